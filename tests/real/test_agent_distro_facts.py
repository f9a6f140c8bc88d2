"""Distribution facts the node agent detects on the node instead of guessing (issue #13,
items 4 and 5): the systemd unit that runs containerd (RKE2/K3s agent or server, k0s
worker or controller), where RKE2 and K3s put their containerd binary (through links),
and the NVIDIA toolkit's data-equal rewrite of the top-level config, which the drift
guard must not take for another writer.

Each runs the agent against a real containerd (tests/support/agent_node.py); `systemctl` is a
stand-in on PATH that answers `is-active` from a file and turns `restart UNIT` into the
sandbox's restart.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomlkit
from support import oracle, toolkit_oracle
from support.agent_node import SandboxNode
from support.layouts import host_path
from support.operator_env import operator_env

from gpuplane.distros.profiles import profile
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node


@pytest.fixture
def nodes(tmp_short: Path) -> Iterator[list[SandboxNode]]:
    made: list[SandboxNode] = []
    yield made
    for node in made:
        node.close()


def _node(nodes: list[SandboxNode], tmp: Path, line: str, distro: str) -> SandboxNode:
    node = SandboxNode(tmp, line, profile(distro))
    nodes.append(node)
    node.boot()
    return node


class FakeSystemd:
    """`systemctl` on PATH: `is-active [--quiet] UNIT` succeeds for the units in `active`,
    `restart UNIT` logs UNIT and restarts the sandbox daemon."""

    def __init__(self, node: SandboxNode) -> None:
        self.dir = node.tmp / "systemd-bin"
        self.dir.mkdir(exist_ok=True)
        self.active_file = node.tmp / "active-units"
        self.log = node.tmp / "restarted-units"
        self.active_file.write_text("")
        script = self.dir / "systemctl"
        script.write_text(
            "#!/bin/sh\n"
            'case $1 in\n'
            "is-active) [ \"$2\" = --quiet ] && shift\n"
            f"  grep -qx -e \"$2\" '{self.active_file}' ;;\n"
            f"restart) echo \"$2\" >> '{self.log}'; exec sh '{node.restart_script}' ;;\n"
            "*) exit 1 ;;\n"
            "esac\n")
        script.chmod(0o755)
        self.env = {**os.environ, "PATH": f"{self.dir}:{os.environ['PATH']}"}

    def activate(self, *units: str) -> None:
        self.active_file.write_text("".join(f"{u}\n" for u in units))

    @property
    def restarted(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []


UNITS = {"rke2": ("rke2-agent", "rke2-server"), "k3s": ("k3s-agent", "k3s"),
         "k0s": ("k0sworker", "k0scontroller")}


@pytest.mark.real
@pytest.mark.parametrize(("distro", "unit"),
                         [(d, u) for d in sorted(UNITS) for u in UNITS[d]])
def test_the_agent_restarts_the_unit_that_is_active_on_the_node(
        distro: str, unit: str, nodes: list[SandboxNode], tmp_short: Path) -> None:
    """Each unit on a node of its own: after a restore RKE2/K3s keep the runtime they
    detect from the host toolkit, so a node gpuplane restored is not the one planned."""
    node = _node(nodes, tmp_short, "1.7", distro)
    units = UNITS[distro]
    assert node.profile.restart_units == units
    systemd = FakeSystemd(node)
    plan = node.plan()
    assert plan.restart_units == units and plan.restart_command == ""
    snap = node.snapshot()

    for active, needle in (((), "none of the"), (units, "several")):
        systemd.activate(*active)
        refused = node.run("apply", plan, env=systemd.env, restart_cmd=False)
        assert refused.rc == 2, refused.err
        assert needle in refused.err and "nothing changed" in refused.err, refused.err
        assert all(u in refused.err for u in units)
        assert node.snapshot() == snap and systemd.restarted == []

    systemd.activate(unit)
    applied = node.run("apply", plan, env=systemd.env, restart_cmd=False)
    assert applied.rc == 0, applied.err
    assert f"{unit} is the active {distro} unit" in applied.err
    assert systemd.restarted == [unit] and "nvidia" in node.effective()["runtimes"]
    # restore runs from the state (no plan): it restarts the same unit
    restored = node.run("restore", env=systemd.env, restart_cmd=False)
    assert restored.rc == 0, restored.err
    assert systemd.restarted == [unit, unit]
    node.assert_undone(snap)


def _place_binary(node: SandboxNode, node_path: str) -> None:
    """The sandbox line's containerd and ctr, as regular files at node_path's directory."""
    target = host_path(node.root, node_path)
    target.parent.mkdir(parents=True, exist_ok=True)
    for name in ("containerd", "ctr"):
        source = oracle.binary(node.line, name).resolve()
        dest = target.parent / name
        try:
            os.link(source, dest)
        except OSError:
            shutil.copy2(source, dest)


def _without_containerd_on_path(node: SandboxNode) -> dict[str, str]:
    """PATH as it is, but with no containerd on it (a directory holding one is replaced by
    links to everything else in it), so the agent can only find the distribution's."""
    path = []
    for entry in os.environ["PATH"].split(":"):
        folder = Path(entry)
        if not (folder / "containerd").exists():
            path.append(entry)
            continue
        shadow = node.tmp / "path" / str(len(path))
        shadow.mkdir(parents=True, exist_ok=True)
        for item in folder.iterdir():
            if not item.name.startswith(("containerd", "ctr")):
                (shadow / item.name).symlink_to(item)
        path.append(str(shadow))
    return {**os.environ, "PATH": ":".join(path)}


@pytest.mark.real
@pytest.mark.parametrize("distro,line,link,real", [
    # RKE2: bin/ -> data/<digest>/bin, an absolute link (pkg/bootstrap/bootstrap.go)
    ("rke2", "2.0", ("/var/lib/rancher/rke2/bin", "/var/lib/rancher/rke2/data/"
                     "v1.31.6-rke2r1-0123456789ab/bin"),
     "/var/lib/rancher/rke2/data/v1.31.6-rke2r1-0123456789ab/bin/containerd"),
    # K3s: data/current -> data/<digest>, a relative link
    ("k3s", "1.7", ("/var/lib/rancher/k3s/data/current", "0123456789abcdef"),
     "/var/lib/rancher/k3s/data/0123456789abcdef/bin/containerd"),
])
def test_the_agent_finds_containerd_where_the_distribution_puts_it(
        distro: str, line: str, link: tuple[str, str], real: str,
        nodes: list[SandboxNode], tmp_short: Path) -> None:
    node = _node(nodes, tmp_short, line, distro)
    env = _without_containerd_on_path(node)
    plan = node.plan()
    planned = (plan.containerd_binary, *plan.containerd_alternatives)
    refused = node.run("apply", plan, env=env, containerd="")
    assert refused.rc == 2 and "no containerd binary at" in refused.err, refused.err
    assert planned[0] in refused.err

    _place_binary(node, real)
    host_path(node.root, link[0]).symlink_to(link[1])
    snap = node.snapshot()
    applied = node.run("apply", plan, env=env, containerd="")
    assert applied.rc == 0, applied.err
    assert f"containerd: {planned[0]} -> {real}" in applied.err, applied.err
    assert "nvidia" in node.effective()["runtimes"]
    restored = node.run("restore", env=env, containerd="")
    assert restored.rc == 0, restored.err
    node.assert_undone(snap)


def _toolkit_rewrite(node: SandboxNode, tmp: Path) -> dict[str, str]:
    """What the REAL toolkit 1.18.1 (the GPU Operator v25.10.1's) writes on this node after
    gpuplane's operator-mode plan: {node path: text}, made runnable in the sandbox."""
    options = PlanOptions(toolkit=ToolkitMode.OPERATOR, toolkit_version="1.18.1")
    plan = plan_node(node.profile, node.version, options)
    env = operator_env("v25.10.1", plan.toolkit_env, cdi=False,
                       runtime_class=options.runtime_name)
    real = toolkit_oracle.run_toolkit("1.18.1", {**plan.baseline, **plan.files}, env, tmp)
    top = node.profile.config_path
    assert top in real.written, real.log
    assert real.written[top] != plan.files[top], "the toolkit is expected to reformat"
    assert tomllib.loads(real.written[top]) == tomllib.loads(plan.files[top])
    return {path: node.runnable(text) for path, text in real.written.items()}


@pytest.mark.real
@pytest.mark.parametrize("line", ["1.7", "2.1"])
def test_the_toolkits_data_equal_rewrite_is_not_another_writer(
        line: str, nodes: list[SandboxNode], tmp_short: Path) -> None:
    """FM05 compares TOML data for the top-level config: the toolkit's rewrite (comments
    and order gone, data equal) is accepted; a changed value is still refused."""
    node = _node(nodes, tmp_short, line, "kubeadm")
    original = node.snapshot()
    plan = node.plan(ToolkitMode.OPERATOR, toolkit_version="1.18.1")
    top = node.profile.config_path
    assert node.run("apply", plan).rc == 0
    rewrite = _toolkit_rewrite(node, tmp_short / "toolkit")
    for path, text in rewrite.items():
        node.write(path, text)
    rewritten = host_path(node.root, top).read_bytes()
    assert rewritten != plan.files[top].encode()

    again = node.run("apply", plan)  # the same plan: nothing to do, the rewrite stays
    assert again.rc == 0, again.err
    assert "same TOML data as planned" in again.err and again.out["written"] == []
    assert host_path(node.root, top).read_bytes() == rewritten
    status = node.run("status")
    assert top not in status.out["drifted_files"], status.out
    # A changed plan rewrites the top-level config: the guard lets it go ahead.
    changed = dataclasses.replace(
        plan, files={**plan.files, top: plan.files[top] + "# changed\n"})
    over = node.run("apply", changed)
    assert over.rc == 0 and over.out["written"] == [top], over.err
    assert node.run("apply", plan).rc == 0
    node.write(top, rewritten.decode())

    # A third writer that changes a value is refused (apply) and reported (status).
    doc = tomlkit.parse(rewritten.decode())
    doc["oom_score"] = -999
    node.write(top, tomlkit.dumps(doc))
    refused = node.run("apply", changed)
    assert refused.rc == 2 and "FM05" in refused.err and top in refused.err, refused.err
    assert top in node.run("status").out["drifted_files"]

    # Restore puts the original back either way.
    node.write(top, rewritten.decode())
    for path in rewrite:
        if path != top:
            host_path(node.root, path).unlink()
    restored = node.run("restore")
    assert restored.rc == 0, restored.err
    assert node.snapshot() == original
