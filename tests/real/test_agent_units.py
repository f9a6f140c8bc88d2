"""The node agent's host unit step (`mask_unit`, FM35's nvidia-imex.service) against the
real `systemctl` from Debian's systemd package, on a sandbox node with a real containerd.

`systemctl --root=DIR` enables, disables, masks and unmasks unit files offline, against
the directory tree, exactly as on a node; the agent runs it that way under `--root`. What
needs systemd as PID 1 (`is-active`, stopping and starting a running unit) cannot happen
in a sandbox: the agent records the unit's activity as `unknown` there and says that it
did not stop it, which is asserted too.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import oracle
from support.agent_node import AgentRun, SandboxNode
from support.layouts import host_path

from gpuplane.agent.script import AGENT_DIR, AGENT_PATH, AgentPlan, apply_stdin
from gpuplane.core.intent import IMEX_UNIT
from gpuplane.distros.profiles import profile
from gpuplane.plan.node import ToolkitMode

LINE = "1.7"
# A unit as a driver package installs it: under /usr/lib (a unit file in /etc cannot be
# masked: that is where the mask's link goes). The text is this test's own.
UNIT_TEXT = ("[Unit]\nDescription=stand-in host IMEX daemon (gpuplane test)\n\n"
             "[Service]\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n")
MASK = f"etc/systemd/system/{IMEX_UNIT}"
WANTS = f"etc/systemd/system/multi-user.target.wants/{IMEX_UNIT}"


def _systemctl() -> str:
    found = shutil.which("systemctl")
    if found is None:
        oracle.unavailable("systemctl is not installed",
                           "apt-get install systemd (scripts/fetch-containerd.sh does)")
    return found


class UnitNode:
    """The sandbox node, with the unit file under its root and `systemctl --root` on it."""

    def __init__(self, node: SandboxNode) -> None:
        self.node, self.root = node, node.root
        self.systemctl = _systemctl()

    def install(self, enable: bool = True) -> None:
        node_file = host_path(self.root, f"/usr/lib/systemd/system/{IMEX_UNIT}")
        node_file.parent.mkdir(parents=True, exist_ok=True)
        node_file.write_text(UNIT_TEXT)
        if enable:
            self.ctl("enable", IMEX_UNIT)
        assert self.state() == ("enabled" if enable else "disabled")

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.systemctl, f"--root={self.root}", *args],
                              capture_output=True, text=True, check=False, timeout=30)

    def state(self) -> str:
        """`systemctl is-enabled` on the sandbox root ("" where it knows no such unit)."""
        return self.ctl("is-enabled", IMEX_UNIT).stdout.strip()

    def masked(self) -> bool:
        link = self.root / MASK
        return link.is_symlink() and os.readlink(link) == "/dev/null"

    def plan(self, units: bool = True) -> AgentPlan:
        return self.node.plan(ToolkitMode.HOST, mask_units=(IMEX_UNIT,) if units else ())

    def run(self, mode: str, plan: AgentPlan | None = None, *extra: str,
            env: dict[str, str] | None = None) -> AgentRun:
        return self.node.run(mode, plan, *extra, env=env)


@pytest.fixture
def unit_node(tmp_short: Path) -> Iterator[UnitNode]:
    _systemctl()
    node = SandboxNode(tmp_short, LINE, profile("kubeadm"))
    node.boot()
    try:
        yield UnitNode(node)
    finally:
        node.close()


def _units(run: AgentRun) -> list[dict[str, str]]:
    return list(run.out.get("units", []))


@pytest.mark.parametrize("enabled", [True, False], ids=["enabled", "disabled"])
def test_fm35_apply_masks_the_unit_and_restore_puts_back_its_state(unit_node: UnitNode,
                                                                   enabled: bool) -> None:
    """FM35's step: the unit, enabled or disabled, is masked and put back as it was."""
    unit_node.install(enable=enabled)
    plan = unit_node.plan()
    assert f"gp_plan mask_unit {IMEX_UNIT}" in apply_stdin(plan).splitlines()
    first = unit_node.run("apply", plan)
    assert first.rc == 0, first.err
    assert unit_node.masked() and unit_node.state() == "masked"
    assert not (unit_node.root / WANTS).exists()     # disabled: no wants link left
    assert _units(first) == [{"unit": IMEX_UNIT, "before": "enabled" if enabled else "disabled",
                              "active_before": "unknown",
                              "action": "disabled, masked" if enabled else "masked"}]
    # No systemd as PID 1 in a sandbox: the stop is skipped, and the run says so.
    assert f"{IMEX_UNIT}: not stopped (no systemd manages the units under --root" in first.err
    assert first.out["changed"] is True and unit_node.node.restarts == 1

    restored = unit_node.run("restore")
    assert restored.rc == 0, restored.err
    assert not unit_node.masked()
    assert unit_node.state() == ("enabled" if enabled else "disabled")
    assert (unit_node.root / WANTS).is_symlink() is enabled
    assert [u["action"] for u in _units(restored)] == [
        "unmasked, enabled" if enabled else "unmasked"]
    # Everything gpuplane kept is gone, the unit's record with it.
    assert not host_path(unit_node.root, AGENT_DIR).exists()


def test_a_second_apply_changes_nothing_and_restarts_nothing(unit_node: UnitNode) -> None:
    unit_node.install()
    plan = unit_node.plan()
    assert unit_node.run("apply", plan).rc == 0
    link = unit_node.root / MASK
    stamp = link.lstat().st_mtime_ns
    second = unit_node.run("apply", plan)
    assert second.rc == 0, second.err
    assert second.out["changed"] is False and second.out["restarted"] is False
    assert second.out["written"] == [] and unit_node.node.restarts == 1
    assert [u["action"] for u in _units(second)] == ["already masked by gpuplane, nothing to do"]
    assert link.lstat().st_mtime_ns == stamp and unit_node.masked()
    status = unit_node.run("status")
    assert status.rc == 0, status.err
    assert status.out["units"] == {IMEX_UNIT: {"before": "enabled", "active_before": "unknown",
                                               "now": "masked"}}
    # The record still holds the state as first found.
    assert unit_node.run("restore").rc == 0
    assert unit_node.state() == "enabled"


def test_a_node_without_the_unit_is_reported_absent(unit_node: UnitNode) -> None:
    run = unit_node.run("apply", unit_node.plan())
    assert run.rc == 0, run.err
    assert _units(run) == [{"unit": IMEX_UNIT, "before": "absent", "active_before": "unknown",
                            "action": "absent, nothing to do"}]
    assert not (unit_node.root / MASK).exists()
    assert not host_path(unit_node.root, f"{AGENT_DIR}/units").exists()
    restored = unit_node.run("restore")
    assert restored.rc == 0, restored.err
    assert not host_path(unit_node.root, AGENT_DIR).exists()


def test_a_failed_apply_puts_the_unit_back(unit_node: UnitNode) -> None:
    """containerd does not come back on the new files: the run is rolled back, the
    unit included (it was masked before any file was written)."""
    unit_node.install()
    node, once = unit_node.node, unit_node.node.tmp / "failed-once"
    # The first restart fails; the rollback's restart brings containerd back.
    restart = f"[ -e '{once}' ] || {{ touch '{once}'; exit 1; }}; sh '{node.restart_script}'"
    run = unit_node.run("apply", unit_node.plan(), "--restart-cmd", restart)
    assert run.rc == 1, run.err
    assert run.out["restored"] is True
    assert f"{IMEX_UNIT}: put back as it was (unmasked, enabled)" in run.err
    assert not unit_node.masked() and unit_node.state() == "enabled"
    assert not host_path(unit_node.root, f"{AGENT_DIR}/units").exists()


def test_units_follow_the_plan_and_a_replaced_plans_restore_leaves_them(
        unit_node: UnitNode) -> None:
    """A plan that adds the mask to files the node already has masks without a restart;
    the restore of the plan it replaced (Pulumi deletes after the successor's create)
    leaves the unit masked; a plan without the mask puts it back."""
    unit_node.install()
    files_only = unit_node.plan(units=False)
    assert unit_node.run("apply", files_only).rc == 0
    with_units = unit_node.plan()
    assert with_units.plan_id != files_only.plan_id
    masked = unit_node.run("apply", with_units)
    assert masked.rc == 0, masked.err
    assert masked.out["restarted"] is False and unit_node.node.restarts == 1
    assert unit_node.masked()

    skipped = unit_node.run("restore", None, "--plan-id", files_only.plan_id)
    assert skipped.rc == 0, skipped.err
    assert unit_node.masked() and host_path(unit_node.root, AGENT_PATH).is_file()

    back = unit_node.run("apply", dataclasses.replace(files_only))
    assert back.rc == 0, back.err
    assert [u["action"] for u in _units(back)] == [
        "the plan no longer masks it: unmasked, enabled"]
    assert unit_node.state() == "enabled"
    assert not host_path(unit_node.root, f"{AGENT_DIR}/units").exists()


def test_a_unit_that_cannot_be_masked_fails_the_apply_with_nothing_changed(
        unit_node: UnitNode) -> None:
    """A unit whose own file is in /etc/systemd/system, where the mask's link would go:
    systemctl refuses the mask, and the agent puts back what it did (the unit enabled
    again) before any containerd file was written."""
    node_file = host_path(unit_node.root, f"/{MASK}")
    node_file.parent.mkdir(parents=True, exist_ok=True)
    node_file.write_text(UNIT_TEXT)
    unit_node.ctl("enable", IMEX_UNIT)
    assert unit_node.state() == "enabled"
    snap = unit_node.node.snapshot()
    run = unit_node.run("apply", unit_node.plan())
    assert run.rc == 1, run.err
    assert f"cannot mask {IMEX_UNIT}: systemctl mask: Failed to mask unit" in run.out["error"]
    assert unit_node.state() == "enabled" and (unit_node.root / WANTS).is_symlink()
    assert unit_node.node.snapshot() == snap and unit_node.node.restarts == 0
    assert not host_path(unit_node.root, f"{AGENT_DIR}/units").exists()


@pytest.mark.parametrize("then", ["apply", "restore"])
def test_a_run_killed_at_the_unit_step_is_completed_or_undone(unit_node: UnitNode,
                                                              then: str) -> None:
    """SIGKILL once the unit's state is recorded and before it changes: the next apply
    masks it (from the state first recorded), a restore leaves it as it was found, and
    either way the record says what restore needs."""
    unit_node.install()
    plan = unit_node.plan()
    killed = unit_node.run("apply", plan, env={
        **os.environ, "GPUPLANE_AGENT_FAILPOINT": f"apply:unit-{IMEX_UNIT}"})
    assert killed.rc in (-9, 137), killed.err
    assert unit_node.state() == "enabled"
    assert host_path(unit_node.root, f"{AGENT_DIR}/units").is_file()
    assert host_path(unit_node.root, AGENT_PATH).is_file()   # restore can run
    if then == "apply":
        rerun = unit_node.run("apply", plan)
        assert rerun.rc == 0, rerun.err
        assert unit_node.masked()
        assert [(u["before"], u["action"]) for u in _units(rerun)] == [
            ("enabled", "disabled, masked")]
    restored = unit_node.run("restore")
    assert restored.rc == 0, restored.err
    assert unit_node.state() == "enabled" and not unit_node.masked()
    assert not host_path(unit_node.root, AGENT_DIR).exists()
