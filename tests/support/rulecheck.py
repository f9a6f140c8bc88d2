"""Helpers for the cluster-rule tests: every finding a rule returns must be well formed."""

from __future__ import annotations

from gpuplane.core.findings import Finding, Severity
from gpuplane.rules import RULES


def well_formed(findings: list[Finding], where: str | None = None) -> list[Finding]:
    """Assert each finding names a known rule, its place and a stack key in the fix."""
    for f in findings:
        assert f.id in RULES, f
        assert isinstance(f.severity, Severity), f
        assert f.message.strip() and f.message.rstrip().endswith("."), f
        assert "gpuplane:" in f.fix, f
        if where is not None:
            assert f.where.startswith(where), (f.where, where)
    return findings


def ids(findings: list[Finding]) -> list[str]:
    return sorted(f.id for f in findings)


def only(findings: list[Finding], rule_id: str) -> Finding:
    """The one finding with `rule_id`; fails when there are none or several."""
    hits = [f for f in findings if f.id == rule_id]
    assert len(hits) == 1, findings
    return hits[0]
