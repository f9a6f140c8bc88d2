"""The diagnosis of a snapshot: the rulebook's findings, tied to what the cluster shows.

Order of work: the intent (the stack's record or inferred) → every rule over what was
collected (operator and HAMi values, HAMi's nodes, the time-slicing ConfigMap, GPU
workloads, each inspected node's containerd), where a list the rule needs was not
collected saying "not checked" instead, and where a fact is unknown (`unknowns`) never
letting a default stand in for it → symptoms from nodes, components, pods and events →
`combine`, which files each symptom as evidence under the cause that explains it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.doctor import dra, health, unknowns
from gpuplane.doctor.cluster import ClusterView, labels, name, namespace, requests_of
from gpuplane.doctor.diagnosis import Diagnosis, Symptom, causes, combine
from gpuplane.doctor.infer import IntentError, IntentSource, infer, intent_of
from gpuplane.doctor.nodes import NodeContext, ToolkitTarget, analyse_node
from gpuplane.doctor.snapshot import Snapshot
from gpuplane.doctor.symptoms import pod_symptoms
from gpuplane.rules.hami import check_hami_nodes, check_hami_values
from gpuplane.rules.operator import check_operator_values
from gpuplane.rules.sharing_plain import PlainSharing
from gpuplane.rules.timeslicing import check_time_slicing
from gpuplane.rules.workloads import check_workload
from gpuplane.toolkit.operator import chart_writes_dropin


@dataclass
class DoctorReport:
    """Everything `gpuplane doctor` prints."""

    diagnoses: list[Diagnosis]
    intent: ClusterIntent
    intent_source: str
    inferred: dict[str, str]
    notes: list[str] = field(default_factory=list)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    snapshot: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(d.finding.severity is Severity.ERROR for d in self.diagnoses)

    @property
    def unchecked(self) -> list[str]:
        """The notes of rules not run for want of data (a snapshot without some kinds, a
        permission missing: "... not collected"): with any, no error found is not proof of
        health."""
        return [n for n in self.notes if "not checked" in n and "not collected" in n]

    @property
    def verdict(self) -> str:
        """`problems` (an error finding; exit 1), else `incomplete` where something was
        not checked, else `healthy` (both exit 0: nothing found wrong)."""
        if self.failed:
            return "problems"
        return "incomplete" if self.unchecked else "healthy"


def analyse(snapshot: Snapshot) -> DoctorReport:
    view = ClusterView(snapshot)
    notes = list(snapshot.notes)
    if (unseen := view.missing("configmaps")) is not None:
        notes.append(f"{unseen}: a gpuplane-intent record could not be read, so the intent is "
                     "inferred")
    try:
        source = intent_of(view, snapshot.inspections)
    except IntentError as exc:
        notes.append(f"{exc}; inferring the intent instead")
        source = infer(view, snapshot.inspections)
    intent = source.intent
    symptoms: list[Symptom] = []
    operator = view.operator_values()
    release = view.release("hami")
    hami_values: dict[str, Any] | None = release.values if release is not None else None

    outside = unknowns.outside_model(intent.containerd_version)
    if outside is None:
        diagnoses = _rules(view, intent, notes)
    else:
        diagnoses = unknowns.line_independent(lambda i, n: _rules(view, i, n), intent, notes,
                                              outside)
    declared = source.source != "inferred"
    if not declared and "nvidia_default" not in source.inferred:
        diagnoses = unknowns.default_runtime_unknown(diagnoses, notes)
    kube_known = declared or "kubernetes_version" in source.inferred
    if not kube_known:
        diagnoses = unknowns.kubernetes_unknown(diagnoses, notes)

    node_facts: dict[str, dict[str, Any]] = {}
    for node_name, inspection in sorted(snapshot.inspections.items()):
        result = analyse_node(inspection, _node_context(view, intent, node_name, operator))
        diagnoses += result.diagnoses
        symptoms += result.symptoms
        notes += result.notes
        node_facts[node_name] = result.facts

    found, more = health.operator_health(view, intent)
    symptoms += found
    notes += more
    symptoms += health.node_readiness(view)
    symptoms += health.allocatable(view, intent, hami_values, notes)
    hami_diag, found, more = health.hami_health(view, intent, source.source != "inferred",
                                               hami_values, kube_known)
    diagnoses += hami_diag
    symptoms += found
    notes += more
    found, more = pod_symptoms(view, intent)
    symptoms += found
    notes += more
    diagnoses += dra.dra_health(view, intent, notes)

    return DoctorReport(
        diagnoses=combine(diagnoses, symptoms),
        intent=intent,
        intent_source=source.source,
        inferred=source.inferred,
        notes=list(dict.fromkeys(notes)),
        nodes=node_facts,
        snapshot={"collectedAt": snapshot.collected_at, "source": snapshot.source,
                  "serverVersion": snapshot.version.get("gitVersion"),
                  "gpuNodes": [name(n) for n in view.gpu_nodes(n.name for n in intent.nodes)],
                  "gpuPods": len(view.gpu_pods), "inspectedNodes": sorted(snapshot.inspections),
                  "collected": snapshot.collected.to_dict()},
    )


def _dra(view: ClusterView, intent: ClusterIntent,
         operator: dict[str, Any] | None) -> list[Diagnosis]:
    """NVIDIA's DRA driver's release on the cluster (either chart name), judged as the plan
    judges it (FM15, FM30-FM36), beside the operator's values; FM34 on the operator."""
    from gpuplane.rules.dra import check_dra_release, check_operator_dra
    from gpuplane.rules.platform import DRA_CHARTS, check_dra_driver_root

    found = [r for r in (view.release(c) for c in DRA_CHARTS) if r is not None]
    # FM32 per node, by the labels the nodes have (the DRA pools' plugin off).
    node_labels = {name(n): labels(n) for n in view.gpu_nodes(n.name for n in intent.nodes)}
    out = causes(check_operator_dra(operator, where="GPU Operator", dra_release=bool(found))
                 if operator is not None else [], "operator")
    for release in found:
        out += causes(check_dra_driver_root(release.values, intent, where=release.where)
                      + check_dra_release(release.values, intent, where=release.where,
                                          operator=operator, node_labels=node_labels,
                                          live=True), "dra")
    return out


def _rules(view: ClusterView, intent: ClusterIntent, notes: list[str]) -> list[Diagnosis]:
    """Every rule over what was collected, judged against `intent`."""
    diagnoses: list[Diagnosis] = []
    operator = view.operator_values()
    if operator is not None:
        values, where, chart = operator
        # FM28 (CDI turned off on a chart that turns it on) is advice on a choice, given
        # when the stack or program makes it; it never explains a broken GPU.
        found = [f for f in check_operator_values(values, intent, chart_version=chart,
                                                  where=where) if f.id != "FM28"]
        diagnoses += causes(found, "operator")
        diagnoses += _time_slicing(view, intent, notes)
        diagnoses += _sharing(view, intent, values, where)
    elif intent.toolkit == "operator" or intent.device_plugin == "gpu-operator":
        unseen = view.missing("helm-releases", "clusterpolicies")
        notes.append(f"not checked: {unseen}: the GPU Operator's values" if unseen else
                     "no GPU Operator release or ClusterPolicy found: its values were not "
                     "checked")
    if operator is None and intent.device_plugin == "hami":   # HAMi alone: its pools
        from gpuplane.rules.sharing import check_pools

        diagnoses += causes(check_pools(intent, where="stack"), "hami")
    release = view.release("hami")
    if release is not None:
        diagnoses += causes(check_hami_values(release.values, intent,
                                              chart_version=release.chart_version,
                                              where=release.where), "hami")
    diagnoses += causes(check_hami_nodes(view.gpu_nodes(n.name for n in intent.nodes), intent),
                        "hami")
    diagnoses += _dra(view, intent, operator[0] if operator is not None else None)
    if (unseen := view.missing("pods")) is not None:
        notes.append(f"not checked: {unseen}: GPU workloads (FM11, FM14) and the GPU "
                     "components' pods")
    plain = _live_sharing(view, intent, operator) if operator is not None else None
    diagnoses += _workloads(view, intent, plain)
    if (unseen := view.missing("runtimeclasses")) is not None:
        notes.append(f"not checked: {unseen}: whether RuntimeClass {intent.runtime_class} "
                     "exists (FM11)")
    else:
        diagnoses += health.runtimeclass(view, intent)
    return diagnoses


def _node_context(view: ClusterView, intent: ClusterIntent, node_name: str,
                  operator: tuple[dict[str, Any], str, str | None] | None) -> NodeContext:
    node = view.node(node_name) or {}
    runtime = ((node.get("status") or {}).get("nodeInfo") or {}).get("containerRuntimeVersion")
    target = None
    live = view.live_toolkit_env()
    if intent.toolkit == "operator" and live is not None and operator is not None:
        env, source = live
        chart = operator[2]
        dropin = chart_writes_dropin(chart) or any(
            isinstance(e, dict) and e.get("name") == "RUNTIME_DROP_IN_CONFIG" for e in env)
        target = ToolkitTarget.from_env(env, dropin=dropin, source=source)
    return NodeContext(node_name, intent, runtime, target,
                       view.runtime_classes_on(node_name))


def _time_slicing(view: ClusterView, intent: ClusterIntent, notes: list[str]
                  ) -> list[Diagnosis]:
    """FM10 over the ConfigMap the device plugin is told to read."""
    if intent.time_slicing_replicas <= 0 or intent.device_plugin != "gpu-operator":
        return []
    ns = view.operator_namespace() or intent.operator_namespace
    cm = view.configmap(ns, intent.time_slicing_configmap)
    where = f"ConfigMap {ns}/{intent.time_slicing_configmap}"
    if cm is None and (unseen := view.missing("configmaps")) is not None:
        notes.append(f"not checked: {unseen}: the time-slicing {where} (FM10)")
        return []
    if cm is None:
        return [Diagnosis(Finding(
            "FM10", Severity.ERROR,
            f"the time-slicing ConfigMap {intent.time_slicing_configmap} does not exist in "
            f"{ns}: the device plugin has no sharing config and nvidia.com/gpu stays at the "
            "physical count.",
            where,
            "Let gpuplane create it from `gpuplane:timeSlicing` (configMap, profile, "
            f"replicas) in `gpuplane:gpuOperator.namespace`; raw: create ConfigMap "
            f"{intent.time_slicing_configmap} in {ns} and point devicePlugin.config.name at "
            "it."), "operator")]
    return causes(check_time_slicing(cm.get("data") or {}, intent, where=where), "operator")


def _sharing(view: ClusterView, intent: ClusterIntent, values: dict[str, Any],
             where: str) -> list[Diagnosis]:
    """FM19-FM23 on the live cluster: the device plugin's ConfigMap against the operator's
    values and the nodes' `nvidia.com/device-plugin.config` labels, and the stack's own
    sharing profiles (the intent's)."""
    from gpuplane.core.sharing import PLUGIN_CONFIG_LABEL
    from gpuplane.rules._shared import lookup, mapping
    from gpuplane.rules.sharing import (
        check_mig_strategy,
        check_mps_profiles,
        check_pools,
        check_profile_keys,
    )

    found = check_pools(intent, where="stack")
    cfg = mapping(lookup(values, "devicePlugin.config"))
    cm_name, default = str(cfg.get("name") or ""), str(cfg.get("default") or "")
    ns = view.operator_namespace() or intent.operator_namespace
    cm = view.configmap(ns, cm_name) if cm_name else None
    if cm is not None:
        data = cm.get("data") or {}
        here = f"ConfigMap {ns}/{cm_name}"
        chosen = [(f"node {name(n)}", str(labels(n)[PLUGIN_CONFIG_LABEL]))
                  for n in view.snap.nodes if PLUGIN_CONFIG_LABEL in labels(n)]
        found += check_mig_strategy(values, data, where=here) \
            + check_mps_profiles(data, where=here) \
            + check_profile_keys(data, default, chosen, where=here, default_where=(
                f"{where} values.devicePlugin.config.default"))
    return causes(found, "operator")


def _live_sharing(view: ClusterView, intent: ClusterIntent,
                  operator: tuple[dict[str, Any], str, str | None]) -> PlainSharing | None:
    """FM24/FM25 on a cluster whose operator no gpuplane stack configured (no pools in the
    intent): the live operator's values, the device plugin ConfigMap they name and the GPU
    nodes' own `nvidia.com/device-plugin.config` / `nvidia.com/mig.config` labels. A
    ConfigMap named but not read: not known, not judged."""
    from gpuplane.core.sharing import MIG_CONFIG_LABEL, PLUGIN_CONFIG_LABEL
    from gpuplane.rules._shared import lookup
    from gpuplane.rules.sharing import profile_docs
    from gpuplane.rules.sharing_plain import chart_layouts, plain_sharing

    values, where, chart = operator
    if intent.sharing or intent.device_plugin != "gpu-operator":
        return None
    cm_name = str(lookup(values, "devicePlugin.config.name") or "")
    data: dict[str, Any] | None = {}
    if cm_name:
        cm = view.configmap(view.operator_namespace() or intent.operator_namespace, cm_name)
        data = (cm.get("data") or {}) if cm is not None else None
    nodes = [(labels(n).get(PLUGIN_CONFIG_LABEL), labels(n).get(MIG_CONFIG_LABEL))
             for n in view.gpu_nodes(n.name for n in intent.nodes)]
    if not nodes:
        return None
    return plain_sharing(values, None if data is None else profile_docs(data),
                         [m for _, m in nodes if m], where=where,
                         named_layouts=chart_layouts(values, chart), nodes=nodes)


def _workloads(view: ClusterView, intent: ClusterIntent,
               plain: PlainSharing | None = None) -> list[Diagnosis]:
    """FM11/FM14 for each GPU workload, checked once, at the highest controller collected:
    a Deployment, a DaemonSet, a ReplicaSet no collected Deployment owns, else its pods
    (one per controller, the first). A workload whose pods were refused (no RuntimeClass,
    a webhook) is seen only here. A pod's spec is checked as submitted: spec.nodeName of a
    live pod is the scheduler's binding (a pod that set it itself would have been refused
    by HAMi's webhook)."""
    out: list[Diagnosis] = []
    checked: set[tuple[str, str, str]] = set()
    deployments = {(namespace(d), name(d)) for d in view.snap.deployments}
    objects = [("Deployment", d) for d in view.snap.deployments]
    objects += [("DaemonSet", d) for d in view.snap.daemonsets]
    objects += [("ReplicaSet", r) for r in view.snap.replicasets
                if not any(o.get("kind") == "Deployment" and (namespace(r), o.get("name"))
                           in deployments for o in _owners(r))]
    for kind, obj in objects:
        typed = {**obj, "kind": kind}
        if not requests_of(typed):
            continue
        checked.add((kind, namespace(obj), name(obj)))
        where = f"{kind} {namespace(obj)}/{name(obj)}"
        out += causes(check_workload(typed, intent, where, plain),
                      f"workload:{namespace(obj)}/{kind}/{name(obj)}")
    owned_by = {(namespace(r), name(r)): [(o.get("kind"), o.get("name")) for o in _owners(r)]
                for r in view.snap.replicasets}
    seen: set[str] = set()
    for pod in view.gpu_pods:
        owner = next((o for o in _owners(pod) if o.get("controller")), None)
        if owner and _covered(namespace(pod), owner, checked, owned_by):
            continue
        key = f"{namespace(pod)}/{owner['kind']}/{owner['name']}" if owner else \
            f"{namespace(pod)}/Pod/{name(pod)}"
        if key in seen:
            continue
        seen.add(key)
        where = f"Pod {namespace(pod)}/{name(pod)}"
        if owner:
            where += f" (of {owner['kind']} {owner['name']})"
        # A running pod's spec.nodeName is the scheduler's binding, not the user's pin.
        spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
        findings = check_workload({**pod, "kind": "Pod", "spec": spec}, intent, where, plain)
        out += causes(findings, f"pod:{namespace(pod)}/{name(pod)}")
    return out


def _owners(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list((obj.get("metadata") or {}).get("ownerReferences") or [])


def _covered(ns: str, owner: dict[str, Any], checked: set[tuple[str, str, str]],
             owned_by: dict[tuple[str, str], list[tuple[Any, Any]]]) -> bool:
    """Whether the pod's controller, or the Deployment above its ReplicaSet, was checked."""
    kind, owner_name = str(owner.get("kind")), str(owner.get("name"))
    if (kind, ns, owner_name) in checked:
        return True
    return any((str(k), ns, str(n)) in checked for k, n in owned_by.get((ns, owner_name), []))


__all__ = ["DoctorReport", "IntentSource", "analyse"]
