"""The plan's stack-file warnings (a bare key that looks like gpuplane's, which Pulumi
gives to the project instead) are in `gpuplane plan --format json` too, as `warnings`
entries with file:line, message and fix, not only on stderr; a clean stack has none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_own_program_inputs import BARE_STACK, bare_project

from gpuplane.cli.main import main


def _plan_json(folder: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    code = main(["plan", "--stack", "dev", "--format", "json", "--project", str(folder)])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_a_bare_key_warning_is_a_json_warnings_entry(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = _plan_json(bare_project(tmp_path, "infra"), capsys)
    line = BARE_STACK[:BARE_STACK.index("  rollout:")].count("\n") + 1
    [entry] = report["warnings"]
    assert entry["where"].endswith(f"Pulumi.dev.yaml:{line}")
    assert "`rollout` has no namespace" in entry["message"]
    assert "`infra:rollout`" in entry["message"]
    assert entry["fix"] == "write `gpuplane:rollout`"


def test_a_stack_without_bare_keys_has_no_json_warnings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The fix applied (the key namespaced): no warning left.
    folder = bare_project(tmp_path, "infra")
    stack = folder / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text().replace("  rollout:", "  gpuplane:rollout:"))
    assert _plan_json(folder, capsys)["warnings"] == []
