"""Verdicts on what GPU count each node advertises (`status.allocatable`): FM10 when
time-slicing did not multiply it, FM12 when two device plugins fight over it, FM13 when
HAMi does not split it. Pure, on recorded Node objects; split from
`gpuplane.checks.verdicts` (which re-exports these names) to keep modules small.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuplane.checks.causes import device_plugin_fix, device_plugin_id
from gpuplane.checks.manifests import GPU
from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.rules.timeslicing import expected_allocatable as timeslicing_allocatable

HAMI_DEFAULT_SPLIT = 10        # HAMi chart's devicePlugin.deviceSplitCount


def _finding(rule: str, message: str, where: str, fix: str) -> Finding:
    return Finding(rule, Severity.ERROR, message, where, fix)


def allocatable_of(node: dict[str, Any] | None, resource: str = GPU) -> int | None:
    """`status.allocatable[resource]` of a Node object as an int (None when absent)."""
    if not node:
        return None
    value = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
    if value is None:
        return None
    try:
        return int(str(value))
    except ValueError:
        return None


def expected_allocatable(gpus: int, intent: ClusterIntent,
                         hami_split: int = HAMI_DEFAULT_SPLIT) -> int:
    """nvidia.com/gpu a node with `gpus` physical GPUs must advertise: HAMi splits each GPU
    into `hami_split` shares (`gpuplane:hami.deviceSplitCount`); otherwise the rulebook's
    time-slicing rule (physical x replicas)."""
    if intent.device_plugin == "hami":
        return gpus * hami_split
    return timeslicing_allocatable(gpus, intent)


@dataclass(frozen=True)
class AllocatableSeries:
    """The values one node advertised while the check watched it, oldest first."""

    node: NodeIntent
    values: tuple[int | None, ...] = ()
    found: bool = True            # the Node object exists


def allocatable_settled(values: Sequence[int | None], expected: int, settle: int) -> bool:
    """The last `settle` reads all equal `expected`."""
    return len(values) >= settle and all(v == expected for v in values[-settle:])


def allocatable_findings(series: AllocatableSeries, intent: ClusterIntent, settle: int = 1,
                         hami_split: int = HAMI_DEFAULT_SPLIT) -> list[Finding]:
    """FM10 (not multiplied), FM12 (flips back to physical) and friends, for one node, on
    the resource name the device plugin advertises (`ClusterIntent.gpu_resource`)."""
    node = series.node
    expected = expected_allocatable(node.gpus, intent, hami_split)
    values = series.values
    resource = intent.gpu_resource   # nvidia.com/gpu.shared under renameByDefault
    where = f"node {node.name} (status.allocatable[{resource}])"
    if allocatable_settled(values, expected, settle):
        return []
    rule = device_plugin_id(intent)
    shown = " -> ".join("none" if v is None else str(v) for v in values) or "not read"
    if not series.found:
        return [_finding(rule, f"node {node.name} is not in the cluster", where,
                         "each `gpuplane:nodes[].name` must be the Kubernetes node name "
                         "(`kubectl get nodes`)")]
    last = values[-1] if values else None
    if last is None:
        return [_finding(rule, f"node {node.name} advertises no {resource} (expected {expected}; "
                         f"seen {shown})", where, device_plugin_fix(intent, node.name))]
    if intent.device_plugin == "hami":
        if expected != node.gpus and node.gpus in values:
            return [_finding("FM12", f"node {node.name}: {resource} flips back to the physical "
                             f"count {node.gpus} (HAMi's split is {expected}; seen {shown}): "
                             "two device plugins are registering the resource", where,
                             "disable the operator's device plugin when HAMi manages the GPUs "
                             "(gpuplane sets `devicePlugin.enabled: false`; remove any "
                             "override in `gpuplane:gpuOperator.values`)")]
        return [_finding("FM13", f"node {node.name}: {resource} is {last}, HAMi should split "
                         f"{node.gpus} GPU(s) into {expected} (seen {shown})", where,
                         "set `gpuplane:hami.deviceSplitCount` as intended and "
                         "`gpuplane:nodes[].gpus` to the node's physical GPU count")]
    if intent.time_slicing_replicas > 1:
        what = ("not multiplied: it is the physical count" if last == node.gpus
                else f"{last}, not the expected")
        return [_finding("FM10", f"node {node.name}: {resource} is {what} ({node.gpus} GPU(s) x "
                         f"{intent.time_slicing_replicas} replicas = {expected}; seen "
                         f"{shown})", where,
                         "make the time-slicing config reach the device plugin: "
                         "`sharing.timeSlicing.resources` from "
                         "`gpuplane:timeSlicing.replicas`, the ConfigMap named by "
                         "`gpuplane:timeSlicing.configMap` in `gpuplane:gpuOperator.namespace`, "
                         "and a device plugin restart after changes")]
    return [_finding("FM08", f"node {node.name}: {resource} is {last}, the stack says {node.gpus} "
                     f"(seen {shown})", where,
                     "set `gpuplane:nodes[].gpus` to the node's GPU count; if it is right, a "
                     "GPU has fallen off (check `nvidia-smi` and Xid errors on the node)")]


__all__ = ["HAMI_DEFAULT_SPLIT", "AllocatableSeries", "allocatable_findings", "allocatable_of",
           "allocatable_settled", "expected_allocatable"]
