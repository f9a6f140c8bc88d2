"""The node agent under faults (issue #14), against real containerd daemons on sandbox roots
(tests/support/agent_node.py): SIGKILL at every step boundary of `apply` and `restore` (the
agent's test-only failpoint), a full or read-only state dir or containerd dir, a restart
command that hangs, stale and foreign locks, exit code 3 naming the files, and restore
keeping a copy of a managed file another writer changed.

The crash matrix: every step boundary of both modes on containerd 2.1, the boundaries in
REPRESENTATIVE on 1.6, 1.7, 2.0 and 2.2 (GPUPLANE_CRASH_MATRIX=full runs every boundary on
every line). For each boundary: killed, then the same mode run again converges, and killed
again, the other mode converges; the original is never lost and containerd serves after.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from support import oracle
from support.agent_node import AgentRun, SandboxNode
from support.layouts import host_path

from gpuplane.agent.script import AGENT_PATH, AgentPlan, apply_stdin
from gpuplane.distros.profiles import profile

STATE = "var/lib/gpuplane"
FULL = os.environ.get("GPUPLANE_CRASH_MATRIX") == "full"
# On the other lines (CI time): half the files written with the restart still to come,
# the restart phase recorded before the restart; for restore, the originals back and
# gpuplane's directories removed (issue #14's wedge), and the state forgotten but the
# transaction not committed.
REPRESENTATIVE = {
    "apply": ("write-1", "restart"),
    "restore": ("rmdirs", "forget"),
}
# What a clean run of each mode passes, in order (checked against the agent's own list).
STEPS = {
    "apply": ("checked", "journal", "originals", "write-1", "write-2", "verified", "restart",
              "restarted", "manifest", "state", "committed"),
    "restore": ("checked", "journal", "write-1", "write-2", "rmdirs", "verified", "restart",
                "restarted", "forget", "committed"),
}


@pytest.fixture
def node_of(tmp_short: Path) -> Iterator:
    made: list[SandboxNode] = []

    def make(line: str, distro: str = "kubeadm") -> SandboxNode:
        node = SandboxNode(tmp_short, line, profile(distro))
        made.append(node)
        node.boot()
        return node

    yield make
    for node in made:
        node.close()


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


def _killed(node: SandboxNode, mode: str, step: str, plan: AgentPlan | None) -> AgentRun:
    run = node.run(mode, plan if mode == "apply" else None,
                   env=_env(GPUPLANE_AGENT_FAILPOINT=f"{mode}:{step}"))
    assert run.rc == -9, f"{mode}:{step} was not reached: rc {run.rc}\n{run.err}"
    return run


def _restore(node: SandboxNode) -> AgentRun:
    """Restore as Pulumi's delete runs it (gpuplane.agent.script.restore_command): the installed
    agent, or nothing when none is installed."""
    if not host_path(node.root, AGENT_PATH).is_file():
        return AgentRun(0, {}, "nothing to restore (no agent installed)")
    return node.run("restore")


def _leftovers(node: SandboxNode) -> list[str]:
    """Temp files anywhere under the root (the agent's, or a rename never done)."""
    return sorted(p.relative_to(node.root).as_posix() for p in node.root.rglob("*")
                  if ".gpuplane-tmp" in p.name or ".gpuplane-cmp" in p.name
                  or ".tmp." in p.name or p.name.endswith(".back"))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _is_applied(node: SandboxNode, plan: AgentPlan) -> None:
    for path, text in plan.files.items():
        assert host_path(node.root, path).read_text() == text, path
    assert "nvidia" in node.effective()["runtimes"], "containerd does not serve the plan"
    assert (node.root / STATE / "state").is_file()
    assert not (node.root / STATE / "backup/txn").exists()
    assert _leftovers(node) == []


def _is_original(node: SandboxNode, original: dict[str, str]) -> None:
    assert node.snapshot() == original, "the original files are not back byte for byte"
    assert "nvidia" not in node.effective()["runtimes"], "containerd does not serve runc"
    state = node.root / STATE
    left = [p.name for p in state.iterdir()] if state.exists() else []
    assert left in ([], ["lock"]), f"gpuplane's state was not forgotten: {left}"
    assert _leftovers(node) == []


def _steps_of(node: SandboxNode, plan: AgentPlan) -> dict[str, tuple[str, ...]]:
    """The step boundaries a clean apply and a clean restore pass on this node."""
    log = node.tmp / "steps.log"
    assert node.run("apply", plan, env=_env(GPUPLANE_AGENT_STEPS=str(log))).rc == 0
    assert node.run("restore", env=_env(GPUPLANE_AGENT_STEPS=str(log))).rc == 0
    steps: dict[str, list[str]] = {"apply": [], "restore": []}
    for line in log.read_text().splitlines():
        mode, step = line.split()
        steps[mode].append(step)
    return {mode: tuple(names) for mode, names in steps.items()}


@pytest.mark.real
def test_every_crash_point_of_apply_and_restore_is_recoverable(containerd_line: str,
                                                               node_of) -> None:
    node = node_of(containerd_line)
    original = node.snapshot()
    plan = node.plan(nvidia_default=True)
    steps = _steps_of(node, plan)
    assert steps == STEPS, "the agent's step boundaries changed: update STEPS"
    _is_original(node, original)
    every = FULL or containerd_line == "2.1"
    covered = _every_crash_point(node, original, plan, STEPS if every else REPRESENTATIVE)
    print(f"containerd {containerd_line}: {covered} crash points x 2 reruns")


@pytest.mark.real
def test_every_crash_point_on_k0s_is_recoverable(node_of) -> None:
    """k0s renders the config containerd reads from gpuplane's drop-in only at its restart
    (the sandbox's restart runs gpuplane.distros.k0s_render, as k0s does): the agent checks the
    merged config after the restart, and every crash point still converges."""
    node = node_of("1.7", "k0s")
    original = node.snapshot()
    plan = node.plan(nvidia_default=True)
    assert plan.rendered and list(plan.files) == ["/etc/k0s/containerd.d/50-gpuplane.toml"]
    steps = _steps_of(node, plan)
    assert "write-2" not in steps["apply"] and "restart" in steps["apply"]
    _is_original(node, original)
    covered = _every_crash_point(node, original, plan, steps)
    print(f"k0s on containerd 1.7: {covered} crash points x 2 reruns")


@pytest.mark.real
def test_a_drop_in_containerd_refuses_is_caught_before_the_k0s_restart(node_of) -> None:
    node = node_of("1.7", "k0s")
    original, restarts = node.snapshot(), node.restarts
    plan = node.plan()
    broken = dataclasses.replace(plan, files={p: t + "\n[plugins\nbroken"
                                              for p, t in plan.files.items()})
    run = node.run("apply", broken)
    assert run.rc == 1, run.err
    assert "containerd refuses /etc/k0s/containerd.d/50-gpuplane.toml" in run.err, run.err
    assert "nothing was restarted" in run.err, run.err
    assert node.snapshot() == original and node.restarts == restarts
    assert "nvidia" not in node.effective()["runtimes"]


def _every_crash_point(node: SandboxNode, original: dict[str, str], plan: AgentPlan,
                       steps: Mapping[str, Sequence[str]]) -> int:
    """Kill apply and restore at each of `steps`; each is followed once by a rerun of the
    same mode and once by the other mode, and the node must end as that mode promises."""
    covered = 0
    for step in steps["apply"]:
        # killed, then apply again: the plan is applied
        _killed(node, "apply", step, plan)
        rerun = node.run("apply", plan)
        assert rerun.rc == 0, f"apply:{step}: {rerun.err}"
        _is_applied(node, plan)
        assert _restore(node).rc == 0
        _is_original(node, original)
        # killed, then restore: the node is as it was found
        _killed(node, "apply", step, plan)
        other = _restore(node)
        assert other.rc == 0, f"apply:{step}: {other.err}"
        _is_original(node, original)
        covered += 1

    assert node.run("apply", plan).rc == 0
    for step in steps["restore"]:
        # killed, then restore again: the original is back
        _killed(node, "restore", step, None)
        rerun = node.run("restore")
        assert rerun.rc == 0, f"restore:{step}: {rerun.err}"
        _is_original(node, original)
        assert node.run("apply", plan).rc == 0
        # killed, then apply: the plan is applied
        _killed(node, "restore", step, None)
        other = node.run("apply", plan)
        assert other.rc == 0, f"restore:{step}: {other.err}"
        _is_applied(node, plan)
        covered += 1

    assert node.run("restore").rc == 0
    _is_original(node, original)
    assert node.daemon is not None
    result = oracle.run_sandbox(node.daemon, "runc")
    assert result.ok, result.error
    return covered


# ---------------------------------------------------------------------------------------
# Full, read-only and failing disks


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


def _tmpfs(target: Path, size: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    try:
        _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target))
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        oracle.unavailable(f"cannot mount a tmpfs here (root and mount needed): {exc}")


def _fill(target: Path) -> None:
    subprocess.run(["dd", "if=/dev/zero", f"of={target / 'filler'}", "bs=1k"],
                   capture_output=True, check=False)


def _read_only(target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    try:
        _mount("--bind", str(target), str(target))
        _mount("-o", "remount,bind,ro", str(target))
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        oracle.unavailable(f"cannot bind-mount read-only here: {exc}")


def _unmount(target: Path) -> None:
    subprocess.run(["umount", str(target)], check=True, capture_output=True)


def _unchanged(node: SandboxNode, run: AgentRun, original: dict[str, str],
               restarts: int) -> None:
    assert run.rc == 1, run.err
    assert "nothing was changed" in run.err, run.err
    assert run.out["ok"] is False
    assert node.snapshot() == original and node.restarts == restarts
    assert "nvidia" not in node.effective()["runtimes"]
    assert _leftovers(node) == [], "temp files left behind"


@pytest.mark.real
@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_a_state_dir_that_cannot_be_written_stops_before_any_change(
        fault: str, node_of) -> None:
    """Issue #14 (1): with /var/lib/gpuplane full the agent used to write the node's files,
    restart and exit 0 without state, and a later restore deleted the originals."""
    node = node_of("2.1")
    original = node.snapshot()
    state = node.root / STATE
    if fault == "full":
        _tmpfs(state, "32k")
        _fill(state)
    else:
        _read_only(state)
    try:
        run = node.run("apply", node.plan())
        _unchanged(node, run, original, 0)
        if fault == "full":
            assert sorted(p.name for p in state.iterdir()) == ["filler"], "state left behind"
        # no agent installed: Pulumi's delete (restore_command) has nothing to undo
        assert not (state / "agent.sh").exists()
    finally:
        _unmount(state)
    applied = node.run("apply", node.plan())  # with room again, it applies
    assert applied.rc == 0, applied.err


@pytest.mark.real
@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_a_containerd_dir_that_cannot_be_written_changes_nothing(fault: str, node_of) -> None:
    """Issue #14: a read-only or full /etc/containerd used to exit 3 ("a person has to
    look") and leave *.gpuplane-tmp files and an empty conf.d behind."""
    node = node_of("1.7")
    original = node.snapshot()
    etc = host_path(node.root, "/etc/containerd")
    if fault == "full":
        saved = {p.name: p.read_bytes() for p in etc.iterdir() if p.is_file()}
        _tmpfs(etc, "16k")
        for name, data in saved.items():
            (etc / name).write_bytes(data)
        _fill(etc)
        original = node.snapshot()
    else:
        _read_only(etc)
    try:
        run = node.run("apply", node.plan())
        _unchanged(node, run, original, 0)
        assert not (etc / "conf.d").exists(), "an empty conf.d was left behind"
        assert not (node.root / STATE).exists(), "gpuplane's state was left behind"
    finally:
        _unmount(etc)


# ---------------------------------------------------------------------------------------
# Bounded time, locks


@pytest.mark.real
def test_a_hung_restart_is_stopped_and_rolled_back(node_of) -> None:
    node = node_of("2.0")
    original = node.snapshot()
    armed, pidfile = node.tmp / "hang-armed", node.tmp / "hang.pid"
    armed.touch()
    script = node.restart_script.read_text().split("\n", 1)[1]
    node.restart_script.write_text(
        "#!/bin/sh\n"
        f"if [ -e '{armed}' ]; then rm -f '{armed}'; echo $$ > '{pidfile}'; sleep 300; fi\n"
        + script)
    run = node.run("apply", node.plan(), "--restart-timeout", "2")
    assert run.rc == 1, run.err
    assert "hung" in run.err and "did not finish within 2s" in run.err, run.err
    assert "restored" in run.err and run.out["restored"] is True
    assert node.snapshot() == original and "nvidia" not in node.effective()["runtimes"]
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    assert not (node.root / STATE).exists()
    assert _leftovers(node) == []


@pytest.mark.real
def test_a_restart_that_hangs_again_on_rollback_exits_3_naming_it(node_of) -> None:
    node = node_of("2.1")
    hang = node.tmp / "hang"
    hang.touch()
    script = node.restart_script.read_text().split("\n", 1)[1]
    node.restart_script.write_text(f"#!/bin/sh\n[ -e '{hang}' ] && sleep 300\n" + script)
    run = node.run("apply", node.plan(), "--restart-timeout", "1")
    assert run.rc == 3, run.err
    assert "files are restored, but containerd did not come back" in run.err, run.err
    assert run.err.count("hung") >= 2
    hang.unlink()
    assert node.run("restore").rc == 0  # the next run restarts it on the originals
    assert "nvidia" not in node.effective()["runtimes"]


@pytest.mark.real
def test_stale_and_foreign_locks(node_of) -> None:
    node = node_of("1.7")
    state = node.root / STATE
    state.mkdir(parents=True)
    lock = state / "lock"
    dead = subprocess.Popen(["sleep", "0"])
    dead.wait()
    lock.symlink_to(f"{dead.pid}:1")
    taken = node.run("apply", node.plan())
    assert taken.rc == 0 and "removed the stale lock" in taken.err, taken.err
    assert not lock.exists() and not lock.is_symlink()
    # A lock held by a live run with the same pid but another start time: pid reused.
    lock.symlink_to(f"{os.getpid()}:1")
    reused = node.run("restore")
    assert reused.rc == 0 and "removed the stale lock" in reused.err, reused.err
    # Not a gpuplane lock at all: refused at once, never waited on forever.
    state.mkdir(parents=True, exist_ok=True)
    lock.write_text("someone else's\n")
    try:
        foreign = subprocess.run(node.command("apply"), input=apply_stdin(node.plan()),
                                 capture_output=True,
                                 text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("the agent waits forever on a lock file it did not make")
    assert foreign.returncode == 2, foreign.stderr
    assert "is not a gpuplane lock" in foreign.stderr


# ---------------------------------------------------------------------------------------
# Exit 3 names the files; restore keeps another writer's version


@pytest.mark.real
def test_exit_3_says_which_files_differ_from_what(node_of) -> None:
    node = node_of("2.2")
    top = node.profile.config_path
    before = _sha(host_path(node.root, top))
    plan = node.plan()
    _killed(node, "apply", "write-2", plan)
    written = _sha(host_path(node.root, top))
    assert written != before
    etc = host_path(node.root, "/etc/containerd")
    _read_only(etc)
    try:
        stuck = node.run("apply", plan)
    finally:
        _unmount(etc)
    assert stuck.rc == 3, stuck.err
    assert f"could not put back {top}" in stuck.err
    assert f"the node has sha256 {written}" in stuck.err
    assert f"before this run it was sha256 {before}" in stuck.err
    assert "backup/txn/files" + top in stuck.err
    recovered = node.run("apply", plan)  # writable again: recovery, then the apply
    assert recovered.rc == 0, recovered.err
    _is_applied(node, plan)


@pytest.mark.real
def test_restore_keeps_a_copy_of_a_managed_file_another_writer_changed(node_of) -> None:
    """FM05 on restore: the original goes back (restore is an uninstall), but the other
    writer's version is kept and the run says where."""
    node = node_of("1.7")
    original = node.snapshot()
    plan = node.plan()
    assert node.run("apply", plan).rc == 0
    dropin = next(p for p in plan.files if p.endswith("50-gpuplane.toml"))
    theirs = plan.files[dropin] + "# tuned by hand\n"
    node.write(dropin, theirs)
    restored = node.run("restore")
    assert restored.rc == 0, restored.err
    assert node.snapshot() == original
    assert f"{dropin} was changed by another writer" in restored.err, restored.err
    kept = restored.out["kept"]
    assert len(kept) == 1 and kept[0].endswith(dropin) and kept[0] in restored.err
    assert Path(kept[0]).read_text() == theirs
    assert Path(kept[0]).is_relative_to(node.root / STATE / "kept")


@pytest.mark.real
def test_a_first_apply_killed_after_its_restart_is_undone_by_restore_alone(node_of) -> None:
    """Pulumi's delete runs `restore` with no plan and no --restart-cmd; a first apply
    killed after it restarted containerd has written no state yet: the journal carries
    the restart command the recovery needs."""
    node = node_of("1.7")
    original = node.snapshot()
    plan = dataclasses.replace(node.plan(), restart_command=f"sh {node.restart_script}")
    killed = node.run("apply", plan, restart_cmd=False,
                      env=_env(GPUPLANE_AGENT_FAILPOINT="apply:restarted"))
    assert killed.rc == -9, killed.err
    assert node.restarts == 1 and not (node.root / STATE / "state").exists()
    restored = node.run("restore", restart_cmd=False)
    assert restored.rc == 0, restored.err
    assert node.restarts == 2
    _is_original(node, original)
