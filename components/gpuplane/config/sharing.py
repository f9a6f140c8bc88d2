"""`gpuplane:sharing`: how each node pool's GPUs are handed out, with a cluster default.

One model for every way the GPU Operator's device plugin shares a GPU: whole GPUs,
time-slicing, MPS, and MIG (single or mixed strategy) with a layout named from the
chart's default mig-parted config or written out. gpuplane renders from it the device
plugin's ConfigMap (one key per profile), the operator's `mig.*`/`migManager.*` values
and the per-node labels that select them (gpuplane.config.sharing_values), and the
intent's per-node resources (gpuplane.core.sharing.advertised).

The older `gpuplane:timeSlicing` keeps working: it is the cluster default (time-slicing
with its replicas), in its own ConfigMap and key; setting both is refused.

Under HAMi (`devicePlugin: hami`) a profile says HAMi's `operatingmode` for the pool's
nodes instead: `hami-core` (HAMi's own slicing, with the pool's `deviceSplitCount` /
`deviceMemoryScaling` where they differ from `gpuplane:hami`) or `mig` (HAMi's dynamic
MIG); gpuplane writes HAMi's per-node `nodeconfig` from it (sharing_values). The operator
plugin's modes on a HAMi pool, and HAMi's on an operator cluster, are FM22/FM29.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from gpuplane.config.errors import Problem, stack_key
from gpuplane.config.sections import _Section
from gpuplane.core.mig import MODELS, config_layout, model, named_configs
from gpuplane.core.sharing import HAMI_MODES, PoolSharing

if TYPE_CHECKING:
    from gpuplane.config.stack import StackConfig

DEFAULT_KEY = "default"
CUSTOM_PREFIX = "gpuplane-"    # mig-parted config names gpuplane gives custom layouts
_PROFILE = re.compile(r"^[1-8]g\.\d+gb(\+[a-z.]+|-me)?$")
_KEY = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# The StackConfig fields `sharing_problems` reads (gpuplane.config.stack.Check).
SHARING_NEEDS = frozenset({"sharing", "time_slicing", "device_plugin", "nodes", "gpu_operator",
                           "hami"})


class MigConfig(_Section):
    strategy: Literal["single", "mixed"] = "single"
    """`single`: every MIG instance is advertised as `nvidia.com/gpu` (all instances of a
    pool must then be alike); `mixed`: as `nvidia.com/mig-<profile>`. The operator runs
    one strategy for the whole cluster (`mig.strategy`), so MIG pools must agree (FM19)."""
    profile: str | None = None
    """A layout of the chart's default mig-parted config, e.g. `all-1g.10gb` or
    `all-balanced` (the `nvidia.com/mig.config` label MIG Manager applies)."""
    layout: dict[str, int] | None = None
    """A custom layout instead: MIG profile -> instances per GPU, e.g. `{"3g.40gb": 1,
    "2g.20gb": 1, "1g.10gb": 2}`; gpuplane writes it into its own mig-parted ConfigMap."""

    @field_validator("layout")
    @classmethod
    def _layout(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        for name, count in (value or {}).items():
            if not _PROFILE.match(name):
                raise ValueError(f"{name!r} is not a MIG profile name (e.g. 1g.10gb, 3g.40gb)")
            if isinstance(count, bool) or not 1 <= count <= 7:
                raise ValueError(f"{name}: {count!r} instances; give 1 to 7 per GPU")
        return value

    @model_validator(mode="after")
    def _one_layout(self) -> MigConfig:
        if (self.profile is None) == (self.layout is None):
            raise ValueError("give exactly one of profile (a name of the chart's mig-parted "
                             "config, e.g. all-1g.10gb) or layout (profile -> instances per "
                             "GPU)")
        return self


class SharingProfileConfig(_Section):
    mode: Literal["whole", "time-slicing", "mps", "hami-core", "mig"] = "whole"
    """How each device (a GPU, or a MIG instance) is shared: `whole` (one pod each),
    `time-slicing` or `mps` (`replicas` pods each; MPS also splits memory and compute);
    under HAMi, HAMi's operating mode for the pool's nodes: `hami-core` (HAMi's own
    slicing) or `mig` (HAMi makes MIG instances to fit each pod)."""
    replicas: int = Field(0, ge=0, le=64)
    """Pods per device with time-slicing or MPS (2 or more); 0 with `whole`."""
    rename_by_default: bool = False
    """Advertise shared devices as `<resource>.shared` (e.g. `nvidia.com/gpu.shared`)."""
    fail_requests_greater_than_one: bool = False
    """Time-slicing: refuse a pod that asks for more than one shared device (MPS always
    does)."""
    gpu_model: str | None = None
    """The pool's GPU model, e.g. H100-80GB, A100-40GB, L40S: required with `mig`, which
    must fit it (FM20)."""
    mig: MigConfig | None = None
    """Cut each GPU into MIG instances (A30, A100, H100, H200, B200 and the like)."""
    device_split_count: int | None = Field(None, ge=1, le=100)
    """HAMi modes: tasks sharing one GPU on this pool's nodes (HAMi's per-node
    `devicesplitcount`); unset: `hami.deviceSplitCount`."""
    device_memory_scaling: float | None = Field(None, gt=0)
    """`hami-core`: this pool's GPU memory oversubscription factor (HAMi's per-node
    `devicememoryscaling`); unset: `hami.deviceMemoryScaling`."""

    @field_validator("gpu_model")
    @classmethod
    def _model(cls, value: str | None) -> str | None:
        if value is not None and model(value) is None:
            raise ValueError(f"unknown GPU model {value!r}; known: {', '.join(MODELS)}")
        return None if value is None else model(value).name  # type: ignore[union-attr]

    @model_validator(mode="after")
    def _replicas(self) -> SharingProfileConfig:
        hami = self.mode in HAMI_MODES
        if not hami and (self.device_split_count is not None
                         or self.device_memory_scaling is not None):
            raise ValueError("deviceSplitCount and deviceMemoryScaling are HAMi's, for mode "
                             f"hami-core or mig, not mode {self.mode}; set mode: hami-core "
                             "(with devicePlugin: hami) or remove them")
        if self.mode == "mig" and self.device_memory_scaling is not None:
            raise ValueError("deviceMemoryScaling with mode mig: HAMi's MIG mode never scales "
                             "memory (a MIG instance has its own); remove it, or use mode "
                             "hami-core")
        if self.mode == "mig" and self.mig is not None:
            raise ValueError("mode mig is HAMi's MIG mode, which makes the instances itself; "
                             "the mig block is the GPU Operator's MIG Manager layout: remove "
                             "one (mode mig under HAMi, mig under the operator)")
        if self.mode == "mig" and self.gpu_model is None:
            raise ValueError("mode mig needs gpuModel (e.g. H100-80GB): only GPUs with MIG "
                             "can run HAMi's MIG mode")
        if hami and self.replicas:
            raise ValueError(f"replicas {self.replicas} with mode {self.mode}: HAMi splits a "
                             "GPU deviceSplitCount ways; remove replicas")
        if hami:
            return self
        if self.mode == "whole" and self.replicas:
            raise ValueError(f"replicas {self.replicas} with mode whole; set mode: "
                             "time-slicing (or mps), or remove replicas")
        if self.mode != "whole" and self.replicas < 2:
            raise ValueError(f"mode {self.mode} needs replicas of 2 or more (the device "
                             "plugin refuses fewer)")
        if self.mig is not None and self.gpu_model is None:
            raise ValueError("mig needs gpuModel (e.g. H100-80GB): the profiles a GPU can "
                             "make depend on its model")
        return self


class SharingConfig(_Section):
    config_map: str = "device-plugin-config"
    """The device plugin's ConfigMap (`devicePlugin.config.name`): one key per profile,
    `default` for the cluster default and the pool's name for each pool."""
    default: SharingProfileConfig = SharingProfileConfig()
    """The sharing of every GPU node whose pool has no entry under `pools`."""
    pools: dict[str, SharingProfileConfig] = Field(default_factory=dict)
    """Per node pool (`nodes[].pool`): its own sharing, selected on its nodes by the
    `nvidia.com/device-plugin.config` (and `nvidia.com/mig.config`) labels; under HAMi by
    an entry per listed node in HAMi's per-node config."""

    @field_validator("pools")
    @classmethod
    def _pool_names(cls, value: dict[str, SharingProfileConfig]
                    ) -> dict[str, SharingProfileConfig]:
        for name in value:
            if name == DEFAULT_KEY:
                raise ValueError("pool 'default' is the cluster default: write its sharing "
                                 "under gpuplane:sharing.default")
            if not _KEY.match(name):
                raise ValueError(f"pool {name!r} must be a DNS label, as nodes[].pool")
        return value


def profiles(cfg: StackConfig) -> dict[str, PoolSharing]:
    """Every sharing profile by ConfigMap key (`default` first, then the pools by name):
    from `gpuplane:sharing`, else from `gpuplane:timeSlicing` (its profile key), else none
    (whole GPUs, no ConfigMap)."""
    chart = cfg.gpu_operator.chart_version if cfg.gpu_operator else None
    split = cfg.hami.device_split_count
    if cfg.sharing is not None:
        out = {DEFAULT_KEY: _pool(DEFAULT_KEY, cfg.sharing.default, chart, split)}
        # By name, not as written: the Pulumi engine hands the program its config maps
        # with sorted keys, and the plan and the engine must build the same intent.
        out.update({name: _pool(name, p, chart, split)
                    for name, p in sorted(cfg.sharing.pools.items())})
        return out
    ts = cfg.time_slicing
    if ts.replicas > 0:
        return {ts.profile: PoolSharing(
            ts.profile, "time-slicing", ts.replicas, ts.rename_by_default,
            ts.fail_requests_greater_than_one)}
    return {}


def _pool(key: str, p: SharingProfileConfig, chart: str | None, split: int) -> PoolSharing:
    """One profile's record; `split`: `hami.deviceSplitCount`, a HAMi pool's fallback."""
    gpu = model(p.gpu_model) if p.gpu_model else None
    mig = p.mig
    layout: dict[str, int] = {}
    config = ""
    if mig is not None and mig.layout is not None:
        layout, config = dict(mig.layout), f"{CUSTOM_PREFIX}{key}"
    elif mig is not None and mig.profile is not None:
        config = mig.profile
        layout = config_layout(mig.profile, gpu, chart) or {}
    return PoolSharing(
        key, p.mode, p.replicas, p.rename_by_default, p.fail_requests_greater_than_one,
        mig.strategy if mig else "none", config, tuple(sorted(layout.items())),
        p.gpu_model or "", custom_layout=mig is not None and mig.layout is not None,
        hami_split=(p.device_split_count or split) if p.mode in HAMI_MODES else 0,
        hami_memory_scaling=p.device_memory_scaling or 0.0)


def sharing_key(cfg: StackConfig, pool: str) -> str | None:
    """The ConfigMap key (profile) a node of `pool` uses; None: no sharing config."""
    if cfg.sharing is not None:
        return pool if pool in cfg.sharing.pools else DEFAULT_KEY
    return cfg.time_slicing.profile if cfg.time_slicing.replicas > 0 else None


def sharing_problems(cfg: StackConfig) -> Iterator[Problem]:
    """What `gpuplane:sharing` cannot be combined with; each with its key and the fix."""
    if cfg.sharing is None:
        return
    if "time_slicing" in cfg.model_fields_set and cfg.time_slicing.model_fields_set:
        yield Problem(stack_key("timeSlicing"), "set together with gpuplane:sharing, which "
                      "replaces it; move its settings to gpuplane:sharing.default (mode: "
                      "time-slicing, replicas, renameByDefault, failRequestsGreaterThanOne) "
                      "and remove gpuplane:timeSlicing")
    if cfg.device_plugin == "platform":
        yield Problem(stack_key("sharing"), "needs the GPU Operator's device plugin or HAMi, "
                      "but devicePlugin is platform: the node image's plugin takes its "
                      "sharing from the platform (docs/platform-inputs.md); remove "
                      "gpuplane:sharing")
    if cfg.device_plugin == "hami":
        yield from _hami_default(cfg.sharing.default)
        yield from _hami_raw_node_config(cfg)
        if "config_map" in cfg.sharing.model_fields_set:
            yield Problem(stack_key("sharing.configMap"),
                          "names the GPU Operator device plugin's ConfigMap, which HAMi "
                          "replaces (gpuplane writes HAMi's per-node config into HAMi's own "
                          "chart values); remove sharing.configMap")
    pools = {n.pool for n in cfg.nodes}
    for name in sorted(set(cfg.sharing.pools) - pools):
        known = ", ".join(sorted(pools)) or "none"
        yield Problem(stack_key(f"sharing.pools.{name}"), f"no node has pool {name!r} "
                      f"(nodes[].pool: {known}); fix the pool name or remove the entry")
    chart = cfg.gpu_operator.chart_version if cfg.gpu_operator else None
    names = named_configs(chart)
    entries = [("default", cfg.sharing.default),
               *((f"pools.{k}", v) for k, v in cfg.sharing.pools.items())]
    for path, p in entries:
        if p.mig is not None and p.mig.profile is not None and p.mig.profile not in names:
            close = difflib.get_close_matches(p.mig.profile, list(names), n=3) or \
                [n for n in names if n.startswith("all-")][:4]
            yield Problem(stack_key(f"sharing.{path}.mig.profile"),
                          f"{p.mig.profile!r} is not a layout of the GPU Operator "
                          f"{chart or 'chart'}'s default mig-parted config; did you mean "
                          f"{' or '.join(close)}? (or give mig.layout)")


def _hami_default(d: SharingProfileConfig) -> Iterator[Problem]:
    """Under HAMi the cluster's own split and scaling are `gpuplane:hami`'s: the default
    profile reaches only the listed nodes (HAMi's nodeconfig is per node name), so it does
    not carry them a second time."""
    for field, key in (("device_split_count", "deviceSplitCount"),
                       ("device_memory_scaling", "deviceMemoryScaling")):
        if getattr(d, field) is not None:
            yield Problem(stack_key(f"sharing.default.{key}"),
                          f"under HAMi the cluster's {key} is hami.{key} (every GPU node, "
                          f"listed or not); move the value to gpuplane:hami.{key} and "
                          f"remove sharing.default.{key}, or set it per pool under "
                          "sharing.pools")


def _hami_raw_node_config(cfg: StackConfig) -> Iterator[Problem]:
    """Raw `hami.values` that replace the per-node config gpuplane writes for HAMi pools:
    `config` overwrites it, `externalConfigName` makes the chart mount another ConfigMap
    (charts/hami/templates/device-plugin/daemonsetnvidia.yaml@v2.10.0); either way the
    pools' modes would be dropped without a word."""
    assert cfg.sharing is not None
    profiles = [cfg.sharing.default, *cfg.sharing.pools.values()]
    if not any(p.mode in HAMI_MODES for p in profiles):
        return
    plugin = cfg.hami.values.get("devicePlugin")
    node = plugin.get("nodeConfiguration") if isinstance(plugin, dict) else None
    if not isinstance(node, dict):
        return
    for key in ("config", "externalConfigName"):
        if node.get(key):
            yield Problem(stack_key(f"hami.values.devicePlugin.nodeConfiguration.{key}"),
                          "replaces the per-node config gpuplane writes from the HAMi modes "
                          "of gpuplane:sharing, so those modes would never reach HAMi; "
                          f"remove nodeConfiguration.{key} from hami.values (give each "
                          "pool's mode, deviceSplitCount and deviceMemoryScaling under "
                          "gpuplane:sharing.pools), or remove the HAMi modes")


__all__ = ["CUSTOM_PREFIX", "DEFAULT_KEY", "SHARING_NEEDS", "MigConfig", "SharingConfig",
           "SharingProfileConfig", "profiles", "sharing_key", "sharing_problems"]
