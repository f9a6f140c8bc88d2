"""HAMi's Helm values and nodes against the stack's intent (FM12, FM13, FM14, FM18).

From the HAMi chart (2.5-2.10): the kube-scheduler sidecar's tag is
`scheduler.kubeScheduler.image.tag` from 2.7 (`scheduler.kubeScheduler.imageTag` before);
empty means the Kubernetes version Helm sees at render time. The device plugin DaemonSet
selects nodes by `devicePlugin.nvidiaNodeSelector` (default `gpu: "on"`), and HAMi's
webhook adds `devicePlugin.runtimeClassName` to GPU pods that have none. The webhook's
failurePolicy defaults to Ignore; the maintainers advise Fail with more than one
scheduler replica (replicas count only with `scheduler.leaderElect`, default true).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules._shared import (
    at,
    finding,
    flag,
    lookup,
    mapping,
    present,
    quantity,
    version_tuple,
)
from gpuplane.rules.pinning import check_chart_version, check_image_tags
from gpuplane.rules.platform import check_platform_hami

NODE_LABEL = ("gpu", "on")                # what gpuplane puts on every GPU node
IMAGE_TAG_FROM = (2, 7, 0)                # chart that moved imageTag to image.tag
GPU_NODE_LABELS = {"feature.node.kubernetes.io/pci-10de.present": "true",
                   "nvidia.com/gpu.present": "true"}
# Chart defaults the rules assume where a value is not set: values.yaml of every HAMi
# chart gpuplane knows (Project-HAMi/HAMi charts/hami/values.yaml@v2.8.3, @v2.9.0, and
# main as of 2026-08-21, chart 2.10.0); tests/pure/test_charts.py holds them against the charts.
HAMI_DEFAULTS: dict[str, Any] = {
    "devicePlugin.enabled": True,
    "devicePlugin.runtimeClassName": "",
    "devicePlugin.nvidiaNodeSelector": {"gpu": "on"},
    "devicePlugin.deviceSplitCount": 10,
    "devicePlugin.deviceMemoryScaling": 1,
    "devicePlugin.deviceCoreScaling": 1,
    "devicePlugin.gpuOperatorToolkitReady.enabled": False,
    "devicePlugin.createRuntimeClass": False,
    "scheduler.admissionWebhook.enabled": True,
    "scheduler.admissionWebhook.failurePolicy": "Ignore",
    "scheduler.replicas": 1,
    "scheduler.leaderElect": True,
    "scheduler.kubeScheduler.image.tag": "",
}
_KUBE_TAG = "scheduler.kubeScheduler.image.tag"
_OLD_KUBE_TAG = "scheduler.kubeScheduler.imageTag"


def check_hami_values(values: dict[str, Any], intent: ClusterIntent, *, chart_version: str | None,
                      where: str, cluster_version_known: bool = True) -> list[Finding]:
    """Every rule over the HAMi release's values; `where` names the release.
    `cluster_version_known`: False where the intent's Kubernetes version is a default, not
    the cluster's (a stack gpuplane did not make, without `kubernetesVersion`): the
    scheduler tag is then not held against it."""
    values = values if isinstance(values, Mapping) else {}
    if intent.device_plugin != "hami":
        return _unwanted(values, where, intent.device_plugin)
    chart = version_tuple(chart_version)
    out = _scheduler_tag(values, intent, chart, where) if cluster_version_known else []
    out += _runtime_class(values, intent, where)
    out += _node_selector(values, where)
    out += _toolkit_ready(values, intent, where)
    out += _webhook(values, where, intent)
    out += _split(values, where)
    out += check_platform_hami(values, intent, where=where)
    out += check_chart_version(chart_version, chart="hami", where=where,
                               stack_key="gpuplane:hami.chartVersion", example="2.10.0")
    out += check_image_tags(
        values, where=where, stack_key=lambda path: f"gpuplane:hami.{path}",
        skip=lambda path, tag: tag == "" or path.startswith("values.scheduler.kubeScheduler"))
    return out


def _unwanted(values: Mapping[str, Any], where: str, plugin: str) -> list[Finding]:
    if not flag(values, "devicePlugin.enabled", HAMI_DEFAULTS["devicePlugin.enabled"]):
        return []
    return [finding(
        "FM12",
        f"a HAMi release runs its device plugin while gpuplane:devicePlugin is {plugin}: "
        "two device plugins register nvidia.com/gpu on the GPU nodes and overwrite each "
        "other's count.",
        at(where, "values.devicePlugin.enabled", "gpuplane:devicePlugin"),
        "Set `gpuplane:devicePlugin: hami` if HAMi should share the GPUs (gpuplane then "
        "disables the operator's plugin), or uninstall the HAMi release (raw: `helm "
        "uninstall hami`, or --set devicePlugin.enabled=false).")]


def _scheduler_tag(values: Mapping[str, Any], intent: ClusterIntent,
                   chart: tuple[int, int, int] | None, where: str) -> list[Finding]:
    if chart is None:  # unknown chart: read the key the values use, else the current one
        old_style = isinstance(lookup(values, "scheduler.kubeScheduler.image"), str) or (
            present(values, _OLD_KUBE_TAG) and not present(values, _KUBE_TAG))
        new = not old_style
    else:
        new = chart >= IMAGE_TAG_FROM
    path = _KUBE_TAG if new else _OLD_KUBE_TAG
    tag = str(lookup(values, path, "") or "").strip()
    want = f"v{intent.kubernetes_version.lstrip('v')}"
    key = "gpuplane:hami.schedulerImageTag"
    fix = (f"Set `{key}: {want}` (or leave it null: gpuplane then pins "
           f"v<gpuplane:cluster.kubernetesVersion>) and keep "
           f"`gpuplane:cluster.kubernetesVersion` equal to the API server's version; raw "
           f"Helm: --set {path}={want}.")
    here = at(where, f"values.{path}", key)
    if not tag:
        ignored = (f" ({_OLD_KUBE_TAG} is set, but this chart reads {_KUBE_TAG})"
                   if new and present(values, _OLD_KUBE_TAG) else "")
        return [finding(
            "FM13",
            f"{path} is empty{ignored}: the chart takes the Kubernetes version Helm sees "
            "while rendering, which a client-side render fakes, and a kube-scheduler that "
            "does not match the cluster crash-loops.",
            here, fix)]
    have, expect = version_tuple(tag), version_tuple(want)
    if not tag.startswith("v") or have is None:
        return [finding(
            "FM13",
            f"{path} is {tag!r}, not a kube-scheduler release tag such as {want}: the image "
            "does not exist or does not match the cluster.", here, fix)]
    if expect is None or have == expect:
        return []
    if have[:2] != expect[:2]:
        return [finding(
            "FM13",
            f"{path} is {tag} but the cluster runs Kubernetes {intent.kubernetes_version}: "
            "HAMi's kube-scheduler crash-loops against an API server of another minor "
            "version.", here, fix)]
    return [finding(
        "FM13",
        f"{path} is {tag} but the cluster runs Kubernetes {intent.kubernetes_version}: one "
        "patch apart works, but the scheduler should match the cluster exactly.",
        here, fix, severity=Severity.WARNING)]


def _runtime_class(values: Mapping[str, Any], intent: ClusterIntent,
                   where: str) -> list[Finding]:
    name = str(lookup(values, "devicePlugin.runtimeClassName",
                      HAMI_DEFAULTS["devicePlugin.runtimeClassName"]) or "")
    here = at(where, "values.devicePlugin.runtimeClassName", "gpuplane:runtime.name")
    rc = intent.runtime_class
    fix = (f"Leave devicePlugin.runtimeClassName to gpuplane (it renders "
           f"`gpuplane:runtime.name`), or set `gpuplane:runtime.nvidiaDefault: true`; raw "
           f"Helm: --set devicePlugin.runtimeClassName={rc}.")
    if not name and not intent.nvidia_default:
        return [finding(
            "FM13",
            "devicePlugin.runtimeClassName is empty while nvidia is not containerd's default "
            "runtime (gpuplane:runtime.nvidiaDefault is false): HAMi's device plugin and the "
            "GPU pods its webhook admits run under runc, without the driver (NVML not found).",
            here, fix)]
    if name and name != rc:
        return [finding(
            "FM13",
            f"devicePlugin.runtimeClassName is {name!r} but the nvidia runtime is {rc!r}: "
            "HAMi's device plugin and the GPU pods its webhook mutates ask for a runtime "
            "class that does not inject the driver.", here, fix)]
    return []


def _node_selector(values: Mapping[str, Any], where: str) -> list[Finding]:
    key, value = NODE_LABEL
    selector = lookup(values, "devicePlugin.nvidiaNodeSelector",
                      HAMI_DEFAULTS["devicePlugin.nvidiaNodeSelector"])
    here = at(where, "values.devicePlugin.nvidiaNodeSelector",
              "gpuplane:hami.values.devicePlugin.nvidiaNodeSelector")
    fix = (f"Remove devicePlugin.nvidiaNodeSelector from `gpuplane:hami.values` (the chart "
           f"default `{key}: \"{value}\"` matches the label gpuplane puts on every node in "
           f"`gpuplane:nodes`); raw Helm: devicePlugin.nvidiaNodeSelector.{key}=\"{value}\".")
    if not isinstance(selector, Mapping):
        return [finding("FM13", f"devicePlugin.nvidiaNodeSelector is {selector!r}, not a "
                        "label map: the device plugin DaemonSet does not render.", here, fix)]
    if not selector:
        return [finding(
            "FM13",
            "devicePlugin.nvidiaNodeSelector is empty: HAMi's device plugin runs on every "
            "node, crash-looping where there is no GPU.", here, fix, severity=Severity.WARNING)]
    out = []
    for label, want in sorted(selector.items(), key=lambda kv: str(kv[0])):
        if label == key:
            if want is True:
                out.append(finding(
                    "FM13",
                    f"devicePlugin.nvidiaNodeSelector.{key} is the boolean true (an unquoted "
                    f"YAML `on`): node selector values are strings, so the DaemonSet is "
                    "refused or selects no node.", here, fix))
            elif want != value:
                out.append(finding(
                    "FM13",
                    f"devicePlugin.nvidiaNodeSelector.{key} is {want!r}, but gpuplane labels "
                    f"GPU nodes {key}={value}: HAMi's device plugin is scheduled on no node.",
                    here, fix))
        else:
            out.append(finding(
                "FM13",
                f"devicePlugin.nvidiaNodeSelector requires label {label}={want}, which "
                f"gpuplane does not set (it labels GPU nodes {key}={value}): unless something "
                "else labels the nodes, HAMi's device plugin is scheduled on none.",
                here, fix, severity=Severity.WARNING))
    return out


def _toolkit_ready(values: Mapping[str, Any], intent: ClusterIntent,
                   where: str) -> list[Finding]:
    """`devicePlugin.gpuOperatorToolkitReady.enabled` makes the device plugin's init
    container wait for the GPU Operator's toolkit validation: on the host's toolkit (HAMi
    alone) no operator ever writes it, and the plugin never starts."""
    key = "devicePlugin.gpuOperatorToolkitReady.enabled"
    if intent.toolkit == "operator" or not flag(values, key, HAMI_DEFAULTS[key]):
        return []
    return [finding(
        "FM13",
        f"{key} is true but the toolkit is the host's (no gpuplane:gpuOperator, or its "
        "toolkit: host): HAMi's device plugin waits for the "
        "operator's toolkit-ready validation, which nothing writes, and never starts.",
        at(where, f"values.{key}", "gpuplane:hami.values"),
        "Remove devicePlugin.gpuOperatorToolkitReady from `gpuplane:hami.values` (gpuplane "
        "sets it false on the host's toolkit); raw Helm: --set "
        f"{key}=false.")]


def _webhook(values: Mapping[str, Any], where: str, intent: ClusterIntent) -> list[Finding]:
    if not flag(values, "scheduler.admissionWebhook.enabled",
                HAMI_DEFAULTS["scheduler.admissionWebhook.enabled"]):
        return [finding(
            "FM13",
            "scheduler.admissionWebhook.enabled is false: nothing sends GPU pods to "
            "hami-scheduler or adds their runtime class, so HAMi's sharing never applies.",
            at(where, "values.scheduler.admissionWebhook.enabled", "gpuplane:hami.values"),
            "Remove scheduler.admissionWebhook.enabled from `gpuplane:hami.values`; raw Helm: "
            "--set scheduler.admissionWebhook.enabled=true.")]
    policy = str(lookup(values, "scheduler.admissionWebhook.failurePolicy",
                        HAMI_DEFAULTS["scheduler.admissionWebhook.failurePolicy"]))
    here = at(where, "values.scheduler.admissionWebhook.failurePolicy",
              "gpuplane:hami.webhookFailurePolicy")
    replicas = lookup(values, "scheduler.replicas", HAMI_DEFAULTS["scheduler.replicas"])
    leader = flag(values, "scheduler.leaderElect", HAMI_DEFAULTS["scheduler.leaderElect"])
    try:
        count = int(quantity(replicas)) if leader else 1
    except ValueError:
        count = 1
    fix = ("Set `gpuplane:hami.webhookFailurePolicy: Fail` and "
           "`gpuplane:hami.schedulerReplicas: 2` (the maintainers' advice); raw Helm: --set "
           "scheduler.admissionWebhook.failurePolicy=Fail,scheduler.replicas=2,"
           "scheduler.leaderElect=true.")
    if policy == "Ignore":
        shown = "Ignore" if present(values, "scheduler.admissionWebhook.failurePolicy") \
            else "not set (chart default: Ignore)"
        return [finding(
            "FM13",
            f"the admission webhook's failurePolicy is {shown}: while hami-scheduler is "
            "unreachable, GPU pods are silently admitted unmutated and land on the default "
            "scheduler, unshared and without HAMi's limits.",
            here, fix, severity=Severity.WARNING)]
    if policy != "Fail":
        return [finding(
            "FM13", f"the admission webhook's failurePolicy is {policy!r}; Kubernetes accepts "
            "only Fail or Ignore, so the webhook configuration is refused.", here, fix)]
    exempt = _exemptions(values, where, intent)
    if count < 2:
        return [*exempt, finding(
            "FM13",
            f"the admission webhook fails closed but hami-scheduler runs {count} replica"
            f"{'' if leader else ' (leaderElect is false)'}: while it restarts, every pod "
            "creation the webhook matches is refused.",
            at(where, "values.scheduler.replicas", "gpuplane:hami.schedulerReplicas"),
            fix, severity=Severity.WARNING)]
    return exempt


def _exemptions(values: Mapping[str, Any], where: str, intent: ClusterIntent) -> list[Finding]:
    """A webhook that fails closed sees every pod CREATE in every namespace it does not
    exempt: while hami-scheduler is down nothing can start there — kube-system's own pods
    (DNS, CNI, kube-proxy on a new node) and the GPU Operator's included. HAMi's chart
    exempts namespaces with `scheduler.admissionWebhook.whitelistNamespaces`."""
    listed = lookup(values, "scheduler.admissionWebhook.whitelistNamespaces")
    exempted = {str(n) for n in listed} if isinstance(listed, list | tuple) else set()
    needed = ["kube-system", intent.hami_namespace, intent.operator_namespace]
    missing = [n for n in dict.fromkeys(needed) if n not in exempted]
    if not missing:
        return []
    return [finding(
        "FM13",
        "the admission webhook fails closed (failurePolicy Fail) and does not exempt "
        f"{', '.join(missing)}: while hami-scheduler is unreachable, every pod create there "
        "is refused" + (", kube-system included (DNS, CNI, kube-proxy)"
                        if "kube-system" in missing else "") + ".",
        at(where, "values.scheduler.admissionWebhook.whitelistNamespaces",
           "gpuplane:hami.webhookExemptNamespaces"),
        "Exempt them: gpuplane does by default (kube-system, the HAMi and the operator "
        "namespaces; add more with `gpuplane:hami.webhookExemptNamespaces`) unless "
        "`gpuplane:hami.values` replaces the list; raw Helm: --set "
        "'scheduler.admissionWebhook.whitelistNamespaces={kube-system,...}'.",
        severity=Severity.ERROR if "kube-system" in missing else Severity.WARNING)]


# (chart key, what it sets, valid?, the rule in words); defaults in HAMI_DEFAULTS
_SPLIT: tuple[tuple[str, str, Callable[[float], bool], str], ...] = (
    ("deviceSplitCount", "tasks per GPU", lambda v: v >= 1 and v == int(v), ">= 1 integer"),
    ("deviceMemoryScaling", "memory scaling", lambda v: v > 0, "> 0"),
    ("deviceCoreScaling", "core scaling", lambda v: v > 0, "> 0"),
)


def _split(values: Mapping[str, Any], where: str) -> list[Finding]:
    out = []
    for name, what, ok, rule in _SPLIT:
        default = HAMI_DEFAULTS[f"devicePlugin.{name}"]
        raw = lookup(values, f"devicePlugin.{name}", default)
        try:
            good = ok(quantity(raw))
        except ValueError:
            good = False
        if good:
            continue
        key = f"gpuplane:hami.{name}"
        out.append(finding(
            "FM14",
            f"devicePlugin.{name} is {raw!r} ({what}, must be {rule}): HAMi advertises no "
            "usable GPU shares, so every GPU pod stays Pending or gets other limits than "
            "asked.",
            at(where, f"values.devicePlugin.{name}", key),
            f"Set `{key}` ({rule}; chart default {default}); raw Helm: --set "
            f"devicePlugin.{name}={default}."))
    return out


def _is_gpu_node(node: Mapping[str, Any], intent_nodes: set[str]) -> bool:
    meta = mapping(node.get("metadata"))
    if meta.get("name") in intent_nodes:
        return True
    labels = mapping(meta.get("labels"))
    if any(labels.get(k) == v for k, v in GPU_NODE_LABELS.items()):
        return True
    status = mapping(node.get("status"))
    for field in ("capacity", "allocatable"):
        try:
            if quantity(mapping(status.get(field)).get("nvidia.com/gpu", 0)) > 0:
                return True
        except ValueError:
            continue
    return False


def check_hami_nodes(nodes: list[dict[str, Any]], intent: ClusterIntent) -> list[Finding]:
    """FM13 for live GPU nodes (stack nodes, NVIDIA PCI label or GPU capacity) without the
    `gpu=on` label HAMi's device plugin DaemonSet selects."""
    if intent.device_plugin != "hami":
        return []
    key, value = NODE_LABEL
    wanted = {n.name for n in intent.gpu_nodes}
    out = []
    for node in nodes:
        if not isinstance(node, Mapping) or not _is_gpu_node(node, wanted):
            continue
        meta = mapping(node.get("metadata"))
        name = meta.get("name", "?")
        have = mapping(meta.get("labels")).get(key)
        if have == value:
            continue
        shown = "no gpu label" if have is None else f"gpu={have}"
        out.append(finding(
            "FM13",
            f"GPU node {name} has {shown}: HAMi's device plugin DaemonSet selects {key}="
            f"{value}, so it runs no pod there and the node's GPUs are never shared.",
            at(f"Node {name}", f"metadata.labels.{key}", "gpuplane:nodes"),
            f"List the node in `gpuplane:nodes` (gpuplane labels it {key}={value}); by hand: "
            f"kubectl label node {name} {key}={value} --overwrite."))
    return out


__all__ = ["NODE_LABEL", "check_hami_nodes", "check_hami_values"]
