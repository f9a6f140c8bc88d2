"""FM30-FM36: a release of NVIDIA's DRA driver for GPUs that cannot hand out GPUs on the
cluster it is deployed to, judged from its values and the cluster's facts (gpuplane's
intent, or the policy config's for a program gpuplane did not write).

Pure: values and the intent in, findings out. The chart facts are in
`gpuplane.rules.dra_facts`; the workload side (claims, selectors) in
`gpuplane.rules.dra_workloads`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import IMEX_UNIT, ClusterIntent
from gpuplane.rules._shared import at, finding, flag, lookup, version_tuple
from gpuplane.rules.dra_facts import (
    DEFAULT_KUBELET_ROOT,
    DEVICE_PLUGIN_DEPLOY,
    DRA_NODE_LABEL,
    kubelet_root,
)
from gpuplane.rules.node_affinity import operator_matches
from gpuplane.rules.platform import platform_of

OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"   # the operator's driver container, on the host
_DRA_GA = (1, 34)       # DynamicResourceAllocation GA and on (kubernetes/website feature gate)
_DRA_BETA = (1, 32)     # the charts' kubeVersion ">=1.32.0-0" (Chart.yaml@every tag)


def check_dra_release(values: Mapping[str, Any], intent: ClusterIntent, *,
                      where: str, operator: Mapping[str, Any] | None = None,
                      operator_where: str = "", driver_managed: bool | None = None,
                      node_labels: Mapping[str, Mapping[str, str]] | None = None,
                      live: bool = False) -> list[Finding]:
    """Every DRA rule over one release of the driver. `operator`: the values of the GPU
    Operator release beside it (None: none in the program); `driver_managed`: whether the
    operator installs the NVIDIA driver (None: the intent's `driver_preinstalled`);
    `node_labels`: node -> the labels the program sets on it (`live`: all the labels a
    live node has), by which FM32 is judged per GPU node of the intent; None: the nodes
    are not known, and any device plugin beside the driver is FM32."""
    ours = intent.dra
    managed = (not intent.driver_preinstalled) if driver_managed is None else driver_managed
    gpus = flag(values, "resources.gpus.enabled", True)
    cds = flag(values, "resources.computeDomains.enabled", True)
    # Per node where the driver serves some pools only, or on a live cluster; a stack
    # whose driver serves every GPU node has both plugins on all of them or on none.
    split = node_labels is not None and bool(intent.gpu_nodes) and (
        bool(intent.dra_pools) or live)
    twice = served_twice(values, [n.name for n in intent.gpu_nodes], node_labels or {},
                         live=live) if split else None
    return [*_cdi(intent, where, ours), *_driver_root(values, intent, where, ours, managed),
            *_device_plugin(intent, gpus, operator, operator_where or where, ours, twice,
                            where),
            *_kubernetes(intent, where, ours), *_imex(cds, managed, intent, where, ours),
            *_kubelet_paths(values, intent, where, ours)]


def _cdi(intent: ClusterIntent, where: str, ours: bool) -> list[Finding]:
    """FM30: the driver writes a CDI spec per claim (templates/kubeletplugin.yaml, CDI_ROOT)
    and the runtime injects the devices from it: containerd 1.6 has no CDI, 1.7 has it off
    unless `enable_cdi = true` (docs/prerequisites.md@v0.4.0), 2.x has it on."""
    try:
        line = ContainerdVersion.parse(intent.containerd_version)
    except ValueError:
        return []
    if not line.supports_cdi:
        return [finding(
            "FM30",
            f"containerd {intent.containerd_version} has no CDI, through which the DRA "
            "driver's devices reach containers: every claimed pod fails with "
            "\"unresolvable CDI devices\".",
            at(where, "(the nodes' containerd)", "gpuplane:cluster.containerdVersion"
               if ours else None),
            "Upgrade the GPU nodes' containerd to 1.7 (with enable_cdi = true) or 2.x.")]
    # gpuplane writes enable_cdi itself where it installs the toolkit on the host.
    if line.major == 1 and not intent.cdi and not (ours and intent.toolkit == "host"):
        return [finding(
            "FM30",
            f"containerd {intent.containerd_version} keeps CDI off unless enable_cdi = true, "
            "and nothing here turns it on: the DRA driver's devices are never injected "
            "(\"unresolvable CDI devices\").",
            at(where, "(CDI in the nodes' containerd)", "gpuplane:gpuOperator.cdi"
               if ours else None),
            ("Set gpuplane:gpuOperator.cdi: true (the toolkit then writes enable_cdi), or "
             "containerdVersion 2.x." if ours else
             "Set `enable_cdi = true` under [plugins.\"io.containerd.grpc.v1.cri\"] on the "
             "GPU nodes (GPU Operator: cdi.enabled=true), then say `cdi: true` in the "
             "pack's config."),
            changes=(("gpuplane:gpuOperator.cdi", True),) if ours else ())]
    return []


def check_dra_node_cdi(effective_cdi: bool | None, intent: ClusterIntent, *,
                       where: str) -> list[Finding]:
    """FM30 on a node plan: the node's merged containerd config, once gpuplane and the
    toolkit have written theirs, must have CDI on for the DRA driver. containerd 2.x has it
    on unless a file sets `enable_cdi = false` (cmd/containerd/server/config and
    internal/cri/config@v2.0.11); where the stack itself keeps CDI off on 1.x the release
    check (`_cdi`) has said so already."""
    if not intent.dra or effective_cdi is True:
        return []
    try:
        line = ContainerdVersion.parse(intent.containerd_version)
    except ValueError:
        return []
    if not line.supports_cdi or (line.major == 1 and not intent.cdi
                                 and intent.toolkit != "host"):
        return []
    return [finding(
        "FM30",
        "the node's merged containerd config has CDI off (a file sets enable_cdi = false) "
        "once the plan is applied: the DRA driver's devices are never injected "
        "(\"unresolvable CDI devices\").",
        where,
        "Remove `enable_cdi = false` from the node's containerd files (or set it to true), "
        "then capture them again (`gpuplane nodes capture`).")]


def _driver_root(values: Mapping[str, Any], intent: ClusterIntent, where: str, ours: bool,
                 managed: bool) -> list[Finding]:
    """FM31: `nvidiaDriverRoot` (default `/`) must be where the driver lives: `/` for a
    host driver, /run/nvidia/driver under the operator's driver container
    (values.yaml, docs/install.md@v0.4.0; hack/kubelet-plugin-prestart.sh@v0.4.1). A
    platform that keeps the driver elsewhere (GKE COS) is FM15's."""
    plat = platform_of(intent)
    if plat is not None and plat.install_dir:
        return []
    wanted = OPERATOR_DRIVER_ROOT if managed else "/"
    value = lookup(values, "nvidiaDriverRoot", "/")
    shown = posixpath.normpath(value) if isinstance(value, str) and value else "/"
    if shown == wanted:
        return []
    lives = ("the GPU Operator installs the driver, under /run/nvidia/driver" if managed
             else "the nodes carry the driver themselves, under /")
    return [finding(
        "FM31",
        f"nvidiaDriverRoot is {shown!r}, but {lives}: the kubelet plugin's init container "
        "waits for nvidia-smi and libnvidia-ml there forever, and no GPU is published.",
        at(where, "values.nvidiaDriverRoot", "gpuplane:draDriver.driverRoot" if ours else None),
        (f"Remove gpuplane:draDriver.driverRoot (gpuplane derives {wanted}), or set it to "
         f"{wanted}" if ours else f"Set `nvidiaDriverRoot: {wanted}` (Helm: --set nvidiaDriverRoot="
         f"{wanted})."),
        changes=(("gpuplane:draDriver.driverRoot", None),) if ours else ())]


def served_twice(values: Mapping[str, Any], nodes: Sequence[str],
                 node_labels: Mapping[str, Mapping[str, str]], *, live: bool = False
                 ) -> list[str]:
    """The GPU nodes (of `nodes`) where the GPU Operator's device plugin and the DRA
    driver's kubelet plugin both run, by their labels. The operator's DaemonSet selects
    `nvidia.com/gpu.deploy.device-plugin: "true"`, a label the operator sets on a GPU node
    that has none (assets/state-device-plugin/0500_daemonset.yaml, addGPUStateLabels in
    controllers/state_manager.go@v24.3.0..v26.7.0); the kubelet plugin runs where
    `kubeletPlugin.nodeSelector` matches (templates/kubeletplugin.yaml@every tag). With
    the labels a program sets (`live` false), a label it sets on no node is not known: a
    selector on it may match (a label it sets on some nodes, and gpuplane's own
    `gpuplane.dev/dra-driver`, the others lack); on a live node the selector matches the
    labels it has. An unset deploy label is "true" either way (the operator sets it on a
    GPU node). A required node affinity in the values (`kubeletPlugin.affinity`,
    templates/kubeletplugin.yaml@every tag) narrows the nodes further, term by term."""
    raw = lookup(values, "kubeletPlugin.nodeSelector", None)
    # A null value removes the key, as Helm merges values.
    selector = {str(k): str(v) for k, v in raw.items() if v is not None} \
        if isinstance(raw, Mapping) else {}
    terms = lookup(values, _REQUIRED_AFFINITY, None)
    known = {DRA_NODE_LABEL, *(k for labels in node_labels.values() for k in labels)}
    out = []
    for node in nodes:
        labels = node_labels.get(node) or {}
        deploy = labels.get(DEVICE_PLUGIN_DEPLOY, "true")
        dra = all(labels[k] == v if k in labels else not live and k not in known
                  for k, v in selector.items())
        if isinstance(terms, list):
            dra = dra and any(isinstance(t, Mapping) and _term_matches(
                t, node, labels, known, live) for t in terms)
        if deploy == "true" and dra:
            out.append(node)
    return out


# The values' own required node affinity replaces the chart's list of terms (a list is
# replaced whole when Helm merges values); its other keys leave the chart's terms be.
_REQUIRED_AFFINITY = ("kubeletPlugin.affinity.nodeAffinity."
                      "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms")


def _term_matches(term: Mapping[str, Any], node: str, labels: Mapping[str, str],
                  known: set[str], live: bool) -> bool:
    """One nodeSelectorTerm (its expressions ANDed) as the scheduler reads it, over what
    is known of a node: a label the program sets on no node may be there or not, so it
    may match; `metadata.name` is the node's name. An empty term matches nothing."""
    exprs = list(term.get("matchExpressions") or [])
    fields = list(term.get("matchFields") or [])
    if not exprs and not fields:
        return False
    for expr in exprs:
        key, op = str(expr.get("key")), expr.get("operator")
        wanted = [str(v) for v in expr.get("values") or []]
        if key not in labels and not live and key not in known:
            continue
        value = labels.get(key)
        if not operator_matches(op, value, wanted):
            return False
    for expr in fields:
        if expr.get("key") != "metadata.name":
            continue
        wanted = [str(v) for v in expr.get("values") or []]
        if not operator_matches(expr.get("operator"), node, wanted):
            return False
    return True


def _device_plugin(intent: ClusterIntent, gpus: bool, operator: Mapping[str, Any] | None,
                   where: str, ours: bool, twice: list[str] | None = None,
                   dra_where: str = "") -> list[Finding]:
    """FM32: with resources.gpus.enabled the driver "cannot be deployed alongside the
    standard GPU device plugin on the same node" (templates/validation.yaml@v25.12.0,
    the guard gpuResourcesEnabledOverride lifts); both advertise the same GPUs. Judged
    per node where the nodes and their labels are known (`twice`: the nodes with both);
    with the operator's plugin off on the driver's nodes (`draDriver.pools`) the split
    is clean."""
    if not gpus:
        return []
    who = None
    if operator is not None and flag(operator, "devicePlugin.enabled", True):
        if twice is not None:
            return _twice(twice, dra_where or where, ours)
        who = "the GPU Operator's device plugin (devicePlugin.enabled)"
        key = "gpuplane:gpuOperator.values" if ours else None
    elif ours and intent.device_plugin in ("hami", "platform"):
        who = ("HAMi's device plugin" if intent.device_plugin == "hami"
               else "the node image's device plugin")
        key = "gpuplane:devicePlugin"
    if who is None:
        return []
    return [finding(
        "FM32",
        f"the DRA driver hands out GPUs (resources.gpus.enabled) while {who} advertises "
        "the same GPUs as nvidia.com/gpu: each GPU can be given twice, to a claim and to a "
        "device-plugin pod, and nodes are over-admitted.",
        at(where, "values.devicePlugin.enabled" if "Operator" in who else "", key),
        ("Leave the operator's device plugin to gpuplane (off with draDriver.gpus) and "
         "remove devicePlugin.enabled from gpuplane:gpuOperator.values" if ours and
         "Operator" in who else
         "Use devicePlugin: gpu-operator with draDriver (gpuplane turns its plugin off)"
         if ours else
         "Install the GPU Operator with devicePlugin.enabled=false on the DRA nodes "
         "(docs/prerequisites.md@v0.4.0), or set resources.gpus.enabled=false."))]


def _twice(nodes: list[str], where: str, ours: bool) -> list[Finding]:
    """FM32 on the nodes where both plugins run (none: the pools are split cleanly)."""
    if not nodes:
        return []
    shown = ", ".join(nodes[:8]) + (f" and {len(nodes) - 8} more" if len(nodes) > 8 else "")
    return [finding(
        "FM32",
        f"on node(s) {shown} the DRA driver's kubelet plugin (kubeletPlugin.nodeSelector) "
        "runs beside the GPU Operator's device plugin (the node's "
        f"{DEVICE_PLUGIN_DEPLOY} label is not \"false\"): each GPU there can be given "
        "twice, to a claim and to a device-plugin pod, and the node is over-admitted.",
        at(where, "values.kubeletPlugin.nodeSelector",
           "gpuplane:draDriver.values" if ours else None),
        ("Remove kubeletPlugin.nodeSelector from gpuplane:draDriver.values: with "
         "gpuplane:draDriver.pools gpuplane labels the driver's nodes "
         f"{DRA_NODE_LABEL}=true and {DEVICE_PLUGIN_DEPLOY}=false, and its kubelet plugin "
         "selects them; or remove draDriver.pools (the device plugin then is off "
         "everywhere)." if ours else
         f"Label the DRA nodes {DEVICE_PLUGIN_DEPLOY}=false and select only them in the "
         "driver's kubeletPlugin.nodeSelector, or install the GPU Operator with "
         "devicePlugin.enabled=false (docs/prerequisites.md@v0.4.0)."))]


def _kubernetes(intent: ClusterIntent, where: str, ours: bool) -> list[Finding]:
    """FM33: DRA is GA and on from Kubernetes 1.34 (resource.k8s.io/v1); 1.32/1.33 need the
    DynamicResourceAllocation gate on all four components and the beta API groups served
    (docs/prerequisites.md@v0.4.0); before 1.32 the chart refuses (kubeVersion)."""
    found = version_tuple(intent.kubernetes_version)
    if found is None or found[:2] >= _DRA_GA:
        return []
    key = "gpuplane:cluster.kubernetesVersion" if ours else None
    if found[:2] < _DRA_BETA:
        return [finding(
            "FM33",
            f"Kubernetes {intent.kubernetes_version} has no DRA API the driver can use "
            "(its charts need >= 1.32, resource.k8s.io v1beta1 or later): the release "
            "fails to install.",
            at(where, "(the cluster's Kubernetes)", key),
            "Upgrade the cluster to Kubernetes 1.34 or later (DRA GA and on)"
            + (" and set gpuplane:cluster.kubernetesVersion, or remove gpuplane:draDriver "
               "(the device plugin)." if ours else ", or use the device plugin."))]
    return [finding(
        "FM33",
        f"Kubernetes {intent.kubernetes_version} has DRA in beta and off: unless the "
        "DynamicResourceAllocation gate is on in kube-apiserver, kube-controller-manager, "
        "kube-scheduler and kubelet and resource.k8s.io/v1beta1 is served, no claim is "
        "ever allocated.", at(where, "(the cluster's Kubernetes)", key),
        "Upgrade to Kubernetes 1.34 or later" + (
            " (then gpuplane:cluster.kubernetesVersion)" if ours else "")
        + ", or turn on DynamicResourceAllocation on all four components and serve "
        "resource.k8s.io/v1beta1 (and v1beta2 on 1.33).",
        severity=Severity.WARNING)]


def _imex(compute_domains: bool, managed: bool, intent: ClusterIntent, where: str,
          ours: bool) -> list[Finding]:
    """FM35: ComputeDomains run their own IMEX daemon; the host's nvidia-imex.service, shipped
    with a preinstalled driver, holds the IMEX session (NV_ERR_IN_USE) unless disabled and
    masked (docs/prerequisites.md@v0.4.0). Where gpuplane reaches the nodes its node agent
    masks it (`intent.dra_masks_imex`), and the finding says where; otherwise the step is
    the user's, with the commands."""
    if not compute_domains or managed:
        return []
    key = "gpuplane:draDriver.computeDomains" if ours else None
    place = at(where, "values.resources.computeDomains.enabled", key)
    off = ("gpuplane:draDriver.computeDomains: false." if ours
           else "resources.computeDomains.enabled=false.")
    if ours and intent.dra_masks_imex:
        nodes = [n.name for n in intent.dra_nodes]
        shown = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5
                                        else "")
        return [finding(
            "FM35",
            f"ComputeDomains are on and the nodes carry their own driver, whose {IMEX_UNIT} "
            f"would take the IMEX session: gpuplane masks it on {shown or 'the GPU nodes'} "
            "(the node agent records its state, then stops, disables and masks it; "
            "destroy puts it back as it was).",
            place,
            "Nothing to do unless a node needs its host IMEX daemon: then "
            + off.replace("gpuplane:", "set gpuplane:", 1))]
    return [finding(
        "FM35",
        "ComputeDomains are on and the nodes carry their own driver, whose "
        f"{IMEX_UNIT} takes the IMEX session: the ComputeDomain daemon never "
        "becomes Ready.",
        place,
        f"On every GPU node: `systemctl disable --now {IMEX_UNIT} && systemctl mask "
        f"{IMEX_UNIT}` (gpuplane's node agent does it where it reaches the nodes, "
        "`gpuplane:cluster.nodeAccess: ssh` or `pod`); or, where no Multi-Node NVLink is "
        "used, " + off)]


def _kubelet_paths(values: Mapping[str, Any], intent: ClusterIntent, where: str,
                   ours: bool) -> list[Finding]:
    """FM36: the kubelet plugin registers under kubeletPlugin.kubeletRegistrarDirectoryPath
    and serves under kubeletPluginsDirectoryPath (default /var/lib/kubelet/...,
    values.yaml@every tag); where the kubelet's root is elsewhere (k0s) the kubelet never
    sees the plugin."""
    root = kubelet_root(intent.distro)
    out = []
    for key, leaf in (("kubeletRegistrarDirectoryPath", "plugins_registry"),
                      ("kubeletPluginsDirectoryPath", "plugins")):
        value = lookup(values, f"kubeletPlugin.{key}", f"{DEFAULT_KUBELET_ROOT}/{leaf}")
        wanted = f"{root}/{leaf}"
        if not isinstance(value, str) or posixpath.normpath(value) != wanted:
            out.append(finding(
                "FM36",
                f"kubeletPlugin.{key} is {value!r}, but {intent.distro}'s kubelet keeps its "
                f"plugins under {root}: the kubelet never registers the DRA plugin and no "
                "claim is prepared.",
                at(where, f"values.kubeletPlugin.{key}",
                   "gpuplane:draDriver.values" if ours else None),
                (f"Remove kubeletPlugin.{key} from gpuplane:draDriver.values (gpuplane sets "
                 f"{wanted})" if ours else f"Set `kubeletPlugin.{key}: {wanted}`.")))
    return out


def check_operator_dra(values: Mapping[str, Any], *, where: str,
                       dra_release: bool = False, ours: bool = False) -> list[Finding]:
    """FM34: GPU Operator v26.7 runs the DRA driver itself under a GPUCluster
    (gpuCluster.deployCR), which must not coexist with its ClusterPolicy
    (clusterPolicy.deployCR, default true: "an invalid configuration for both CRs to
    exist", deployments/gpu-operator/values.yaml@v26.7.0), nor with a DRA driver release of
    its own."""
    if not flag(values, "gpuCluster.deployCR", False):
        return []
    out = []
    if flag(values, "clusterPolicy.deployCR", True):
        out.append(finding(
            "FM34",
            "gpuCluster.deployCR and clusterPolicy.deployCR are both true: the operator "
            "reconciles a ClusterPolicy and a GPUCluster over the same nodes, which it calls "
            "an invalid configuration.",
            at(where, "values.clusterPolicy.deployCR",
               "gpuplane:gpuOperator.values" if ours else None),
            "Set clusterPolicy.deployCR: false beside gpuCluster.deployCR: true, or leave "
            "gpuCluster.deployCR false" + (" (in gpuplane:gpuOperator.values)." if ours
                                           else ".")))
    if dra_release:
        out.append(finding(
            "FM34",
            "the GPU Operator runs its own DRA driver (gpuCluster.deployCR) and the program "
            "installs the DRA driver's chart too: two drivers publish gpu.nvidia.com.",
            at(where, "values.gpuCluster.deployCR",
               "gpuplane:gpuOperator.values" if ours else None),
            "Keep one: remove the DRA driver release (with gpuplane: gpuplane:draDriver), "
            "or gpuCluster.deployCR (gpuplane:gpuOperator.values)."))
    return out


__all__ = ["OPERATOR_DRIVER_ROOT", "check_dra_node_cdi", "check_dra_release",
           "check_operator_dra", "served_twice"]
