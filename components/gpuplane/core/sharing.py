"""How one pool's GPUs are handed out, and what its device plugin then advertises.

One record (`PoolSharing`) per sharing profile, built from the stack's `gpuplane:sharing`
(or the older `gpuplane:timeSlicing`), read by the renderer (the device plugin's
ConfigMap key, the node labels), the rules (FM19-FM25, FM29) and the intent: `advertised` is
the one implementation of "GPUs x sharing -> resources per name" that fills
`NodeIntent.resources`, which the allocatable check and the probe Job read.

The device plugin's naming, NVIDIA/k8s-device-plugin at v0.18.0:
- MIG strategy `single`: every MIG instance is one `nvidia.com/gpu`; `mixed`: one
  `nvidia.com/mig-<profile>` per instance, `+` written as `.` (internal/rm/rm.go,
  AddDefaultResourcesToConfig);
- time-slicing and MPS multiply each device by `replicas`, renamed `<name>.shared` with
  `renameByDefault` (api/config/v1/resources.go, consts.go);
- MPS refuses MIG devices (internal/plugin/mps.go) and the mixed strategy
  (cmd/nvidia-device-plugin/main.go), and always fails a request for more than one shared
  device, `failRequestsGreaterThanOne` or not (internal/rm/rm.go).

HAMi's device plugin (Project-HAMi/HAMi, the same at v2.8.3, v2.9.0 and v2.10.0) takes a
node's `operatingmode` (`hami-core`, its own slicing, or `mig`, MIG instances it makes
itself), `devicesplitcount` and `devicememoryscaling` from the `nodeconfig` entry named
like the node (pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go,
readFromConfigFile), and in either mode hands the kubelet `devicesplitcount` devices of
`nvidia.com/gpu` per GPU (nvinternal/rm/devices.go, GetPluginDevices): what `advertised`
expects of a HAMi pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GPU_RESOURCE = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"

Mode = Literal["whole", "time-slicing", "mps", "hami-core", "mig"]
# The modes HAMi's device plugin runs a node in (its `operatingmode`); the rest are the
# GPU Operator's device plugin's.
HAMI_MODES: tuple[str, ...] = ("hami-core", "mig")
MigStrategy = Literal["none", "single", "mixed"]


@dataclass(frozen=True)
class PoolSharing:
    """One sharing profile: the device plugin's ConfigMap key `key`, how each device (a
    GPU, or a MIG instance) is shared, and the MIG layout per GPU.

    `mig_config` is the `nvidia.com/mig.config` value (a name of the default mig-parted
    config, or gpuplane's own for a custom layout); `mig_layout` the instances per GPU it
    gives this pool's model ((profile, count), empty when unknown or no MIG).

    With a HAMi mode (`hami-core`, `mig`) `hami_split` is the `devicesplitcount` the
    pool's nodes run (the pool's own, else `hami.deviceSplitCount`) and
    `hami_memory_scaling` the pool's own `devicememoryscaling` (0: the cluster's)."""

    key: str
    mode: Mode = "whole"
    replicas: int = 0
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = False
    mig_strategy: MigStrategy = "none"
    mig_config: str = ""
    mig_layout: tuple[tuple[str, int], ...] = ()
    gpu_model: str = ""
    custom_layout: bool = False
    hami_split: int = 0
    hami_memory_scaling: float = 0.0

    @property
    def hami(self) -> bool:
        """Whether the pool names a HAMi operating mode."""
        return self.mode in HAMI_MODES

    @property
    def mig(self) -> bool:
        return self.mig_strategy != "none"

    @property
    def shared(self) -> bool:
        return self.mode in ("time-slicing", "mps") and self.replicas > 1


def mig_resource(profile: str) -> str:
    """`nvidia.com/mig-<profile>` as the plugin names it under the mixed strategy: a
    resource name has no `+`, so `1g.10gb+me` becomes `mig-1g.10gb.me`."""
    return MIG_PREFIX + profile.replace("+", ".")


def advertised(gpus: int, sharing: PoolSharing) -> tuple[tuple[str, int], ...]:
    """What a node with `gpus` GPUs advertises under `sharing`, per resource name, in a
    stable order. MIG with an unknown layout (a model gpuplane does not know): empty, as
    nothing can be expected."""
    if gpus <= 0:
        return ()
    if sharing.hami:
        return ((GPU_RESOURCE, gpus * sharing.hami_split),) if sharing.hami_split > 0 else ()
    if sharing.mig:
        devices = [(GPU_RESOURCE if sharing.mig_strategy == "single" else mig_resource(p),
                    n * gpus) for p, n in sharing.mig_layout if n > 0]
        merged: dict[str, int] = {}
        for name, count in devices:
            merged[name] = merged.get(name, 0) + count
    else:
        merged = {GPU_RESOURCE: gpus}
    if sharing.shared:
        suffix = ".shared" if sharing.rename_by_default else ""
        merged = {f"{name}{suffix}": count * sharing.replicas for name, count in merged.items()}
    return tuple(sorted(merged.items()))


def layout_mixes(layout: tuple[tuple[str, int], ...]) -> bool:
    """Whether a layout holds more than one MIG profile (the single strategy then
    advertises unlike instances under one name)."""
    return len({p for p, n in layout if n > 0}) > 1


__all__ = ["GPU_RESOURCE", "HAMI_MODES", "MIG_CONFIG_LABEL", "MIG_PREFIX", "PLUGIN_CONFIG_LABEL",
           "MigStrategy", "Mode", "PoolSharing", "advertised", "layout_mixes",
           "mig_resource"]
