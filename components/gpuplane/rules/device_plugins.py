"""The GPU objects a stack declares itself, beside the charts that run the GPU stack:
device-plugin DaemonSets (FM12: every NVIDIA device plugin registers `nvidia.com/gpu` with
the kubelet, and with two on a node each overwrites the other's count) and RuntimeClasses
(FM11: a handler no containerd runtime on the nodes has fails every pod that names it).

What counts as a device plugin: a DaemonSet running NVIDIA's `k8s-device-plugin` image or
HAMi's device plugin, or named `*device-plugin*` (the names both charts give theirs, and
what `kubectl apply` of NVIDIA's static manifest creates).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuplane.core.findings import Finding
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


def check_runtime_class_handlers(runtime_classes: Sequence[tuple[str, Mapping[str, Any]]],
                                 handlers: Sequence[str], *, source: str) -> list[Finding]:
    """FM11 for each RuntimeClass (`(where, object)`) whose handler is none of `handlers`,
    the containerd runtimes the nodes get (from `source`, e.g. the GPU Operator's toolkit:
    `operator.runtimeClass`, `nvidia-cdi`, `nvidia-legacy`, and runc)."""
    out = []
    for where, obj in runtime_classes:
        handler = str(mapping(obj).get("handler") or "")
        if handler in handlers:
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


__all__ = ["check_device_plugin_daemonsets", "check_runtime_class_handlers",
           "is_device_plugin"]
