"""Resources as the engine presents them → rulebook calls → findings, each tied to the
URN of the resource it is about. Shared by every policy of the pack and the offline plan,
so a rule runs once per stack however many policies report it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from gpuplane.core.chartsource import chart_name_of, release_version
from gpuplane.core.findings import Finding, levelled
from gpuplane.core.intent import INTENT_CONFIGMAP, INTENT_KEY, ClusterIntent, NodeIntent
from gpuplane.policy.nodes import NODE_AGENT_POD, node_findings, plan_programs
from gpuplane.policy.views import Located, StackFindings, View
from gpuplane.rules.sharing_plain import PlainSharing
from gpuplane.rules.toolkit_version import toolkit_version
from gpuplane.toolkit.options import NEWEST_TOOLKIT

RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
RUNTIMECLASS = "kubernetes:node.k8s.io/v1:RuntimeClass"
GPU_CLUSTER = "gpuplane:index:GpuCluster"
COMMAND = "command:remote:Command"
NODE_COMMANDS = frozenset({COMMAND, NODE_AGENT_POD})
# Between two batches of a pod rollout: batch k+1 depends on it, it on batch k
# (gpuplane.stack.barrier).
ROLLOUT_BARRIER = "pulumi-python:dynamic/gpuplane:RolloutBarrier"
WORKLOADS: dict[str, tuple[str, str]] = {
    "kubernetes:core/v1:Pod": ("v1", "Pod"),
    "kubernetes:core/v1:ReplicationController": ("v1", "ReplicationController"),
    "kubernetes:batch/v1:Job": ("batch/v1", "Job"),
    "kubernetes:batch/v1:CronJob": ("batch/v1", "CronJob"),
    "kubernetes:apps/v1:Deployment": ("apps/v1", "Deployment"),
    "kubernetes:apps/v1:StatefulSet": ("apps/v1", "StatefulSet"),
    "kubernetes:apps/v1:DaemonSet": ("apps/v1", "DaemonSet"),
    "kubernetes:apps/v1:ReplicaSet": ("apps/v1", "ReplicaSet"),
}


def intent_of(views: Iterable[View]) -> ClusterIntent | None:
    """The stack's intent from its `gpuplane-intent` ConfigMap, if it has one (the first,
    where a program builds several GpuClusters: `intents_of` gives them all)."""
    found = intents_of(views)
    return found[0][1] if found else None


def intents_of(views: Iterable[View]) -> list[tuple[View, ClusterIntent]]:
    """Every `gpuplane-intent` ConfigMap of the stack (one per GpuCluster) and its intent."""
    out = []
    for v in views:
        meta = v.props.get("metadata") or {}
        if v.type == CONFIGMAP and meta.get("name") == INTENT_CONFIGMAP:
            text = (v.props.get("data") or {}).get(INTENT_KEY)
            if isinstance(text, str):
                out.append((v, ClusterIntent.from_json(text)))
    return out


def intent_from_config(config: Mapping[str, Any] | None) -> ClusterIntent:
    """Cluster facts from the pack config, for workload stacks without gpuplane's intent."""
    cfg = dict(config or {})
    gpus = int(cfg.get("maxGpusPerNode", 0) or 0)
    distro = str(cfg.get("distro", ClusterIntent.distro))
    base_dir = str(cfg.get("containerdBaseDir") or "").rstrip("/")
    return ClusterIntent(
        distro=distro,
        # k8s-snap's layout only (gpuplane.distros.profiles.profile); "/" is the default.
        containerd_base_dir=base_dir or None if distro == "k8s-snap" else None,
        platform=cfg.get("platform") or None,
        containerd_version=str(cfg.get("containerdVersion", ClusterIntent.containerd_version)),
        nvidia_default=bool(cfg.get("nvidiaDefault", False)),
        runtime_class=str(cfg.get("runtimeClass", "nvidia")),
        device_plugin=cfg.get("devicePlugin", "gpu-operator"),
        cdi=bool(cfg.get("cdi", False)),
        nri=bool(cfg.get("nri", False)),
        kubernetes_version=str(cfg.get("kubernetesVersion", ClusterIntent.kubernetes_version)),
        nodes=(NodeIntent("any", gpus),) if gpus else (),
    )


def workload_findings(view: View, intent: ClusterIntent,
                      plain: PlainSharing | None = None) -> list[Finding]:
    from gpuplane.rules.workloads import check_workload

    api_version, kind = WORKLOADS[view.type]
    obj = {**view.props, "apiVersion": api_version, "kind": kind}
    meta = obj.get("metadata") or {}
    where = f"{kind} {meta.get('namespace', 'default')}/{meta.get('name', view.name)}"
    return check_workload(obj, intent, where, plain)


# DRA claims, in each API version the engine may present (resource.k8s.io v1 from 1.34).
CLAIMS = frozenset(f"kubernetes:resource.k8s.io/{version}:{kind}"
                   for version in ("v1", "v1beta1", "v1beta2")
                   for kind in ("ResourceClaim", "ResourceClaimTemplate"))


def claim_findings(view: View, intent: ClusterIntent) -> list[Finding]:
    """FM37 over one ResourceClaim or ResourceClaimTemplate."""
    from gpuplane.rules.dra_workloads import check_claim

    kind = view.type.rsplit(":", 1)[-1]
    meta = view.props.get("metadata") or {}
    where = f"{kind} {meta.get('namespace', 'default')}/{meta.get('name', view.name)}"
    return check_claim({**view.props, "kind": kind}, intent, where)


def stack_findings(views: list[View], fallback: ClusterIntent,
                   config: Mapping[str, Any] | None = None) -> StackFindings:
    """Every rule over one stack's resources. A stack without gpuplane's intent (one
    gpuplane did not make) is judged from `fallback`, the pack config's facts. A stack
    with several GpuClusters (several intents) has each cluster judged by its own intent,
    on its own resources, every finding naming its cluster (`GpuCluster <name>: where`)."""
    intents = intents_of(views)
    if len(intents) <= 1:
        return _cluster_findings(views, intents[0][1] if intents else None, fallback, config)
    out = StackFindings()
    for label, intent, group in clusters(views, intents):
        mine = _cluster_findings(group, intent, fallback, config)
        out.items += [Located(named(item.finding, label), item.urn) for item in mine.items]
    return out


def cluster_label(name: str) -> str:
    """How a finding names the GpuCluster it belongs to."""
    return f"GpuCluster {name}"


def named(f: Finding, label: str) -> Finding:
    """`f` with the cluster it belongs to in front of its `where`."""
    return replace(f, where=f"{label}: {f.where}")


def clusters(views: list[View], intents: list[tuple[View, ClusterIntent]]
             ) -> list[tuple[str, ClusterIntent, list[View]]]:
    """Per intent: the cluster's label, its intent and the resources it judges. A
    GpuCluster's resources are the descendants of the component that holds its intent
    ConfigMap. A resource in no such component (the program's own workloads and
    RuntimeClasses) goes with the clusters whose resources share its provider; with none,
    to every cluster (where it runs is not known from the stack, so it must suit each)."""
    parent = {v.urn: v.parent for v in views}
    by_urn = {v.urn: v for v in views}
    scopes = [(v.parent, _label(v, by_urn.get(v.parent)), intent) for v, intent in intents]
    owned = {scope for scope, _, _ in scopes if scope}
    home: dict[str, str | None] = {}
    for v in views:
        at = v.parent
        while at and at not in owned:
            at = parent.get(at, "")
        home[v.urn] = at or None
    providers: dict[str, set[str]] = {}
    for v in views:
        scope = home[v.urn]
        if scope is not None and v.provider:
            providers.setdefault(scope, set()).add(v.provider)
    out = []
    for scope, label, intent in scopes:
        group = []
        for v in views:
            where = home[v.urn]
            if where is not None:
                if where == scope:
                    group.append(v)
                continue
            matched = [s for s, _, _ in scopes if v.provider in providers.get(s, ())]
            if scope in matched or not matched:
                group.append(v)
        out.append((label, intent, group))
    return out


def _label(intent_view: View, holder: View | None) -> str:
    """The GpuCluster (or other component) holding an intent ConfigMap, by name; an intent
    declared at the stack's root, by its own resource name."""
    if holder is not None:
        return cluster_label(holder.name) if holder.type == GPU_CLUSTER \
            else f"{holder.type.rsplit(':', 1)[-1]} {holder.name}"
    if intent_view.parent:   # the holder is not among the views: its URN names it
        kind, _, name = intent_view.parent.rpartition("::")
        return cluster_label(name) if kind.endswith(GPU_CLUSTER) else name
    return f"ConfigMap {intent_view.name}"


def _cluster_findings(views: list[View], intent: ClusterIntent | None,
                      fallback: ClusterIntent, config: Mapping[str, Any] | None
                      ) -> StackFindings:
    """Every rule over one cluster's resources, judged by `intent` (None: not gpuplane's)."""
    out = StackFindings()
    judge = intent or fallback
    plain = None
    if intent is None:
        from gpuplane.policy.foreign import plain_operator_sharing, runs_nri

        # A plain release in NRI plugin mode decides what its workloads may name (FM26),
        # its device plugin's profiles what they may ask for (FM24/FM25).
        if not fallback.nri and runs_nri(views):
            judge = replace(fallback, nri=True)
        if judge.device_plugin == "gpu-operator":
            plain = plain_operator_sharing(views)
    for v in views:
        if v.type in WORKLOADS:
            out.add(workload_findings(v, judge, plain), v.urn)
        elif v.type in CLAIMS:
            out.add(claim_findings(v, judge), v.urn)
    if intent is None:   # not a gpuplane stack: its GPU installs, judged from the config
        from gpuplane.policy.foreign import foreign_findings

        foreign_findings(views, config or {}, fallback, out)
        return out
    releases = [v for v in views if v.type == RELEASE]
    for v in views:
        if v.type == RELEASE:
            _release(v, intent, out, releases, views)
        elif v.type == CONFIGMAP and intent.time_slicing_replicas > 0:
            _time_slicing(v, intent, out)
    _runtime_classes(views, intent, out)
    operator = [v for v in views if v.type == RELEASE and _chart(v) == "gpu-operator"]
    from gpuplane.policy.sharing import sharing_findings

    for f, urn in sharing_findings(views, [(v.props.get("values") or {},
                                            f"Release {v.props.get('name', v.name)}", v.urn)
                                           for v in operator], intent):
        out.add([f], urn)
    version = (release_version(operator[0].props) or "") if operator else ""
    values = (operator[0].props.get("values") or {}) if operator else {}
    found = toolkit_version(values, version)
    node_findings([v for v in views if v.type in NODE_COMMANDS], intent, out,
                  toolkit=".".join(str(p) for p in found[0]) if found else NEWEST_TOOLKIT,
                  operator_chart=version or None, programs=plan_programs(views),
                  barriers={v.urn: v.dependencies for v in views if v.type == ROLLOUT_BARRIER})
    if intent.rule_levels:   # the stack's own `gpuplane:rules`, as the program applies them
        nodes = {v.urn for v in views if v.type in NODE_COMMANDS}
        out.items = [Located(f, item.urn) for item in out.items
                     for f in ([item.finding] if item.urn in nodes
                               else levelled([item.finding], intent.rule_levels))]
    return out


def _runtime_classes(views: list[View], intent: ClusterIntent, out: StackFindings) -> None:
    """FM11: the RuntimeClasses the stack declares, against the runtimes its intent gives
    the nodes (the operator's toolkit, the host's toolkit, the platform's config)."""
    from gpuplane.rules.device_plugins import check_runtime_class_handlers, node_runtime_handlers

    classes = [v for v in views if v.type == RUNTIMECLASS]
    if not classes:
        return
    handlers, source = node_runtime_handlers(intent)
    for v in classes:
        where = f"RuntimeClass {(v.props.get('metadata') or {}).get('name', v.name)}"
        out.add(check_runtime_class_handlers([(where, v.props)], handlers, source=source),
                v.urn)


def _chart(v: View) -> str | None:
    """The chart a Release installs, whatever its source: a name, `oci://.../<chart>`, or
    a local chart (Chart.yaml's name; where the path cannot be read from here, e.g. in a
    policy pack's own directory, the release's name, which gpuplane sets to the chart's)."""
    chart = v.props.get("chart")
    if not isinstance(chart, str) or not chart:
        return None
    name = v.props.get("name")
    return chart_name_of(chart, fallback=name if isinstance(name, str) else None)


def _release(v: View, intent: ClusterIntent, out: StackFindings,
             releases: list[View], views: list[View]) -> None:
    from gpuplane.rules.platform import DRA_CHARTS

    chart = _chart(v)
    values = v.props.get("values") or {}
    version = release_version(v.props)
    where = f"Release {v.props.get('name', v.name)}"
    dra = any(_chart(r) in DRA_CHARTS for r in releases)
    if chart == "gpu-operator":
        from gpuplane.rules.dra import check_operator_dra
        from gpuplane.rules.operator import check_operator_values

        out.add(check_operator_values(values, intent, chart_version=version, where=where),
                v.urn)
        out.add(check_operator_dra(values, where=where, dra_release=dra, ours=True), v.urn)
    elif chart == "hami":
        from gpuplane.rules.hami import check_hami_values

        out.add(check_hami_values(values, intent, chart_version=version, where=where), v.urn)
    elif chart in DRA_CHARTS:
        from gpuplane.rules.dra import check_dra_release
        from gpuplane.rules.dra_facts import DRA_NEWEST
        from gpuplane.rules.pinning import check_chart_version
        from gpuplane.rules.platform import check_dra_driver_root

        operator = [r for r in releases if _chart(r) == "gpu-operator"]
        out.add(check_chart_version(version, chart=chart, where=where,
                                    stack_key="gpuplane:draDriver.chartVersion",
                                    example=DRA_NEWEST), v.urn)
        out.add(check_dra_driver_root(values, intent, where=where), v.urn)
        from gpuplane.policy.sharing import node_labels_of

        out.add(check_dra_release(
            values, intent, where=where, node_labels=node_labels_of(views),
            operator=(operator[0].props.get("values") or {}) if operator else None,
            operator_where=f"Release {operator[0].props.get('name', operator[0].name)}"
            if operator else ""), v.urn)


def _time_slicing(v: View, intent: ClusterIntent, out: StackFindings) -> None:
    from gpuplane.rules.timeslicing import check_time_slicing

    meta = v.props.get("metadata") or {}
    if meta.get("name") != intent.time_slicing_configmap:
        return
    where = f"ConfigMap {meta.get('namespace', 'default')}/{meta.get('name')}"
    out.add(check_time_slicing(v.props.get("data") or {}, intent, where=where), v.urn)

__all__ = ["COMMAND", "GPU_CLUSTER", "NODE_AGENT_POD", "NODE_COMMANDS", "RELEASE",
           "ROLLOUT_BARRIER", "WORKLOADS",
           "Located", "StackFindings", "View", "cluster_label", "clusters",
           "intent_from_config", "intent_of", "intents_of", "named", "stack_findings",
           "workload_findings"]
