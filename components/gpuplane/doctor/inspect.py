"""Node inspection: run the packaged inspection program on a GPU node and read its JSON.

The program (components/gpuplane/data/doctor/inspect_node.py, stdlib only) runs in a short-lived
pod pinned to the node: privileged, hostPID, the host's / mounted read-only at /host, so
it can read /proc, the containerd configs the daemons really use, and run `containerd
config dump` and `crictl` in the host's mount namespace through nsenter. It is passed
inline (`python3 -c`), so no ConfigMap is needed and nothing is left behind: the pod is
deleted whatever happens.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from gpuplane.kube.client import ApiError, ClusterClient

PROGRAM_PATH = Path(__file__).resolve().parent.parent / "data" / "doctor" / "inspect_node.py"
DEFAULT_IMAGE = "python:3.12-slim"
DEFAULT_NAMESPACE = "kube-system"
LABELS = {"app.kubernetes.io/name": "gpuplane-doctor",
          "app.kubernetes.io/component": "node-inspection"}


def program_source() -> str:
    return PROGRAM_PATH.read_text(encoding="utf-8")


def pod_name(node: str) -> str:
    """A DNS-1123 name per node, stable so a leftover pod is found and replaced."""
    digest = hashlib.sha256(node.encode()).hexdigest()[:10]
    return f"gpuplane-inspect-{digest}"


def node_pod(node: str, name: str, labels: dict[str, str], container: dict[str, Any], *,
             namespace: str, timeout_s: int, host_pid: bool = False) -> dict[str, Any]:
    """A short-lived privileged pod pinned to `node` with the host's / mounted read-only at
    /host: the shape the doctor's inspection and node capture share. `container` gives
    name, image, command and resources; the pod adds the privilege and the mount."""
    spec: dict[str, Any] = {
        "nodeName": node,
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "activeDeadlineSeconds": timeout_s,
        "terminationGracePeriodSeconds": 0,
        "tolerations": [{"operator": "Exists"}],
        "containers": [{
            **container,
            "imagePullPolicy": "IfNotPresent",
            "securityContext": {"privileged": True},
            "volumeMounts": [{"name": "host", "mountPath": "/host", "readOnly": True}],
        }],
        "volumes": [{"name": "host", "hostPath": {"path": "/", "type": "Directory"}}],
    }
    if host_pid:
        spec = {"nodeName": node, "hostPID": True, **spec}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels),
                     "annotations": {"gpuplane.dev/node": node}},
        "spec": spec,
    }


def pod_manifest(node: str, *, namespace: str = DEFAULT_NAMESPACE, image: str = DEFAULT_IMAGE,
                 cri_probe: bool = True, timeout_s: int = 240) -> dict[str, Any]:
    """The inspection pod for `node` (validated strictly against the Pod schema in tests)."""
    args = ["--root", "/host", "--exec", "nsenter", "--timeout", "60"]
    if not cri_probe:
        args.append("--no-cri-probe")
    return node_pod(node, pod_name(node), LABELS, {
        "name": "inspect",
        "image": image,
        "command": ["python3", "-c", program_source(), *args],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                      "limits": {"memory": "256Mi"}},
    }, namespace=namespace, timeout_s=timeout_s, host_pid=True)


class InspectionFailed(Exception):
    """The node could not be inspected; the report says so and goes on."""


def inspect_node(client: ClusterClient, node: str, *, namespace: str = DEFAULT_NAMESPACE,
                 image: str = DEFAULT_IMAGE, cri_probe: bool = True, timeout_s: int = 240,
                 poll_s: float = 2.0) -> dict[str, Any]:
    """Run the inspection pod on `node` and return the program's JSON.

    Raises InspectionFailed with the reason (forbidden: which permission; the pod failed
    or timed out: its phase and the log tail)."""
    manifest = pod_manifest(node, namespace=namespace, image=image, cri_probe=cri_probe,
                            timeout_s=timeout_s)
    phase, log = run_pod(client, manifest, timeout_s=timeout_s, poll_s=poll_s)
    return parse_output(log, phase)


def run_pod(client: ClusterClient, manifest: dict[str, Any], *, timeout_s: int = 240,
            poll_s: float = 2.0) -> tuple[str, str]:
    """Run a one-shot pod to its end and return (its phase, its first container's log);
    the pod is deleted whatever happens (shared by the doctor and `nodes capture`).

    Raises InspectionFailed with the reason (forbidden: which permission; it could not
    start or timed out)."""
    name = manifest["metadata"]["name"]
    container = manifest["spec"]["containers"][0]["name"]
    base = f"/api/v1/namespaces/{manifest['metadata']['namespace']}/pods"
    try:
        client.delete(f"{base}/{name}")
        _create(client, base, manifest, timeout_s, poll_s)
    except ApiError as exc:
        raise InspectionFailed(_why(exc)) from None
    try:
        phase = _wait(client, f"{base}/{name}", timeout_s, poll_s)
        log = client.get_text(f"{base}/{name}/log", {"container": container})
    except ApiError as exc:
        raise InspectionFailed(_why(exc)) from None
    finally:
        with contextlib.suppress(ApiError):
            client.delete(f"{base}/{name}")
    return phase, log


def _create(client: ClusterClient, base: str, manifest: dict[str, Any], timeout_s: int,
            poll_s: float) -> None:
    """Create the pod; a leftover of an earlier run may still be terminating (409)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.post(base, manifest)
            return
        except ApiError as exc:
            if exc.status != 409 or time.monotonic() > deadline:
                raise
        time.sleep(poll_s)


def parse_output(log: str, phase: str = "Succeeded") -> dict[str, Any]:
    """The JSON object the program printed (the last line starting with `{`)."""
    for line in reversed(log.splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                break
            if isinstance(data, dict) and "format" in data:
                return data
    tail = "\n".join(log.splitlines()[-10:])
    raise InspectionFailed(f"the inspection pod ended {phase} without a report: "
                           f"{tail or '(no log)'}")


def _wait(client: ClusterClient, path: str, timeout_s: int, poll_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    phase = "Pending"
    while time.monotonic() < deadline:
        pod = client.get(path)
        phase = str((pod.get("status") or {}).get("phase") or "Pending")
        if phase in ("Succeeded", "Failed"):
            return phase
        waiting = _waiting_reason(pod)
        if waiting in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                       "CreateContainerConfigError", "CreateContainerError"):
            raise InspectionFailed(f"the inspection pod cannot start: {waiting}; pass "
                                   "--inspect-image with an image the node can pull (it needs "
                                   "python3)")
        time.sleep(poll_s)
    raise InspectionFailed(f"the inspection pod was still {phase} after {timeout_s}s")


def _waiting_reason(pod: dict[str, Any]) -> str | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting")
        if waiting:
            return waiting.get("reason")
    return None


def _why(exc: ApiError) -> str:
    if exc.status == 403:
        return f"forbidden: needs permission to {exc.permission} ({exc})"
    return str(exc)


__all__ = ["DEFAULT_IMAGE", "DEFAULT_NAMESPACE", "PROGRAM_PATH", "InspectionFailed",
           "inspect_node", "parse_output", "pod_manifest", "program_source", "run_pod"]
