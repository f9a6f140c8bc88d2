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

from gpuplane.core.intent import INTENT_CONFIGMAP, INTENT_KEY, ClusterIntent, NodeIntent
from gpuplane.doctor.cluster import ClusterView, gpu_count, labels, name, namespace
from gpuplane.rules._shared import flag, lookup, version_tuple
from gpuplane.rules.operator import cdi_enabled

UNKNOWN = "unknown"     # a fact no collected object shows


class IntentError(ValueError):
    """The gpuplane-intent ConfigMap exists but cannot be read."""


@dataclass
class IntentSource:
    intent: ClusterIntent
    source: str                                       # "ConfigMap ns/gpuplane-intent" | "inferred"
    inferred: dict[str, str] = field(default_factory=dict)   # field -> where it came from


_SUFFIX_DISTRO = (("+rke2", "rke2"), ("+k3s", "k3s"), ("+k0s", "k0s"))
# containerd built by k3s-io (K3s and RKE2): containerRuntimeVersion `containerd://1.7.23-k3s2`
_K3S_CONTAINERD = re.compile(r"-k3s\d*$")
# Labels the distribution's kubelet sets (key, value or None for any, distro): K3s and RKE2
# set instance-type, Canonical Kubernetes k8sd.io/role, MicroK8s microk8s.io/cluster, k0s
# node.k0sproject.io/role.
_LABEL_DISTRO = (("node.kubernetes.io/instance-type", "rke2", "rke2"),
                 ("node.kubernetes.io/instance-type", "k3s", "k3s"),
                 ("k8sd.io/role", None, "k8s-snap"),
                 ("microk8s.io/cluster", "true", "microk8s"),
                 ("node.k0sproject.io/role", None, "k0s"))
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

    distro, base, reason = _distro(nodes or view.snap.nodes, inspections)
    fields["distro"], why["distro"] = distro, reason
    if base:
        fields["containerd_base_dir"] = base
        why["containerd_base_dir"] = "the kubelet's containerd config path"
    if first is not None:
        fields.update(_platform(first, inspections, why))
    runtime = str(info.get("containerRuntimeVersion") or "")
    if runtime.startswith("containerd://"):
        fields["containerd_version"] = runtime.removeprefix("containerd://")
        why["containerd_version"] = f"Node {name(first or {})} containerRuntimeVersion"
    else:   # never assume a line: the rules that depend on it are then not checked
        fields["containerd_version"] = UNKNOWN
        why["containerd_version"] = (
            f"not known: Node {name(first)} reports containerRuntimeVersion "
            f"{runtime or '(none)'}" if first is not None else "not known: no GPU node")
    kube = _kubernetes(view)
    if kube is not None:
        fields["kubernetes_version"], why["kubernetes_version"] = kube

    release = view.release("hami")
    parts = [o for o in view.hami_objects()
             if "device-plugin" in name(o) or "scheduler" in name(o)]
    fields["device_plugin"] = "hami" if release or parts else "gpu-operator"
    if release is not None:
        why["device_plugin"] = f"HAMi is installed ({release.where})"
    elif parts:
        why["device_plugin"] = f"HAMi is installed ({namespace(parts[0])}/{name(parts[0])})"
    else:
        unseen = view.missing("helm-releases", "deployments", "daemonsets")
        why["device_plugin"] = "no HAMi found" + (f" ({unseen})" if unseen else "")
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
    elif (toolkit_obj := view.operator_toolkit()) is not None:
        fields["toolkit"] = "operator"
        why["toolkit"] = (f"the operator's toolkit runs as {namespace(toolkit_obj)}/"
                          f"{name(toolkit_obj)} (its values were not collected)")
    else:
        unseen = view.missing("helm-releases", "clusterpolicies")
        fields["toolkit"] = "host"
        operator_ns = view.operator_namespace()
        why["toolkit"] = (f"the GPU Operator runs in {operator_ns} but no toolkit of it was "
                          "seen" if operator_ns else "no GPU Operator found") + (
            f" ({unseen})" if unseen else "")

    default = _nvidia_default(inspections, fields.get("runtime_class", "nvidia"))
    if default is not None:
        fields["nvidia_default"], why["nvidia_default"] = default[0], default[1]
    fields["nodes"] = tuple(_node_intent(n, inspections.get(name(n)), fields) for n in nodes)
    why["nodes"] = "GPU nodes: gpus from nvidia.com/gpu.count or capacity, os from the " \
                   "node's labels or inspection"
    return IntentSource(ClusterIntent(**fields), "inferred", why)


def _kubernetes(view: ClusterView) -> tuple[str, str] | None:
    """The API server's version, else a control-plane node's kubelet (which kubeadm and
    the distributions keep at the API server's version); None when neither was seen."""
    server = str(view.snap.version.get("gitVersion") or "")
    if version_tuple(server):
        return ".".join(map(str, version_tuple(server) or ())), "the API server's version"
    for node in view.snap.nodes:
        lbl = labels(node)
        if "node-role.kubernetes.io/control-plane" in lbl or \
                "node-role.kubernetes.io/master" in lbl:
            kubelet = str(((node.get("status") or {}).get("nodeInfo") or {}).get(
                "kubeletVersion") or "")
            if version_tuple(kubelet):
                return (".".join(map(str, version_tuple(kubelet) or ())),
                        f"kubeletVersion of control-plane node {name(node)} (the API "
                        "server's version was not collected)")
    return None


def _distro(nodes: list[dict[str, Any]], inspections: dict[str, dict[str, Any]]
            ) -> tuple[str, str | None, str]:
    """(distro, k8s-snap base dir, why), from the hints in order of trust: the kubelet's
    and the runtime's version suffixes (the distribution builds them), the labels its
    kubelet puts on the node, then the containerd daemons a node inspection found."""
    suffixes: list[tuple[str, str]] = []
    runtime_hint: str | None = None
    by_label: list[tuple[str, str]] = []
    for node in nodes:
        info = (node.get("status") or {}).get("nodeInfo") or {}
        kubelet = str(info.get("kubeletVersion") or "")
        for suffix, distro in _SUFFIX_DISTRO:
            if suffix in kubelet:
                suffixes.append((distro, f"Node {name(node)} kubeletVersion {kubelet}"))
        runtime = str(info.get("containerRuntimeVersion") or "")
        if runtime_hint is None and _K3S_CONTAINERD.search(runtime):
            runtime_hint = (f"Node {name(node)} containerRuntimeVersion {runtime} (k3s-io's "
                            "containerd, which K3s and RKE2 ship)")
        lbl = labels(node)
        for key, value, distro in _LABEL_DISTRO:
            if key in lbl and value in (None, lbl[key]):
                by_label.append((distro, f"Node {name(node)} label {key}={lbl[key]}"))
    by_daemon, base = _daemon_hints(inspections)
    hints = suffixes + by_label + by_daemon
    if suffixes:
        chosen = suffixes[0]
    elif runtime_hint is not None:
        named = [h for h in by_label + by_daemon if h[0] in ("k3s", "rke2")]
        chosen = (named[0][0], f"{runtime_hint}; {named[0][1]}") if named else \
            ("k3s", f"{runtime_hint}; K3s taken, as no label or daemon names RKE2")
    elif hints:
        chosen = hints[0]
    else:
        return "kubeadm", None, ("no distro-specific kubelet or runtime version, node label "
                                 "or containerd path")
    disagree = sorted({f"{why} says {d}" for d, why in hints if d != chosen[0]})
    reason = chosen[1] + (f" (trusted over: {'; '.join(disagree)})" if disagree else "")
    return chosen[0], base if chosen[0] == "k8s-snap" else None, reason


def _daemon_hints(inspections: dict[str, dict[str, Any]]
                  ) -> tuple[list[tuple[str, str]], str | None]:
    """Distro hints from the containerd each inspected node's kubelet talks to, and the
    k8s-snap base dir its config path shows."""
    out: list[tuple[str, str]] = []
    base = None
    for node, inspection in sorted(inspections.items()):
        daemon = next((d for d in inspection.get("daemons") or []
                       if d.get("pid") == inspection.get("kubelet_daemon")), None)
        if daemon is None:
            continue
        config, binary = str(daemon.get("config")), str(daemon.get("binary"))
        match = _SNAP_BASE.match(config)
        if match:
            base = base or match["base"]
            out.append(("k8s-snap", f"node {node}: containerd reads {config}"))
        elif "/snap/k8s/" in binary or config.startswith("/var/snap/k8s/"):
            out.append(("k8s-snap", f"node {node}: containerd {binary}"))
        elif "microk8s" in config:
            out.append(("microk8s", f"node {node}: containerd reads {config}"))
        elif config.startswith("/etc/k0s/"):
            out.append(("k0s", f"node {node}: containerd reads {config}"))
        elif "/var/lib/rancher/rke2/" in config:
            out.append(("rke2", f"node {node}: containerd reads {config}"))
        elif "/var/lib/rancher/k3s/" in config:
            out.append(("k3s", f"node {node}: containerd reads {config}"))
    return out, base


def _platform(node: dict[str, Any], inspections: dict[str, dict[str, Any]],
              why: dict[str, str]) -> dict[str, Any]:
    """The managed platform the first GPU node shows (gpuplane.platforms.detect), with the
    stack key to set; nothing for self-managed nodes."""
    from gpuplane.doctor.nodes import dump_view
    from gpuplane.platforms.detect import STACK_KEY, detect_platform

    dump = (inspections.get(name(node)) or {}).get("config_dump") or {}
    view = dump_view(str(dump.get("stdout", ""))) if dump.get("ok") else None
    found = detect_platform(node, view["default_runtime"] if view else None)
    seen = "; ".join(found.evidence)
    if found.platform is not None:
        why["platform"] = (f"Node {name(node)}: {seen}; in a stack: {STACK_KEY}: "
                           f"{found.platform.value}")
        return {"platform": found.platform.value}
    if found.cloud is not None:
        why["platform"] = (f"not known: Node {name(node)} runs on {found.cloud} ({seen}) but "
                           f"no profile fits it exactly. {found.note}").rstrip()
    return {}


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


__all__ = ["UNKNOWN", "IntentError", "IntentSource", "infer", "intent_of"]
