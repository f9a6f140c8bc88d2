"""What gpuplane writes for the stack's GPU sharing: pure functions over `StackConfig`.

- the device plugin's ConfigMap, one key per sharing profile (`default` and each pool):
  `flags.migStrategy` and `sharing.timeSlicing` or `sharing.mps` (the plugin's config
  file format, NVIDIA/k8s-device-plugin api/config/v1/config.go@v0.18.0);
- the operator's values that point at it (`devicePlugin.config`), its `mig.strategy`, and
  `migManager.*` (gpuplane's own mig-parted ConfigMap when a pool writes its layout out;
  `WITH_REBOOT=true` on GKE nodes whose driver is Google's installer's: NVIDIA
  cloud-native-docs gpu-operator/google-gke.rst@305025848fdb, "Using the Google Driver
  Installer");
- the per-node labels that select a profile (`nvidia.com/device-plugin.config`) and a
  MIG layout (`nvidia.com/mig.config`), applied through `NodeLabels`;
- under HAMi, HAMi's per-node config instead: the chart's
  `devicePlugin.nodeConfiguration.config` (a JSON text the chart puts in its device
  plugin's ConfigMap as `config.json`, charts/hami/templates/device-plugin/configmap.yaml
  at v2.8.3, v2.9.0, v2.10.0), whose `nodeconfig` entries the plugin matches by its
  `NODE_NAME` (pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go,
  readFromConfigFile, at the same tags): one entry per listed node of a pool with a HAMi
  mode, its values merged over the cluster's (a key left out keeps `gpuplane:hami`'s),
  and, beside the operator, MIG Manager off where a pool runs HAMi's MIG mode.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import yaml

from gpuplane.core.mig import named_configs
from gpuplane.core.sharing import (
    GPU_RESOURCE,
    HAMI_MODES,
    MIG_CONFIG_LABEL,
    PLUGIN_CONFIG_LABEL,
    PoolSharing,
    mig_resource,
)
from gpuplane.platforms.profiles import Platform
from gpuplane.rules.opvalues import mig_strategy

if TYPE_CHECKING:
    from gpuplane.config import StackConfig

MIG_PARTED_CONFIGMAP = "gpuplane-mig-parted-config"
MIG_PARTED_KEY = "config.yaml"
_REBOOT_PLATFORMS = (Platform.GKE_COS, Platform.GKE_UBUNTU)


def cluster_mig_strategy(cfg: StackConfig) -> str:
    """The operator's `mig.strategy`: the first MIG profile's (`default`, then pools by
    name), else what the raw values say (the chart's `single` where unset). Pools
    that disagree keep their own in their key, which FM19 then reports."""
    for p in cfg.sharing_profiles().values():
        if p.mig:
            return p.mig_strategy
    op = cfg.gpu_operator
    return mig_strategy(op.values if op else {})


def profile_doc(p: PoolSharing, cluster_strategy: str) -> dict[str, Any]:
    """One key of the device plugin's ConfigMap, as a mapping."""
    doc: dict[str, Any] = {"version": "v1", "flags": {
        "migStrategy": p.mig_strategy if p.mig else cluster_strategy}}
    if not p.shared:
        return doc
    names = [GPU_RESOURCE] if not p.mig or p.mig_strategy == "single" \
        else [mig_resource(name) for name, n in p.mig_layout if n > 0]
    section: dict[str, Any] = {"renameByDefault": p.rename_by_default}
    if p.mode == "time-slicing":
        section["failRequestsGreaterThanOne"] = p.fail_requests_greater_than_one
    section["resources"] = [{"name": n, "replicas": p.replicas} for n in names]
    doc["sharing"] = {"timeSlicing" if p.mode == "time-slicing" else "mps": section}
    return doc


def plugin_config_data(cfg: StackConfig) -> dict[str, str]:
    """The device plugin's ConfigMap `data`: key -> YAML, one key per profile."""
    strategy = cluster_mig_strategy(cfg)
    return {key: yaml.safe_dump(profile_doc(p, strategy), sort_keys=False)
            for key, p in cfg.sharing_profiles().items()}


def config_map_name(cfg: StackConfig) -> str:
    return cfg.sharing.config_map if cfg.sharing is not None else cfg.time_slicing.config_map


def default_key(cfg: StackConfig) -> str:
    return "default" if cfg.sharing is not None else cfg.time_slicing.profile


def sharing_operator_values(cfg: StackConfig) -> dict[str, Any]:
    """The operator's values for the sharing (merged under the user's raw values)."""
    found = cfg.sharing_profiles()
    if cfg.device_plugin == "hami" and any(p.mode == "mig" for p in found.values()):
        # The operator labels every MIG-capable node nvidia.com/mig.config=all-disabled
        # where MIG Manager runs with the chart's default config (NVIDIA/gpu-operator
        # controllers/state_manager.go@v25.10.1), and MIG Manager then turns MIG off under
        # HAMi's MIG mode. Under HAMi nothing of gpuplane's uses MIG Manager (FM29).
        return {"migManager": {"enabled": False}}
    if not found or cfg.device_plugin != "gpu-operator":
        return {}
    values: dict[str, Any] = {"devicePlugin": {"config": {
        "create": False, "name": config_map_name(cfg), "default": default_key(cfg)}}}
    if any(p.mig for p in found.values()):
        values["mig"] = {"strategy": cluster_mig_strategy(cfg)}
        manager: dict[str, Any] = {"enabled": True}
        if any(p.custom_layout for p in found.values()):
            manager["config"] = {"name": MIG_PARTED_CONFIGMAP, "default": "all-disabled"}
        op = cfg.gpu_operator
        if cfg.cluster.platform in _REBOOT_PLATFORMS and op is not None \
                and op.driver == "preinstalled":
            manager["env"] = [{"name": "WITH_REBOOT", "value": "true"}]
        values["migManager"] = manager
    return values


def mig_parted_data(cfg: StackConfig) -> dict[str, str] | None:
    """gpuplane's mig-parted ConfigMap `data` where a pool writes its layout out: it
    replaces the chart's default config, so it also carries `all-disabled` and every
    named layout another pool uses (copied from the chart's own at its tag). None: no
    custom layout, MIG Manager keeps the chart's default config."""
    found = [p for p in cfg.sharing_profiles().values() if p.mig]
    if not any(p.custom_layout for p in found):
        return None
    chart = cfg.gpu_operator.chart_version if cfg.gpu_operator else None
    named = named_configs(chart)
    configs: dict[str, Any] = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    for p in found:
        if p.custom_layout:
            configs[p.mig_config] = [{"devices": "all", "mig-enabled": True,
                                      "mig-devices": dict(p.mig_layout)}]
        elif p.mig_config in named:
            configs[p.mig_config] = [
                {**({"device-filter": flt} if flt else {}), "devices": "all",
                 "mig-enabled": enabled, **({"mig-devices": devices} if enabled else {})}
                for flt, enabled, devices in named[p.mig_config]]
    doc = {"version": "v1", "mig-configs": configs}
    return {MIG_PARTED_KEY: yaml.safe_dump(doc, sort_keys=False)}


def node_labels(cfg: StackConfig) -> dict[str, dict[str, str]]:
    """node -> the labels that select its pool's profile and MIG layout. Only nodes of a
    pool with its own entry get the plugin label (the rest use
    `devicePlugin.config.default`); only MIG pools get `nvidia.com/mig.config`; the nodes
    of the DRA driver's own pools (`draDriver.pools`) none."""
    if cfg.sharing is None or cfg.device_plugin != "gpu-operator":
        return {}
    found = cfg.sharing_profiles()
    out: dict[str, dict[str, str]] = {}
    dra_pools = cfg.dra_pools
    for node in cfg.nodes:
        # A node the DRA driver serves (draDriver.pools) runs no device plugin to select.
        if node.gpus <= 0 or node.pool in dra_pools:
            continue
        key = cfg.sharing_key(node.pool)
        p = found.get(key) if key else None
        labels: dict[str, str] = {}
        if key and key != default_key(cfg):
            labels[PLUGIN_CONFIG_LABEL] = key
        if p is not None and p.mig:
            labels[MIG_CONFIG_LABEL] = p.mig_config
        if labels:
            out[node.name] = labels
    return out


def hami_node_config(cfg: StackConfig) -> dict[str, Any] | None:
    """HAMi's `nodeconfig` document: per listed GPU node of a pool whose profile names a
    HAMi mode, its `operatingmode` and the pool's own `devicesplitcount` /
    `devicememoryscaling`. None: no such node (the chart's own example entry stays)."""
    if cfg.sharing is None or cfg.device_plugin != "hami":
        return None
    entries: list[dict[str, Any]] = []
    for node in cfg.nodes:
        p = cfg.sharing.pools.get(node.pool, cfg.sharing.default)
        if node.gpus <= 0 or p.mode not in HAMI_MODES:
            continue
        entry: dict[str, Any] = {"name": node.name, "operatingmode": p.mode}
        if p.device_split_count is not None:
            entry["devicesplitcount"] = p.device_split_count
        if p.device_memory_scaling is not None:
            entry["devicememoryscaling"] = p.device_memory_scaling
        entries.append(entry)
    return {"nodeconfig": entries} if entries else None


def hami_node_values(cfg: StackConfig) -> dict[str, Any]:
    """HAMi's chart values for the per-node config (empty: none to write)."""
    doc = hami_node_config(cfg)
    if doc is None:
        return {}
    return {"devicePlugin": {"nodeConfiguration": {
        "config": json.dumps(doc, indent=2) + "\n"}}}


__all__ = ["MIG_PARTED_CONFIGMAP", "MIG_PARTED_KEY", "cluster_mig_strategy",
           "config_map_name", "default_key", "hami_node_config", "hami_node_values",
           "mig_parted_data", "node_labels",
           "plugin_config_data", "profile_doc", "sharing_operator_values"]
