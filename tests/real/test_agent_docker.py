"""The node agent's Docker target (`gpuplane:docker`) on a sandbox node with a real
containerd: daemon.json written in the same transaction as containerd's files, checked
before anything restarts, Docker restarted once and only when the file changed, the whole
run rolled back when Docker does not come back, restore putting the original back.

Docker here is a stand-in (a restart command that logs, a readiness command that prints
the runtimes the file on the sandbox root names); tests/real/test_docker_real.py runs the same
agent against a real dockerd.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.agent_node import SandboxNode
from support.layouts import host_path

from gpuplane.agent.script import AgentPlan, apply_stdin
from gpuplane.distros.docker_daemon import DAEMON_JSON, DockerSettings
from gpuplane.distros.profiles import profile
from gpuplane.plan.node import ToolkitMode

LINE = "1.7"
# Prints the runtimes of the daemon.json under the root, as `docker info` would list them.
_RUNTIMES = ("import json, os, sys; p = sys.argv[1]; "
             "d = json.load(open(p)) if os.path.exists(p) else {}; "
             "print(json.dumps(d.get('runtimes', {})))")


class DockerStandIn:
    """The sandbox node plus a stand-in Docker: restarts are logged, readiness prints
    the runtimes the node's daemon.json names (or fails, when `down`)."""

    def __init__(self, node: SandboxNode, tmp: Path) -> None:
        self.node, self.log = node, tmp / "docker-restarts.log"
        self.file = host_path(node.root, DAEMON_JSON)
        self.down = tmp / "docker-down"

    @property
    def restarts(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0

    def args(self) -> list[str]:
        # `down`: this Docker does not start on a daemon.json with the nvidia runtime.
        ready = (f"! {{ [ -e '{self.down}' ] && grep -q nvidia '{self.file}'; }} && "
                 f"'{sys.executable}' -c \"{_RUNTIMES}\" '{self.file}'")
        return ["--docker-restart-cmd", f"echo restart >> '{self.log}'",
                "--docker-ready-cmd", ready, "--dockerd", "/nonexistent/dockerd"]

    def run(self, mode: str, plan: AgentPlan | None = None) -> tuple[int, str]:
        result = self.node.run(mode, plan, *self.args())
        return result.rc, result.err


@pytest.fixture
def docker_node(tmp_short: Path) -> Iterator[DockerStandIn]:
    node = SandboxNode(tmp_short, LINE, profile("kubeadm"))
    node.boot()
    try:
        yield DockerStandIn(node, tmp_short)
    finally:
        node.close()


def _plan(node: SandboxNode, *, docker: bool = True, current: dict[str, str] | None = None,
          default: bool = False) -> AgentPlan:
    return node.plan(ToolkitMode.HOST, current=current,
                     docker=DockerSettings(set_as_default=default) if docker else None)


def test_apply_writes_daemon_json_restarts_docker_once_and_restore_removes_it(
        docker_node: DockerStandIn) -> None:
    node = docker_node.node
    plan = _plan(node)
    rc, err = docker_node.run("apply", plan)
    assert rc == 0, err
    assert docker_node.file.read_text() == plan.files[DAEMON_JSON]
    assert node.restarts == 1 and docker_node.restarts == 1
    # No dockerd here: the check that ran is named, honestly.
    assert "JSON syntax only, with python3 (no dockerd at /nonexistent/dockerd)" in err, err
    rc, err = docker_node.run("apply", plan)           # the same plan again: nothing to do
    assert rc == 0, err
    assert node.restarts == 1 and docker_node.restarts == 1
    rc, err = docker_node.run("restore")
    assert rc == 0, err
    assert not docker_node.file.exists()
    assert docker_node.restarts == 2


def test_a_docker_only_change_does_not_restart_containerd(docker_node: DockerStandIn) -> None:
    node = docker_node.node
    rc, err = docker_node.run("apply", _plan(node, docker=False))
    assert rc == 0, err
    assert node.restarts == 1 and docker_node.restarts == 0
    rc, err = docker_node.run("apply", _plan(node))
    assert rc == 0, err
    assert node.restarts == 1 and docker_node.restarts == 1
    assert "containerd is not restarted" in err


def test_a_docker_that_does_not_come_back_rolls_everything_back(
        docker_node: DockerStandIn) -> None:
    node = docker_node.node
    before = node.snapshot()
    docker_node.down.touch()
    rc, err = docker_node.run("apply", _plan(node))
    assert rc == 1, err
    assert "Docker did not come back" in err
    assert not docker_node.file.exists()
    node.assert_undone(before)
    # Restarted for the change, then again on the restored file; containerd twice too.
    assert docker_node.restarts == 2 and node.restarts == 2


def test_an_existing_daemon_json_is_kept_and_put_back_byte_for_byte(
        docker_node: DockerStandIn) -> None:
    node = docker_node.node
    original = '{\n  "data-root": "/raid/docker",\n  "debug": false\n}\n'
    node.write(DAEMON_JSON, original)
    current = {**node.profile.baseline(node.version), DAEMON_JSON: original}
    plan = _plan(node, current=current, default=True)
    rc, err = docker_node.run("apply", plan)
    assert rc == 0, err
    data = json.loads(docker_node.file.read_text())
    assert data["data-root"] == "/raid/docker" and data["default-runtime"] == "nvidia"
    rc, err = docker_node.run("restore")
    assert rc == 0, err
    assert docker_node.file.read_text() == original


def test_a_node_whose_daemon_json_is_not_the_planned_one_is_refused(
        docker_node: DockerStandIn) -> None:
    node = docker_node.node
    node.write(DAEMON_JSON, '{"debug": true}\n')        # the plan assumed none
    rc, err = docker_node.run("apply", _plan(node))
    assert rc == 2, err
    assert f"different {DAEMON_JSON}" in err
    assert docker_node.file.read_text() == '{"debug": true}\n'
    assert docker_node.restarts == 0


def test_a_daemon_json_docker_would_refuse_stops_the_run_before_any_restart(
        docker_node: DockerStandIn) -> None:
    node = docker_node.node
    plan = _plan(node)
    broken = dict(plan.files)
    broken[DAEMON_JSON] = '{"runtimes": {},\n'
    rc, err = docker_node.run("apply", dataclasses.replace(plan, files=broken))
    assert rc == 1, err
    assert "Docker would refuse" in err and "not a JSON object" in err
    assert node.restarts == 0 and docker_node.restarts == 0
    assert not docker_node.file.exists()


def test_a_run_killed_while_docker_restarts_is_undone_by_the_next(
        docker_node: DockerStandIn) -> None:
    node = docker_node.node
    before = node.snapshot()
    env = {**os.environ, "GPUPLANE_AGENT_FAILPOINT": "apply:docker-restart"}
    proc = subprocess.run(node.command("apply", *docker_node.args()),
                          input=apply_stdin(_plan(node)),
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == -9 or proc.returncode == 137, proc.stderr
    rc, err = docker_node.run("restore")
    assert rc == 0, err
    node.assert_undone(before)
    assert "restarting Docker again" in err
