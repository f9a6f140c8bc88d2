"""Helm values and ConfigMap data derived from the stack config: pure functions.

One place decides every value gpuplane sets in the GPU Operator and HAMi charts, so the
Pulumi components, the offline plan and the tests all see the same dicts. A user's raw
`values` are merged last; the policies check the merged result, not our intentions.
"""

from __future__ import annotations

import copy
from typing import Any

from gpuplane.config import StackConfig
from gpuplane.config.dra import DraDriverConfig
from gpuplane.config.sharing_values import (
    hami_node_values,
    plugin_config_data,
    sharing_operator_values,
)
from gpuplane.core.images import hami_mirror_values, operator_mirror_values
from gpuplane.rules.dra_facts import DRA_NODE_LABEL, dra_image_path, dra_node_labels
from gpuplane.toolkit.env import DEVICE_PLUGIN_ENV, before_v25_10


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Helm's rule for values: maps merge key by key, anything else replaces."""
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def operator_values(cfg: StackConfig, toolkit_env: list[dict[str, str]]) -> dict[str, Any]:
    """GPU Operator values: driver/toolkit ownership, the toolkit env that points at the
    kubelet's containerd, CDI, the RuntimeClass, and the device plugin's sharing config;
    with `imageMirror`, every image's registry moved to the mirror under them. Only for a
    stack with `gpuplane:gpuOperator` (ValueError otherwise: HAMi alone has none)."""
    op = cfg.gpu_operator
    if op is None:
        raise ValueError("no gpuplane:gpuOperator: this stack installs no GPU Operator")
    toolkit: dict[str, Any] = {"enabled": op.toolkit == "operator"}
    if op.toolkit == "operator":
        toolkit["env"] = toolkit_env
    if op.toolkit_image:
        repository, _, image = op.toolkit_image.repository.rpartition("/")
        toolkit.update(repository=repository, image=image, version=op.toolkit_image.tag)
    # With the DRA driver handing out the GPUs, the operator's device plugin must not
    # advertise them too (FM32). On every GPU node: off in the ClusterPolicy (one switch
    # for every node it manages); on some pools only (draDriver.pools): on, and off on
    # those pools' nodes by their nvidia.com/gpu.deploy.device-plugin label
    # (dra_node_labels).
    dra_gpus = cfg.dra_driver is not None and cfg.dra_driver.gpus \
        and cfg.dra_driver.pools is None
    device_plugin: dict[str, Any] = {
        "enabled": cfg.device_plugin == "gpu-operator" and not dra_gpus}
    if op.toolkit == "operator" and cfg.device_plugin == "gpu-operator" \
            and cfg.plan_options().detected and before_v25_10(op.chart_version):
        # RKE2's docs for chart v25.3.x in detected mode (gpuplane.toolkit.env).
        device_plugin["env"] = [{"name": k, "value": v} for k, v in DEVICE_PLUGIN_ENV.items()]
    plat = cfg.platform
    if plat is not None and plat.install_dir:
        # COS: the only writable, stateful place for NVIDIA's files (NVIDIA's GKE recipe).
        toolkit["installDir"] = plat.install_dir
    values: dict[str, Any] = {
        "operator": {"runtimeClass": cfg.runtime.name},
        "driver": {"enabled": op.driver == "managed"},
        "toolkit": toolkit,
        "cdi": {"enabled": op.cdi, **({"nriPluginEnabled": True} if op.nri else {})},
        "devicePlugin": device_plugin,
    }
    if plat is not None and plat.install_dir:
        values["hostPaths"] = {"driverInstallDir": plat.install_dir}
    # The sharing: devicePlugin.config, mig.strategy, migManager (config.sharing_values).
    values = deep_merge(values, sharing_operator_values(cfg))
    mirror = operator_mirror_values(op.chart_version, op.image_mirror)
    return deep_merge(deep_merge(mirror, values) if mirror else values, op.values)


def hami_values(cfg: StackConfig) -> dict[str, Any]:
    """HAMi values: the scheduler pinned to the cluster's version, a webhook that fails
    closed with more than one scheduler, and the runtime class where nvidia isn't default;
    the device plugin waits for the operator's toolkit only where the operator installs
    it (HAMi alone: the host's toolkit, nothing to wait for); with `imageMirror`, every
    image's registry moved to the mirror under them."""
    hami = cfg.hami
    exempt = list(dict.fromkeys(["kube-system", hami.namespace, cfg.gpuplane_namespace,
                                 *hami.webhook_exempt_namespaces]))
    values = {
        "scheduler": {
            "kubeScheduler": {"image": {"registry": hami.scheduler_registry,
                                        "repository": hami.scheduler_image_repository,
                                        "tag": cfg.hami_scheduler_tag}},
            "admissionWebhook": {"failurePolicy": hami.webhook_failure_policy,
                                 "whitelistNamespaces": exempt},
            "leaderElect": True,
            "replicas": hami.scheduler_replicas,
        },
        "devicePlugin": {
            "deviceSplitCount": hami.device_split_count,
            "deviceMemoryScaling": hami.device_memory_scaling,
            "deviceCoreScaling": hami.device_core_scaling,
            "runtimeClassName": "" if cfg.runtime.nvidia_default else cfg.runtime.name,
            "nvidiaNodeSelector": {"gpu": "on"},
            "gpuOperatorToolkitReady": {"enabled": cfg.toolkit == "operator"},
        },
    }
    plat = cfg.platform
    if plat is not None and plat.install_dir:
        # COS keeps the driver outside / (gpuplane.rules.platform._hami_driver_root).
        values["devicePlugin"]["nvidiaDriverRoot"] = plat.install_dir
    values = deep_merge(values, hami_node_values(cfg))   # gpuplane:sharing's HAMi pools
    mirror = hami_mirror_values(hami.chart_version, hami.image_mirror)
    return deep_merge(deep_merge(mirror, values) if mirror else values, hami.values)


def dra_values(cfg: StackConfig) -> dict[str, Any]:
    """The DRA driver's values (dra_release_values below): the driver root
    for where the driver lives, the kubelet plugin paths under the distribution's kubelet
    root. Only for a stack with `gpuplane:draDriver` (ValueError otherwise)."""
    from gpuplane.rules.dra_facts import kubelet_root

    if cfg.dra_driver is None:
        raise ValueError("no gpuplane:draDriver: this stack installs no DRA driver")
    return dra_release_values(cfg.dra_driver, cfg.dra_driver_root,
                              kubelet_root(cfg.cluster.distro.value))


def dra_release_values(dra: DraDriverConfig, driver_root: str, kubelet_dir: str
                       ) -> dict[str, Any]:
    """The chart's values for these choices (NVIDIA/k8s-dra-driver-gpu deployments/helm/
    nvidia-dra-driver-gpu/values.yaml@v25.8.1, @v25.12.0; kubernetes-sigs/
    dra-driver-nvidia-gpu deployments/helm/dra-driver-nvidia-gpu/values.yaml@v0.4.1):
    `gpuResourcesEnabledOverride` is the chart's own guard against a device plugin on the
    same GPUs (templates/validation.yaml); gpuplane sets it only because it turns the
    operator's device plugin off where the driver runs (FM32 judges the result). With
    `pools`, the kubelet plugin runs only on the nodes labelled as those pools'
    (`kubeletPlugin.nodeSelector`, templates/kubeletplugin.yaml@every tag). The kubelet
    plugin's registration paths follow the kubelet's root directory (k0s:
    /var/lib/k0s/kubelet)."""
    values: dict[str, Any] = {
        "nvidiaDriverRoot": driver_root,
        "resources": {"gpus": {"enabled": dra.gpus},
                      "computeDomains": {"enabled": dra.compute_domains}},
        "gpuResourcesEnabledOverride": dra.gpus,
        "kubeletPlugin": {
            "kubeletRegistrarDirectoryPath": f"{kubelet_dir}/plugins_registry",
            "kubeletPluginsDirectoryPath": f"{kubelet_dir}/plugins",
        },
    }
    if dra.pools is not None:
        values["kubeletPlugin"]["nodeSelector"] = {DRA_NODE_LABEL: "true"}
    if dra.feature_gates:
        values["featureGates"] = dict(dra.feature_gates)
    if dra.image_mirror:
        values["image"] = {"repository": f"{dra.image_mirror}/{dra_image_path(dra.chart_version)}"}
    return deep_merge(values, dra.values)


def dra_labels(cfg: StackConfig) -> dict[str, dict[str, str]]:
    """node -> the labels of a node the DRA driver serves where it serves some pools only
    (`draDriver.pools`; gpuplane.rules.dra_facts.dra_node_labels); none otherwise."""
    dra = cfg.dra_driver
    if dra is None or dra.pools is None:
        return {}
    return {node: dra_node_labels(dra.gpus) for node in cfg.dra_pool_nodes()}


def time_slicing_data(cfg: StackConfig) -> dict[str, str]:
    """The device plugin's sharing ConfigMap `data`, one profile key per pool (with
    `gpuplane:timeSlicing`, its one profile): keys under `sharing.timeSlicing` or
    `sharing.mps`, never under `flags`, where the plugin ignores them. Each key's
    `flags.migStrategy` is the operator's `mig.strategy` (a MIG pool's own), so the
    plugin's config never contradicts what the operator runs it with
    (gpuplane.config.sharing_values)."""
    return plugin_config_data(cfg)


__all__ = ["deep_merge", "dra_labels", "dra_release_values", "dra_values", "hami_values",
           "operator_values", "time_slicing_data"]
