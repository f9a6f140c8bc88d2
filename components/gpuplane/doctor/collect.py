"""Collect what the diagnosis needs from a live cluster into a Snapshot.

Only GPU-related objects are kept: GPU pods (any pod requesting `nvidia.com/*`), the GPU
Operator's and HAMi's DaemonSets, Deployments and pods wherever they run (found by name,
labels and images), events about those objects and about GPU workloads, RuntimeClasses,
the ClusterPolicy, the ConfigMaps the device plugin and gpuplane use, the webhooks, and
the deployed gpu-operator / HAMi Helm releases (values only). Failure to read nodes or
pods ends collection (exit 2, naming the permission); anything else missing becomes a
note in the report and the diagnosis goes on without it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any

from gpuplane.core.intent import INTENT_CONFIGMAP, INTENT_KEY, ClusterIntent
from gpuplane.doctor.cluster import (
    ClusterView,
    is_component,
    is_gpu_node,
    is_gpu_pod,
    name,
    namespace,
    requests_of,
)
from gpuplane.doctor.dra import requests_of as dra_requests
from gpuplane.doctor.helm import (
    LABEL_SELECTOR,
    SECRET_TYPE,
    ReleaseDecodeError,
    decode_release,
    release_record,
)
from gpuplane.doctor.inspect import (
    DEFAULT_IMAGE,
    DEFAULT_NAMESPACE,
    InspectionFailed,
    inspect_node,
)
from gpuplane.doctor.snapshot import ALL_NAMESPACES, KINDS, Collected, Snapshot, now
from gpuplane.kube.client import ApiError, ClusterClient, CollectError, get_required
from gpuplane.rules._shared import lookup

EVENT_TEXT = re.compile(r"nvidia|RuntimeClass|GLIBC|CDI|hami|gpu", re.IGNORECASE)
MAX_LOGS = 20
LOG_LINES = "60"

PATHS = {
    "version": "/version",
    "nodes": "/api/v1/nodes",
    "pods": "/api/v1/pods",
    "events": "/api/v1/events",
    "namespaces": "/api/v1/namespaces",
    "daemonsets": "/apis/apps/v1/daemonsets",
    "deployments": "/apis/apps/v1/deployments",
    "replicasets": "/apis/apps/v1/replicasets",
    "runtimeclasses": "/apis/node.k8s.io/v1/runtimeclasses",
    "configmaps": "/api/v1/configmaps",
    "webhooks": "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    "clusterpolicies": "/apis/nvidia.com/v1/clusterpolicies",
    "secrets": "/api/v1/secrets",
    # Dynamic Resource Allocation (Kubernetes 1.34+; a 404 elsewhere): doctor.dra.
    "resourceslices": "/apis/resource.k8s.io/v1/resourceslices",
    "resourceclaims": "/apis/resource.k8s.io/v1/resourceclaims",
    "deviceclasses": "/apis/resource.k8s.io/v1/deviceclasses",
}
# The snapshot kind (file) each request fills, where the names differ.
KIND_OF = {"webhooks": "mutatingwebhookconfigurations", "secrets": "helm-releases"}


def collect(client: ClusterClient, *, inspect: bool = True, only_nodes: list[str] | None = None,
            inspect_namespace: str = DEFAULT_NAMESPACE, inspect_image: str = DEFAULT_IMAGE,
            cri_probe: bool = True, source: dict[str, Any] | None = None,
            progress: Callable[[str], None] = lambda _: None) -> Snapshot:
    """A snapshot of the cluster behind `client`. Raises CollectError when it cannot read
    the cluster at all (unreachable, unauthorised, or forbidden to list nodes or pods)."""
    snap = Snapshot(collected_at=now(), source=dict(source or {}),
                    collected=Collected(kinds=frozenset(KINDS), namespaces=ALL_NAMESPACES))
    snap.version = _required(client, "version", PATHS["version"])
    progress("nodes and pods")
    snap.nodes = _items(_required(client, "nodes", PATHS["nodes"]))
    all_pods = _items(_required(client, "pods", PATHS["pods"]))

    snap.daemonsets = [d for d in _optional(client, snap, "daemonsets")
                       if is_component(d) or _gpu_workload(d, "DaemonSet")]
    snap.deployments = [d for d in _optional(client, snap, "deployments")
                        if is_component(d) or _gpu_workload(d, "Deployment")]
    snap.clusterpolicies = _optional(client, snap, "clusterpolicies", missing_ok=True)
    snap.helm_releases = _releases(client, snap)
    snap.runtimeclasses = _optional(client, snap, "runtimeclasses")
    snap.webhooks = [w for w in _optional(client, snap, "webhooks") if is_component(w)
                     or any(is_component({"metadata": {"name": h.get("name", "")}})
                            for h in w.get("webhooks") or [])]

    component_ns = {namespace(o) for o in [*snap.daemonsets, *snap.deployments]}
    component_ns |= {str(r.get("namespace")) for r in snap.helm_releases}
    snap.pods = [p for p in all_pods if is_gpu_pod(p) or
                 (namespace(p) in component_ns and is_component(p))]
    owners = {(namespace(p), str(o.get("name"))) for p in snap.pods
              for o in (p.get("metadata") or {}).get("ownerReferences") or []
              if o.get("kind") == "ReplicaSet"}
    snap.replicasets = [r for r in _optional(client, snap, "replicasets")
                        if is_component(r) or (namespace(r), name(r)) in owners
                        or _gpu_workload(r, "ReplicaSet")]
    snap.configmaps = _configmaps(client, snap, component_ns)
    wanted_ns = component_ns | {namespace(p) for p in snap.pods}
    snap.namespaces = [n for n in _optional(client, snap, "namespaces")
                       if name(n) in wanted_ns]
    snap.events = _events(client, snap)
    snap.logs = _logs(client, snap)
    _dra(client, snap)

    if inspect:
        view = ClusterView(snap)
        intent_nodes = _intent_nodes(snap)
        targets = [name(n) for n in view.gpu_nodes(intent_nodes)]
        if only_nodes:
            unknown = sorted(set(only_nodes) - {name(n) for n in snap.nodes})
            if unknown:
                raise CollectError(f"--node {', '.join(unknown)}: no such node")
            targets = list(only_nodes)
        for node in targets:
            progress(f"inspecting node {node}")
            try:
                snap.inspections[node] = inspect_node(
                    client, node, namespace=inspect_namespace, image=inspect_image,
                    cri_probe=cri_probe)
            except InspectionFailed as exc:
                snap.notes.append(f"node {node} was not inspected: {exc}")
    return snap


def _dra(client: ClusterClient, snap: Snapshot) -> None:
    """NVIDIA's ResourceSlices, every DeviceClass (a few), and the claims that ask for a device of
    an NVIDIA class or of a class that does not exist (doctor.dra explains them)."""
    snap.resourceslices = [s for s in _optional(client, snap, "resourceslices", missing_ok=True)
                           if str((s.get("spec") or {}).get("driver", "")).endswith("nvidia.com")]
    snap.deviceclasses = _optional(client, snap, "deviceclasses", missing_ok=True)
    known = {name(c) for c in snap.deviceclasses}
    snap.resourceclaims = [
        c for c in _optional(client, snap, "resourceclaims", missing_ok=True)
        if any(k.endswith("nvidia.com") or k not in known for _, k, _ in dra_requests(c) if k)]


def _gpu_workload(obj: dict[str, Any], kind: str) -> bool:
    """A workload whose pods ask for NVIDIA resources (list items carry no `kind`)."""
    return bool(requests_of({**obj, "kind": kind}))


def _items(data: Any) -> list[dict[str, Any]]:
    items = data.get("items") if isinstance(data, dict) else None
    return [i for i in items or [] if isinstance(i, dict)]


def _required(client: ClusterClient, what: str, path: str) -> Any:
    return get_required(client, path, what, needs="the doctor needs")


def _optional(client: ClusterClient, snap: Snapshot, what: str, *, missing_ok: bool = False,
              params: dict[str, str] | None = None) -> list[dict[str, Any]]:
    try:
        return _items(client.get(PATHS[what], params))
    except ApiError as exc:
        if exc.status == 404 and missing_ok:
            return []
        if exc.status == 0:
            raise CollectError(f"cluster unreachable: {exc}") from None
        reason = (f"forbidden: needs permission to {exc.permission}" if exc.status == 403
                  else f"HTTP {exc.status}: {exc}")
        snap.notes.append(f"{what} not collected ({reason})")
        kind = KIND_OF.get(what, what)
        _lost(snap, kind)
        if exc.status == 403:
            snap.collected.denied[kind] = exc.permission
        else:
            snap.collected.failed[kind] = f"HTTP {exc.status}: {exc}"
        return []


def _lost(snap: Snapshot, kind: str) -> None:
    if snap.collected.kinds is not None:
        snap.collected.kinds = snap.collected.kinds - {kind}


def _releases(client: ClusterClient, snap: Snapshot) -> list[dict[str, Any]]:
    """Deployed gpu-operator and HAMi releases from helm's release Secrets."""
    records = []
    for secret in _optional(client, snap, "secrets", params={"labelSelector": LABEL_SELECTOR}):
        if secret.get("type") not in (None, SECRET_TYPE):
            continue
        try:
            record = release_record(decode_release(secret))
        except ReleaseDecodeError as exc:
            snap.notes.append(f"helm release not read: {exc}")
            continue
        if record is not None:
            records.append(record)
    return records


def _intent_nodes(snap: Snapshot) -> list[str]:
    cm = next((c for c in snap.configmaps if name(c) == INTENT_CONFIGMAP), None)
    text = ((cm or {}).get("data") or {}).get(INTENT_KEY)
    if not isinstance(text, str):
        return []
    try:
        return [n.name for n in ClusterIntent.from_json(text).gpu_nodes]
    except (ValueError, TypeError):
        return []


def _configmaps(client: ClusterClient, snap: Snapshot, component_ns: set[str]
                ) -> list[dict[str, Any]]:
    """The intent record, the device plugin's config (named by the ClusterPolicy or the
    release values, or by the intent record) and HAMi's / the operator's own ConfigMaps."""
    everything = _optional(client, snap, "configmaps")
    wanted = {INTENT_CONFIGMAP}
    found = ClusterView(snap).operator_values()
    if found is not None:
        config_name = lookup(found[0], "devicePlugin.config.name")
        if isinstance(config_name, str) and config_name:
            wanted.add(config_name)
    for cm in everything:
        text = (cm.get("data") or {}).get(INTENT_KEY) if name(cm) == INTENT_CONFIGMAP else None
        if isinstance(text, str):
            with contextlib.suppress(ValueError, TypeError):   # analysis reports it broken
                wanted.add(ClusterIntent.from_json(text).time_slicing_configmap)
    return [cm for cm in everything if name(cm) in wanted or (
        namespace(cm) in component_ns and re.search(r"hami|time-slicing|device-plugin",
                                                     name(cm)))]


def _events(client: ClusterClient, snap: Snapshot) -> list[dict[str, Any]]:
    """Events about kept objects and GPU nodes, plus any that mention GPU causes."""
    kept = {("Pod", namespace(p), name(p)) for p in snap.pods}
    kept |= {("DaemonSet", namespace(d), name(d)) for d in snap.daemonsets}
    kept |= {("Deployment", namespace(d), name(d)) for d in snap.deployments}
    kept |= {("ReplicaSet", namespace(r), name(r)) for r in snap.replicasets}
    kept |= {("Node", "", name(n)) for n in snap.nodes if is_gpu_node(n)}
    out = []
    for event in _optional(client, snap, "events"):
        obj = event.get("involvedObject") or {}
        key = (str(obj.get("kind")), str(obj.get("namespace") or ""), str(obj.get("name")))
        if key in kept or EVENT_TEXT.search(str(event.get("message", ""))):
            out.append(event)
    return out


def _logs(client: ClusterClient, snap: Snapshot) -> list[dict[str, Any]]:
    """The log tail of each failing container of the GPU components' pods."""
    out: list[dict[str, Any]] = []
    for pod in snap.pods:
        if is_gpu_pod(pod):
            continue
        status = pod.get("status") or {}
        for cs in [*(status.get("initContainerStatuses") or []),
                   *(status.get("containerStatuses") or [])]:
            if len(out) >= MAX_LOGS:
                return out
            state = cs.get("state") or {}
            bad = (state.get("waiting") or {}).get("reason") not in (None, "PodInitializing",
                                                                     "ContainerCreating")
            if not bad and not (state.get("terminated") or {}).get("exitCode"):
                continue
            path = f"/api/v1/namespaces/{namespace(pod)}/pods/{name(pod)}/log"
            params = {"container": str(cs.get("name")), "tailLines": LOG_LINES}
            if int(cs.get("restartCount") or 0) > 0 and not state.get("terminated"):
                params["previous"] = "true"
            try:
                text = client.get_text(path, params)
            except ApiError as exc:
                if exc.status == 403:
                    snap.notes.append(f"logs not collected (forbidden: needs permission to "
                                      f"{exc.permission})")
                    snap.collected.denied["logs"] = exc.permission
                    _lost(snap, "logs")
                    return out
                continue
            out.append({"namespace": namespace(pod), "pod": name(pod),
                        "container": cs.get("name"),
                        "previous": params.get("previous") == "true", "text": text})
    return out


__all__ = ["PATHS", "collect"]
