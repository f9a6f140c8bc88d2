"""Lean Pulumi state: the node agent travels once per node and agent version (an upload
keyed by its digest, which the node command installs as root the first time), and each
node command carries only the plan: two resources per node.

The plan side is checked on the registered resources of real stacks; the node side runs
the install script and the lean program through the real agent against a real
containerd on a sandbox root (tests/support/agent_node.py), then restores without any stdin.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.agent_node import DASH, AgentRun, SandboxNode, parse_result
from support.layouts import host_path
from test_stacks import registered

from gpuplane.agent.payload import payload_bases, payload_files
from gpuplane.agent.script import (
    AGENT_DIR,
    AGENT_PATH,
    agent_digest,
    agent_file,
    agent_source,
    install_script,
    plan_stdin,
    staged_agent_path,
    uninstall_script,
)
from gpuplane.distros.profiles import profile

COMMAND = "command:remote:Command"
COPY = "command:remote:CopyToRemote"


@pytest.fixture
def make_node(tmp_short: Path) -> Iterator[Callable[[str], SandboxNode]]:
    """Sandbox kubeadm nodes (a real containerd each), stopped afterwards."""
    nodes: list[SandboxNode] = []

    def make(line: str) -> SandboxNode:
        nodes.append(SandboxNode(tmp_short, line, profile("kubeadm")))
        return nodes[-1]

    yield make
    for node in nodes:
        node.close()


@pytest.mark.parametrize("stack", ["kubeadm-prod", "microk8s-edge"])
def test_node_commands_carry_the_plan_and_the_agent_travels_once_per_node(stack: str) -> None:
    resources = registered(stack)
    nodes = [r.name.removeprefix("containerd-") for r in resources
             if r.type == COMMAND and r.name.startswith("containerd-")]
    assert nodes
    source = agent_source()
    for r in resources:   # the agent's text is in no resource's inputs at all
        assert json.dumps(source[:2000])[1:-1] not in json.dumps(r.inputs)
    by_name = {r.name: r for r in resources}
    for node in nodes:
        cmd = by_name[f"containerd-{node}"]
        stdin = cmd.inputs["stdin"]
        assert "gp_usage()" not in stdin and "GPUPLANE_AGENT_" not in stdin
        assert AGENT_DIR in stdin and Path(agent_file()).name in stdin
        assert agent_digest() in stdin
        assert payload_files(stdin) and payload_bases(stdin) is not None
        copy = by_name[f"gpuplane-agent-copy-{node}"]
        assert copy.type == COPY
        assert copy.inputs["source"]["hash"] == agent_digest()
        assert copy.inputs["remotePath"] == staged_agent_path()
        assert copy.urn in cmd.dependencies
        assert staged_agent_path() in stdin, "the command installs the upload"
        assert agent_file() in cmd.inputs["delete"], "the delete removes the install"
    assert sum(r.type == COPY for r in resources) == len(nodes)
    assert sum(r.type == COMMAND for r in resources) == len(nodes), "no other command"


def _install(node: SandboxNode, home: Path, upload: str) -> subprocess.CompletedProcess[str]:
    """The install command as the node runs it: root, in the SSH user's home."""
    home.mkdir(exist_ok=True)
    (home / staged_agent_path()).write_text(upload)
    state_dir = str(host_path(node.root, AGENT_DIR))
    return subprocess.run([DASH, "-c", install_script(state_dir)], cwd=home,
                          capture_output=True, text=True, timeout=60, check=False)


def _lean(node: SandboxNode, plan, *extra: str, home: Path | None = None) -> AgentRun:
    """The node command as the node runs it: root, in the SSH user's home."""
    home = home or node.tmp / "home"
    home.mkdir(exist_ok=True)
    proc = subprocess.run([DASH, "-s", "--", "apply", *node.args(*extra)],
                          input=plan_stdin(plan), capture_output=True, text=True,
                          timeout=120, check=False, cwd=home)
    return parse_result(proc.returncode, proc.stdout, proc.stderr)


def test_the_node_command_installs_the_upload_applies_and_restore_needs_no_stdin(
        containerd_line: str, make_node) -> None:
    node = make_node(containerd_line)
    node.boot()
    snap = node.snapshot()
    home = node.tmp / "home"
    # An older version's install and upload are cleaned up; the restore copy is kept.
    state = host_path(node.root, AGENT_DIR)
    state.mkdir(parents=True)
    (state / "agent-0000000000000000.sh").write_text("old")
    home.mkdir()
    (home / ".gpuplane-agent-0000000000000000.sh").write_text("old")
    (home / staged_agent_path()).write_text(agent_source())   # what the copy uploads

    plan = node.plan()
    first = _lean(node, plan)
    assert first.rc == 0, first.err
    assert host_path(node.root, agent_file()).read_text() == agent_source()
    assert host_path(node.root, agent_file()).stat().st_mode & 0o077 == 0
    assert not (state / "agent-0000000000000000.sh").exists()
    assert sorted(p.name for p in home.iterdir()) == [staged_agent_path()]
    assert first.out["ok"] is True and node.restarts == 1
    assert set(first.out["written"]) == set(plan.files)
    assert "nvidia" in node.effective()["runtimes"]
    # The agent keeps its own copy for restore, which Pulumi runs without stdin.
    assert host_path(node.root, AGENT_PATH).read_text() == agent_source()
    again = _lean(node, plan)
    assert again.rc == 0 and again.out["changed"] is False and node.restarts == 1

    # While a plan is applied (a replaced command's skipped restore), nothing is removed.
    kept = subprocess.run([DASH, "-c", uninstall_script(str(state))], cwd=home,
                          capture_output=True, text=True, check=False)
    assert kept.returncode == 0, kept.stderr
    assert host_path(node.root, agent_file()).exists() and list(home.iterdir())
    restored = node.run("restore")
    assert restored.rc == 0, restored.err
    assert node.snapshot() == snap, "originals are not byte-exact"
    assert node.effective()["default_runtime"] == "runc"
    removed = subprocess.run([DASH, "-c", uninstall_script(str(state))], cwd=home,
                             capture_output=True, text=True, check=False)
    assert removed.returncode == 0, removed.stderr
    assert not state.exists() and not list(home.iterdir())


def test_the_install_script_installs_once_and_cleans_other_versions(make_node) -> None:
    node = make_node("1.7")
    home = node.tmp / "home"
    state = host_path(node.root, AGENT_DIR)
    state.mkdir(parents=True)
    (state / "agent-0000000000000000.sh").write_text("old")
    (state / ".agent.Xk3Q9a").write_text(agent_source()[:100])   # an install killed mid-copy
    installed = _install(node, home, agent_source())
    assert installed.returncode == 0, installed.stderr
    assert sorted(p.name for p in state.iterdir()) == [Path(agent_file()).name]
    assert _install(node, home, agent_source()).returncode == 0, "install is idempotent"


def test_a_node_without_the_installed_agent_refuses_before_anything(make_node) -> None:
    node = make_node("1.7")
    snap = node.snapshot()
    plan = node.plan()
    missing = _lean(node, plan)   # no install and no upload
    assert missing.rc == 2 and "no agent at" in missing.err
    assert str(host_path(node.root, agent_file())) in missing.err
    # A file at the digest path that is not that agent is not run either.
    host_path(node.root, agent_file()).parent.mkdir(parents=True)
    host_path(node.root, agent_file()).write_text(agent_source() + "echo tampered\n")
    tampered = subprocess.run(
        [DASH, "-s", "--", "apply", f"--root={node.root}", "--restart-cmd", "false"],
        input=plan_stdin(plan), capture_output=True, text=True, timeout=60, check=False,
        cwd=node.tmp / "home")
    assert tampered.returncode == 2 and "no agent at" in tampered.stderr
    assert node.snapshot() == snap and node.restarts == 0


def test_an_upload_that_is_not_the_agent_is_not_installed(make_node) -> None:
    node = make_node("1.7")
    home = node.tmp / "home"
    refused = _install(node, home, agent_source().replace("gp_", "xx_", 1))
    assert refused.returncode == 2 and "is not agent" in refused.stderr
    state = host_path(node.root, AGENT_DIR)
    assert not state.exists() or not list(state.iterdir()), "nothing half-written"
    # The node command refuses that upload too, before anything else.
    snap = node.snapshot()
    lean = _lean(node, node.plan(), home=home)
    assert lean.rc == 2 and "is not agent" in lean.err
    assert not state.exists() or not list(state.iterdir()), "nothing half-written"
    assert node.snapshot() == snap and node.restarts == 0
