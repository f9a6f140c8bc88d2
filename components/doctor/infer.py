"""The intent the rules compare the cluster against: the stack's own record when gpuplane
deployed it (ConfigMap `gpuplane-intent`), else inferred from what was collected.

Inferred facts come from the nodes wherever possible (distro from the kubelet's version
and its containerd's paths, containerd from the node status, OS from the node's labels or
its inspection, nvidia-as-default from the effective containerd config) so rules that
compare values with them still mean something. What can only be read from the values
(driver, CDI, runtime class) is taken from them and says so: the report lists every
inferred field with its source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpuplane.doctor.cluster import ClusterView, gpu_count, labels, name
from gpuplane.intent import INTENT_CONFIGMAP, INTENT_KEY, ClusterIntent, NodeIntent
from gpuplane.rules._shared import flag, lookup, version_tuple
from gpuplane.rules.operator import cdi_enabled


class IntentError(ValueError):
    """The gpuplane-intent ConfigMap exists but cannot be read."""


@dataclass
class IntentSource:
    intent: ClusterIntent
    source: str                                       # "ConfigMap ns/gpuplane-intent" | "inferred"
    inferred: dict[str, str] = field(default_factory=dict)   # field -> where it came from


_SUFFIX_DISTRO = (("+rke2", "rke2"), ("+k3s", "k3s"), ("+k0s", "k0s"))
_SNAP_BASE = re.compile(r"^(?P<base>/.+)/k8s-containerd/etc/containerd/config\.toml$")


def intent_of(view: ClusterView, inspections: dict[str, dict[str, Any]]) -> IntentSource:
    cm = view.configmap(None, INTENT_CONFIGMAP)
    if cm is not None:
        text = (cm.get("data") or {}).get(INTENT_KEY)
        where = f"ConfigMap {cm['metadata'].get('namespace')}/{INTENT_CONFIGMAP}"
        if not isinstance(text, str):
            raise IntentError(f"{where} has no key {INTENT_KEY}; re-run `pulumi up` or delete "
                              "the ConfigMap to let the doctor infer the intent")
        try:
            return IntentSource(ClusterIntent.from_json(text), where)
        except (ValueError, TypeError) as exc:
            raise IntentError(f"{where} data.{INTENT_KEY}: {exc}") from None
    return infer(view, inspections)


def infer(view: ClusterView, inspections: dict[str, dict[str, Any]]) -> IntentSource:
    why: dict[str, str] = {}
    fields: dict[str, Any] = {}
    nodes = view.gpu_nodes()
    first = nodes[0] if nodes else None
    info = ((first or {}).get("status") or {}).get("nodeInfo") or {}

    distro, base, reason = _distro(info, inspections)
    fields["distro"], why["distro"] = distro, reason
    if base:
        fields["containerd_base_dir"] = base
        why["containerd_base_dir"] = "the kubelet's containerd config path"
    runtime = str(info.get("containerRuntimeVersion") or "")
    if runtime.startswith("containerd://"):
        fields["containerd_version"] = runtime.removeprefix("containerd://")
        why["containerd_version"] = f"Node {name(first or {})} containerRuntimeVersion"
    server = str(view.snap.version.get("gitVersion") or "")
    if version_tuple(server):
        fields["kubernetes_version"] = ".".join(map(str, version_tuple(server) or ()))
        why["kubernetes_version"] = "the API server's version"

    hami = view.release("hami") is not None or any(
        "device-plugin" in name(o) for o in view.hami_objects())
    fields["device_plugin"] = "hami" if hami else "gpu-operator"
    why["device_plugin"] = "HAMi is installed" if hami else "no HAMi found"
    if (ns := view.operator_namespace()) is not None:
        fields["operator_namespace"], why["operator_namespace"] = ns, "where the operator runs"
    if (ns := view.hami_namespace()) is not None:
        fields["hami_namespace"], why["hami_namespace"] = ns, "where HAMi runs"

    found = view.operator_values()
    if found is not None:
        values, where, chart = found
        toolkit = "operator" if flag(values, "toolkit.enabled", True) else "host"
        fields["toolkit"], why["toolkit"] = toolkit, f"{where} toolkit.enabled"
        fields["driver_preinstalled"] = not flag(values, "driver.enabled", True)
        why["driver_preinstalled"] = f"{where} driver.enabled"
        fields["cdi"] = cdi_enabled(values, version_tuple(chart))[0]
        why["cdi"] = f"{where} cdi.enabled"
        fields["runtime_class"] = str(lookup(values, "operator.runtimeClass", "nvidia"))
        why["runtime_class"] = f"{where} operator.runtimeClass"
        fields.update(_time_slicing(view, values, where, why))
    else:
        fields["toolkit"], why["toolkit"] = "host", "no GPU Operator found"

    default = _nvidia_default(inspections, fields.get("runtime_class", "nvidia"))
    if default is not None:
        fields["nvidia_default"], why["nvidia_default"] = default[0], default[1]
    fields["nodes"] = tuple(_node_intent(n, inspections.get(name(n)), fields) for n in nodes)
    why["nodes"] = "GPU nodes: gpus from nvidia.com/gpu.count or capacity, os from the " \
                   "node's labels or inspection"
    return IntentSource(ClusterIntent(**fields), "inferred", why)


def _distro(info: dict[str, Any], inspections: dict[str, dict[str, Any]]
            ) -> tuple[str, str | None, str]:
    kubelet = str(info.get("kubeletVersion") or "")
    for suffix, distro in _SUFFIX_DISTRO:
        if suffix in kubelet:
            return distro, None, f"kubeletVersion {kubelet}"
    for node, inspection in inspections.items():
        daemon = next((d for d in inspection.get("daemons") or []
                       if d.get("pid") == inspection.get("kubelet_daemon")), None)
        if daemon is None:
            continue
        config, binary = str(daemon.get("config")), str(daemon.get("binary"))
        match = _SNAP_BASE.match(config)
        if match:
            return "k8s-snap", match["base"], f"node {node}: containerd reads {config}"
        if "/snap/k8s/" in binary or config.startswith("/var/snap/k8s/"):
            return "k8s-snap", None, f"node {node}: containerd {binary}"
        if "microk8s" in config:
            return "microk8s", None, f"node {node}: containerd reads {config}"
        if config.startswith("/etc/k0s/"):
            return "k0s", None, f"node {node}: containerd reads {config}"
        if "/var/lib/rancher/rke2/" in config:
            return "rke2", None, f"node {node}: containerd reads {config}"
        if "/var/lib/rancher/k3s/" in config:
            return "k3s", None, f"node {node}: containerd reads {config}"
    return "kubeadm", None, "no distro-specific kubelet version or containerd path"


def _nvidia_default(inspections: dict[str, dict[str, Any]],
                    runtime: str) -> tuple[bool, str] | None:
    """nvidia is the default on the nodes when the kubelet's containerd config dump says so."""
    from gpuplane.doctor.nodes import dump_view

    for node, inspection in inspections.items():
        dump = inspection.get("config_dump") or {}
        view = dump_view(str(dump.get("stdout", ""))) if dump.get("ok") else None
        if view is not None:
            return view["default_runtime"] == runtime, f"node {node}: containerd config dump"
    return None


def _time_slicing(view: ClusterView, values: dict[str, Any], where: str,
                  why: dict[str, str]) -> dict[str, Any]:
    cm_name = str(lookup(values, "devicePlugin.config.name", "") or "")
    if not cm_name or not flag(values, "devicePlugin.enabled", True):
        return {}
    profile = str(lookup(values, "devicePlugin.config.default", "") or "any")
    out: dict[str, Any] = {"time_slicing_configmap": cm_name, "time_slicing_profile": profile}
    why["time_slicing_configmap"] = f"{where} devicePlugin.config.name"
    why["time_slicing_profile"] = f"{where} devicePlugin.config.default"
    cm = view.configmap(view.operator_namespace(), cm_name)
    text = ((cm or {}).get("data") or {}).get(profile)
    replicas = _replicas(text)
    if replicas:
        out["time_slicing_replicas"] = replicas
        why["time_slicing_replicas"] = f"ConfigMap {cm_name} profile {profile} (wherever the " \
                                       "replicas are written)"
    return out


def _replicas(text: Any) -> int | None:
    """The nvidia.com/gpu replicas a profile means, even at a level the plugin ignores."""
    try:
        doc = yaml.safe_load(text) if isinstance(text, str) else None
    except yaml.YAMLError:
        return None
    found: list[int] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("name") == "nvidia.com/gpu" and isinstance(node.get("replicas"), int):
                found.append(node["replicas"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    return found[0] if found else None


def _node_intent(node: dict[str, Any], inspection: dict[str, Any] | None,
                 fields: dict[str, Any]) -> NodeIntent:
    lbl = labels(node)
    count = lbl.get("nvidia.com/gpu.count")
    try:
        gpus = int(count) if count else 0
    except ValueError:
        gpus = 0
    if not gpus:
        capacity = gpu_count(node, "capacity")
        replicas = lbl.get("nvidia.com/gpu.replicas")
        divisor = int(replicas) if replicas and replicas.isdigit() and int(replicas) > 0 else 1
        gpus = int(capacity // divisor) or 1
    return NodeIntent(name(node), gpus, _os(node, inspection))


def _os(node: dict[str, Any], inspection: dict[str, Any] | None) -> str:
    lbl = labels(node)
    os_id = lbl.get("feature.node.kubernetes.io/system-os_release.ID")
    version = lbl.get("feature.node.kubernetes.io/system-os_release.VERSION_ID")
    if not os_id and inspection:
        release = inspection.get("os_release") or {}
        os_id, version = release.get("ID"), release.get("VERSION_ID")
    if not os_id:
        image = str(((node.get("status") or {}).get("nodeInfo") or {}).get("osImage") or "")
        match = re.match(r"^(Ubuntu) (\d+\.\d+)|^(Amazon Linux) (\d+)", image)
        if match:
            os_id = "ubuntu" if match[1] else "amzn"
            version = match[2] or match[4]
    if os_id:
        return f"{os_id.lower()}{version or ''}"
    return "ubuntu22.04"


__all__ = ["IntentError", "IntentSource", "infer", "intent_of"]
