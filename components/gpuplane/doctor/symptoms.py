"""What GPU pods and their events say: symptoms mapped to the rule ids that explain them.

Which cause an event's text shows is the rulebook's event table
(`gpuplane.rules.events.EVENT_CAUSES`, first match wins, shared with the post-deploy
checks); here each cause becomes a symptom that points at the findings the rules made:

| cause | causes looked for (in order) |
| --- | --- |
| no-runtime | FM17, FM01, FM02, FM04, FM11 (node, operator) |
| no-runtimeclass | FM11 |
| cdi | FM13, FM16 |
| glibc | FM15 |
| admission | FM12, FM13 |
| insufficient(-shares) | HAMi: FM14, FM13, FM12; operator: FM10, FM12, FM14 |
| node-not-ready | FM02, FM03, FM09, FM01, FM15, FM17 (NotReady nodes) |

The other causes (node affinity, taints, image pulls, OOM) say nothing about GPUs: no
symptom. No rule is re-implemented here: a symptom only points at the findings the rules
made; when none matches, the symptom's own finding (its fallback) says what was seen.
"""

from __future__ import annotations

import re
from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.doctor.cluster import ClusterView, gpu_count, name, namespace, requests_of
from gpuplane.doctor.diagnosis import Evidence, Symptom
from gpuplane.rules.events import NODE_DOWN_IDS, first_cause
from gpuplane.rules.messages import NO_RUNTIMECLASS

HAMI_RESOURCES = ("nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores")


def event_evidence(event: dict[str, Any]) -> Evidence:
    obj = event.get("involvedObject") or {}
    count = event.get("count") or (event.get("series") or {}).get("count")
    times = f" (x{count})" if count and int(count) > 1 else ""
    where = f"{obj.get('namespace')}/{obj.get('name')}" if obj.get("namespace") \
        else str(obj.get("name"))
    message = " ".join(str(event.get("message", "")).split())
    if len(message) > 400:
        message = message[:397] + "..."
    return Evidence(f"event {obj.get('kind')} {where}: {event.get('reason')}{times}", message)


def pod_symptoms(view: ClusterView, intent: ClusterIntent) -> tuple[list[Symptom], list[str]]:
    """Symptoms from GPU pods that do not run and from events about GPU workloads."""
    symptoms: list[Symptom] = []
    notes: list[str] = []
    for pod in view.gpu_pods:
        pod_scope = f"pod:{namespace(pod)}/{name(pod)}"
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        stuck = _stuck(pod)
        events = [e for e in view.events_for(pod, "Pod") if e.get("type") == "Warning"]
        matched = False
        for event in events:
            symptom = classify(event, view, intent, pod_scope, node)
            if symptom is not None:
                symptoms.append(symptom)
                matched = True
        if stuck and not matched:
            unseen = view.missing("events")
            notes.append(f"Pod {namespace(pod)}/{name(pod)} is {stuck}; not checked why: "
                         f"{unseen}" if unseen else
                         f"Pod {namespace(pod)}/{name(pod)} is {stuck} with no event that "
                         "points at a GPU cause")
    for event in view.snap.events:
        obj = event.get("involvedObject") or {}
        if obj.get("kind") in ("ReplicaSet", "Job", "StatefulSet", "DaemonSet") and \
                NO_RUNTIMECLASS.search(str(event.get("message", ""))):
            symptoms.append(_runtimeclass_symptom(event, intent))
    return symptoms, notes


def _stuck(pod: dict[str, Any]) -> str | None:
    status = pod.get("status") or {}
    if status.get("phase") == "Pending":
        for cs in status.get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting")
            if waiting:
                return f"Pending ({waiting.get('reason')})"
        return "Pending"
    return None


def classify(event: dict[str, Any], view: ClusterView, intent: ClusterIntent,
             pod_scope: str, node: str) -> Symptom | None:
    """The symptom one warning event is, or None when it says nothing about GPUs."""
    message = str(event.get("message", ""))
    found = first_cause([f"{event.get('reason') or ''}: {message}"])
    if found is None or not found[0].gpu:
        return None
    cause, match = found
    evidence = event_evidence(event)
    node_scope = f"node:{node}" if node else pod_scope
    if cause.key == "no-runtime":
        handler = match["handler"] or "nvidia"
        fallback: Finding | None = Finding(
            "FM01", Severity.ERROR,
            f"the containerd that {'node ' + node if node else 'the node'}'s kubelet uses "
            f"has no {handler!r} runtime, so pods with runtimeClassName {handler} never "
            "start (the node was not inspected, so which file is missing is unknown).",
            f"Node {node}" if node else pod_scope.removeprefix("pod:"),
            f"Run `gpuplane doctor` with node inspection (or `gpuplane containerd check` on "
            f"the node); set `gpuplane:cluster.distro` (now {intent.distro}) and, on "
            "k8s-snap, `gpuplane:cluster.containerdBaseDir` to what the node runs; without "
            "gpuplane point the operator's toolkit.env CONTAINERD_CONFIG / CONTAINERD_SOCKET "
            "/ RUNTIME_DROP_IN_CONFIG at the kubelet's containerd.")
        return Symptom(("FM17", "FM01", "FM02", "FM04", "FM11"),
                       (node_scope, "operator", "cluster"), evidence, fallback)
    if cause.key == "no-runtimeclass":
        return _runtimeclass_symptom(event, intent)
    if cause.key == "cdi":
        fallback = None
        if intent.device_plugin == "hami":
            fallback = Finding(
                "FM13", Severity.ERROR,
                "GPU pods fail with `unresolvable CDI devices`: the operator runs the toolkit "
                "in CDI mode and HAMi's device plugin does not hand out CDI devices.",
                pod_scope.removeprefix("pod:"),
                "Set `gpuplane:gpuOperator.cdi: false`; raw Helm: --set cdi.enabled=false on "
                "the gpu-operator release.")
        return Symptom(("FM13", "FM16"), ("operator", "hami", node_scope), evidence, fallback,
                       about=("CDI", "cdi"))
    if cause.key == "glibc":
        return Symptom(("FM15",), ("operator", node_scope), evidence, glibc_fallback(
            node_scope.removeprefix("node:"), message))
    if cause.key == "admission":
        return Symptom(("FM12", "FM13"), ("operator", "hami", pod_scope), evidence,
                       about=("device plugin", "devicePlugin"), serious=True)
    if cause.key in ("insufficient-shares", "insufficient"):
        return _insufficient(match["resource"], evidence, view, intent, pod_scope)
    down = tuple(f"node:{name(n)}" for n in view.gpu_nodes() if not _ready(n))
    if down:                                            # node-not-ready
        return Symptom(NODE_DOWN_IDS, (*down, "operator"), evidence, serious=True)
    return None


def _ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _insufficient(resource: str, evidence: Evidence, view: ClusterView,
                  intent: ClusterIntent, pod_scope: str) -> Symptom:
    advertised = [name(n) for n in view.snap.nodes if gpu_count(n, "allocatable", resource)]
    if intent.device_plugin == "hami":
        ids: tuple[str, ...] = ("FM14", "FM13", "FM12")
        fallback: Finding | None = None
        if not advertised:
            fallback = Finding(
                "FM13", Severity.ERROR,
                f"no node advertises {resource}: HAMi's device plugin runs on no GPU node, so "
                "every pod asking for a GPU share stays Pending.",
                pod_scope.removeprefix("pod:"),
                "List the GPU nodes in `gpuplane:nodes` (gpuplane labels them gpu=on for "
                "HAMi's device plugin) and check `gpuplane:hami.values` does not change "
                "devicePlugin.nvidiaNodeSelector; by hand: kubectl label node <node> gpu=on.")
        return Symptom(ids, (pod_scope, "hami", "operator", "cluster"), evidence, fallback)
    if resource in HAMI_RESOURCES:
        return Symptom(("FM14",), (pod_scope,), evidence)
    return Symptom(("FM10", "FM12", "FM14", "FM13"), (pod_scope, "operator", "cluster"),
                   evidence)


def _runtimeclass_symptom(event: dict[str, Any], intent: ClusterIntent) -> Symptom:
    match = NO_RUNTIMECLASS.search(str(event.get("message", "")))
    rc = match["name"] if match else intent.runtime_class
    fallback = Finding(
        "FM11", Severity.ERROR,
        f"RuntimeClass {rc!r} does not exist: the API server rejects every pod that asks for "
        "it.",
        f"RuntimeClass {rc}",
        runtimeclass_fix(rc))
    return Symptom(("FM11",), ("cluster",), event_evidence(event), fallback)


def runtimeclass_fix(rc: str) -> str:
    return (f"Set `gpuplane:runtime.createRuntimeClass: true` (gpuplane creates RuntimeClass "
            f"{rc} with handler {rc}; `gpuplane:runtime.name` names both); without gpuplane "
            f"set the operator's Helm value operator.runtimeClass={rc} (the operator creates "
            f"it), or apply `{{apiVersion: node.k8s.io/v1, kind: RuntimeClass, metadata: "
            f"{{name: {rc}}}, handler: {rc}}}`.")


def glibc_fallback(node: str, message: str) -> Finding:
    need = re.search(r"GLIBC_(\d+\.\d+)", message)
    shown = f"GLIBC_{need[1]}" if need else "a newer glibc"
    return Finding(
        "FM15", Severity.ERROR,
        f"the toolkit's binaries need {shown}, which the host OS of "
        f"{'node ' + node if node else 'the GPU nodes'} does not have: every container "
        "started through the nvidia runtime fails (`GLIBC_... not found`).",
        f"Node {node}" if node else "gpu-operator toolkit",
        "Set `gpuplane:nodes[].os` to the nodes' OS (gpuplane then picks a toolkit flavour "
        "built for its glibc) or `gpuplane:gpuOperator.toolkitImage.tag` to such a flavour, "
        "or `gpuplane:gpuOperator.toolkit: host`; raw Helm: toolkit.version=<tag of that "
        "flavour>, or toolkit.enabled=false and the OS package nvidia-container-toolkit.")


def requests_text(pod: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in sorted(requests_of({**pod, "kind": "Pod"}).items()))


__all__ = ["classify", "event_evidence", "glibc_fallback", "pod_symptoms", "runtimeclass_fix"]
