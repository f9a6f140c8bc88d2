"""Rules over one node's containerd configuration (FM01, FM02, FM03, FM07, FM09, FM16,
FM27).

Pure functions from `ContainerdFacts` to findings, so the same rules serve the offline
plan (a rendered layout in memory), the node agent before a restart, and the doctor.
Each rule returns list[Finding]; `check_containerd` runs them all. One cause gives one
finding: a refusal that follows from a loss is told inside that loss's finding.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuplane.core.findings import Finding, Severity
from gpuplane.rules.containerd.facts import Analysis, ContainerdFacts, Loss, analyse
from gpuplane.rules.containerd.merging import (
    check_config_versions,
    check_replaced_cri_table,
    fm02,
    fm03,
)
from gpuplane.rules.containerd.nri import check_nri_enabled, fm27
from gpuplane.rules.containerd.reading import check_not_read, fm01
from gpuplane.rules.containerd.runtimes import (
    check_cdi_support,
    check_default_runtime,
    check_other_refusals,
    check_systemd_cgroup,
    fm01_shadowed_binary,
    fm07,
    fm09,
    fm16,
    unexplained_refusals,
)
from gpuplane.rules.containerd.whole import cri_disabled, missing_binary, no_top_level_file

_CHECKS: tuple[Callable[[Analysis], list[Finding]], ...] = (
    cri_disabled, no_top_level_file, missing_binary, fm01, fm01_shadowed_binary, fm02,
    fm03, fm07, fm09, fm16, fm27, unexplained_refusals,
)
_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def check_containerd(facts: ContainerdFacts) -> list[Finding]:
    """Every containerd rule over one node's facts; errors first."""
    analysis = analyse(facts)
    findings = dict.fromkeys(f for check in _CHECKS for f in check(analysis))
    return sorted(findings, key=lambda f: (_RANK[f.severity], f.id, f.where))


__all__ = [
    "Analysis",
    "ContainerdFacts",
    "Loss",
    "analyse",
    "check_cdi_support",
    "check_config_versions",
    "check_containerd",
    "check_default_runtime",
    "check_not_read",
    "check_nri_enabled",
    "check_other_refusals",
    "check_replaced_cri_table",
    "check_systemd_cgroup",
]
