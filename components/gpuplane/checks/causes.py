"""Which rule a check pod's trouble points at: the event table's cause (shared with the
doctor, `gpuplane.rules.events`) turned into one rule id and a fix that names stack keys.

The checks know the stack's intent, so where the table lists several candidate rules they
pick one (HAMi or the operator's device plugin, time-slicing, nvidia as the default
runtime). Pure: `gpuplane.checks.verdicts` calls these on recorded objects.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuplane.core.intent import ClusterIntent
from gpuplane.rules.events import first_cause


def gpu_path_id(intent: ClusterIntent) -> str:
    """The failure mode behind "a pod gets no GPU": no runtime class (FM11) or a runtime
    that containerd does not really have (FM01)."""
    return "FM11" if intent.nvidia_default else "FM01"


def no_gpu_fix(intent: ClusterIntent, node: str) -> str:
    if intent.nvidia_default:
        return (f"nvidia is not really containerd's default runtime on {node}: set "
                "`gpuplane:runtime.nvidiaDefault: false` so GPU pods use "
                f"runtimeClassName `{intent.runtime_class}`, or fix the node's default "
                "runtime (`gpuplane containerd check` on the node)")
    return (f"the `{intent.runtime_class}` runtime on {node} did not inject the driver: run "
            "`gpuplane containerd check` on the node and make `gpuplane:cluster.distro` "
            "(and `gpuplane:cluster.containerdBaseDir` for k8s-snap) match the containerd "
            "the kubelet uses")


def device_plugin_id(intent: ClusterIntent) -> str:
    """Who is to blame when a node advertises no (or the wrong number of) GPUs."""
    if intent.device_plugin == "hami":
        return "FM13"
    return "FM10" if intent.time_slicing_replicas > 1 else "FM01"


def device_plugin_fix(intent: ClusterIntent, node: str) -> str:
    if intent.device_plugin == "hami":
        return (f"HAMi's device plugin is not serving {node}: label the node `gpu=on`, keep "
                "`gpuplane:gpuOperator.cdi: false`, set `gpuplane:hami.schedulerImageTag` to "
                "the cluster's version and make sure the operator's device plugin is off")
    return (f"the operator's device plugin is not serving {node}: it waits for the toolkit "
            "validation, which fails while containerd lacks the nvidia runtime; run "
            "`gpuplane containerd check` on the node and check `gpuplane:cluster.distro`")


def _event_rule(key: str, intent: ClusterIntent) -> str:
    """The one rule id the checks report for a cause of the event table: the checks know
    the stack's intent, so they pick among the table's candidates."""
    hami = intent.device_plugin == "hami"
    return {
        "no-runtime": "FM01",
        "no-runtimeclass": "FM11",
        "cdi": "FM13" if hami else ("FM16" if intent.containerd_version.startswith("1.6")
                                    else "FM01"),
        "glibc": "FM15",
        "admission": "FM12" if hami else device_plugin_id(intent),
        "insufficient-shares": "FM13",
        "node-not-ready": "FM02",
        "image-pull": gpu_path_id(intent),
        "oom": gpu_path_id(intent),
    }.get(key) or device_plugin_id(intent)     # insufficient, node-affinity, taint


# The fix the checks print for each cause of `gpuplane.rules.events.EVENT_CAUSES`
# ("" = the device plugin's fix for the node); {node} and {rc} are filled in.
_EVENT_FIXES = {
    "no-runtime":
        "containerd on the node has no `{rc}` runtime: the toolkit wrote a file this "
        "containerd does not read. Run `gpuplane containerd check` on the node; set "
        "`gpuplane:cluster.distro` (and `gpuplane:cluster.containerdBaseDir` for "
        "k8s-snap) to match it",
    "no-runtimeclass":
        "create the RuntimeClass: set `gpuplane:runtime.createRuntimeClass: true` (or "
        "`auto` with the operator's `operator.runtimeClass` equal to "
        "`gpuplane:runtime.name`)",
    "cdi":
        "CDI devices were requested that containerd cannot resolve: set "
        "`gpuplane:gpuOperator.cdi: false`, or use containerd >= 1.7 with CDI enabled",
    "glibc":
        "the toolkit image does not fit the node OS: set `gpuplane:nodes[].os` to the "
        "node's OS or `gpuplane:gpuOperator.toolkitImage` to a matching flavour",
    "admission":
        "the kubelet on {node} could not get the GPUs the scheduler counted from the "
        "device plugin: two device plugins may register the resource (gpuplane sets "
        "`devicePlugin.enabled: false` with HAMi; remove any override in "
        "`gpuplane:gpuOperator.values`) or the device plugin restarted; check its pods",
    "insufficient-shares":
        "the pod reached the default scheduler, not hami-scheduler: HAMi's webhook did "
        "not mutate it; set `gpuplane:hami.webhookFailurePolicy: Fail`, check "
        "`gpuplane:hami.namespace` and that hami-scheduler is running; or lower "
        "`gpuplane:checks.hamiGpuMem` below a card's memory",
    "insufficient": "",
    "node-not-ready":
        "{node} is not ready: a containerd that lost runc or refused its config takes "
        "the node down; run `gpuplane containerd check` and `journalctl -u containerd` "
        "on the node, or `gpuplane doctor`",
    "node-affinity":
        "no node has `kubernetes.io/hostname={node}`: each `gpuplane:nodes[].name` "
        "must be the Kubernetes node name",
    "untolerated-taint":
        "{node} has a taint the checks do not tolerate (they tolerate "
        "nvidia.com/gpu:NoSchedule only); remove it or run the checks elsewhere",
    "image-pull":
        "the check image could not be pulled on {node}: set `gpuplane:checks.image` to "
        "an image the node can pull (it must have python3), or "
        "`gpuplane:checks.sample: probe` if the vectoradd image is unreachable",
    "oom":
        "the check container ran out of memory on {node}; the image at "
        "`gpuplane:checks.image` may load too much at start",
}


def classify(texts: Sequence[str], intent: ClusterIntent, node: str) -> tuple[str, str] | None:
    """(rule id, fix) for the most specific known symptom in `texts` (the rulebook's event
    table, `gpuplane.rules.events`, shared with the doctor), else None. Under DRA a claim
    the scheduler cannot satisfy comes first (FM38, checks.dra)."""
    if intent.dra and (not intent.dra_pools or any(
            n.name == node and intent.dra_serves(n) for n in intent.nodes)):
        from gpuplane.checks.dra import dra_cause

        claimed = dra_cause(texts, node)
        if claimed is not None:
            return claimed
    found = first_cause(texts)
    if found is None:
        return None
    key = found[0].key
    fix = _EVENT_FIXES[key] or device_plugin_fix(intent, node)
    return _event_rule(key, intent), fix.format(node=node, rc=intent.runtime_class)


__all__ = ["classify", "device_plugin_fix", "device_plugin_id", "gpu_path_id", "no_gpu_fix"]
