"""The doctor's view of GPU sharing on a live node: MIG Manager's state labels (a node
whose layout is still being applied, or failed, is reported as that and not as a broken
GPU) and the counts a pool with its own sharing advertises per resource name.

What MIG Manager's labels mean, and the wedge of NVIDIA/gpu-operator#2833, are stated
with their sources in `gpuplane.rules.advertised`.
"""

from __future__ import annotations

from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.doctor.cluster import gpu_count, name
from gpuplane.doctor.diagnosis import Evidence, Symptom
from gpuplane.rules.advertised import (
    DEVICE_PLUGIN_DEPLOY_LABEL,
    PAUSED,
    MigManagerState,
    expected_resources,
)


def mig_manager_symptom(node: dict[str, Any], mig: MigManagerState) -> Symptom:
    """A node whose MIG layout MIG Manager is still applying (`pending`, `rebooting`) or
    failed to apply: its device plugin is paused or advertises a layout that is not the
    one asked for, which is not a broken GPU. `pending` with the device plugin paused is
    also how MIG Manager wedges when shutting down the GPU clients failed
    (NVIDIA/gpu-operator#2833), which a snapshot cannot tell from work in progress."""
    have = {r: v for r, v in ((node.get("status") or {}).get("allocatable") or {}).items()
            if r.startswith("nvidia.com/")}
    shown = ", ".join(f"{r}: {v}" for r, v in sorted(have.items())) or "no nvidia.com/ resource"
    evidence = Evidence(f"Node {name(node)} labels", f"{mig.describe()}; advertises {shown}")
    where = f"Node {name(node)}"
    logs = ("`kubectl logs -n <operator namespace> -l app=nvidia-mig-manager` on the node "
            "says why")
    if mig.failed:
        finding = Finding(
            "FM10", Severity.ERROR,
            f"MIG Manager failed to apply MIG layout {mig.config!r} on node {name(node)} "
            f"(nvidia.com/mig.config.state=failed); it advertises {shown}. The GPU is not "
            "known to be broken: the layout did not apply (often a profile that does not fit "
            "the GPU model, or a GPU client holding the GPU).",
            where, f"{logs}; fix the pool's MIG profile (`nvidia.com/mig.config`) and "
            "relabel the node, which makes MIG Manager try again.")
    else:
        wedged = (f" If this lasts more than a few minutes with {DEVICE_PLUGIN_DEPLOY_LABEL}="
                  f"{PAUSED}, MIG Manager is wedged: it aborted and waits for a label change "
                  "that never comes (NVIDIA/gpu-operator#2833)."
                  if mig.plugin_paused and mig.state == "pending" else "")
        finding = Finding(
            "FM10", Severity.WARNING,
            f"node {name(node)} is being reconfigured by MIG Manager (layout {mig.config!r}, "
            f"nvidia.com/mig.config.state={mig.state}): it advertises {shown} until the "
            f"layout is applied; this is not a broken GPU.{wedged}",
            where, f"Wait for the state `success` (a `rebooting` node waits for its reboot); "
            f"{logs}. A wedged node: delete the nvidia-mig-manager pod on it, so it applies "
            "the layout again.")
    return Symptom(("FM10",), (f"node:{name(node)}", "operator"), evidence, finding)


def pool_counts(node: dict[str, Any], want: NodeIntent, intent: ClusterIntent) -> list[Symptom]:
    """FM10: a pool with its own sharing (MIG instances per profile, its own replicas)
    whose node advertises a resource short of the stack's count."""
    out = []
    for resource, expected in expected_resources(want, intent).items():
        have = gpu_count(node, "allocatable", resource)
        if have == expected:
            continue
        evidence = Evidence(f"Node {name(node)} status.allocatable",
                            f"{resource}: {have:g} (expected {expected})")
        out.append(Symptom(("FM10",), (f"node:{name(node)}", "operator", "cluster"), evidence,
                           Finding(
            "FM10", Severity.ERROR,
            f"node {name(node)} (pool {want.pool}) advertises {have:g} {resource}, the stack "
            f"expects {expected}: the pool's MIG layout or device plugin config did not "
            "reach the node.",
            f"Node {name(node)}",
            "Check the node's `nvidia.com/mig.config` and `nvidia.com/device-plugin.config` "
            "labels against the pool's sharing in the stack, `nvidia-smi mig -lgi` on the "
            "node, and restart the device plugin after a change (`kubectl rollout restart "
            "ds/nvidia-device-plugin-daemonset`).")))
    return out


__all__ = ["mig_manager_symptom", "pool_counts"]
