"""The stack catalogue (tests/support/stack_cases.py) offline: every broken stack is rejected with
exactly its rule ids, every bundled stack plans clean, `nodeAccess: pod` gives the verdict
`nodeAccess: ssh` gives, and a rejected plan registers nothing below `GpuCluster`
(issue #41: the component refuses before its first child, so `pulumi up` creates nothing).
The same catalogue runs under the real engine in tests/engine/test_pulumi_engine.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.stack_cases import BROKEN, CLEAN, as_pod, broken_config, config_of, write_stack

from gpuplane.cli.plan.run import plan_stack


def _plan(folder: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    write_stack(folder, "case", cfg)
    return plan_stack("case", folder)


def _ids(report: dict[str, Any], severity: str) -> set[str]:
    return {f["id"] for f in report["findings"]
            if (f["severity"] == "error") == (severity == "error")}


@pytest.mark.parametrize("case", list(BROKEN))
def test_each_broken_stack_is_rejected_with_its_rules_and_registers_no_child(
        case: str, tmp_path: Path) -> None:
    cfg = broken_config(case, tmp_path)
    report = _plan(tmp_path / "as-is", cfg)
    assert _ids(report, "error") == set(BROKEN[case].errors), report["findings"]
    assert [r["type"] for r in report["resources"]] == ["gpuplane:index:GpuCluster"]
    pod = _plan(tmp_path / "pod", as_pod(cfg))
    assert _ids(pod, "error") == _ids(report, "error")
    assert _ids(pod, "warning") == _ids(report, "warning")


@pytest.mark.parametrize("stack", CLEAN)
def test_each_bundled_stack_plans_clean_and_the_same_through_a_pod(
        stack: str, tmp_path: Path) -> None:
    report = _plan(tmp_path / "as-is", config_of(stack))
    assert _ids(report, "error") == set(), report["findings"]
    pod = _plan(tmp_path / "pod", as_pod(config_of(stack)))
    assert _ids(pod, "error") == set()
    assert _ids(pod, "warning") == _ids(report, "warning")


@pytest.mark.parametrize(("level", "found"), [("advisory", {"FM18": "warning"}),
                                              ("disabled", {})])
def test_a_stack_accepts_a_rule_by_its_level(level: str, found: dict[str, str],
                                             tmp_path: Path) -> None:
    """`gpuplane:rules`: the program does not refuse on an accepted rule, and the pack's
    view (the intent) carries the same level."""
    cfg = broken_config("kind-smoke/FM18-latest-toolkit", tmp_path)
    cfg["gpuplane:rules"] = {"FM18": level}
    report = _plan(tmp_path, cfg)
    assert {f["id"]: f["severity"] for f in report["findings"]} == found
    assert "kubernetes:helm.sh/v3:Release" in {r["type"] for r in report["resources"]}


def test_an_unknown_rule_id_is_a_stack_key_error(tmp_path: Path) -> None:
    from gpuplane.config import StackConfigError

    cfg = config_of("kind-smoke")
    cfg["gpuplane:rules"] = {"FM99": "advisory", "FM18": "sometimes"}
    with pytest.raises(StackConfigError) as err:
        _plan(tmp_path, cfg)
    text = str(err.value)
    assert "gpuplane:rules.FM99" in text and "gpuplane:rules.FM18" in text, text
