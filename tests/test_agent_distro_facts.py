"""Distribution facts the node agent detects on the node instead of guessing (issue #13,
items 4 and 5): the systemd unit that runs containerd (RKE2/K3s agent or server, k0s
worker or controller), where RKE2 and K3s put their containerd binary (through links),
and the NVIDIA toolkit's data-equal rewrite of the top-level config, which the drift
guard must not take for another writer.

Each runs the agent against a real containerd (tests/agent_node.py); `systemctl` is a
stand-in on PATH that answers `is-active` from a file and turns `restart UNIT` into the
sandbox's restart.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuplane.distros import profile

import oracle
from agent_node import SandboxNode
from layouts import host_path


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
@pytest.mark.parametrize("distro", sorted(UNITS))
def test_the_agent_restarts_the_unit_that_is_active_on_the_node(
        distro: str, nodes: list[SandboxNode], tmp_short: Path) -> None:
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

    for unit in units:
        systemd.activate(unit)
        applied = node.run("apply", plan, env=systemd.env, restart_cmd=False)
        assert applied.rc == 0, applied.err
        assert f"{unit} is the active {distro} unit" in applied.err
        assert systemd.restarted[-1:] == [unit] and "nvidia" in node.effective()["runtimes"]
        # restore runs from the state (no plan): it restarts the same unit
        restored = node.run("restore", env=systemd.env, restart_cmd=False)
        assert restored.rc == 0, restored.err
        assert systemd.restarted[-2:] == [unit, unit]
        assert node.snapshot() == snap and "nvidia" not in node.effective()["runtimes"]
    assert set(systemd.restarted) == set(units)


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
    applied = node.run("apply", plan, env=env, containerd="")
    assert applied.rc == 0, applied.err
    assert f"containerd: {planned[0]} -> {real}" in applied.err, applied.err
    assert "nvidia" in node.effective()["runtimes"]
    restored = node.run("restore", env=env, containerd="")
    assert restored.rc == 0, restored.err
    assert "nvidia" not in node.effective()["runtimes"]
