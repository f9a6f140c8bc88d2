"""Run the capture script on a node without SSH: a short-lived privileged pod pinned to
the node, the host's / mounted read-only at /host, the script run in it with `chroot
/host` (so `containerd --version` runs against the host's own libraries). The doctor's
pod runner (`gpuplane.doctor.inspect.run_pod`) creates it, waits, reads the log and
deletes it whatever happens."""

from __future__ import annotations

import hashlib
from typing import Any

from gpuplane.doctor.inspect import InspectionFailed, node_pod, run_pod
from gpuplane.kube.client import ClusterClient

DEFAULT_IMAGE = "busybox:1.36"   # needs only sh and chroot
DEFAULT_NAMESPACE = "kube-system"
LABELS = {"app.kubernetes.io/name": "gpuplane", "app.kubernetes.io/component": "node-capture"}


def pod_name(node: str) -> str:
    """Stable per node, so a leftover of an interrupted run is found and replaced."""
    return f"gpuplane-capture-{hashlib.sha256(node.encode()).hexdigest()[:10]}"


def capture_pod(node: str, script: str, *, namespace: str = DEFAULT_NAMESPACE,
                image: str = DEFAULT_IMAGE, timeout_s: int = 120) -> dict[str, Any]:
    """The capture pod for `node`: reads only (the host's / is mounted read-only)."""
    return node_pod(node, pod_name(node), LABELS, {
        "name": "capture",
        "image": image,
        "command": ["chroot", "/host", "/bin/sh", "-c", script],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                      "limits": {"memory": "64Mi"}},
    }, namespace=namespace, timeout_s=timeout_s)


def run_in_pod(client: ClusterClient, node: str, script: str, *,
               namespace: str = DEFAULT_NAMESPACE, image: str = DEFAULT_IMAGE,
               timeout_s: int = 120, poll_s: float = 2.0) -> tuple[str | None, str]:
    """(the script's output, "") or (None, why the node could not be read)."""
    manifest = capture_pod(node, script, namespace=namespace, image=image,
                           timeout_s=timeout_s)
    try:
        phase, log = run_pod(client, manifest, timeout_s=timeout_s, poll_s=poll_s)
    except InspectionFailed as exc:
        return None, f"capture pod on {node}: {exc}"
    if phase != "Succeeded":
        tail = " | ".join(log.strip().splitlines()[-3:]) or "(no log)"
        return None, f"capture pod on {node} ended {phase}: {tail}"
    return log, ""


__all__ = ["DEFAULT_IMAGE", "DEFAULT_NAMESPACE", "capture_pod", "run_in_pod"]
