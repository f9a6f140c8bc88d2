"""The host unit step in the agent's plan (`mask_unit`, FM35's nvidia-imex.service): it
travels as one plan line the plan id covers, and a name that is no systemd unit is
refused on both sides (gpuplane.agent.script, data/agent/20-plan.sh). The step itself
runs against the real systemctl in tests/real/test_agent_units.py."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from gpuplane.agent.script import AgentPlan, agent_plan, apply_stdin
from gpuplane.containerd import ContainerdVersion
from gpuplane.core.intent import IMEX_UNIT
from gpuplane.distros.profiles import profile
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node


def _plan(units: tuple[str, ...]) -> AgentPlan:
    return agent_plan(plan_node(profile("kubeadm"), ContainerdVersion.parse("2.1"),
                                PlanOptions(toolkit=ToolkitMode.OPERATOR, mask_units=units)))


def test_the_mask_step_is_one_plan_line_and_part_of_the_plan_id() -> None:
    plain, masked = _plan(()), _plan((IMEX_UNIT,))
    assert masked.mask_units == (IMEX_UNIT,)
    assert plain.plan_id != masked.plan_id
    assert plain.files == masked.files
    lines = apply_stdin(masked).splitlines()
    assert f"gp_plan mask_unit {IMEX_UNIT}" in lines
    assert not any("mask_unit" in line for line in apply_stdin(plain).splitlines()
                   if line.startswith("gp_plan "))


@pytest.mark.parametrize("name", ["nvidia imex", "-x.service", "a;b"])
def test_a_name_that_is_no_unit_is_refused(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unit"):
        dataclasses.replace(_plan(()), mask_units=(name,))
    # The agent refuses it too, before anything else (a payload made by other means).
    program = apply_stdin(_plan((IMEX_UNIT,))).replace(
        f"gp_plan mask_unit {IMEX_UNIT}", f"gp_plan mask_unit '{name}'")
    run = subprocess.run(["sh", "-s", "--", "apply", "--root", str(tmp_path)],
                         input=program, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 2, run.stderr
    assert f"payload: '{name}' is not a systemd unit name" in run.stderr
    assert list(tmp_path.iterdir()) == []   # nothing written
