"""A real Kubernetes node for the tests: a kubelet built from `k8s.io/kubernetes`
(tests/builds/kubelet-1.34.3, the control plane's release) on a real containerd, registered
with the test control plane (tests/support/control_plane.py), started by the test and stopped by
PID.

What it is made of:
- containerd of one line (oracle.Daemon: its own root, state and socket, its shims killed
  and its mounts and cgroups removed at stop) running a node layout, e.g. the files a
  gpuplane plan leaves on a node;
- the layout made runnable here the way the sandbox tests do (`runnable`): the NVIDIA
  runtime's binary is a stand-in that logs each call and execs runc (oracle.nvidia_wrapper),
  SystemdCgroup is off (no systemd here), and every CRI table gets Debian's CNI plugins
  (/usr/lib/cni, containernetworking-plugins) and a bridge network of its own;
- the pause image built locally and imported (no registry is reachable);
- a kubelet with the cgroupfs driver (this machine has cgroup v1 and no systemd as PID 1),
  its own root dir and port, authenticated as `system:node:<name>` by a client
  certificate from the control plane's CA.

What it cannot do: run a GPU (no device here unless one is lent), or share the machine
with another real-containerd test at the same time (the CRI stream port is fixed).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
import yaml

from gpuplane.distros import rancher_render
from gpuplane.distros.profiles import DistroProfile
from support import control_plane, oracle
from support.agent_node import SandboxNode
from support.layouts import host_path, write_layout

KUBELET_BUILD = "kubelet-1.34.3"
KUBELET = control_plane.CACHE / "builds" / KUBELET_BUILD / "bin" / "kubelet"
CNI_BIN = Path("/usr/lib/cni")
_CRI_KEYS = ("io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime")
_NVIDIA_BINARIES = ("/usr/bin/nvidia-container-runtime",
                    "/usr/local/nvidia/toolkit/nvidia-container-runtime")


def missing() -> str | None:
    """Why no node can start here, or None."""
    if not KUBELET.exists():
        return f"{KUBELET} is not built: run `make test` (scripts/build-oracles.sh {KUBELET_BUILD})"
    if not (CNI_BIN / "bridge").exists():
        return ("no CNI plugins in /usr/lib/cni: run `make containerd` "
                "(scripts/fetch-containerd.sh installs containernetworking-plugins)")
    return control_plane.missing()


@dataclass
class KubeletNode:
    name: str
    root: Path
    daemon: oracle.Daemon
    kubelet: subprocess.Popen[bytes]
    wrapper: Path
    pause: str      # the local pause image, imported under the name the config uses

    def import_image(self, tar: Path) -> None:
        """An OCI image tar (oracle.oci_image_tar) into the CRI's image store."""
        self.daemon.ctr("images", "import", str(tar))

    def log(self) -> str:
        return (self.root / "kubelet.log").read_text(errors="replace")[-4000:]

    cp: control_plane.ControlPlane | None = None

    def stop(self) -> None:
        """The kubelet by its PID, then containerd with every pod it runs; the Node leaves
        the cluster (`leave`)."""
        if self.kubelet.poll() is None:
            self.kubelet.terminate()
            try:
                self.kubelet.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kubelet.kill()
                self.kubelet.wait()
        self.daemon.stop()
        oracle.unmount_under(self.root)
        if self.cp is not None:
            leave(self.cp, self.name)


def leave(cp: control_plane.ControlPlane, name: str) -> None:
    """Delete the stopped node's Node object, as a drained node leaves a cluster: no pod
    is scheduled to it later (a pod bound to a node without a kubelet never terminates,
    and a namespace holding one is never deleted, which hangs a later `pulumi destroy`),
    and the pods still bound to it are collected."""
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(config_file=str(cp.kubeconfig)))
    try:
        core.delete_node(name)
    except client.exceptions.ApiException as error:
        if error.status != 404:
            raise


def runnable(text: str, wrapper: Path, cni_conf: Path) -> str:
    """A node file as this machine can run it (see the module docstring)."""
    for binary in _NVIDIA_BINARIES:
        text = text.replace(f'"{binary}"', f'"{wrapper}"')
    text = text.replace("SystemdCgroup = true", "SystemdCgroup = false")
    return _with_cni(text, cni_conf)


def start(cp: control_plane.ControlPlane, root: Path, layout: dict[str, str], top: str,
          *, line: str = "1.7", name: str = "gpu-node-1", timeout: float = 90) -> KubeletNode:
    """containerd `line` on `layout` (node paths; `top` is the file containerd reads
    first), then a kubelet that registers `name`; returns once the node is Ready."""
    root.mkdir(parents=True, exist_ok=True)
    wrapper = oracle.nvidia_wrapper(root / "bin")
    cni_conf = write_cni(root / "cni")
    files = {p: runnable(t, wrapper, cni_conf) for p, t in layout.items()}
    write_layout(files, root / "fs")
    daemon = oracle.Daemon(line, host_path(root / "fs", top), root / "d")
    daemon.start()
    daemon.require_started()
    try:
        pause = daemon.ensure_pause_image()
        kubelet = _kubelet(cp, root, name, daemon)
        node = KubeletNode(name, root, daemon, kubelet, wrapper, pause, cp)
        _wait_ready(cp, node, timeout)
    except BaseException:
        daemon.stop()
        raise
    return node


def _kubelet(cp: control_plane.ControlPlane, root: Path, name: str,
             daemon: oracle.Daemon, *, prefix: Sequence[str] = (),
             endpoint: str | None = None, cgroup_root: str | None = None
             ) -> subprocess.Popen[bytes]:
    """The kubelet, run through `prefix` (tests/support/ns_node.py: the node's namespaces),
    talking to containerd at `endpoint` (default: the daemon's socket), its pods' cgroups
    under `cgroup_root` (default: the hierarchies' roots; kubelets side by side need one
    each, or each removes the other's pod cgroups as orphans)."""
    pki = cp.root / "pki"
    user = f"node-{name}"
    control_plane.cert(pki, user, f"/O=system:nodes/CN=system:node:{name}")
    control_plane.kubeconfig(root / "kubelet.kubeconfig", cp.server, pki, user)
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs", "failSwapOn": False,
        "containerRuntimeEndpoint": endpoint or f"unix://{daemon.socket}",
        # The apiserver reaches the kubelet at the node's InternalIP for `kubectl logs`
        # (a pod's log is how the probe reports): listening there, open to it without a
        # client certificate (the test control plane gives the apiserver none).
        "address": "0.0.0.0", "port": control_plane.free_port(), "readOnlyPort": 0,
        "healthzPort": 0,
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "resolvConf": "", "enforceNodeAllocatable": [],
        "localStorageCapacityIsolation": False,
        # The test machine's disk is whatever it is: no evictions, no image GC.
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
    }
    if cgroup_root:
        config["cgroupRoot"] = cgroup_root
    # YAML, as kubeadm writes /var/lib/kubelet/config.yaml (the doctor's inspection reads it).
    (root / "kubelet.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    log = open(root / "kubelet.log", "wb")  # noqa: SIM115 - owned by the process
    return subprocess.Popen(
        [*prefix, str(KUBELET), "--kubeconfig", str(root / "kubelet.kubeconfig"),
         "--config", str(root / "kubelet.yaml"), "--hostname-override", name,
         "--root-dir", str(root / "kubelet")],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, preexec_fn=control_plane.die_with_parent,
        env={**os.environ, "PATH": f"{oracle.binary(daemon.line).parent}:{os.environ['PATH']}"})


def _wait_ready(cp: control_plane.ControlPlane, node: KubeletNode, timeout: float) -> None:
    wait_ready(cp, node.name, node.kubelet, node.root / "kubelet.log", timeout)


def ready(cp: control_plane.ControlPlane, name: str) -> tuple[bool, str]:
    """Whether node `name` is Ready, and its Ready condition as text."""
    try:
        status = cp.get(f"/api/v1/nodes/{name}")["status"]  # type: ignore[index]
    except Exception as exc:  # not registered yet
        return False, str(exc)
    condition = {c["type"]: c for c in status.get("conditions", [])}.get("Ready", {})
    return (condition.get("status") == "True",
            f"Ready={condition.get('status')}: {condition.get('message')}")


def wait_ready(cp: control_plane.ControlPlane, name: str, kubelet: subprocess.Popen[bytes],
               log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    last = "not registered"
    while time.monotonic() < deadline:
        if kubelet.poll() is not None:
            raise RuntimeError(f"kubelet exited {kubelet.returncode}:\n{_tail(log)}")
        ok, last = ready(cp, name)
        if ok:
            return
        time.sleep(1)
    raise RuntimeError(f"node {name} not Ready in {timeout:.0f} s ({last}):\n{_tail(log)}")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:] if log.exists() else ""


def write_cni(conf_dir: Path) -> Path:
    """A bridge network of the node's own (Debian's plugins)."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "10-gpuplane-test.conflist").write_text(json.dumps({
        "cniVersion": "1.0.0", "name": "gpuplane-test", "plugins": [
            {"type": "bridge", "bridge": "gptest0", "isGateway": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]]}},
            {"type": "loopback"}]}))
    return conf_dir


class KubeletSandbox(SandboxNode):
    """The node agent's sandbox node (agent_node.SandboxNode: a root holding the node's
    files, real containerd restarted by the agent's restart command) with what a kubelet
    needs of its containerd: every CRI table names Debian's CNI plugins and a network of
    the node's own, in the files as found and in every file a plan writes (`runnable`
    applies to both, so the agent's base digests still match). The socket path stays
    the same across restarts, so a kubelet attached with `attach` reconnects."""

    def __init__(self, tmp: Path, line: str, prof: DistroProfile) -> None:
        self.cni_conf = write_cni(tmp / "cni")
        super().__init__(tmp, line, prof)

    def runnable(self, text: str) -> str:
        return _with_cni(super().runnable(text), self.cni_conf)


def attach(cp: control_plane.ControlPlane, node: SandboxNode, root: Path,
           name: str) -> subprocess.Popen[bytes]:
    """A kubelet for the booted sandbox `node`, Ready when this returns."""
    assert node.daemon is not None
    node.daemon.ensure_pause_image()
    root.mkdir(parents=True, exist_ok=True)
    kubelet = _kubelet(cp, root, name, node.daemon)
    try:
        wait_ready(cp, name, kubelet, root / "kubelet.log")
    except BaseException:
        stop_kubelet(kubelet, root)
        raise
    return kubelet


def stop_kubelet(kubelet: subprocess.Popen[bytes], root: Path,
                 cp: control_plane.ControlPlane | None = None, name: str = "") -> None:
    """The kubelet by its PID; with `cp`, node `name` leaves the cluster (`leave`)."""
    if kubelet.poll() is None:
        kubelet.terminate()
        try:
            kubelet.wait(timeout=15)
        except subprocess.TimeoutExpired:
            kubelet.kill()
            kubelet.wait()
    oracle.unmount_under(root)
    if cp is not None:
        leave(cp, name)


def _with_cni(text: str, cni_conf: Path) -> str:
    if rancher_render.extends_base(text):
        return text
    doc = tomlkit.parse(text)
    tables = [t for k, t in doc.get("plugins", {}).items() if k in _CRI_KEYS]
    if not tables and "plugins" not in doc and "version" in doc:
        doc["plugins"] = {_CRI_KEYS[0] if doc["version"] < 3 else _CRI_KEYS[1]: {}}
        tables = list(doc["plugins"].values())
    for table in tables:
        cni = table.setdefault("cni", tomlkit.table())
        cni["bin_dir"] = str(CNI_BIN)
        cni["conf_dir"] = str(cni_conf)
    return tomlkit.dumps(doc)
