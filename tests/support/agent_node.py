"""A sandbox node for driving the node agent against a real containerd (tests and
benchmarks/node_agent.py).

The root directory stands in for `/` and holds a distro's baseline layout; a real
containerd (tests/support/oracle.py's Daemon) runs on whatever the root holds. The agent runs
exactly as Pulumi runs it (the program from `apply_stdin` piped to `sh -s -- apply`) with
three substitutions: `--root` (the sandbox), `--restart-cmd` (asks this process to stop
the daemon and start a fresh one on the files now under the root, logging each restart;
template distros get their config regenerated from the template first, as RKE2 does, and
k0s its files from its drop-ins) and
`--address` (the sandbox daemon's socket, for the readiness check).

Two substitutions keep the layouts runnable here without changing what the merge sees:
nvidia's BinaryName points at a wrapper that logs and execs runc, and SystemdCgroup is off
(no systemd on this machine).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuplane.agent.script import AGENT_PATH, AgentPlan, agent_plan, apply_stdin
from gpuplane.containerd import ContainerdVersion
from gpuplane.distros import k0s_render, rancher_render
from gpuplane.distros.docker_daemon import DockerSettings
from gpuplane.distros.profiles import DistroProfile
from gpuplane.plan.node import PlanOptions, ToolkitMode, native_config, plan_node
from support import oracle
from support.layouts import host_path, rebase_imports

DASH = shutil.which("dash") or "/bin/sh"
BUSYBOX = shutil.which("busybox")
NVIDIA_BINARIES = ("/usr/bin/nvidia-container-runtime",
                   "/usr/local/nvidia/toolkit/nvidia-container-runtime")


@dataclasses.dataclass
class AgentRun:
    rc: int
    out: dict[str, Any]
    err: str


class SandboxNode:
    """A sandbox node: a root holding a distro layout, a real containerd that the
    injected restart command restarts on whatever the root holds, and a restart log."""

    def __init__(self, tmp: Path, line: str, prof: DistroProfile) -> None:
        oracle.require_daemon_support(line)
        self.tmp, self.line, self.profile = tmp, line, prof
        self.version = ContainerdVersion.parse(line)
        self.root = tmp / "root"
        self.workdir = tmp / f"{tmp.name}-d"  # unique: the daemon's cgroup is named after it
        self.wrapper = oracle.nvidia_wrapper(tmp / "bin")
        self.restart_log = tmp / "restarts.log"
        self.daemon: oracle.Daemon | None = None
        self.restart_delay = 0.0
        self.starts = 0
        self._lock = threading.Lock()
        self._server = restart_server(tmp / "ctl.sock", self._start)
        self.restart_script = tmp / "restart.sh"
        self.restart_script.write_text(
            "#!/bin/sh\n"
            f"echo restart >> '{self.restart_log}'\n"
            f"exec '{sys.executable}' -c '{RESTART_CLIENT}' '{tmp / 'ctl.sock'}'\n")
        self.containerd = str(oracle.binary(line))
        for path, text in prof.baseline(self.version).items():
            self.write(path, self.runnable(text))
        # What the distribution's built-in template renders (a test may give another).
        self.builtin_model = prof.baseline(self.version).get(prof.config_path, "")
        self.builtin = self.runnable(self.builtin_model)
        # RKE2/K3s detect the host toolkit's runtime at every start (rancher_render). The
        # sandbox's toolkit is installed after the first boot, as on a node gpuplane
        # comes to: the first boot renders the distro's baseline as it is.
        self.detected = rancher_render.HOST_TOOLKIT_BINARIES

    # -- layout --------------------------------------------------------------------

    def runnable(self, text: str) -> str:
        for binary in NVIDIA_BINARIES:
            text = text.replace(f'"{binary}"', f'"{self.wrapper}"')
        text = text.replace("SystemdCgroup = true", "SystemdCgroup = false")
        return rebase_imports(text, self.root)

    def assert_undone(self, snap: dict[str, str]) -> None:
        """gpuplane's change is gone: every file as in `snap`, except that RKE2/K3s render
        their generated config from their built-in template again, with the runtime they
        detect from the host toolkit that stays installed (rancher_render)."""
        if not self.profile.detects_nvidia_runtime:
            assert self.snapshot() == snap
            return
        generated = self.profile.config_path.lstrip("/")
        assert ({k: v for k, v in self.snapshot().items() if k != generated}
                == {k: v for k, v in snap.items() if k != generated})
        assert host_path(self.root, self.profile.config_path).read_text() == self.runnable(
            rancher_render.detect(self.builtin_model, self.detected))

    def write(self, node_path: str, text: str) -> None:
        target = host_path(self.root, node_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def plan(self, mode: ToolkitMode = ToolkitMode.HOST, current: dict[str, str] | None = None,
             docker: DockerSettings | None = None, **options: Any) -> AgentPlan:
        """The agent plan for this node's distro, made from `current` (default: the distro
        baseline), its files made runnable here and its bases the digests of the files it
        was made from as this sandbox writes them (see :meth:`runnable`). Docker's
        daemon.json (`docker`) travels as planned: no containerd reads it."""
        node_plan = plan_node(self.profile, self.version, PlanOptions(toolkit=mode, **options),
                              current, docker=docker)
        plan = agent_plan(node_plan)
        own = {plan.docker_config} if plan.docker_config else set()
        bases = {p: digest if p in own or digest is None
                 else _sha256(self.runnable(node_plan.baseline[p]))
                 for p, digest in plan.bases.items()}
        return dataclasses.replace(
            plan, files={p: t if p in own else self.runnable(t) for p, t in plan.files.items()},
            bases=bases, base_texts={p: t if p in own else self.runnable(t)
                                     for p, t in plan.base_texts.items()})

    def snapshot(self) -> dict[str, str]:
        """sha256 of every file under the root (gpuplane's own state excluded)."""
        out = {}
        for path in sorted(self.root.rglob("*")):
            rel = path.relative_to(self.root).as_posix()
            if path.is_file() and not rel.startswith(("var/lib/gpuplane", "proc/")):
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        return out

    # -- the daemon ----------------------------------------------------------------

    def boot(self) -> oracle.Daemon:
        assert self._start() == "ok", self.daemon
        assert self.daemon is not None
        return self.daemon

    def _start(self) -> str:
        with self._lock:
            if self.daemon is not None:
                self.daemon.stop()
                self.daemon = None
            time.sleep(self.restart_delay)
            if self.profile.rendered_by_distro:  # RKE2/K3s/MicroK8s regenerate at start
                template = host_path(self.root, self.profile.edit_path(self.version))
                own = template.read_text() if template.is_file() else None
                text = own if own is not None else self.builtin
                if self.profile.detects_nvidia_runtime and (
                        own is None or rancher_render.extends_base(own)):
                    base = self.runnable(rancher_render.detect(
                        self.builtin_model, self.detected if self.starts else ()))
                    text = base if own is None else rancher_render.render(own, base)
                self.write(self.profile.config_path, text)
            if self.profile.generates_from_dropins:  # k0s merges its drop-ins at start
                self._k0s_render()
            config = host_path(self.root, self.profile.config_path)
            if not config.exists():
                # No top-level file: containerd runs on its built-in defaults, which a
                # file of only the line's `version` is (tests/real/test_no_top_level_file_dump.py);
                # the harness needs a file to point the daemon into its run dir.
                config = self.tmp / "defaults.toml"
                config.write_text(native_config(self.version))
            daemon = oracle.Daemon(self.line, config, self.workdir)
            daemon.start()
            if not daemon.start_ok:
                error = daemon.start_error.splitlines()[0]
                daemon.stop()
                return f"fail {error}"
            self.daemon = daemon
            self.starts += 1
            return "ok"

    def _k0s_render(self) -> None:
        """What k0s does before it starts containerd (gpuplane.distros.k0s_render, the model held
        against real containerd in tests/real/test_k0s_layout.py): regenerate the top-level
        file and the CRI file from the drop-ins now under the root."""
        paths = [self.profile.config_path, k0s_render.CRI_FILE]
        dropins = host_path(self.root, k0s_render.DROPIN_DIR)
        if dropins.is_dir():
            paths += [f"{k0s_render.DROPIN_DIR}/{f.name}" for f in sorted(dropins.glob("*.toml"))]
        layout = {p: host_path(self.root, p).read_text() for p in paths
                  if host_path(self.root, p).is_file()}
        rendered = k0s_render.render(layout, self.profile.config_path)
        for path in (self.profile.config_path, k0s_render.CRI_FILE):
            if rendered.get(path) not in (None, layout.get(path)):
                self.write(path, self.runnable(rendered[path]))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self.daemon is not None:
            self.daemon.stop()

    @property
    def restarts(self) -> int:
        return len(self.restart_log.read_text().splitlines()) if self.restart_log.exists() else 0

    def effective(self) -> dict[str, Any]:
        """What the running daemon's CRI plugin reports it uses."""
        assert self.daemon is not None
        return oracle.effective_from_status(oracle.cri_status(self.daemon))

    # -- the agent -----------------------------------------------------------------

    def args(self, *extra: str, containerd: str | None = None,
             restart_cmd: bool = True) -> list[str]:
        """The agent's options for this sandbox. containerd="" leaves --containerd out (the
        agent looks where the plan says); restart_cmd=False leaves --restart-cmd out (the
        agent restarts the plan's unit through whatever `systemctl` is on PATH)."""
        out = ["--root", str(self.root)]
        if containerd != "":
            out += ["--containerd", containerd or self.containerd]
        out += ["--ctr", str(oracle.binary(self.line, "ctr")),
                "--address", str(self.workdir / "c.sock")]
        if restart_cmd:
            out += ["--restart-cmd", f"sh {self.restart_script}"]
        return [*out, "--ready-timeout", "20", "--lock-timeout", "60", *extra]

    def command(self, mode: str, *extra: str, shell: str = DASH, **kw: Any) -> list[str]:
        shells = {"busybox": [BUSYBOX or "busybox", "sh"], "bash": ["bash", "--posix"]}
        sh = shells.get(shell, [shell])
        if mode == "apply":
            return [*sh, "-s", "--", "apply", *self.args(*extra, **kw)]
        return [*sh, str(host_path(self.root, AGENT_PATH)), mode, *self.args(*extra, **kw)]

    def run(self, mode: str, plan: AgentPlan | None = None, *extra: str,
            env: dict[str, str] | None = None, **kw: Any) -> AgentRun:
        proc = subprocess.run(self.command(mode, *extra, **kw),
                              input=apply_stdin(plan) if plan else "", capture_output=True,
                              text=True, timeout=120, env=env, check=False)
        return parse_result(proc.returncode, proc.stdout, proc.stderr)


def restart_server(path: Path, start: Callable[[], str]) -> socketserver.UnixStreamServer:
    """The sandbox's containerd unit: a unix socket at `path` where each line asks for a
    restart, answered with `start()`'s "ok" or "fail ...". The restart command the agent
    runs is a client of it (`RESTART_CLIENT`); the server runs in a thread of the test."""

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.rfile.readline()
            try:
                reply = start()
            except Exception as exc:  # report to the agent, never kill the server
                reply = f"fail {exc!r}"
            self.wfile.write(reply.encode() + b"\n")

    server = socketserver.UnixStreamServer(str(path), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


RESTART_CLIENT = (
    "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
    's.sendall(b"restart\\n"); r = s.makefile().readline().strip(); print(r); '
    'sys.exit(0 if r == "ok" else 1)')


def parse_result(rc: int, stdout: str, stderr: str) -> AgentRun:
    try:
        out = json.loads(stdout) if stdout.strip() else {}
    except json.JSONDecodeError as exc:
        raise AssertionError(f"agent stdout is not one JSON object: {stdout!r}\n{stderr}") from exc
    return AgentRun(rc, out, stderr)
