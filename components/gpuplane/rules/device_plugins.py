"""The GPU objects a stack declares itself, beside the charts that run the GPU stack:
device-plugin DaemonSets (FM12: every NVIDIA device plugin registers `nvidia.com/gpu` with
the kubelet, and with two on a node each overwrites the other's count) and RuntimeClasses
(FM11: a handler no containerd runtime on the nodes has fails every pod that names it).

What counts as a device plugin: a DaemonSet running NVIDIA's `k8s-device-plugin` image or
HAMi's device plugin, or named `*device-plugin*` (the names both charts give theirs, and
what `kubectl apply` of NVIDIA's static manifest creates).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules._shared import finding, items, mapping

_IMAGES = ("k8s-device-plugin", "hami", "vgpu-device-plugin")


def is_device_plugin(obj: Mapping[str, Any]) -> bool:
    """Whether a DaemonSet object runs an NVIDIA (or HAMi) device plugin."""
    name = str(mapping(mapping(obj).get("metadata")).get("name") or "")
    spec = mapping(mapping(mapping(mapping(obj).get("spec")).get("template")).get("spec"))
    images = [str(mapping(c).get("image") or "") for c in items(spec.get("containers"))]
    return "device-plugin" in name or any(
        part in image for image in images for part in _IMAGES)


def check_device_plugin_daemonsets(daemonsets: Sequence[tuple[str, Mapping[str, Any]]], *,
                                   installed: Sequence[str]) -> list[Finding]:
    """FM12 for each device-plugin DaemonSet (`(where, object)`) when another plugin is
    there too: another such DaemonSet, or one of `installed` (what the stack's chart
    installs run: "the GPU Operator's device plugin", "HAMi's device plugin")."""
    plugins = [(where, obj) for where, obj in daemonsets if is_device_plugin(obj)]
    out = []
    for where, _obj in plugins:
        others = [w for w, _ in plugins if w != where] + list(installed)
        if not others:
            continue
        out.append(finding(
            "FM12",
            f"{where} runs a device plugin beside {', '.join(others)}: two device plugins "
            "register nvidia.com/gpu on every GPU node and overwrite each other's count.",
            where,
            "Keep one device plugin: remove this DaemonSet, or turn the chart's own off "
            "(GPU Operator: --set devicePlugin.enabled=false; HAMi: "
            "--set devicePlugin.enabled=false)."))
    return out


def node_runtime_handlers(intent: ClusterIntent) -> tuple[tuple[str, ...], str]:
    """The containerd runtimes (RuntimeClass handlers) the GPU nodes get, and what gives
    them: the GPU Operator's toolkit names its runtime after `operator.runtimeClass`
    (CONTAINERD_RUNTIME_CLASS, gpuplane.toolkit.operator) beside `nvidia-cdi` and
    `nvidia-legacy` (gpuplane.toolkit.output); the host's toolkit gets the one runtime
    gpuplane writes (`gpuplane:runtime.name`, plan.node); a platform's image defines the
    runtime `runtime.name` names (FM11-platform-runtime holds that). runc everywhere."""
    name = intent.runtime_class
    if intent.toolkit == "operator" and intent.nri:
        # NRI plugin mode: the toolkit writes no runtime (toolkit/options.py, FM11-nri).
        return ("runc",), "the GPU Operator's toolkit in NRI plugin mode (no nvidia runtime)"
    if intent.toolkit == "operator":
        return (tuple(dict.fromkeys((name, "nvidia-cdi", "nvidia-legacy", "runc"))),
                "the GPU Operator's toolkit")
    if intent.toolkit == "host":
        return (tuple(dict.fromkeys((name, "runc"))),
                f"the host's toolkit: the runtime {name!r} gpuplane:runtime.name names")
    return tuple(dict.fromkeys((name, "runc"))), "the platform's containerd config"


def gpu_runtime_classes(intent: ClusterIntent) -> tuple[str, ...]:
    """The RuntimeClasses that give a pod the nvidia runtime: one per nvidia runtime of
    `node_runtime_handlers` (the operator creates each; without it, `gpuplane:runtime.name`
    is the one gpuplane creates or the cluster has)."""
    return tuple(h for h in node_runtime_handlers(intent)[0] if h != "runc")


def check_runtime_class_handlers(runtime_classes: Sequence[tuple[str, Mapping[str, Any]]],
                                 handlers: Sequence[str], *, source: str) -> list[Finding]:
    """FM11 for each RuntimeClass (`(where, object)`) whose handler is none of `handlers`,
    the containerd runtimes the nodes get (from `source`, e.g. the GPU Operator's toolkit:
    `operator.runtimeClass`, `nvidia-cdi`, `nvidia-legacy`, and runc).

    An error where the handler is meant to be one of them (an NVIDIA name, or one close
    to a listed runtime: a misspelling). Any other handler is a runtime another tool
    configures (kata-deploy's `kata-*`, gVisor's `runsc`, a Wasm shim), which gpuplane
    neither manages nor always sees: advice, naming what a pod needs."""
    out = []
    for where, obj in runtime_classes:
        handler = str(mapping(obj).get("handler") or "")
        if handler in handlers:
            continue
        if not _meant_for(handler, handlers):
            out.append(finding(
                "FM11",
                f"{where} has handler {handler!r}, which is not a runtime gpuplane gives the "
                f"nodes ({', '.join(handlers)}: {source}). It is not judged: a runtime "
                "another tool configures is outside gpuplane's model. A pod naming it fails "
                f"with `no runtime for \"{handler}\" is configured` on any node whose "
                "containerd lacks it.",
                f"{where} handler",
                "Make sure the nodes this RuntimeClass schedules onto "
                f"(`scheduling.nodeSelector`) have the containerd runtime {handler!r}; for a "
                f"GPU pod, set the handler to one of {', '.join(handlers)}.",
                severity=Severity.WARNING))
            continue
        out.append(finding(
            "FM11",
            f"{where} has handler {handler!r}, but the nodes' containerd gets the runtimes "
            f"{', '.join(handlers)} ({source}): every pod naming this RuntimeClass fails "
            f"with `no runtime for \"{handler}\" is configured`.",
            f"{where} handler",
            f"Set the handler to one of {', '.join(handlers)} (the operator's own "
            "RuntimeClass uses operator.runtimeClass), or configure that runtime on the "
            "nodes."))
    return out


def _meant_for(handler: str, handlers: Sequence[str]) -> bool:
    """Whether `handler` is meant to be one of the nodes' NVIDIA runtimes `handlers`: an
    NVIDIA name, no name at all, or a near miss of one of them (difflib, 0.75)."""
    if not handler or handler.lower().startswith("nvidia"):
        return True
    wanted = [h for h in handlers if h != "runc"]
    return bool(difflib.get_close_matches(handler.lower(), wanted, n=1, cutoff=0.75))


__all__ = ["check_device_plugin_daemonsets", "check_runtime_class_handlers",
           "gpu_runtime_classes", "is_device_plugin", "node_runtime_handlers"]
