"""Held against the real dockerd (29.8.0, built from moby/moby/v2@v2.0.0-beta.24 by
scripts/build-oracles.sh, tests/builds/dockerd-29.8.0): every daemon.json the planner
writes passes `dockerd --validate --config-file`, a broken one is refused by both, and
the node agent's Docker target against a real dockerd on a sandbox node: the runtime
appears in Docker's own `/info`, and restore takes it away again.

dockerd's validation wants `docker-proxy` on PATH (the userland proxy is on by default);
the sandbox gives it a stand-in, as a real node has the real one beside dockerd.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import oracle
from support.agent_node import SandboxNode
from support.layouts import host_path

from gpuplane.distros.docker_daemon import (
    DAEMON_JSON,
    DaemonJsonError,
    DockerSettings,
    plan_daemon_json,
)
from gpuplane.distros.profiles import profile
from gpuplane.plan.node import ToolkitMode

pytestmark = pytest.mark.real
VERSION = "29.8.0"
SEED = '{\n  "data-root": "/raid/docker",\n  "log-opts": {"max-size": "10m"}\n}\n'


def dockerd() -> Path:
    binary = oracle.cache_dir() / "builds" / f"dockerd-{VERSION}" / "bin" / "dockerd"
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        oracle.unavailable(f"dockerd {VERSION} is not built ({binary})",
                           f"run `sh scripts/build-oracles.sh dockerd-{VERSION}`")
    return binary


@pytest.fixture
def proxy_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has a `docker-proxy` stand-in."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "docker-proxy").write_text("#!/bin/sh\nexit 0\n")
    (bindir / "docker-proxy").chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}


def validate(text: str, tmp: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    path = tmp / "daemon.json"
    path.write_text(text)
    return subprocess.run([str(dockerd()), "--validate", "--config-file", str(path)],
                          capture_output=True, text=True, env=env, timeout=60, check=False)


@pytest.mark.parametrize("current", [None, "", SEED, '{"runtimes": {"crun": {"path": "crun"}}}'])
@pytest.mark.parametrize("default", [False, True])
def test_every_planned_daemon_json_validates(current: str | None, default: bool,
                                             tmp_path: Path, proxy_path: dict[str, str]) -> None:
    text = plan_daemon_json(current, DockerSettings(set_as_default=default))
    result = validate(text, tmp_path, proxy_path)
    assert result.returncode == 0, result.stderr
    assert "configuration OK" in result.stderr + result.stdout


@pytest.mark.parametrize("broken", ['{\n  "debug": true,\n}\n', '["nvidia"]\n',
                                    '{"runtimes": ["nvidia"]}\n'])
def test_a_broken_daemon_json_is_refused_by_planner_and_dockerd(
        broken: str, tmp_path: Path, proxy_path: dict[str, str]) -> None:
    with pytest.raises(DaemonJsonError):
        plan_daemon_json(broken, DockerSettings())
    result = validate(broken, tmp_path, proxy_path)
    assert result.returncode != 0
    assert "unable to configure the Docker daemon" in result.stderr


# ------------------------------------------------------------------ the agent, real dockerd

_RESTART = """#!/bin/sh
# Stop the sandbox's dockerd (if any) and start a fresh one on the root's daemon.json.
d={dir}
if [ -f $d/dockerd.pid ]; then
    kill "$(cat $d/dockerd.pid)" 2>/dev/null
    i=0
    while [ -e /proc/"$(cat $d/dockerd.pid)" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
fi
rm -f $d/d.sock
echo restart >> $d/docker-restarts.log
PATH={path} nohup {dockerd} --config-file {config} --data-root $d/data --exec-root $d/exec \\
    --pidfile $d/dockerd.pid -H unix://$d/d.sock --iptables=false --ip6tables=false \\
    --bridge=none >>$d/dockerd.log 2>&1 </dev/null &
"""


@pytest.fixture
def real_docker(tmp_short: Path, proxy_path: dict[str, str]) -> Iterator[
        tuple[SandboxNode, Path, dict[str, str]]]:
    binary = dockerd()
    if os.geteuid() != 0:
        oracle.unavailable("a real dockerd needs root")
    if shutil.which("curl") is None:
        oracle.unavailable("curl is missing (the readiness check asks dockerd's /info)")
    node = SandboxNode(tmp_short, "1.7", profile("kubeadm"))
    node.boot()
    ddir = tmp_short / "dk"
    ddir.mkdir()
    config = host_path(node.root, DAEMON_JSON)
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("{}\n")       # dockerd needs the file it is pointed at
    (ddir / "restart.sh").write_text(_RESTART.format(
        dir=ddir, path=proxy_path["PATH"], dockerd=binary, config=config))
    try:
        yield node, ddir, proxy_path
    finally:
        pid = ddir / "dockerd.pid"
        if pid.exists():
            subprocess.run(["kill", pid.read_text().strip()], check=False)
        node.close()


def _info(ddir: Path) -> dict[str, object]:
    out = subprocess.run(["curl", "-s", "--unix-socket", str(ddir / "d.sock"), "http://d/info"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    return json.loads(out)


def test_agent_gives_a_real_dockerd_the_nvidia_runtime_and_restore_takes_it_away(
        real_docker: tuple[SandboxNode, Path, dict[str, str]]) -> None:
    node, ddir, env = real_docker
    start = ["--docker-restart-cmd", f"sh {ddir / 'restart.sh'}", "--docker-ready-cmd",
             f"curl -sf --unix-socket {ddir / 'd.sock'} http://d/info",
             "--dockerd", str(dockerd())]
    # Docker as found: running on the node's (empty) daemon.json.
    subprocess.run(["sh", str(ddir / "restart.sh")], check=True, timeout=30)
    original = host_path(node.root, DAEMON_JSON).read_text()
    current = {**node.profile.baseline(node.version), DAEMON_JSON: original}
    plan = node.plan(ToolkitMode.HOST, current=current, docker=DockerSettings())
    result = node.run("apply", plan, *start, env=env)
    assert result.rc == 0, result.err
    assert f"dockerd --validate ({dockerd()})" in result.err
    info = _info(ddir)
    assert "nvidia" in info["Runtimes"]  # type: ignore[operator]
    assert info["ServerVersion"] == VERSION
    restarts = (ddir / "docker-restarts.log").read_text().splitlines()
    assert len(restarts) == 2                       # as found + exactly one for the change
    result = node.run("restore", None, *start, env=env)
    assert result.rc == 0, result.err
    assert host_path(node.root, DAEMON_JSON).read_text() == original
    assert "nvidia" not in _info(ddir)["Runtimes"]  # type: ignore[operator]
