"""Verdicts on what each node advertises (`status.allocatable`), per resource name: FM10
when time-slicing did not multiply it, a pool's MIG instances are short or MIG Manager has
not finished the layout, FM12 when two device plugins fight over it, FM13 when HAMi does
not split it. Pure, on recorded Node objects; split from
`gpuplane.checks.verdicts` (which re-exports these names) to keep modules small.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplane.checks.causes import device_plugin_fix, device_plugin_id
from gpuplane.checks.manifests import GPU
from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.rules.advertised import (
    DEVICE_PLUGIN_DEPLOY_LABEL,
    MIG_CONFIG_LABEL,
    MIG_STATE_LABEL,
    PAUSED,
    MigManagerState,
    expected_resources,
    is_mig_resource,
    mig_manager_state,
)

HAMI_DEFAULT_SPLIT = 10        # HAMi chart's devicePlugin.deviceSplitCount

# The label every GPU node carries under each device plugin, for a LIST of the GPU nodes
# rather than every node of the cluster: the GPU Operator labels each node with an NVIDIA
# PCI device `nvidia.com/gpu.present=true` (controllers/state_manager.go
# `commonGPULabelKey`, `labelGPUNodes`, NVIDIA/gpu-operator@04751ec7); gpuplane labels
# HAMi's nodes `gpu=on` itself (its `NodeLabels`, which HAMi's device plugin selects). A
# node without it is still read (gpuplane.checks.live._read_nodes): a lost label is what a
# finding is about, not a node to skip.
GPU_NODE_SELECTORS = {"gpu-operator": "nvidia.com/gpu.present=true", "hami": "gpu=on"}


def gpu_node_selector(intent: ClusterIntent) -> str | None:
    """The label selector that finds the intent's GPU nodes; None: list every node."""
    return GPU_NODE_SELECTORS.get(intent.device_plugin)


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
    """The count of the one resource a node with `gpus` physical GPUs and no pool map of
    its own advertises (`gpuplane.rules.advertised.expected_resources`, which says it for
    every resource name)."""
    return next(iter(expected_resources(NodeIntent("", gpus), intent, hami_split).values()))


@dataclass(frozen=True)
class AllocatableSeries:
    """The values one node advertised for one resource while the check watched it, oldest
    first, and the node's labels at the last read (MIG Manager's state)."""

    node: NodeIntent
    values: tuple[int | None, ...] = ()
    found: bool = True            # the Node object exists
    resource: str = ""            # "": the node's first expected resource
    labels: Mapping[str, str] = field(default_factory=dict)


def allocatable_settled(values: Sequence[int | None], expected: int, settle: int) -> bool:
    """The last `settle` reads all equal `expected`."""
    return len(values) >= settle and all(v == expected for v in values[-settle:])


def allocatable_findings(series: AllocatableSeries, intent: ClusterIntent, settle: int = 1,
                         hami_split: int = HAMI_DEFAULT_SPLIT) -> list[Finding]:
    """FM10 (not multiplied, a MIG count short or still being reconfigured), FM12 (flips
    back to physical) and friends, for one node and one resource name it must advertise
    (`gpuplane.rules.advertised.expected_resources`)."""
    node = series.node
    wanted = expected_resources(node, intent, hami_split)
    resource = series.resource or next(iter(wanted))
    expected = wanted.get(resource, 0)
    values = series.values
    where = f"node {node.name} (status.allocatable[{resource}])"
    if allocatable_settled(values, expected, settle):
        return []
    rule = device_plugin_id(intent)
    shown = " -> ".join("none" if v is None else str(v) for v in values) or "not read"
    if not series.found:
        return [_finding(rule, f"node {node.name} is not in the cluster", where,
                         "each `gpuplane:nodes[].name` must be the Kubernetes node name "
                         "(`kubectl get nodes`)")]
    mig = mig_manager_state(series.labels)
    if mig is not None and (mig.reconfiguring or mig.failed):
        return [_mig_manager_finding(node, mig, wanted)]
    last = values[-1] if values else None
    if node.resources:
        return [_pool_finding(node, resource, expected, last, shown, where)]
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


def _pool_finding(node: NodeIntent, resource: str, expected: int, last: int | None,
                  shown: str, where: str) -> Finding:
    """FM10: a pool with its own sharing (MIG instances, its own replicas) advertises a
    resource short, or not at all: the layout or the plugin's config for the pool did not
    reach the node."""
    got = "none" if last is None else str(last)
    kind = "MIG instances" if is_mig_resource(resource) else "shared slots"
    return _finding("FM10", f"node {node.name} (pool {node.pool}): {resource} is {got}, "
                    f"expected {expected} {kind} (seen {shown})", where,
                    f"make pool {node.pool}'s sharing reach the node: its "
                    "`nvidia.com/mig.config` and `nvidia.com/device-plugin.config` labels "
                    "must name the layout and the device plugin config the stack renders "
                    "(`kubectl get node --show-labels`), the MIG layout must fit the GPU "
                    "(`nvidia-smi mig -lgi` on the node) and the device plugin must have "
                    "restarted since (`gpuplane:nodes[].gpus` must be the physical count)")


def _mig_manager_finding(node: NodeIntent, mig: MigManagerState,
                         wanted: Mapping[str, int]) -> Finding:
    """FM10, said as what it is: MIG Manager has not finished (or failed) the node's
    layout, so its counts are not final; the GPU is not broken."""
    counts = ", ".join(f"{r} x {c}" for r, c in wanted.items())
    where = f"node {node.name} (labels {MIG_STATE_LABEL}, {MIG_CONFIG_LABEL})"
    if mig.failed:
        return _finding("FM10", f"node {node.name}: MIG Manager failed to apply its MIG "
                        f"layout ({mig.describe()}), so it does not advertise {counts}; "
                        "the GPU itself is not known to be broken", where,
                        "read why in the log of the nvidia-mig-manager pod on the node "
                        "(`kubectl logs -n <operator namespace> -l app=nvidia-mig-manager`); "
                        "usually the layout does not fit the GPU model or GPU clients held "
                        "the GPU; fix the pool's MIG profile, then relabel the node with it")
    wedged = (" If it stays so, MIG Manager may be wedged with the GPU clients paused "
              "(NVIDIA/gpu-operator#2833)." if mig.plugin_paused and mig.state == "pending"
              else "")
    return _finding("FM10", f"node {node.name} is still being reconfigured by MIG Manager "
                    f"({mig.describe()}): its counts ({counts}) are not final; this is not a "
                    f"broken GPU.{wedged}", where,
                    "wait for the state to become `success` (a `rebooting` node waits for "
                    "its reboot) and run the checks again (`pulumi up`), or raise "
                    "`gpuplane:checks.timeoutSeconds`; a node wedged at `pending` with "
                    f"`{DEVICE_PLUGIN_DEPLOY_LABEL}={PAUSED}` needs the nvidia-mig-manager "
                    "pod on it deleted, so it applies the layout again")


__all__ = ["HAMI_DEFAULT_SPLIT", "AllocatableSeries", "allocatable_findings", "allocatable_of",
           "allocatable_settled", "expected_allocatable", "expected_resources"]
