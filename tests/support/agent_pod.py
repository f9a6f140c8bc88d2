"""The node agent's pod (`cluster.nodeAccess: pod`) on a real kubelet node, for the tests
and benchmarks/node_pod.py.

`PodNode` is the kubelet sandbox (tests/kubelet_node.KubeletSandbox: a root holding the
node's files, real containerd restarted by the agent's restart command, a real kubelet
registered with the test control plane) plus what the agent's pod needs there:

- its image, `docker.io/library/busybox:1.36` (gpuplane's default `nodePod.image`) built
  here from Debian's busybox-static (`sh`, `nsenter`), since no registry is reachable;
  the sandbox's restart starts containerd on a fresh image store, so the image (and the
  pause image) is imported again after every start, before the restart is reported done;
- a namespace for the pods (Pod Security labels as the test says);
- the sandbox as the pods see it (gpuplane.stack.node_pod.SANDBOX_ENV): the agent's
  options for this sandbox (`--root`, `--restart-cmd`, ...) and, as "the host", this test
  process's namespaces (`nsenter -t <pid>`; PID 1's cannot be entered on this machine).

What differs from a real node: the sandbox's restart stops containerd with its shims
(oracle.Daemon.stop), so the pod running the agent dies with the restart, where a real
node's `containerd.service` (KillMode=process) keeps it running; the provider then runs
the pod again and the agent's journal converges. Both paths end the same on the node.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

from gpuplane.agent.pod import DEFAULT_IMAGE, plan_configmap, plan_configmap_name
from gpuplane.agent.script import AgentPlan, plan_stdin
from gpuplane.distros.profiles import DistroProfile
from gpuplane.kube.client import ApiError, KubeClient
from gpuplane.stack.node_pod import SANDBOX_ENV
from support import control_plane, kubelet_node, oracle

IMAGE = f"docker.io/library/{DEFAULT_IMAGE}"


def build_agent_image(dest: Path, name: str = IMAGE) -> Path:
    """An OCI image tar `name`: busybox-static with `sh` and `nsenter` links."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("bin", "dev", "etc", "proc", "sys", "tmp"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        data = oracle.BUSYBOX.read_bytes()
        info = tarfile.TarInfo("bin/busybox")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
        for applet in ("sh", "nsenter", "cat"):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
    return oracle.oci_image_tar(dest, name, layer.getvalue(), {
        "Env": ["PATH=/bin"], "WorkingDir": "/"})


class PodNode(kubelet_node.KubeletSandbox):
    """A kubelet sandbox whose containerd restarts as a real node's does: the shims, and
    the pods they run, keep running (`containerd.service` KillMode=process); containerd
    comes back on the same state and finds them. `kill_shims_next` makes the next restart
    take the shims down too (the pod running the agent dies with it), as a unit file
    with KillMode=control-group would."""

    def __init__(self, tmp: Path, line: str, prof: DistroProfile) -> None:
        self.image_tar = build_agent_image(tmp / "agent-image.tar")
        self.kill_shims_next = False
        super().__init__(tmp, line, prof)

    def _start(self) -> str:
        old = self.daemon
        if old is not None and not self.kill_shims_next:
            old.stop = lambda: _stop_keeping_shims(old)  # type: ignore[method-assign]
        self.kill_shims_next = False
        result = super()._start()
        if result == "ok" and self.daemon is not None:
            self.daemon.ensure_pause_image()
            self.daemon.ctr("images", "import", str(self.image_tar))
        return result

    def sandbox(self) -> dict[str, Any]:
        """SANDBOX_ENV's value for this node."""
        return {"agentArgs": self.args(), "root": str(self.root), "hostPid": os.getpid()}

    def sandbox_env(self) -> dict[str, str]:
        return {SANDBOX_ENV: json.dumps(self.sandbox())}


def _stop_keeping_shims(daemon: oracle.Daemon) -> None:
    """containerd alone, by its PID (SIGTERM), its state and shims left for the next
    daemon on the same work dir; the last daemon's full stop (oracle.Daemon.stop) then
    takes every shim of the socket down."""
    if daemon.proc is not None and daemon.proc.poll() is None:
        daemon.proc.terminate()
        daemon.proc.wait(timeout=10)
    daemon._stopped = True
    oracle._LIVE.discard(daemon)


def client(cp: control_plane.ControlPlane) -> KubeClient:
    return KubeClient(str(cp.kubeconfig))


def plan_program(cp: control_plane.ControlPlane, namespace: str, plan: AgentPlan) -> str:
    """The plan's ConfigMap in `namespace`, as the stack makes it (ContainerdPodRollout):
    its name, for a NodeAgentPod's `program`. Made once (a second call finds it)."""
    program = plan_stdin(plan)
    name = plan_configmap_name(plan.plan_id, program)
    try:
        client(cp).post(f"/api/v1/namespaces/{namespace}/configmaps",
                        plan_configmap(name, namespace, program))
    except ApiError as exc:
        if exc.status != 409:   # 409: made already
            raise
    return name


def namespace(cp: control_plane.ControlPlane, name: str, enforce: str | None) -> None:
    """Create namespace `name`, with Pod Security `enforce` when given."""
    labels = {"pod-security.kubernetes.io/enforce": enforce} if enforce else {}
    client(cp).post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": name, "labels": labels}})
