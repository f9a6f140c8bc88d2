"""Read-only views over a snapshot: which nodes and pods are about GPUs, where the GPU
Operator and HAMi run (found by labels and names, never by a fixed namespace), their
Helm values, the ClusterPolicy and the events of an object.

Shared by collection (what to keep) and analysis (what to check), so both agree on what
counts as a GPU node, a GPU pod or a GPU component.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from gpuplane.doctor.helm import effective_values
from gpuplane.doctor.snapshot import Snapshot
from gpuplane.rules._shared import quantity
from gpuplane.rules.workloads import gpu_requests, pod_spec_of

GPU_NODE_LABELS = {"feature.node.kubernetes.io/pci-10de.present": "true",
                   "nvidia.com/gpu.present": "true", "gpu": "on"}
COMPONENT = re.compile(r"nvidia|gpu-operator|hami|vgpu|container-toolkit|device-plugin|"
                       r"gpu-feature-discovery|dcgm", re.IGNORECASE)
OPERATOR = re.compile(r"^gpu-operator$|nvidia-gpu-operator|^gpu-operator-")
HAMI = re.compile(r"hami|vgpu")
# Images only the GPU Operator's operands run (validator, operator-deployed toolkit).
OPERAND_IMAGE = re.compile(r"/gpu-operator-validator:|/gpu-operator:|/k8s/container-toolkit:")


def name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def namespace(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace", ""))


def labels(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def ref(obj: dict[str, Any], kind: str | None = None) -> str:
    """`Kind ns/name` as the report shows an object."""
    kind = kind or str(obj.get("kind") or "")
    ns = namespace(obj)
    return f"{kind} {ns}/{name(obj)}" if ns else f"{kind} {name(obj)}"


def requests_of(obj: dict[str, Any]) -> dict[str, float]:
    """`nvidia.com/*` requested by a pod or workload (empty for malformed quantities)."""
    spec = pod_spec_of(obj)
    if spec is None:
        return {}
    try:
        return {k: v for k, v in gpu_requests(spec).items() if v > 0}
    except ValueError:
        return {}


def is_gpu_pod(pod: dict[str, Any]) -> bool:
    return bool(requests_of({**pod, "kind": "Pod"}))


def is_component(obj: dict[str, Any]) -> bool:
    """A GPU Operator / HAMi / NVIDIA object, by name, labels or image."""
    text = " ".join([name(obj), *labels(obj).keys(), *labels(obj).values(),
                     *(c.get("image", "") for c in _containers(obj))])
    return bool(COMPONENT.search(text))


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec_of({**obj, "kind": obj.get("kind") or "Pod"}) or {}
    return [c for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
            if isinstance(c, dict)]


def gpu_count(node: dict[str, Any], field: str = "allocatable",
              resource: str = "nvidia.com/gpu") -> float:
    value = ((node.get("status") or {}).get(field) or {}).get(resource)
    if value is None:
        return 0.0
    try:
        return quantity(value)
    except ValueError:
        return 0.0


def is_gpu_node(node: dict[str, Any], named: Iterable[str] = ()) -> bool:
    if name(node) in set(named):
        return True
    lbl = labels(node)
    if any(lbl.get(k) == v for k, v in GPU_NODE_LABELS.items()):
        return True
    return gpu_count(node, "capacity") > 0


def _is_hami(obj: dict[str, Any]) -> bool:
    return bool(HAMI.search(name(obj))) or any(
        "projecthami" in str(c.get("image", "")) for c in _containers(obj))


@dataclass(frozen=True)
class Release:
    """A gpu-operator or HAMi Helm release as the snapshot records it."""

    record: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.record.get("name"))

    @property
    def namespace(self) -> str:
        return str(self.record.get("namespace"))

    @property
    def chart(self) -> str:
        return str((self.record.get("chart") or {}).get("name"))

    @property
    def chart_version(self) -> str | None:
        return (self.record.get("chart") or {}).get("version")

    @property
    def where(self) -> str:
        return f"Release {self.namespace}/{self.name}"

    @property
    def values(self) -> dict[str, Any]:
        return effective_values(self.record)

    @property
    def user_values(self) -> dict[str, Any]:
        return dict(self.record.get("values") or {})


class ClusterView:
    """Derived views over one snapshot (computed once)."""

    def __init__(self, snapshot: Snapshot):
        self.snap = snapshot

    def missing(self, *kinds: str) -> str | None:
        """`a not collected (why); b not collected` for the kinds the snapshot lacks, or
        None when it has them all: a rule that needs them says "not checked" instead."""
        found = [m for m in (self.snap.missing(k) for k in kinds) if m]
        return "; ".join(found) if found else None

    # -------------------------------------------------------------- nodes and pods
    def gpu_nodes(self, named: Iterable[str] = ()) -> list[dict[str, Any]]:
        named = set(named) | {str((p.get("spec") or {}).get("nodeName"))
                              for p in self.gpu_pods}
        return [n for n in self.snap.nodes if is_gpu_node(n, named)]

    def runtime_classes_on(self, node_name: str) -> tuple[tuple[str, str], ...]:
        """(RuntimeClass, handler) that the node's containerd must serve: the classes of
        pods bound to the node, and the classes whose `scheduling.nodeSelector` selects it.
        A class with no selector that no pod there uses is left out: nothing says it is
        meant for this node (a kata class on other nodes, say)."""
        node = self.node(node_name) or {}
        have = labels(node)
        used = {str((p.get("spec") or {}).get("runtimeClassName"))
                for p in self.snap.pods
                if (p.get("spec") or {}).get("nodeName") == node_name
                and (p.get("spec") or {}).get("runtimeClassName")}
        out = []
        for rc in self.snap.runtimeclasses:
            handler = rc.get("handler")
            selector = ((rc.get("scheduling") or {}).get("nodeSelector") or {})
            picked = bool(selector) and all(have.get(k) == v for k, v in selector.items())
            if isinstance(handler, str) and handler and (name(rc) in used or picked):
                out.append((name(rc), handler))
        return tuple(sorted(out))

    def node(self, node_name: str) -> dict[str, Any] | None:
        return next((n for n in self.snap.nodes if name(n) == node_name), None)

    @cached_property
    def gpu_pods(self) -> list[dict[str, Any]]:
        return [p for p in self.snap.pods if is_gpu_pod(p)]

    def events_for(self, obj: dict[str, Any], kind: str) -> list[dict[str, Any]]:
        """Events about `obj`, oldest first."""
        wanted = (kind, namespace(obj), name(obj))
        found = [e for e in self.snap.events
                 if (str((e.get("involvedObject") or {}).get("kind")),
                     str((e.get("involvedObject") or {}).get("namespace") or ""),
                     str((e.get("involvedObject") or {}).get("name"))) == wanted]
        return sorted(found, key=lambda e: str(e.get("lastTimestamp") or
                                                e.get("eventTime") or ""))

    def pods_of(self, owner: dict[str, Any]) -> list[dict[str, Any]]:
        """Pods a DaemonSet or Deployment runs (by its selector's matchLabels)."""
        match = ((owner.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        if not match:
            return []
        return [p for p in self.snap.pods if namespace(p) == namespace(owner)
                and all(labels(p).get(k) == v for k, v in match.items())]

    def logs_of(self, pod: dict[str, Any]) -> list[dict[str, Any]]:
        return [entry for entry in self.snap.logs if entry.get("namespace") == namespace(pod)
                and entry.get("pod") == name(pod)]

    # -------------------------------------------------------------- components
    def release(self, chart: str) -> Release | None:
        found = [Release(r) for r in self.snap.helm_releases
                 if (r.get("chart") or {}).get("name") == chart]
        return found[0] if found else None

    @cached_property
    def cluster_policy(self) -> dict[str, Any] | None:
        return self.snap.clusterpolicies[0] if self.snap.clusterpolicies else None

    def operator_values(self) -> tuple[dict[str, Any], str, str | None] | None:
        """(values, where, chart version) of the GPU Operator: the Helm release, else the
        ClusterPolicy's spec (its keys are the chart's values)."""
        release = self.release("gpu-operator")
        if release is not None:
            return release.values, release.where, release.chart_version
        policy = self.cluster_policy
        if policy is not None:
            chart = labels(policy).get("helm.sh/chart", "")
            version = chart.removeprefix("gpu-operator-") or None
            return dict(policy.get("spec") or {}), f"ClusterPolicy {name(policy)}", version
        return None

    def live_toolkit_env(self) -> tuple[list[Any], str] | None:
        """The toolkit env the operator really uses: the ClusterPolicy's (what the
        controller renders from), else the release values."""
        policy = self.cluster_policy
        if policy is not None:
            toolkit = (policy.get("spec") or {}).get("toolkit") or {}
            return list(toolkit.get("env") or []), f"ClusterPolicy {name(policy)} toolkit.env"
        found = self.operator_values()
        if found is None:
            return None
        values, where, _ = found
        return list((values.get("toolkit") or {}).get("env") or []), f"{where} toolkit.env"

    def operator_namespace(self) -> str | None:
        """Where the GPU Operator runs: its release, else its Deployment, ReplicaSet or
        pod (a snapshot may hold only pods)."""
        release = self.release("gpu-operator")
        if release is not None:
            return release.namespace
        for obj in [*self.snap.deployments, *self.snap.replicasets, *self.component_pods]:
            if OPERATOR.search(name(obj)) or \
                    labels(obj).get("app.kubernetes.io/name") == "gpu-operator":
                return namespace(obj)
        for obj in [*self.snap.daemonsets, *self.component_pods]:   # its operands' images
            if any(OPERAND_IMAGE.search(str(c.get("image", ""))) for c in _containers(obj)):
                return namespace(obj)
        return None

    def operator_toolkit(self) -> dict[str, Any] | None:
        """The operator's toolkit DaemonSet or pod, when one was collected."""
        return next((o for o in [*self.snap.daemonsets, *self.component_pods]
                     if "container-toolkit" in name(o) or any(
                         "/container-toolkit:" in str(c.get("image", ""))
                         for c in _containers(o))), None)

    def hami_namespace(self) -> str | None:
        release = self.release("hami")
        if release is not None:
            return release.namespace
        for obj in self.hami_objects():
            return namespace(obj)
        return None

    def daemonsets_in(self, ns: str | None) -> list[dict[str, Any]]:
        return [d for d in self.snap.daemonsets if ns and namespace(d) == ns]

    @cached_property
    def component_pods(self) -> list[dict[str, Any]]:
        """Pods of the GPU components (not GPU workloads)."""
        return [p for p in self.snap.pods if is_component(p) and not is_gpu_pod(p)]

    def hami_objects(self) -> list[dict[str, Any]]:
        """HAMi's Deployments, DaemonSets, ReplicaSets and pods: whichever were collected."""
        return [o for o in [*self.snap.deployments, *self.snap.daemonsets,
                            *self.snap.replicasets, *self.component_pods]
                if HAMI.search(name(o))]

    def covered(self, pod: dict[str, Any]) -> bool:
        """Whether a controller of `pod` is in the snapshot (then it speaks for the pod)."""
        return any(pod in self.pods_of(owner)
                   for owner in [*self.snap.deployments, *self.snap.daemonsets])

    def device_plugins_on(self, node: dict[str, Any]) -> tuple[list[str], list[str]]:
        """(HAMi's, any other) device plugins that run on `node`, each named with what shows
        it: a plugin pod bound to the node, else a DaemonSet with pods scheduled whose
        nodeSelector selects it."""
        node_labels = labels(node)
        hami: list[str] = []
        other: list[str] = []
        pods = [p for p in self.component_pods if "device-plugin" in name(p)]
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") == name(node):
                (hami if _is_hami(pod) else other).append(ref(pod, "Pod"))
        for ds in self.snap.daemonsets:
            if "device-plugin" not in name(ds) or self.pods_of(ds):
                continue   # its pods (above) say where it runs
            spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
            selector = spec.get("nodeSelector") or {}
            scheduled = int((ds.get("status") or {}).get("desiredNumberScheduled") or 0)
            if scheduled and all(node_labels.get(k) == v for k, v in selector.items()):
                (hami if _is_hami(ds) else other).append(
                    f"{ref(ds, 'DaemonSet')} ({scheduled} pod(s) scheduled, nodeSelector "
                    f"{', '.join(f'{k}={v}' for k, v in selector.items()) or 'none'})")
        return hami, other

    def configmap(self, ns: str | None, cm_name: str) -> dict[str, Any] | None:
        return next((c for c in self.snap.configmaps
                     if name(c) == cm_name and (ns is None or namespace(c) == ns)), None)

    def runtimeclass(self, rc_name: str) -> dict[str, Any] | None:
        return next((r for r in self.snap.runtimeclasses if name(r) == rc_name), None)


__all__ = ["ClusterView", "Release", "gpu_count", "is_component", "is_gpu_node", "is_gpu_pod",
           "name", "namespace", "ref", "requests_of"]
