"""The rulebook's verdict on what `GpuCluster` is about to build, before it builds it.

A Pulumi program cannot stop an update with `pulumi.log.error`: the engine goes on
registering and creating resources (pulumi/pulumi#6090, closed by #6573, which documents
"Calling Error does not by itself stop processing resource operations"; pulumi/pulumi#5085).
And the policy pack's stack policies run only once every resource is registered, after
`pulumi up --skip-preview` (the Automation API's `up`) has already created them. So the
component judges its own resources first, with the pack's own collectors
(`gpuplane.policy.collect`, `gpuplane.policy.nodes`) over the values it is about to
register, and refuses before its first child when any finding is an error. The pack
then judges the same resources the same way for stacks that get past it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuplane.core.findings import Finding
from gpuplane.core.intent import INTENT_CONFIGMAP, INTENT_KEY, ClusterIntent
from gpuplane.plan.node import NodeContainerdPlan
from gpuplane.policy.collect import CONFIGMAP, RELEASE, stack_findings
from gpuplane.policy.nodes import judge_rollout, written_file_findings
from gpuplane.policy.views import View, intent_profile


def release_view(name: str, *, chart: str, version: str, namespace: str,
                 values: Mapping[str, Any]) -> View:
    """A Helm release as the pack sees it (the inputs `helm.v3.Release` registers)."""
    return View(RELEASE, name, f"planned::{name}",
                {"name": chart, "chart": chart, "version": version, "namespace": namespace,
                 "values": dict(values)})


def config_map_view(name: str, *, namespace: str, data: Mapping[str, str]) -> View:
    """A ConfigMap as the pack sees it."""
    return View(CONFIGMAP, name, f"planned::{name}",
                {"metadata": {"name": name, "namespace": namespace}, "data": dict(data)})


def node_labels_view(name: str, *, nodes: Sequence[str], labels: Mapping[str, str]) -> View:
    """gpuplane's `NodeLabels` as the pack sees it (its inputs)."""
    from gpuplane.policy.sharing import NODE_LABELS

    return View(NODE_LABELS, name, f"planned::{name}",
                {"nodes": list(nodes), "labels": dict(labels)})


def planned_findings(intent: ClusterIntent, *, releases: Sequence[View],
                     config_maps: Sequence[View],
                     node_plans: Mapping[str, NodeContainerdPlan],
                     batches: Sequence[Sequence[str]],
                     node_labels: Sequence[View] = ()) -> list[Finding]:
    """What the pack would report on the stack's releases, its time-slicing ConfigMap,
    the DRA driver's node labels, the files each node is sent (beyond the planner's own
    findings) and the rollout order: the same collectors, on the values the component is
    about to register."""
    intent_view = config_map_view(INTENT_CONFIGMAP, namespace=intent.operator_namespace,
                                  data={INTENT_KEY: intent.to_json()})
    found = [item.finding for item in stack_findings(
        [intent_view, *releases, *config_maps, *node_labels], intent).items]
    profile, version = intent_profile(intent)
    seen: set[int] = set()
    for node, plan in node_plans.items():
        if id(plan) in seen or not plan.files:
            continue
        seen.add(id(plan))
        found += written_file_findings(profile, version, plan.files,
                                       where=f"Command containerd-{node}")
    found += judge_rollout(intent, batches, node_plans)
    return list(dict.fromkeys(found))


__all__ = ["config_map_view", "node_labels_view", "planned_findings", "release_view"]
