"""A test node in mount and network namespaces of its own (issue #28), where gpuplane's
plans run as they are: the node's containerd reads `/etc/containerd/config.toml`, keeps
its state in `/var/lib/containerd` and `/run/containerd`, finds the NVIDIA runtime at
`/usr/bin/nvidia-container-runtime`, and is restarted by `systemctl restart containerd`,
the kubeadm profile's restart command, from inside the node.

How (root, no systemd as PID 1, cgroup v1, as tests/support/kubelet_node.py):
- a holder process (`unshare --mount --net`, private propagation) keeps the namespaces;
  in them, overlays on `/etc`, `/var`, `/run`, `/opt` and `/usr/bin` (upper dirs under
  the node's temp dir, so nothing of the host changes) and bind mounts give the node:
  `/etc/containerd` (the node's files, `self.files`), `/var/lib/containerd` and
  `/run/containerd` (containerd's state), `/opt/cni/bin` (Debian's CNI plugins),
  `/etc/cni/net.d` (a bridge network of the node's own);
- `/usr/bin` of the node holds containerd and ctr of the line under test, the stand-in
  `nvidia-container-runtime` (oracle.nvidia_wrapper: it logs each call and execs runc)
  and a `systemctl` that knows the unit `containerd` only: `is-active` answers for it,
  `restart` asks the test (over a unix socket) to restart containerd as
  `containerd.service` does (KillMode=process: containerd stops, its shims and the pods
  keep running; containerd comes back on the same state);
- containerd runs in both namespaces: its CNI bridge and its CRI stream port are the
  node's own. The kubelet and the node's sshd run in the node's mount namespace but the
  host's network (they reach and are reached on 127.0.0.1, as the test control plane
  listens there);
- node-level programs reach the node as a privileged hostPID pod does: `nsenter -t
  <holder's PID> -m -n` (gpuplane.stack.node_pod.SANDBOX_ENV's `hostPid`).

The test reads and edits the node's files from outside through `/proc/<holder>/root`.
Stopping is by PID: the kubelet, every process in the node's mount namespace with its
children (containerd, the shims, the pods' processes), then the holder; the mounts go
with the namespace.

What it cannot do: run a GPU (the NVIDIA runtime is the stand-in unless a device is
lent), or reach a registry (the pause and agent images are built here and imported).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import tomlkit

from gpuplane.containerd import ContainerdVersion
from gpuplane.distros.profiles import DistroProfile
from gpuplane.stack.node_pod import SANDBOX_ENV
from support import agent_pod, control_plane, kubelet_node, oracle
from support.agent_node import RESTART_CLIENT, restart_server

OVERLAID = ("/etc", "/var", "/run", "/opt", "/usr/bin")
NODE_FILES = ("etc/containerd", "var/lib/gpuplane")
"""The node paths whose files `snapshot` compares (gpuplane's own state excluded there)."""



def runnable(text: str) -> str:
    """A node file as this machine runs it, the two edits a kind node makes too: the runc
    cgroup driver is cgroupfs (no systemd here), and the CRI plugin keeps the pause
    container's oom_score_adj (`restrict_oom_score_adj`: no CAP_SYS_RESOURCE here;
    without it runc fails "can't get final child's PID from pipe")."""
    text = text.replace("SystemdCgroup = true", "SystemdCgroup = false")
    doc = tomlkit.parse(text)
    if "version" not in doc:        # a drop-in without a CRI table
        return text
    keys = oracle._CRI_RUNTIME_KEYS_V3 if int(doc["version"]) >= 3 \
        else oracle._CRI_RUNTIME_KEYS_V12
    plugins = doc.setdefault("plugins", tomlkit.table())
    key = next((k for k in keys if k in plugins), keys[-1])
    plugins.setdefault(key, tomlkit.table())["restrict_oom_score_adj"] = True
    return tomlkit.dumps(doc)


class NsDaemon(oracle.Daemon):
    """The node's containerd: `/usr/bin/containerd` with no options, inside the node's
    namespaces. `stop` stops containerd alone (its shims keep running)."""

    def __init__(self, node: NsNode) -> None:
        super().__init__(node.line, node.host("/etc/containerd/config.toml"),
                         node.tmp / "d")
        self.node = node
        self.socket = node.state / "run" / "containerd.sock"

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("PATH", "NOTIFY_SOCKET")}
        env["PATH"] = f"{oracle.binary(self.line, oracle.SHIM).parent}:/usr/sbin:/usr/bin:/bin"
        t0 = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.node.enter("/usr/bin/containerd"),
                                         stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        while time.monotonic() < t0 + self.START_TIMEOUT:
            if self.proc.poll() is not None:
                self.start_error = f"containerd exited {self.proc.returncode}:\n{self.log_tail()}"
                return
            if self._socket_connects():
                self.start_ok = True
                self.start_seconds = time.monotonic() - t0
                return
            time.sleep(0.02)
        self.start_error = f"containerd did not serve in {self.START_TIMEOUT:.0f} s:\n" \
                           f"{self.log_tail()}"

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def ensure_pause_image(self) -> str:
        """The pause image under the name the node's effective config uses."""
        dumped = subprocess.run(self.node.enter("/usr/bin/containerd", "config", "dump"),
                                capture_output=True, text=True, timeout=60, check=False)
        if dumped.returncode != 0:
            self.fail(f"config dump in the node failed: {dumped.stderr[-2000:]}")
        config = tomllib.loads(dumped.stdout)
        name = oracle._normalise_image_name(oracle.sandbox_image_from_dump(self.line, config))
        tar = oracle.build_pause_image(self.node.tmp / "pause.tar", name)
        self.ctr("images", "import", "--snapshotter",
                 oracle.snapshotter_from_dump(self.line, config), str(tar))
        self._pause_image = name
        return name


class NsNode:
    """A node in its own namespaces, its files the distro profile's baseline as this
    machine runs them (`runnable`)."""

    def __init__(self, tmp: Path, line: str, prof: DistroProfile) -> None:
        oracle.require_daemon_support(line)
        self.tmp, self.line, self.profile = tmp, line, prof
        self.version = ContainerdVersion.parse(line)
        self.files = tmp / "node"          # the node's /etc/containerd, bind-mounted
        self.state = tmp / "state"
        self.restart_log = tmp / "restarts.log"
        self.cni_conf = kubelet_node.write_cni(tmp / "cni")
        self.image_tar = agent_pod.build_agent_image(tmp / "agent-image.tar")
        self.daemon: NsDaemon | None = None
        self.cgroup_root = ""       # the kubelet's (attach)
        self.kubelet: subprocess.Popen[bytes] | None = None     # `running`
        self._lock = threading.Lock()
        for sub in ("lib", "run"):
            (self.state / sub).mkdir(parents=True, exist_ok=True)
        (self.files / "etc/containerd").mkdir(parents=True, exist_ok=True)
        for path, text in prof.baseline(self.version).items():
            if not path.startswith("/etc/containerd/"):
                raise ValueError(f"{prof.distro}: {path} is outside the node's /etc/containerd")
            target = self.files / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(runnable(text))
        self._usr_bin()
        self._server = restart_server(tmp / "ctl.sock", self._restart)
        self.holder = self._hold()

    # -- the namespaces --------------------------------------------------------------

    def _usr_bin(self) -> None:
        """The node's own programs, in the upper dir of its /usr/bin overlay."""
        upper = self.tmp / "ovl/usr/bin/up"
        upper.mkdir(parents=True, exist_ok=True)
        for name in ("containerd", "ctr"):
            built = oracle.binary(self.line, name).resolve()
            if built != Path("/usr/bin") / name:   # Debian's own line is there already
                (upper / name).symlink_to(built)
        wrapper = oracle.nvidia_wrapper(self.tmp / "nvidia")
        (upper / "nvidia-container-runtime").symlink_to(wrapper)
        self.wrapper_log = oracle.wrapper_log(wrapper)
        systemctl = upper / "systemctl"
        systemctl.write_text(
            "#!/bin/sh\n"
            "# gpuplane's test node: systemd's containerd.service, nothing else.\n"
            f"printf '%s\\n' \"$*\" >> {shlex.quote(str(self.tmp / 'systemctl.log'))}\n"
            'verb=$1; shift\n'
            'for arg; do case $arg in -*) ;; containerd|containerd.service) unit=1 ;; '
            '*) other=1 ;; esac; done\n'
            'if [ -n "$unit" ] && [ -z "$other" ]; then\n'
            '  case $verb in\n'
            "    is-active) exit 0 ;;\n"
            f"    restart) exec {shlex.quote(sys.executable)} -c {shlex.quote(RESTART_CLIENT)} "
            f"{shlex.quote(str(self.tmp / 'ctl.sock'))} ;;\n"
            "  esac\n"
            "fi\n"
            'echo "systemctl on the test node: $verb $* is not supported" >&2\n'
            "exit 1\n")
        systemctl.chmod(0o755)

    def _hold(self) -> subprocess.Popen[bytes]:
        steps = ["set -e"]
        for target in OVERLAID:
            base = self.tmp / "ovl" / target.lstrip("/")
            (base / "up").mkdir(parents=True, exist_ok=True)
            (base / "work").mkdir(parents=True, exist_ok=True)
            steps.append(f"mount -t overlay overlay -o lowerdir={target},"
                         f"upperdir={base / 'up'},workdir={base / 'work'} {target}")
        binds = {"/etc/containerd": self.files / "etc/containerd",
                 "/var/lib/containerd": self.state / "lib",
                 "/run/containerd": self.state / "run",
                 "/opt/cni/bin": kubelet_node.CNI_BIN,
                 "/etc/cni/net.d": self.cni_conf}
        for target, source in binds.items():
            steps += [f"mkdir -p {target}", f"mount --bind {source} {target}"]
        # sshd's privilege separation dir, in the node's /run.
        steps += ["mkdir -p /run/sshd", "ip link set lo up", "echo ready",
                  "exec sleep 2147483647"]
        holder = subprocess.Popen(
            ["unshare", "--mount", "--net", "--propagation", "private", "sh", "-c",
             "\n".join(steps)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=control_plane.die_with_parent)
        assert holder.stdout is not None
        line = holder.stdout.readline().decode().strip()
        if line != "ready":
            holder.kill()
            raise RuntimeError(f"the node's namespaces could not be set up: "
                               f"{holder.stderr.read().decode() if holder.stderr else ''}")
        return holder

    @property
    def pid(self) -> int:
        return self.holder.pid

    def enter(self, *command: str, net: bool = True) -> list[str]:
        """`command` run in the node's mount namespace (and its network with `net`)."""
        return ["nsenter", "-t", str(self.pid), "-m", *(["-n"] if net else []), "--", *command]

    def host(self, node_path: str) -> Path:
        """Where the test reads and writes `node_path` of the node."""
        return Path(f"/proc/{self.pid}/root") / node_path.lstrip("/")

    # -- containerd ------------------------------------------------------------------

    def boot(self) -> NsDaemon:
        started = self._start()
        assert started == "ok", f"{started}\n{(self.tmp / 'd' / 'containerd.log').read_text()}"
        assert self.daemon is not None
        return self.daemon

    def _start(self) -> str:
        with self._lock:
            if self.daemon is not None:
                self.daemon.stop()
                self.daemon = None
            daemon = NsDaemon(self)
            daemon.start()
            if not daemon.start_ok:
                daemon.stop()
                return f"fail {daemon.start_error.splitlines()[0]}"
            self.daemon = daemon
            daemon.ensure_pause_image()
            daemon.ctr("images", "import", str(self.image_tar))
            return "ok"

    def _restart(self) -> str:
        """What the node's `systemctl restart containerd` asks for (agent_node's
        restart server), logged with its time."""
        with open(self.restart_log, "a") as log:
            log.write(f"{time.time():.3f}\n")
        return self._start()

    def import_image(self, tar: Path) -> None:
        """An OCI image tar into the node's image store (it stays across restarts)."""
        assert self.daemon is not None
        self.daemon.ctr("images", "import", str(tar))

    @property
    def restarts(self) -> int:
        return len(self.restart_log.read_text().splitlines()) if self.restart_log.exists() else 0

    def restart_times(self) -> list[float]:
        """When each restart was asked for (time.time())."""
        if not self.restart_log.exists():
            return []
        return [float(t) for t in self.restart_log.read_text().split()]

    def effective(self) -> dict[str, Any]:
        assert self.daemon is not None
        return oracle.effective_from_status(oracle.cri_status(self.daemon))

    # -- the node's files ------------------------------------------------------------

    def snapshot(self) -> dict[str, str]:
        """sha256 of every file of the node under NODE_FILES (gpuplane's state excluded)."""
        import hashlib

        out: dict[str, str] = {}
        for top in NODE_FILES:
            base = self.host(top)
            if not base.exists():
                continue
            for path in sorted(base.rglob("*")):
                rel = f"{top}/{path.relative_to(base).as_posix()}"
                if path.is_file() and not rel.startswith("var/lib/gpuplane"):
                    out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        return out

    def sandbox(self) -> dict[str, Any]:
        """SANDBOX_ENV for this node: no agent option, the node's real paths; "the host"
        is the holder's namespaces."""
        return {"agentArgs": [], "root": "", "hostPid": self.pid}

    def sandbox_env(self) -> dict[str, str]:
        return {SANDBOX_ENV: json.dumps(self.sandbox())}

    # -- stop ------------------------------------------------------------------------

    def close(self) -> None:
        """Every process in the node's mount namespace and below it, then the holder."""
        self._server.shutdown()
        self._server.server_close()
        if self.daemon is not None:
            self.daemon.stop()
        try:
            ns = os.readlink(f"/proc/{self.pid}/ns/mnt")
        except OSError:
            ns = ""
        table = oracle._proc_table()
        inside = set()
        for pid in table:
            if pid == self.pid:
                continue
            try:
                if ns and os.readlink(f"/proc/{pid}/ns/mnt") == ns:
                    inside.add(pid)
            except OSError:
                continue
        found, changed = set(inside), True
        while changed:
            changed = False
            for pid, (ppid, _) in table.items():
                if ppid in found and pid not in found and pid != self.pid:
                    found.add(pid)
                    changed = True
        oracle._kill_all(sorted(found))
        if self.holder.poll() is None:
            os.killpg(self.holder.pid, signal.SIGKILL)
            self.holder.wait(timeout=10)
        if self.cgroup_root:
            _remove_tree(self.cgroup_root)


def _remove_tree(relative: str) -> None:
    """The cgroup `relative` and every cgroup below it, in every hierarchy (deepest
    first; a cgroup with processes left stays)."""
    for hierarchy in oracle._cgroup_roots():
        top = hierarchy / relative.lstrip("/")
        if not top.is_dir():
            continue
        dirs = sorted((p for p in top.rglob("*") if p.is_dir()),
                      key=lambda p: len(p.parts), reverse=True)
        for path in [*dirs, top]:
            with contextlib.suppress(OSError):
                path.rmdir()


def attach(cp: control_plane.ControlPlane, node: NsNode, name: str) -> subprocess.Popen[bytes]:
    """A kubelet for `node` in its mount namespace (the host's network), its pods' cgroups
    under a root of the node's own, Ready when this returns."""
    assert node.daemon is not None
    root = node.tmp / "k"
    root.mkdir(parents=True, exist_ok=True)
    node.cgroup_root = f"/gpuplane-node-{name}"
    for hierarchy in oracle._cgroup_roots():
        (hierarchy / node.cgroup_root.lstrip("/")).mkdir(exist_ok=True)
    kubelet = kubelet_node._kubelet(cp, root, name, node.daemon,
                                    prefix=node.enter(net=False),
                                    endpoint="unix:///run/containerd/containerd.sock",
                                    cgroup_root=node.cgroup_root)
    try:
        kubelet_node.wait_ready(cp, name, kubelet, root / "kubelet.log")
    except BaseException:
        kubelet_node.stop_kubelet(kubelet, root)
        raise
    return kubelet


@contextlib.contextmanager
def running(cp: control_plane.ControlPlane, names: Sequence[str], line: str = "1.7",
            prof: DistroProfile | None = None) -> Iterator[dict[str, NsNode]]:
    """Nodes `names` (kubeadm unless `prof`), each with its kubelet Ready (`node.kubelet`);
    every one stopped by PID afterwards, and gone from the cluster."""
    from gpuplane.distros.profiles import Distro, profile

    made: list[tuple[NsNode, str]] = []
    try:
        for name in names:
            node = NsNode(Path(tempfile.mkdtemp(prefix="gp-ns-", dir="/tmp")), line,
                          prof or profile(Distro.KUBEADM))
            made.append((node, name))
            node.boot()
            node.kubelet = attach(cp, node, name)
        yield {name: node for node, name in made}
    finally:
        for node, name in made:
            try:
                if node.kubelet is not None:
                    kubelet_node.stop_kubelet(node.kubelet, node.tmp / "k", cp, name)
            finally:
                node.close()


__all__ = ["NODE_FILES", "NsDaemon", "NsNode", "attach", "running"]
