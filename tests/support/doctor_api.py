"""Kubernetes API objects written the way `kubectl get -A -o json` prints them, for
snapshots that the doctor's own code never produced (no `save`, no inspection program):
each file is a `List` whose items carry `apiVersion` and `kind`, with the fields the API
server fills in (uid, creationTimestamp, status)."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

T = "2026-11-21T07:40:00Z"


def _meta(name: str, ns: str | None = None, labels: dict[str, str] | None = None,
          owner: tuple[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"0f3c-{zlib.crc32(f'{ns}/{name}'.encode()):08x}",
                            "resourceVersion": "48213", "creationTimestamp": T}
    if ns is not None:
        meta["namespace"] = ns
    if labels:
        meta["labels"] = labels
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0],
                                    "name": owner[1], "uid": "7a1d-00000001",
                                    "controller": True, "blockOwnerDeletion": True}]
    return meta


def node(name: str, *, kubelet: str, runtime: str, os_image: str = "Ubuntu 22.04.4 LTS",
         labels: dict[str, str] | None = None, gpus: int = 0, allocatable: int | None = None,
         ready: bool = True, message: str = "kubelet is posting ready status") -> dict[str, Any]:
    capacity = {"cpu": "32", "memory": "131900000Ki", "pods": "110"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    alloc = dict(capacity)
    if allocatable is not None:
        alloc["nvidia.com/gpu"] = str(allocatable)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": _meta(name, labels={"kubernetes.io/hostname": name,
                                        "kubernetes.io/os": "linux",
                                        "kubernetes.io/arch": "amd64", **(labels or {})}),
        "spec": {"podCIDR": "10.42.0.0/24"},
        "status": {
            "capacity": capacity, "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                            "reason": "KubeletReady" if ready else "KubeletNotReady",
                            "message": message, "lastHeartbeatTime": T,
                            "lastTransitionTime": T}],
            "nodeInfo": {"kubeletVersion": kubelet, "kubeProxyVersion": kubelet,
                         "containerRuntimeVersion": runtime, "osImage": os_image,
                         "operatingSystem": "linux", "architecture": "amd64",
                         "kernelVersion": "5.15.0-119-generic"},
        },
    }


def container(name: str, image: str, limits: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "image": image, "imagePullPolicy": "IfNotPresent",
            "resources": {"limits": limits} if limits else {},
            "terminationMessagePath": "/dev/termination-log"}


def waiting(name: str, image: str, reason: str, message: str = "",
            restarts: int = 0) -> dict[str, Any]:
    state: dict[str, Any] = {"reason": reason}
    if message:
        state["message"] = message
    return {"name": name, "image": image, "imageID": "", "ready": False,
            "restartCount": restarts, "started": False, "state": {"waiting": state}}


def running(name: str, image: str) -> dict[str, Any]:
    return {"name": name, "image": image, "imageID": f"{image}@sha256:00", "ready": True,
            "restartCount": 0, "started": True, "state": {"running": {"startedAt": T}}}


def pod(name: str, ns: str, containers: list[dict[str, Any]], *, node_name: str | None = None,
        labels: dict[str, str] | None = None, owner: tuple[str, str] | None = None,
        runtime_class: str | None = None, phase: str = "Running",
        statuses: list[dict[str, Any]] | None = None,
        init: list[dict[str, Any]] | None = None,
        init_statuses: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers, "restartPolicy": "Always",
                            "schedulerName": "default-scheduler", "dnsPolicy": "ClusterFirst",
                            "serviceAccountName": "default"}
    if node_name:
        spec["nodeName"] = node_name
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    if init:
        spec["initContainers"] = init
    status: dict[str, Any] = {"phase": phase, "qosClass": "BestEffort"}
    if statuses is None:
        statuses = [running(c["name"], c["image"]) for c in containers] if phase == "Running" \
            else []
    status["containerStatuses"] = statuses
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(name, ns, labels, owner),
            "spec": spec, "status": status}


def event(kind: str, ns: str, name: str, reason: str, message: str, *, count: int = 1,
          warning: bool = True, source: str = "kubelet") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": _meta(f"{name}.{zlib.crc32(reason.encode()):08x}", ns),
            "involvedObject": {"apiVersion": "v1" if kind == "Pod" else "apps/v1",
                               "kind": kind, "namespace": ns, "name": name},
            "reason": reason, "message": message, "type": "Warning" if warning else "Normal",
            "count": count, "firstTimestamp": T, "lastTimestamp": T,
            "source": {"component": source}, "reportingComponent": source}


def workload(kind: str, name: str, ns: str, containers: list[dict[str, Any]], *,
             match: dict[str, str] | None = None, node_selector: dict[str, str] | None = None,
             replicas: int = 1, ready: int = 1, runtime_class: str | None = None,
             owner: tuple[str, str] | None = None) -> dict[str, Any]:
    """A Deployment, ReplicaSet or DaemonSet with its status."""
    match = match or {"app": name}
    spec: dict[str, Any] = {"containers": containers}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    body: dict[str, Any] = {"selector": {"matchLabels": match},
                            "template": {"metadata": {"labels": match}, "spec": spec}}
    if kind == "DaemonSet":
        status = {"desiredNumberScheduled": replicas, "currentNumberScheduled": replicas,
                  "numberReady": ready, "numberAvailable": ready}
    else:
        body["replicas"] = replicas
        status = {"replicas": replicas, "readyReplicas": ready, "availableReplicas": ready}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": _meta(name, ns, owner=owner),
            "spec": body, "status": status}


def write(directory: Path, file: str, items: list[dict[str, Any]]) -> None:
    """`kubectl get <kind> -A -o json > <file>`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / file).write_text(json.dumps(
        {"apiVersion": "v1", "items": items, "kind": "List",
         "metadata": {"resourceVersion": ""}}, indent=4))


def write_version(directory: Path, git: str) -> None:
    """`kubectl get --raw /version > version.json`."""
    major, minor = git.lstrip("v").split(".")[:2]
    (directory / "version.json").write_text(json.dumps(
        {"major": major, "minor": minor, "gitVersion": git, "gitCommit": "0" * 40,
         "gitTreeState": "clean", "buildDate": T, "goVersion": "go1.22.9",
         "compiler": "gc", "platform": "linux/amd64"}, indent=2))
