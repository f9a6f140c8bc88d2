"""FM19-FM25 and FM29: GPU sharing that cannot work as written (MIG, MPS, per-pool
profiles, HAMi's modes per pool).

Pure functions over what the stack renders or a plain install carries: the operator's
values (`mig.strategy`, `devicePlugin.config`), the device plugin's ConfigMap (one YAML
key per profile), the labels that select a key, the stack's sharing profiles (the
intent's `sharing`, with each pool's GPU model and MIG layout) and the workloads.

Facts (NVIDIA/k8s-device-plugin at v0.18.0, NVIDIA/gpu-operator at the chart's tag):
- the plugin's per-key `flags.migStrategy` overrides the `MIG_STRATEGY` the operator
  starts it with, while the operator's plugin validation keeps `mig.strategy`
  (NVIDIA/gpu-operator controllers/object_controls.go@v25.10.1);
- the single strategy requires all MIG devices on a node alike, else the plugin fails
  (`invalid MIG configuration`, internal/rm/device_map.go);
- MPS refuses MIG devices (internal/plugin/mps.go) and the mixed strategy
  (cmd/nvidia-device-plugin/main.go), and always fails a request for more than one
  shared device; time-slicing fails it only with `failRequestsGreaterThanOne`
  (internal/rm/rm.go);
- a node whose `nvidia.com/device-plugin.config` label names a key the ConfigMap lacks
  gets no config: the config-manager sidecar fails to find it and the plugin does not
  start (cmd/config-manager/main.go);
- the mixed strategy advertises MIG instances as `nvidia.com/mig-<profile>` only
  (internal/rm/rm.go AddDefaultResourcesToConfig).

HAMi (Project-HAMi/HAMi): its device plugin runs a node in the `operatingmode` of the
`nodeconfig` entry named like the node (pkg/device-plugin/nvidiadevice/nvinternal/plugin/
server.go@v2.8.3..v2.10.0); in `mig` mode it registers only GPUs it finds MIG profiles on
(nvinternal/plugin/register.go@v2.10.0: "skip MIG device with no discovered profile
capacity"; the scheduler matches the GPU model against `knownMigGeometries`,
pkg/device/nvidia/device.go@v2.8.3), and its docs name Ampere, Hopper and Blackwell
(docs/dynamic-mig-support.md@v2.8.3). The GPU Operator plugin's ConfigMap and MIG
Manager are not part of a HAMi install.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from gpuplane.core.findings import Finding
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.core.mig import model
from gpuplane.core.sharing import (
    GPU_RESOURCE,
    MIG_CONFIG_LABEL,
    MIG_PREFIX,
    PLUGIN_CONFIG_LABEL,
    PoolSharing,
    layout_mixes,
)
from gpuplane.rules._shared import at, finding, mapping
from gpuplane.rules.opvalues import mig_strategy

_KEY = "gpuplane:sharing"
HOSTNAME = "kubernetes.io/hostname"


def _pool_key(key: str) -> str:
    return f"{_KEY}.default" if key == "default" else f"{_KEY}.pools.{key}"


def profile_docs(data: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The ConfigMap's keys that parse as a config mapping (the rest are FM10's)."""
    out: dict[str, Mapping[str, Any]] = {}
    for key, text in data.items():
        try:
            doc = yaml.safe_load(text) if isinstance(text, str) else None
        except yaml.YAMLError:
            continue
        if isinstance(doc, Mapping):
            out[str(key)] = doc
    return out


# ---------------------------------------------------------------- FM19

def check_mig_strategy(values: Any, data: Mapping[str, Any], *, where: str) -> list[Finding]:
    """FM19: a profile whose `flags.migStrategy` names resources another way than the
    operator's `mig.strategy`: one of them `mixed` (nvidia.com/mig-<profile>), the other
    not. `none` and `single` both advertise nvidia.com/gpu (a MIG instance under single,
    k8s-device-plugin internal/rm/rm.go@v0.18.0), so a profile that says `none` beside the
    operator's default `single` (what most plain installs and older gpuplane stacks carry)
    advertises what the validation asks for, and is no failure."""
    want = mig_strategy(values)
    out = []
    for key, doc in sorted(profile_docs(data).items()):
        have = mapping(doc.get("flags")).get("migStrategy")
        if have is None or (str(have) == "mixed") == (want == "mixed"):
            continue
        out.append(finding(
            "FM19",
            f"profile {key!r} runs the device plugin with migStrategy {have!r} but the "
            f"operator's mig.strategy is {want!r}: the plugin advertises MIG instances one "
            "way while the operator's plugin validation and the other pools expect the "
            "other (the operator has one strategy for the whole cluster).",
            at(where, f"data.{key} flags.migStrategy", f"{_pool_key(key)}.mig.strategy"),
            "Give every MIG pool of gpuplane:sharing the same mig.strategy and leave "
            "mig.strategy out of gpuplane:gpuOperator.values (gpuplane sets it from the "
            f"pools); raw Helm: mig.strategy={have}, or flags.migStrategy: {want} in every "
            "profile."))
    return out


# ---------------------------------------------------------------- FM23

def check_profile_keys(data: Mapping[str, Any], default: str,
                       labels: Iterable[tuple[str, str]], *, where: str,
                       default_where: str) -> list[Finding]:
    """FM23: `devicePlugin.config.default` or a node's `nvidia.com/device-plugin.config`
    label (`labels`: (who, key) pairs) names a key the ConfigMap lacks."""
    have = ", ".join(map(repr, sorted(map(str, data)))) or "no keys"
    out = []
    if default and default not in data:
        out.append(finding(
            "FM23",
            f"devicePlugin.config.default is {default!r} but the ConfigMap has {have}: "
            "nodes without a nvidia.com/device-plugin.config label get no config, and the "
            "device plugin does not start there.",
            default_where,
            f"Add key {default!r} to the ConfigMap or point devicePlugin.config.default at "
            "one of its keys (gpuplane writes both from gpuplane:sharing)."))
    for who, key in sorted(set(labels)):
        if key not in data:
            out.append(finding(
                "FM23",
                f"{who} carries {PLUGIN_CONFIG_LABEL}={key} but the ConfigMap has {have}: "
                "the device plugin there finds no config and does not start, so the node "
                "advertises no GPU.",
                at(where, f"data.{key}", _pool_key(key)),
                f"Add key {key!r} to the ConfigMap, or label the node with one of its keys "
                f"(kubectl label node <node> {PLUGIN_CONFIG_LABEL}=<key> --overwrite)."))
    return out


# ---------------------------------------------------------------- FM20-FM22 per pool

def check_pools(intent: ClusterIntent, *, where: str) -> list[Finding]:
    """FM20-FM22 and FM29 over the stack's sharing profiles (the intent's `sharing`),
    each judged against the device plugin the cluster runs (the operator's or HAMi)."""
    out: list[Finding] = []
    hami = intent.device_plugin == "hami"
    for p in intent.sharing:
        out += _fits(p, where) + _single_mixes(p, where) + _mps_on_mig(p, where)
        out += _hami_pool(p, where) if hami else _hami_mode_unread(p, intent, where)
    return out


def _hami_pool(p: PoolSharing, where: str) -> list[Finding]:
    """FM22 and FM29 on a HAMi cluster: the GPU Operator plugin's sharing on a pool, which
    nothing reads there (HAMi replaces that plugin and slices the GPUs itself)."""
    key = _pool_key(p.key)
    if p.mode == "mps":
        return [finding(
            "FM22", f"pool {p.key!r} asks for MPS, the GPU Operator device plugin's sharing, "
                    "but HAMi replaces that plugin: the MPS profile is never read and HAMi "
                    "slices the pool's GPUs with the cluster's settings.",
            at(where, f"sharing {p.key}", f"{key}.mode"),
            f"Set {key}.mode: hami-core (HAMi's own slicing; deviceSplitCount per pool) and "
            "remove replicas.")]
    unread = [what for what, there in (
        (f"mode {p.mode}", p.mode == "time-slicing"),
        (f"mig ({p.mig_strategy} strategy, MIG Manager layout {p.mig_config!r})", p.mig),
        ("renameByDefault", p.rename_by_default),
        ("failRequestsGreaterThanOne", p.fail_requests_greater_than_one)) if there]
    if not unread:
        return []
    return [finding(
        "FM29", f"pool {p.key!r} sets {', '.join(unread)}: the GPU Operator device plugin's "
                "sharing, but devicePlugin is hami: that plugin is off and gpuplane writes "
                "neither its ConfigMap keys nor MIG Manager's layout labels, so none of it "
                "is applied and the pool's nodes get HAMi's cluster settings.",
        at(where, f"sharing {p.key}", f"{key}.{'mig' if p.mig else 'mode'}"),
        f"Under HAMi write {key}.mode: hami-core (with deviceSplitCount / "
        "deviceMemoryScaling for this pool) or mode: mig with gpuModel (HAMi makes the MIG "
        "instances itself), and remove replicas, mig, renameByDefault and "
        "failRequestsGreaterThanOne.")]


def _hami_mode_unread(p: PoolSharing, intent: ClusterIntent, where: str) -> list[Finding]:
    """FM29 off HAMi: a pool naming a HAMi operating mode that no HAMi reads."""
    if not p.hami:
        return []
    key = _pool_key(p.key)
    instead = ("give it mig: {strategy, profile} with gpuModel (MIG Manager's layout)"
               if p.mode == "mig" else "use mode whole, time-slicing or mps")
    return [finding(
        "FM29", f"pool {p.key!r} asks for HAMi's {p.mode} mode, but devicePlugin is "
                f"{intent.device_plugin}: HAMi is not installed, so nothing reads the mode "
                "and the pool's nodes advertise whole GPUs from the cluster's device plugin.",
        at(where, f"sharing {p.key}", f"{key}.mode"),
        f"Set gpuplane:devicePlugin: hami to run HAMi, or {instead} for {key}.")]


def _fits(p: PoolSharing, where: str) -> list[Finding]:
    """FM20: the pool's MIG layout against its GPU model."""
    gpu = model(p.gpu_model) if p.gpu_model else None
    if p.mode == "mig" and gpu is not None and not gpu.mig:
        return [finding(
            "FM20", f"pool {p.key!r} runs HAMi's MIG mode on {gpu.name}, which has no MIG: "
                    "HAMi finds no MIG profile for these GPUs (its device plugin skips them "
                    "from v2.10.0; before, its scheduler fits no pod to them), so no pod is "
                    "ever scheduled there.",
            at(where, f"sharing {p.key}", f"{_pool_key(p.key)}.mode"),
            f"Set {_pool_key(p.key)}.mode: hami-core (HAMi's own slicing shares a "
            f"{gpu.name}), or set gpuModel to the pool's real GPU.")]
    if not p.mig or gpu is None:
        return []
    here = at(where, f"sharing {p.key}", f"{_pool_key(p.key)}.mig")
    if not gpu.mig:
        return [finding(
            "FM20", f"pool {p.key!r} asks for MIG on {gpu.name}, which has no MIG: MIG "
                    "Manager cannot apply the layout and the node advertises nothing it "
                    "expects.", here,
            f"Remove mig from {_pool_key(p.key)} (time-slicing or MPS share a {gpu.name}), "
            "or set gpuModel to the pool's real GPU.")]
    fits = ", ".join(f"{name} (up to {n})" for name, n in gpu.profiles)
    if not p.mig_layout:
        return [finding(
            "FM20", f"pool {p.key!r}: the mig-parted config {p.mig_config!r} has no layout "
                    f"for {gpu.name}: MIG Manager fails on these nodes (mig.config.state "
                    "failed).", here,
            f"Name a layout made for {gpu.name} (its profiles: {fits}) or give mig.layout.")]
    bad = [f"{name} x{n}" for name, n in p.mig_layout if gpu.most(name) < n]
    slices = sum(int(name.split("g", 1)[0]) * n for name, n in p.mig_layout)
    if not bad and slices <= 7:
        return []
    why = (f"{', '.join(bad)} is not a profile a {gpu.name} makes that often" if bad else
           f"the instances take {slices} of the 7 compute slices a GPU has")
    return [finding(
        "FM20", f"pool {p.key!r}: {why}; MIG Manager fails to apply {p.mig_config!r} "
                "(mig.config.state failed) and the node advertises no MIG device.", here,
        f"Use the profiles a {gpu.name} makes: {fits} (at most 7 compute slices per GPU), "
        "or the chart's all-* layout for it.")]


def _single_mixes(p: PoolSharing, where: str) -> list[Finding]:
    """FM21: the single strategy over a layout of unlike instances."""
    if p.mig_strategy != "single" or not layout_mixes(p.mig_layout):
        return []
    kinds = ", ".join(f"{name} x{n}" for name, n in p.mig_layout)
    return [finding(
        "FM21", f"pool {p.key!r} uses the single MIG strategy with a layout of unlike "
                f"instances ({kinds}): the single strategy advertises every instance as "
                f"{GPU_RESOURCE} and so requires them alike; the device plugin refuses the "
                "node (invalid MIG configuration) and it advertises no GPU.",
        at(where, f"sharing {p.key}", f"{_pool_key(p.key)}.mig.strategy"),
        f"Set {_pool_key(p.key)}.mig.strategy: mixed (each profile advertised as "
        "nvidia.com/mig-<profile>), or a layout of one profile (e.g. mig.profile: "
        "all-1g.10gb) with single.")]


def _mps_on_mig(p: PoolSharing, where: str) -> list[Finding]:
    """FM22: MPS over MIG instances, which the device plugin refuses."""
    if p.mode != "mps" or not p.mig:
        return []
    return [finding(
        "FM22", f"pool {p.key!r} shares MIG instances with MPS: the device plugin refuses "
                "MPS on MIG devices (and with the mixed strategy at all), so the node "
                "advertises nothing.",
        at(where, f"sharing {p.key}", f"{_pool_key(p.key)}.mode"),
        f"Set {_pool_key(p.key)}.mode: time-slicing to share MIG instances, or remove "
        f"{_pool_key(p.key)}.mig to run MPS on whole GPUs.")]


def check_mps_profiles(data: Mapping[str, Any], *, where: str) -> list[Finding]:
    """FM22 in a raw ConfigMap: a key with `sharing.mps` and `flags.migStrategy: mixed`."""
    out = []
    for key, doc in sorted(profile_docs(data).items()):
        mps = mapping(doc.get("sharing")).get("mps")
        if mps and mapping(doc.get("flags")).get("migStrategy") == "mixed":
            out.append(finding(
                "FM22", f"profile {key!r} sets sharing.mps with migStrategy mixed: the "
                        "device plugin refuses to start with this combination.",
                at(where, f"data.{key} sharing.mps", f"{_pool_key(key)}.mode"),
                "Use time-slicing with MIG, or MPS only on pools without MIG "
                "(flags.migStrategy: none or single on whole GPUs)."))
    return out


# ---------------------------------------------------------------- FM24-FM25 workloads

def reachable_nodes(selector: Mapping[str, Any], intent: ClusterIntent) -> list[NodeIntent]:
    """The stack's GPU nodes a pod's nodeSelector can land on, by the labels gpuplane
    knows (host name, the plugin's config key, the MIG layout); others do not narrow."""
    nodes = list(intent.gpu_nodes)
    for label, value in selector.items():
        if label == HOSTNAME:
            nodes = [n for n in nodes if n.name == value]
        elif label in (PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL):
            keep = []
            for n in nodes:
                p = intent.sharing_of(n.pool)
                have = (p.key if label == PLUGIN_CONFIG_LABEL else p.mig_config) if p else ""
                if have == value:
                    keep.append(n)
            nodes = keep
    return nodes


Amounts = Iterable[tuple[str, Mapping[str, float]]]   # (container path, {resource: amount})


def check_workload_sharing(spec: Mapping[str, Any], containers: Amounts,
                           intent: ClusterIntent, where: str) -> list[Finding]:
    """FM24 and FM25 for one pod spec, container by container (the device plugin
    allocates per container)."""
    if not intent.sharing or intent.device_plugin != "gpu-operator":
        return []
    nodes = reachable_nodes(mapping(spec.get("nodeSelector")), intent)
    if not nodes:
        return []
    out: list[Finding] = []
    for path, amounts in containers:
        for name, amount in sorted(amounts.items()):
            if amount <= 0 or not name.startswith(GPU_RESOURCE[:11]):
                continue
            offering = [n for n in nodes if dict(n.resources).get(name, 0) > 0]
            here = at(where, f"{path}.resources", _KEY)
            if not offering and name.startswith(GPU_RESOURCE) and any(
                    r.startswith(MIG_PREFIX) for n in nodes for r, _ in n.resources):
                mig = sorted({r for n in nodes for r, _ in n.resources if r.startswith(MIG_PREFIX)})
                out.append(finding(
                    "FM25", f"the pod asks for {name}, but the nodes it can run on advertise "
                            f"only MIG instances ({', '.join(mig)}, mixed strategy): it "
                            "stays Pending.", here,
                    f"Ask for one of {', '.join(mig)}, or run it on a pool with whole GPUs "
                    "(nodeSelector nvidia.com/device-plugin.config=<that pool's key>)."))
                continue
            refusing = [n for n in offering if _one_only(intent.sharing_of(n.pool))]
            if amount > 1 and offering and len(refusing) == len(offering):
                pool = intent.sharing_of(refusing[0].pool)
                assert pool is not None
                why = "MPS" if pool.mode == "mps" else \
                    "time-slicing with failRequestsGreaterThanOne"
                out.append(finding(
                    "FM24", f"the pod asks for {amount:g} {name} where every node offering "
                            f"it shares GPUs with {why}: the device plugin fails the "
                            "allocation (UnexpectedAdmissionError) and the pod never starts.",
                    at(where, f"{path}.resources", _pool_key(pool.key)),
                    f"Ask for 1 {name} per container, or run it on a pool with whole GPUs; "
                    "for time-slicing, failRequestsGreaterThanOne: false lets it through "
                    "(the replicas may share one GPU)."))
    return out


def _one_only(p: PoolSharing | None) -> bool:
    return p is not None and p.shared and (
        p.mode == "mps" or p.fail_requests_greater_than_one)


__all__ = ["check_mig_strategy", "check_mps_profiles", "check_pools", "check_profile_keys",
           "check_workload_sharing", "profile_docs", "reachable_nodes"]
