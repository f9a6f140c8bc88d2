"""The node agent against real containerd daemons on sandbox roots (tests/support/agent_node.py):
no-op and change, refusals before any restart, rollbacks after one, a run killed half-way,
concurrent runs, restore, distro detection (k8s-snap base dir, FM17), plans made from other
files than the node's originals and managed files another writer changed (FM05), status
and drift.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomlkit
from support import oracle
from support.agent_node import BUSYBOX, DASH, AgentRun, SandboxNode, parse_result
from support.layouts import host_path

from gpuplane.agent.payload import payload_bases, payload_files
from gpuplane.agent.script import (
    AGENT_PATH,
    AgentPlan,
    agent_plan,
    agent_script_path,
    agent_source,
    apply_command,
    apply_stdin,
    restore_command,
    status_command,
)
from gpuplane.cli import main as cli
from gpuplane.containerd import ContainerdVersion
from gpuplane.distros import rancher_render
from gpuplane.distros.profiles import DistroProfile, EditMode, profile
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node


class _Maker:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.nodes: list[SandboxNode] = []

    def __call__(self, line: str, prof: DistroProfile | None = None) -> SandboxNode:
        node = SandboxNode(self.tmp, line, prof or profile("kubeadm"))
        self.nodes.append(node)
        return node


@pytest.fixture
def make_node(tmp_short: Path) -> Iterator[_Maker]:
    maker = _Maker(tmp_short)
    yield maker
    for node in maker.nodes:
        node.close()


def _busybox_path(tmp: Path) -> Path:
    bindir = tmp / "busybox-bin"
    bindir.mkdir(exist_ok=True)
    applets = subprocess.run([BUSYBOX or "busybox", "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    for applet in applets:
        (bindir / applet).symlink_to(BUSYBOX or "busybox")
    return bindir


def _sandbox(node: SandboxNode, handler: str) -> None:
    assert node.daemon is not None
    result = oracle.run_sandbox(node.daemon, handler)
    assert result.ok, result.error


# ---------------------------------------------------------------------------------------
# Apply: change, no-op, same plan twice


@pytest.mark.parametrize("shell", ["dash", "busybox", "bash"])
def test_change_restarts_once_and_the_nvidia_handler_runs(containerd_line: str, shell: str,
                                                          make_node) -> None:
    env = None
    if not shutil.which(shell):
        oracle.unavailable(f"{shell} is not installed")
    if shell == "busybox":  # busybox's applets and nothing else on PATH
        env = {**os.environ, "PATH": str(_busybox_path(make_node.tmp))}
    node = make_node(containerd_line)
    node.boot()
    plan = node.plan()
    first = node.run("apply", plan, shell=shell, env=env)
    assert first.rc == 0, first.err
    assert node.restarts == 1
    assert first.out["restarted"] is True and first.out["ok"] is True
    assert set(first.out["written"]) == set(plan.files)
    assert "nvidia" in node.effective()["runtimes"]
    _sandbox(node, "nvidia")
    assert oracle.wrapper_calls(node.wrapper), "the sandbox did not go through nvidia"
    assert first.out["config_sha256"] and first.out["default_runtime"] == "runc"
    assert host_path(node.root, AGENT_PATH).is_file()

    daemon = node.daemon
    second = node.run("apply", plan, shell=shell, env=env)
    assert second.rc == 0, second.err
    assert node.restarts == 1 and node.daemon is daemon
    assert second.out["written"] == [] and second.out["changed"] is False
    assert second.out["config_sha256"] == first.out["config_sha256"]


def test_a_change_that_leaves_the_effective_config_alone_does_not_restart(
        containerd_line: str, make_node) -> None:
    """Operator mode on kubeadm only adds the drop-in dir to `imports`: nothing merges
    differently until the toolkit writes its drop-in, so containerd keeps running."""
    node = make_node(containerd_line)
    node.boot()
    before = node.effective()
    plan = node.plan(ToolkitMode.OPERATOR)
    assert plan.files, "the plan should add the import"
    result = node.run("apply", plan)
    assert result.rc == 0, result.err
    assert result.out["written"] == [node.profile.config_path]
    assert result.out["restarted"] is False and node.restarts == 0
    assert node.effective() == before


def test_a_plan_without_files_is_a_no_op(make_node) -> None:
    node = make_node("1.7")
    node.boot()
    snap = node.snapshot()
    result = node.run("apply", node.plan(ToolkitMode.NONE))
    assert result.rc == 0, result.err
    assert (result.out["written"], node.restarts) == ([], 0)
    assert node.snapshot() == snap
    assert not (node.root / "var/lib/gpuplane").exists(), "nothing to manage, nothing kept"


# ---------------------------------------------------------------------------------------
# Refusals before any restart: the node stays byte-exact


def _state(node: SandboxNode) -> dict[str, bytes]:
    """gpuplane's state on the node, byte for byte (the lock left out)."""
    state = node.root / "var/lib/gpuplane"
    return {p.relative_to(state).as_posix(): p.read_bytes() for p in sorted(state.rglob("*"))
            if p.is_file() and p.name != "lock"}


def _refused(node: SandboxNode, plan: AgentPlan, rc: int, *needles: str) -> AgentRun:
    """Apply `plan` expecting a refusal: files, state and the running daemon untouched."""
    snap, state = node.snapshot(), _state(node)
    daemon, restarts = node.daemon, node.restarts
    result = node.run("apply", plan)
    assert result.rc == rc, result.err
    for needle in needles:
        assert needle in result.err, result.err
    assert node.restarts == restarts and node.daemon is daemon
    assert node.snapshot() == snap, "the node's files changed"
    assert _state(node) == state, "a refused run changed gpuplane's state"
    if not state:
        assert not (node.root / "var/lib/gpuplane").exists(), "a refused run left state behind"
    assert result.out["ok"] is False and result.out["error"]
    return result


def _with_dropin(plan: AgentPlan, text: str) -> AgentPlan:
    dropin = next(p for p in plan.files if p.endswith("50-gpuplane.toml"))
    return dataclasses.replace(plan, files={**plan.files, dropin: text})


def test_malformed_toml_is_refused_before_any_restart(make_node) -> None:
    node = make_node("1.7")
    node.boot()
    plan = _with_dropin(node.plan(), 'version = 2\n[plugins."io.containerd.grpc.v1.cri"\n')
    result = _refused(node, plan, 1, "containerd refuses the new config", "restored")
    assert "50-gpuplane.toml" in result.out["error"]


def test_a_v3_drop_in_on_containerd_1_7_is_refused(make_node) -> None:
    node = make_node("1.7", profile("k8s-snap"))
    node.boot()
    plan = _with_dropin(node.plan(), 'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\n')
    _refused(node, plan, 1, "unsupported config version", "nothing was restarted")


def test_a_drop_in_that_loses_runc_is_refused(make_node) -> None:
    """FM02: on 1.7 a drop-in holding only nvidia replaces the CRI table: runc is gone."""
    node = make_node("1.7", profile("k8s-snap"))
    node.boot()
    cri = 'plugins."io.containerd.grpc.v1.cri".containerd'
    only_nvidia = (f'version = 2\n[{cri}]\n  default_runtime_name = "runc"\n'
                   f'[{cri}.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n')
    _refused(node, _with_dropin(node.plan(), only_nvidia), 1, "no runtime 'runc'", "FM02")


def test_a_file_outside_the_distros_edit_paths_is_refused(make_node) -> None:
    """FM04: RKE2's generated config.toml is never written, only its template."""
    node = make_node("1.7", profile("rke2"))
    node.boot()
    plan = node.plan()
    bad = dataclasses.replace(plan, files={node.profile.config_path: "version = 2\n"})
    _refused(node, bad, 2, "outside the files rke2 lets gpuplane edit")


def test_a_plan_for_another_containerd_line_is_refused(make_node) -> None:
    node = make_node("1.7")
    node.boot()
    plan = dataclasses.replace(node.plan(), containerd_version="2.1")
    _refused(node, plan, 2, "runs containerd 1.7 but the plan was made for 2.1",
             "gpuplane:cluster.containerdVersion")


# ---------------------------------------------------------------------------------------
# Failures after the restart: rolled back, restarted again, serving the previous config


def test_containerd_failing_to_start_is_rolled_back(containerd_line: str, make_node) -> None:
    node = make_node(containerd_line)
    node.boot()
    before = node.effective()
    snap = node.snapshot()
    plan = node.plan()
    dropin = next(p for p in plan.files if p.endswith("50-gpuplane.toml"))
    # Valid for `config dump`, fatal at start: a required plugin that does not exist.
    text = 'required_plugins = ["io.containerd.nosuch.v1.gpuplane"]\n' + plan.files[dropin]
    result = node.run("apply", _with_dropin(plan, text))
    assert result.rc == 1, result.err
    assert "did not come back on the new config" in result.err
    assert "restored" in result.err and "serves" in result.err
    assert node.restarts == 2, "one restart on the change, one on the restored files"
    assert node.snapshot() == snap
    assert node.effective() == before
    _sandbox(node, "runc")


def test_a_readiness_timeout_is_rolled_back(make_node) -> None:
    node = make_node("2.1")
    node.boot()
    snap = node.snapshot()
    dropin = host_path(node.root, "/etc/containerd/conf.d/50-gpuplane.toml")
    result = node.run("apply", node.plan(), "--ready-cmd", f"test ! -e {dropin}",
                      "--ready-timeout", "1")
    assert result.rc == 1, result.err
    assert "did not answer within 1s" in result.err and "restored" in result.err
    assert node.restarts == 2
    assert node.snapshot() == snap
    assert "nvidia" not in node.effective()["runtimes"]


# ---------------------------------------------------------------------------------------
# Killed mid-apply, concurrency


_KILLER = """#!/bin/sh
# SIGKILL the agent holding the lock, once, when armed (then carry on as asked).
if [ -e '{armed}' ] && {when}; then
    rm -f '{armed}'
    owner=$(readlink '{lock}')
    kill -9 "${{owner%%:*}}"
    sleep 0.2
fi
"""


@pytest.mark.parametrize("when", ["after-write", "during-restart"])
def test_a_run_killed_mid_apply_is_undone_and_the_next_run_converges(when: str,
                                                                     make_node) -> None:
    node = make_node("1.7")
    node.boot()
    snap = node.snapshot()
    armed = node.tmp / "armed"
    armed.touch()
    lock = host_path(node.root, "/var/lib/gpuplane/lock")
    count = node.tmp / "dumps"
    containerd = None
    if when == "after-write":  # the second `config dump` checks the written files
        wrapper = node.tmp / "containerd-wrapper"
        wrapper.write_text(
            _KILLER.format(armed=armed, lock=lock, when=(
                f'case "$*" in *"config dump"*) echo x >> \'{count}\' ;; *) false ;; esac && '
                f'[ "$(wc -l < \'{count}\')" -eq 2 ]'))
            + f'exec \'{node.containerd}\' "$@"\n')
        wrapper.chmod(0o755)
        containerd = str(wrapper)
    else:
        script = node.restart_script.read_text()
        node.restart_script.write_text(
            _KILLER.format(armed=armed, lock=lock, when="true") + script.split("\n", 1)[1])
    plan = node.plan()
    killed = subprocess.run(node.command("apply", containerd=containerd),
                            input=apply_stdin(plan), capture_output=True, text=True,
                            timeout=60, check=False)
    assert killed.returncode == -9, killed.stderr
    assert not armed.exists()
    if when == "during-restart":  # the orphaned restart carries on: let it finish
        deadline = time.monotonic() + 20
        while node.starts < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert node.starts == 2
    assert host_path(node.root, "/var/lib/gpuplane/backup/txn").is_dir(), "no journal left"
    status = subprocess.run([DASH, "-s", "--", "status", *node.args()], input=apply_stdin(plan),
                            capture_output=True, text=True, timeout=60, check=False)
    assert json.loads(status.stdout)["interrupted"] is True, status.stderr

    rerun = node.run("apply", plan)
    assert rerun.rc == 0, rerun.err
    assert "removed the stale lock" in rerun.err
    assert "stopped half-way" in rerun.err
    # during-restart: the killed run restarted once, recovery once, the rerun once.
    assert node.restarts == (1 if when == "after-write" else 3)
    _sandbox(node, "nvidia")

    restore = node.run("restore")
    assert restore.rc == 0, restore.err
    assert node.snapshot() == snap


def test_a_run_stopped_by_sigterm_rolls_back_at_once(make_node) -> None:
    """A cancelled `pulumi up` (or a dropped ssh session: SIGHUP) rolls back itself."""
    node = make_node("1.7")
    node.boot()
    snap = node.snapshot()
    node.restart_delay = 1.0
    proc = subprocess.Popen(node.command("apply"), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = "", ""
    try:
        proc.stdin.write(apply_stdin(node.plan()))  # type: ignore[union-attr]
        proc.stdin.close()  # type: ignore[union-attr]
        deadline = time.monotonic() + 20
        while node.restarts == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.terminate()
        proc.wait(timeout=60)
        out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    finally:
        proc.kill()
    result = parse_result(proc.returncode, out, err)
    assert result.rc == 1, result.err
    assert "interrupted by SIGTERM" in result.err and result.out["restored"] is True
    assert node.restarts == 2 and node.snapshot() == snap
    assert "nvidia" not in node.effective()["runtimes"]


def test_concurrent_runs_wait_for_each_other(make_node) -> None:
    node = make_node("1.7")
    node.boot()
    node.restart_delay = 1.0  # hold the lock long enough for the second run to wait
    stdin = apply_stdin(node.plan())
    procs = []
    for _ in range(2):
        proc = subprocess.Popen(node.command("apply"), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        proc.stdin.write(stdin)  # type: ignore[union-attr]
        proc.stdin.close()  # type: ignore[union-attr]
        procs.append(proc)
        time.sleep(0.05)
    runs = [parse_result(p.wait(timeout=60), p.stdout.read(), p.stderr.read())  # type: ignore[union-attr]
            for p in procs]
    assert [r.rc for r in runs] == [0, 0], [r.err for r in runs]
    assert sum("waiting for another gpuplane agent run" in r.err for r in runs) == 1
    assert sorted(r.out["changed"] for r in runs) == [False, True]
    assert node.restarts == 1


# ---------------------------------------------------------------------------------------
# Restore


def test_restore_puts_every_original_back_and_runc_serves(containerd_line: str,
                                                          make_node) -> None:
    node = make_node(containerd_line)
    node.boot()
    snap = node.snapshot()
    applied = node.run("apply", node.plan(nvidia_default=True))
    assert applied.rc == 0, applied.err
    assert node.effective()["default_runtime"] == "nvidia"

    restored = node.run("restore")
    assert restored.rc == 0, restored.err
    assert node.restarts == 2
    assert node.snapshot() == snap, "originals are not byte-exact"
    assert not host_path(node.root, "/etc/containerd/conf.d").exists(), "created dir kept"
    assert node.effective()["default_runtime"] == "runc"
    assert "nvidia" not in node.effective()["runtimes"]
    _sandbox(node, "runc")
    assert not (node.root / "var/lib/gpuplane").exists()

    again = node.run("apply", node.plan(nvidia_default=True))  # and it can be applied again
    assert again.rc == 0 and node.restarts == 3


def test_restore_of_a_replaced_plan_leaves_its_successor_alone(make_node) -> None:
    """Pulumi deletes a replaced command after creating its successor."""
    node = make_node("2.1")
    node.boot()
    old, new = node.plan(), node.plan(nvidia_default=True)
    assert node.run("apply", old).rc == 0
    assert node.run("apply", new).rc == 0
    assert node.restarts == 2
    stale = node.run("restore", None, "--plan-id", old.plan_id)
    assert stale.rc == 0 and "replaced" in stale.err
    assert node.restarts == 2 and node.effective()["default_runtime"] == "nvidia"
    assert node.run("restore", None, "--plan-id", new.plan_id).rc == 0
    assert node.effective()["default_runtime"] == "runc"


def test_an_update_puts_back_the_files_its_plan_no_longer_has(make_node) -> None:
    """Host toolkit, then operator: gpuplane's drop-in goes (its original: absent), the
    import stays; restore then only changes `imports`, so containerd is not restarted."""
    node = make_node("1.7")
    node.boot()
    snap = node.snapshot()
    host, operator = node.plan(), node.plan(ToolkitMode.OPERATOR)
    dropin = next(p for p in host.files if p.endswith("50-gpuplane.toml"))
    assert node.run("apply", host).rc == 0
    update = node.run("apply", operator)
    assert update.rc == 0, update.err
    assert dropin in update.out["written"] and not host_path(node.root, dropin).exists()
    assert node.restarts == 2 and "nvidia" not in node.effective()["runtimes"]
    restored = node.run("restore")
    assert restored.rc == 0, restored.err
    assert restored.out["restarted"] is False and node.restarts == 2
    assert node.snapshot() == snap


def test_a_file_that_already_had_the_planned_bytes_is_not_managed(make_node) -> None:
    node = make_node("2.1")
    node.boot()
    plan = node.plan()
    top = node.profile.config_path
    node.write(top, plan.files[top])  # someone added the import before gpuplane came
    snap = node.snapshot()
    applied = node.run("apply", plan)
    assert applied.rc == 0 and top not in applied.out["written"]
    assert node.run("restore").rc == 0
    assert node.snapshot() == snap


@pytest.mark.parametrize("defines_nvidia", [True, False])
def test_restore_refuses_to_leave_nvidia_default_set_by_another_file(
        defines_nvidia: bool, make_node) -> None:
    """FM09: a toolkit drop-in that survives the uninstall keeps nvidia the default.

    When that file also defines nvidia, the originals are restored and the run fails
    naming the file; when it relies on gpuplane's nvidia runtime, restoring would leave a
    default that does not exist, so gpuplane's files are kept."""
    node = make_node("2.1", profile("k8s-snap"))
    node.boot()
    assert node.run("apply", node.plan()).rc == 0
    toolkit = "/etc/containerd/conf.d/99-nvidia.toml"
    cri = 'plugins."io.containerd.grpc.v1.cri".containerd'
    text = f'version = 2\n[{cri}]\n  default_runtime_name = "nvidia"\n'
    if defines_nvidia:
        text += (f'[{cri}.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n'
                 f'[{cri}.runtimes.nvidia.options]\n  BinaryName = "{node.wrapper}"\n')
    node.write(toolkit, text)
    kept = node.snapshot()
    result = node.run("restore")
    assert result.rc == 1 and "FM09" in result.err and toolkit in result.err, result.err
    dropin = "etc/containerd/conf.d/50-gpuplane.toml"
    assert (dropin in node.snapshot()) is not defines_nvidia
    if not defines_nvidia:
        assert node.snapshot() == kept and "were kept" in result.err
    host_path(node.root, toolkit).unlink()
    assert node.run("restore").rc == 0
    assert dropin not in node.snapshot()
    assert not (node.root / "var/lib/gpuplane").exists()


# ---------------------------------------------------------------------------------------
# Distro detection


def test_k8s_snap_custom_base_dir_comes_from_the_snaps_lock_file(make_node) -> None:
    base = "/var/lib/k8s-containerd"
    node = make_node("1.7", profile("k8s-snap", containerd_base_dir=base))
    node.write("/var/snap/k8s/common/lock/.containerd-base-dir", base + "\n")
    node.boot()
    default_plan = dataclasses.replace(node.plan(), config_path="/etc/containerd/config.toml")
    _refused(node, default_plan, 2, f"containerd base dir is {base}",
             f"gpuplane:cluster.containerdBaseDir: {base}")
    result = node.run("apply", node.plan())
    assert result.rc == 0, result.err
    assert result.out["config"] == f"{base}/k8s-containerd/etc/containerd/config.toml"
    assert node.restarts == 1
    _sandbox(node, "nvidia")


def _kubelet(node: SandboxNode, *argv: str) -> None:
    proc = node.root / "proc" / "4242"
    proc.mkdir(parents=True, exist_ok=True)
    (proc / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


def test_a_kubelet_on_another_containerd_is_refused(make_node) -> None:
    """FM17: Docker's containerd and the kubelet's are different daemons."""
    node = make_node("1.7")
    node.boot()
    _kubelet(node, "/usr/bin/kubelet", "--container-runtime-endpoint",
             "unix:///run/docker/containerd/containerd.sock")
    _refused(node, node.plan(), 2, "/run/docker/containerd/containerd.sock", "FM17",
             "/proc/4242/cmdline")
    _kubelet(node, "/usr/bin/kubelet",
             "--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock")
    result = node.run("apply", node.plan())
    assert result.rc == 0, result.err


def test_the_kubelet_config_file_is_read_when_no_kubelet_runs(make_node) -> None:
    node = make_node("1.7")
    node.boot()
    node.write("/var/lib/kubelet/config.yaml", "kind: KubeletConfiguration\n"
               "containerRuntimeEndpoint: unix:///run/k3s/containerd/containerd.sock\n")
    _refused(node, node.plan(), 2, "/var/lib/kubelet/config.yaml", "FM17")


def test_template_distros_edit_the_template_and_verify_the_regenerated_config(
        containerd_line: str, make_node) -> None:
    node = make_node(containerd_line, profile("rke2"))
    node.boot()
    snap = node.snapshot()
    plan = node.plan()
    assert set(plan.files) == {plan.template_path}
    result = node.run("apply", plan)
    assert result.rc == 0, result.err
    assert node.restarts == 1 and "nvidia" in result.out["runtimes"]
    _sandbox(node, "nvidia")
    assert node.run("apply", plan).out["restarted"] is False
    restored = node.run("restore")
    assert restored.rc == 0, restored.err
    # RKE2 renders its built-in template again, with the runtime it detects from the host
    # toolkit that stays installed (rancher_render).
    assert node.restarts == 2
    node.assert_undone(snap)


# ---------------------------------------------------------------------------------------
# Bases: a plan made from other files than the node's originals is refused


def _sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _site_config(node: SandboxNode) -> dict[str, str]:
    """The node's own top-level config: the distro default with a site's registry mirrors."""
    top = node.profile.config_path
    text = node.profile.baseline(node.version)[top]
    site = text.replace('"/etc/containerd/certs.d"', '"/etc/containerd/mirrors.d"')
    assert site != text
    return {top: site}


def _node_sha(node: SandboxNode, path: str) -> str:
    return _sha(host_path(node.root, path).read_bytes())


def test_a_node_whose_config_differs_from_the_plans_base_is_refused(make_node) -> None:
    """The plan was made from the distro default; this node has its own registry mirrors,
    which writing the plan's config.toml would silently drop."""
    node = make_node("1.7")
    top = node.profile.config_path
    node.write(top, node.runnable(_site_config(node)[top]))
    node.boot()
    plan = node.plan(ToolkitMode.OPERATOR)
    assert top in plan.files and plan.bases[top] != _node_sha(node, top)
    result = _refused(node, plan, 2, f"made from a different {top}",
                      f"plan: sha256 {plan.bases[top]}",
                      f"node's original: sha256 {_node_sha(node, top)}",
                      "replace settings the plan has not seen", "gpuplane:cluster.baselineFiles",
                      "gpuplane:nodes[N].baselineFiles", "Planning from the node's own files")
    assert top in result.out["error"]
    # Planned from the node's own file, the same change applies and keeps the mirrors.
    own = node.plan(ToolkitMode.OPERATOR, current=_site_config(node))
    applied = node.run("apply", own)
    assert applied.rc == 0, applied.err
    assert "mirrors.d" in host_path(node.root, top).read_text()


def test_a_plan_without_bases_is_not_checked(make_node) -> None:
    """Plans made before bases existed apply as they always did."""
    node = make_node("1.7")
    top = node.profile.config_path
    node.write(top, node.runnable(_site_config(node)[top]))
    node.boot()
    plan = dataclasses.replace(node.plan(), bases={})
    result = node.run("apply", plan)
    assert result.rc == 0, result.err
    assert not host_path(node.root, "/var/lib/gpuplane/bases").exists()


def test_an_absent_base_is_refused_when_the_node_has_that_file(make_node) -> None:
    node = make_node("1.7")
    node.boot()
    plan = node.plan()
    dropin = next(p for p in plan.files if p.endswith("50-gpuplane.toml"))
    assert plan.bases[dropin] is None
    theirs = "# written by hand before gpuplane came\nversion = 2\n"
    node.write(dropin, theirs)
    _refused(node, plan, 2, f"made from a different {dropin}", "plan: absent",
             f"node's original: sha256 {_sha(theirs)}")


def test_a_managed_node_compares_against_the_recorded_originals(make_node) -> None:
    """After the first apply config.toml holds gpuplane's import: a changed plan made from
    the same originals applies, one made from the file with gpuplane's edits is refused
    and told where the original is kept."""
    node = make_node("1.7")
    node.boot()
    top = node.profile.config_path
    original = host_path(node.root, top).read_bytes()
    spaced = "/etc/containerd/a b's.toml"  # a base the plan assumes absent, oddly named
    first = node.plan()
    first = dataclasses.replace(first, bases={**first.bases, spaced: None})
    assert node.run("apply", first).rc == 0
    assert _node_sha(node, top) != first.bases[top], "config.toml now holds the import"
    status = node.run("status")
    assert status.out["bases"] == first.bases

    changed = dataclasses.replace(first, files={**first.files,
                                                top: first.files[top] + "# changed\n"})
    again = node.run("apply", changed)
    assert again.rc == 0, again.err
    assert again.out["written"] == [top] and node.restarts == 1

    # Captured from the node as it is now: gpuplane's import looks like the original, so
    # the plan would drop config.toml (and put the original back) instead of keeping it.
    model_top = plan_node(node.profile, node.version,
                          PlanOptions(toolkit=ToolkitMode.HOST)).files[top]
    recaptured = node.plan(current={top: model_top + "# changed\n"})
    assert top not in recaptured.files
    assert recaptured.bases[top] == _node_sha(node, top)
    kept = host_path(node.root, "/var/lib/gpuplane/backup/bases" + top)
    _refused(node, recaptured, 2, f"made from a different {top}",
             f"node's original: sha256 {_sha(original)}", "gpuplane already manages this node",
             "(this plan was made from it)", f"gpuplane keeps at {kept}")
    assert kept.read_bytes() == original


def test_template_distros_compare_against_the_config_found_before_gpuplane(
        make_node) -> None:
    """RKE2 regenerates config.toml from gpuplane's template: the next apply still checks
    the config.toml RKE2 had generated before gpuplane came."""
    node = make_node("1.7", profile("rke2"))
    node.boot()
    top = node.profile.config_path
    first = node.plan()
    assert set(first.bases) == {top, first.template_path}
    assert node.run("apply", first).rc == 0
    assert _node_sha(node, top) != first.bases[top], "config.toml was regenerated"
    second = node.plan(nvidia_default=True)
    assert second.bases == first.bases and second.files != first.files
    result = node.run("apply", second)
    assert result.rc == 0, result.err
    assert node.restarts == 2 and node.effective()["default_runtime"] == "nvidia"
    restored = node.run("restore")
    assert restored.rc == 0, restored.err
    # The template is gone and RKE2 renders its built-in template again, now with the
    # runtime it detects from the host toolkit that stays installed.
    assert not host_path(node.root, first.template_path).exists()
    assert host_path(node.root, top).read_text() == node.runnable(_detected(node))


def _detected(node) -> str:
    """The config RKE2/K3s render from their built-in template once the host toolkit is
    on the node (what the node agent's restart leaves after a restore)."""
    return rancher_render.detect(node.profile.baseline(node.version)[node.profile.config_path],
                                 rancher_render.HOST_TOOLKIT_BINARIES)


def test_a_rancher_node_on_containerd_2_is_planned_from_its_version_3_rendering(
        make_node) -> None:
    """K3s on containerd 2.x renders its version-3 template: the plan gpuplane makes from
    its model matches that node and applies; a plan made from the version-2 rendering
    (K3s on 1.x) is refused as made from another file."""
    node = make_node("2.0", profile("k3s"))
    node.boot()
    top = node.profile.config_path
    assert 'version = 3\n' in host_path(node.root, top).read_text()
    stale = node.plan(current=node.profile.baseline(ContainerdVersion.parse("1.7")))
    _refused(node, stale, 2, f"made from a different {top}")
    result = node.run("apply", node.plan())
    assert result.rc == 0, result.err
    _sandbox(node, "nvidia")


def test_a_k3s_importing_its_drop_in_dir_gets_gpuplanes_drop_in_and_loses_it_on_restore(
        make_node) -> None:
    """K3s with k3s-io/k3s PR #13680 imports config-v3.toml.d: gpuplane writes its drop-in
    there, K3s keeps rendering its own template, one restart, and restore removes it."""
    node = make_node("2.0", profile("k3s"))
    top = node.profile.config_path
    doc = tomlkit.parse(node.builtin_model)
    dropins = "/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.d"
    doc["imports"] = [f"{dropins}/*.toml"]
    node.builtin_model = tomlkit.dumps(doc)
    node.write(top, node.runnable(node.builtin_model))
    node.boot()
    plan = node.plan(nvidia_default=True, current={top: node.builtin_model})
    assert list(plan.files) == [f"{dropins}/50-gpuplane.toml"]
    result = node.run("apply", plan)
    assert result.rc == 0, result.err
    assert node.restarts == 1 and node.effective()["default_runtime"] == "nvidia"
    assert not host_path(node.root, plan.template_path).exists()
    restored = node.run("restore")
    assert restored.rc == 0, restored.err
    assert not host_path(node.root, f"{dropins}/50-gpuplane.toml").exists()
    assert node.effective()["default_runtime"] == "runc"


def test_a_node_changed_before_originals_were_recorded_is_restored_first(make_node) -> None:
    """A template distro applied without bases (an older plan) has regenerated config.toml
    from gpuplane's template: the refusal says to restore before capturing."""
    node = make_node("1.7", profile("rke2"))
    node.boot()
    top = node.profile.config_path
    plan = node.plan()
    assert node.run("apply", dataclasses.replace(plan, bases={})).rc == 0
    _refused(node, node.plan(nvidia_default=True), 2, f"made from a different {top}",
             "before it recorded the originals", "restore the node first")
    assert node.run("restore").rc == 0
    # Planned from the node as the restore left it (captured), the next plan applies.
    result = node.run("apply", node.plan(nvidia_default=True,
                                         current={top: _detected(node)}))
    assert result.rc == 0, result.err


def test_restore_forgets_the_recorded_originals(make_node) -> None:
    node = make_node("1.7")
    node.boot()
    top = node.profile.config_path
    default, site = node.plan(), node.plan(current=_site_config(node))
    assert node.run("apply", default).rc == 0
    _refused(node, site, 2, f"made from a different {top}", "gpuplane already manages")
    assert node.run("restore").rc == 0
    node.write(top, node.runnable(_site_config(node)[top]))  # the site changes its config
    _refused(node, default, 2, f"made from a different {top}")
    result = node.run("apply", site)
    assert result.rc == 0, result.err
    assert "mirrors.d" in host_path(node.root, top).read_text()


def test_a_managed_file_another_writer_changed_is_not_overwritten(make_node) -> None:
    """FM05: gpuplane's drop-in was edited on the node since gpuplane wrote it. Neither the
    same plan (overwrite it) nor an operator-mode plan (put the original back, i.e. remove
    it) goes ahead; once the edit is undone, the change applies."""
    node = make_node("1.7")
    node.boot()
    host = node.plan()
    dropin = next(p for p in host.files if p.endswith("50-gpuplane.toml"))
    assert node.run("apply", host).rc == 0
    written = host_path(node.root, dropin).read_text()
    edited = written + "# tuned by hand\n"
    node.write(dropin, edited)
    for plan in (node.plan(nvidia_default=True), node.plan(ToolkitMode.OPERATOR)):
        _refused(node, plan, 2, f"{dropin} changed on the node since gpuplane wrote it",
                 "FM05", f"node: sha256 {_sha(edited)}", f"gpuplane wrote: sha256 {_sha(written)}")
    node.write(dropin, written)
    result = node.run("apply", node.plan(nvidia_default=True))
    assert result.rc == 0, result.err
    assert node.effective()["default_runtime"] == "nvidia"


# ---------------------------------------------------------------------------------------
# Status and drift (FM05)


def test_status_reports_the_effective_runtimes_and_drift(make_node) -> None:
    node = make_node("1.7")
    node.boot()
    applied = node.run("apply", node.plan())
    status = node.run("status")
    assert status.rc == 0, status.err
    assert status.out["config_sha256"] == applied.out["config_sha256"]
    assert status.out["runtimes"]["nvidia"]["binary_name"] == str(node.wrapper)
    assert status.out["default_runtime"] == "runc" and status.out["drift"] is False
    dropin = "/etc/containerd/conf.d/50-gpuplane.toml"
    node.write(dropin, host_path(node.root, dropin).read_text() + "# edited\n")
    drifted = node.run("status")
    assert drifted.out["drift"] is True and drifted.out["drifted_files"] == [dropin]


# ---------------------------------------------------------------------------------------
# The Python side


def test_file_contents_arrive_byte_exact(make_node) -> None:
    node = make_node("1.7")
    plan = node.plan()
    dropin = next(p for p in plan.files if p.endswith("50-gpuplane.toml"))
    tricky = ("# quotes ' \" $HOME $(id) `id` \\ EOF, a CRLF\r\n#\tand no final newline\n"
              + plan.files[dropin].rstrip("\n"))
    plan = dataclasses.replace(plan, files={**plan.files, dropin: tricky})
    stdin = apply_stdin(plan)
    assert "\n# quotes ' \" $HOME" in stdin, "contents must stay readable in the diff"
    result = node.run("apply", plan, "--restart-cmd", "true", "--ready-cmd", "true")
    assert result.rc == 0, result.err
    assert host_path(node.root, dropin).read_bytes() == plan.files[dropin].encode()


def test_agent_plan_refuses_plans_with_errors_and_promises_what_its_files_do() -> None:
    cdi_on_16 = plan_node(profile("kubeadm"), ContainerdVersion.parse("1.6"),
                          PlanOptions(toolkit=ToolkitMode.HOST, cdi=True))
    with pytest.raises(ValueError, match="FM16"):
        agent_plan(cdi_on_16)
    version = ContainerdVersion.parse("1.7")
    host = agent_plan(plan_node(profile("k8s-snap"), version,
                                PlanOptions(toolkit=ToolkitMode.HOST, nvidia_default=True)))
    assert host.expected_runtimes == {"runc", "nvidia"} and host.expected_default == "nvidia"
    assert host.edit_paths == ("/etc/containerd/config.toml", "/etc/containerd/conf.d/")
    operator = agent_plan(plan_node(profile("k8s-snap"), version,
                                    PlanOptions(nvidia_default=True)))
    assert operator.expected_runtimes == {"runc"} and operator.expected_default is None
    rke2 = profile("rke2")
    assert rke2.edit_mode is EditMode.TEMPLATE
    tmpl = agent_plan(plan_node(rke2, ContainerdVersion.parse("2.1"),
                                PlanOptions(toolkit=ToolkitMode.HOST)))
    assert tmpl.template_path == tmpl.edit_paths[0] == rke2.template_v3_path
    assert tmpl.plan_id != host.plan_id and len(tmpl.plan_id) == 16


def test_agent_plan_carries_the_bases_into_its_id_and_its_stdin() -> None:
    kubeadm = profile("kubeadm")
    node_plan = plan_node(kubeadm, ContainerdVersion.parse("1.7"),
                          PlanOptions(toolkit=ToolkitMode.HOST))
    plan = agent_plan(node_plan)
    top = plan.config_path
    assert plan.bases == node_plan.bases
    assert set(plan.bases) == {*plan.files, top}
    assert plan.bases[top] == _sha(kubeadm.baseline(node_plan.version)[top])
    other = dataclasses.replace(plan, bases={**plan.bases, top: "0" * 64})
    unchecked = dataclasses.replace(plan, bases={})
    assert len({plan.plan_id, other.plan_id, unchecked.plan_id}) == 3

    odd = {**plan.bases, "/etc/containerd/it's a b.toml": None}
    stdin = apply_stdin(dataclasses.replace(plan, bases=odd))
    assert payload_bases(stdin) == odd
    assert payload_files(stdin) == plan.files, "base lines are not files"
    assert payload_bases(apply_stdin(unchecked)) == {}
    assert payload_bases("echo not a plan\n") is None
    for bad in ({top: "ABCD" * 16}, {top: "a" * 63}, {"etc/relative": None}):
        with pytest.raises(ValueError, match="agent plan"):
            dataclasses.replace(plan, bases=bad)


def test_the_agent_refuses_a_malformed_base_before_anything(tmp_path: Path) -> None:
    plan = agent_plan(plan_node(profile("kubeadm"), ContainerdVersion.parse("1.7"),
                                PlanOptions(toolkit=ToolkitMode.HOST)))
    top, digest = plan.config_path, plan.bases[plan.config_path]
    line = f"gp_plan base '{digest} {top}'"
    stdin = apply_stdin(plan)
    assert line in stdin
    for bad, needle in ((f"gp_plan base '{digest[:-1]} {top}'", "is not 'SHA256 PATH'"),
                        (f"gp_plan base '{digest.upper()} {top}'", "is not 'SHA256 PATH'"),
                        (f"gp_plan base '{digest} etc/x.toml'", "not an absolute path"),
                        (f"gp_plan base '{digest} /etc/../x.toml'", "refusing the path")):
        proc = subprocess.run([DASH, "-s", "--", "apply", "--root", str(tmp_path)],
                              input=stdin.replace(line, bad), capture_output=True, text=True,
                              check=False)
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_commands() -> None:
    assert apply_command(False) == "sh -s -- apply"
    assert apply_command(True) == "sudo -n sh -s -- apply"
    assert AGENT_PATH in restore_command(True) and "--plan-id abc" in restore_command(False, "abc")
    if Path(AGENT_PATH).exists():
        pytest.skip(f"{AGENT_PATH} exists on this machine: not running the node commands")
    restore = subprocess.run([DASH, "-c", restore_command(False, "abc")], capture_output=True,
                             text=True, check=False)
    assert restore.returncode == 0 and "nothing to restore" in restore.stderr
    status = subprocess.run([DASH, "-c", status_command(False)], capture_output=True,
                            text=True, check=False)
    assert json.loads(status.stdout) == {"mode": "status", "applied": False}


def test_restore_and_status_on_a_node_gpuplane_never_touched(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    script = tmp_path / "agent.sh"
    script.write_text(agent_source())
    for mode, rc in (("restore", 0), ("status", 2)):
        proc = subprocess.run([DASH, str(script), mode, "--root", str(root)],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == rc, proc.stderr
        assert json.loads(proc.stdout)["mode"] == mode
    assert not (root / "var").exists()


def test_cli_prints_the_agent(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["node-agent"]) == 0
    assert capsys.readouterr().out == agent_source()


def test_the_script_parses_in_posix_shells() -> None:
    script = str(agent_script_path())
    shells = [[DASH]] + ([[BUSYBOX, "sh"]] if BUSYBOX else [])
    for shell in shells:
        proc = subprocess.run([*shell, "-n", script], capture_output=True, text=True,
                              check=False)
        assert proc.returncode == 0, proc.stderr
    checker = shutil.which("shellcheck")  # stricter, where installed
    if checker:
        proc = subprocess.run([checker, "-s", "sh", "-e", "SC2016", script],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout


# ---------------------------------------------------------------------------------------
# A node without a top-level config (issue #39)


@pytest.mark.parametrize("line", ["1.7", "2.1"])
def test_a_node_without_a_top_level_file_gets_one_and_restore_removes_it(
        line: str, make_node) -> None:
    """containerd runs on its defaults without config.toml; the plan made from "no file"
    writes one (planned absent, so the agent checks that none appeared), nvidia serves,
    and restore takes the node back to no file, on which containerd starts again."""
    oracle.require_line(line)
    node = make_node(line)
    config = host_path(node.root, node.profile.config_path)
    config.unlink()
    node.boot()
    snap = node.snapshot()
    plan = node.plan(current={})
    assert plan.bases[node.profile.config_path] is None
    applied = node.run("apply", plan)
    assert applied.rc == 0, applied.err
    assert config.is_file() and node.restarts == 1
    assert "nvidia" in node.effective()["runtimes"]
    _sandbox(node, "nvidia")

    restored = node.run("restore")
    assert restored.rc == 0, restored.err
    assert not config.exists(), "restore must take the node back to no top-level file"
    assert node.snapshot() == snap and node.restarts == 2
    assert "nvidia" not in node.effective()["runtimes"]
    _sandbox(node, "runc")
