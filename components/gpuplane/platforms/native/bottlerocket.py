"""Bottlerocket `aws-k8s-*-nvidia`: the user-data settings for the preinstalled NVIDIA
device plugin, from gpuplane's time-slicing intent.

Why: Bottlerocket has no shell; the host changes only through its settings API, and its
own device plugin (preinstalled, always running) renders its config from
`settings.kubelet-device-plugins.nvidia.*`. A ConfigMap for the operator's plugin does
nothing there. Facts:

- Settings model (bottlerocket-os/bottlerocket-settings-sdk@25e4241
  `bottlerocket-settings-models/modeled-types/src/kubernetes.rs`,
  `NvidiaDevicePluginSettings`): `pass-device-specs` (bool), `device-id-strategy`
  (`uuid` | `index`), `device-list-strategy` (`envvar` | `volume-mounts` | `cdi-cri`),
  `device-sharing-strategy` (`none` | `time-slicing`), `time-slicing.replicas`
  (integer >= 2), `time-slicing.rename-by-default`,
  `time-slicing.fail-requests-greater-than-one`, `device-partitioning-strategy`
  (`none` | `mig`), `mig.profile`. No setting turns the plugin off.
- Later models (settings-sdk CHANGELOG 0.20.0) add `mps` sharing, refused together with
  MIG (`MpsMigConflict`); gpuplane has no MPS intent, so it writes none.
- Plugin config template (bottlerocket-os/bottlerocket-core-kit
  `packages/nvidia-k8s-device-plugin/nvidia-k8s-device-plugin-conf`@v3.1.1 and
  `nvidia-k8s-device-plugin-conf.in`@b41cc9a): one time-slicing resource, fixed to
  `nvidia.com/gpu`; **`rename-by-default` and `fail-requests-greater-than-one` default to
  true** and `replicas` to 2, so gpuplane always writes all three; MIG renders
  `migStrategy: single` only; `deviceListStrategy` defaults to `volume-mounts`,
  `deviceIDStrategy` to `index`, `passDeviceSpecs` to true.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import tomlkit

from gpuplane.platforms.native.result import PlatformInput, PlatformInputError

SOURCES = (
    "bottlerocket-os/bottlerocket-settings-sdk@25e4241 "
    "bottlerocket-settings-models/modeled-types/src/kubernetes.rs",
    "bottlerocket-os/bottlerocket-core-kit@v3.1.1 "
    "packages/nvidia-k8s-device-plugin/nvidia-k8s-device-plugin-conf",
    "bottlerocket-os/bottlerocket-core-kit@b41cc9a "
    "packages/nvidia-k8s-device-plugin/nvidia-k8s-device-plugin-conf.in",
)
GPU = "nvidia.com/gpu"
LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-cri")
ID_STRATEGIES = ("uuid", "index")
_TS = "gpuplane:timeSlicing"


@dataclass(frozen=True)
class DevicePluginIntent:
    """gpuplane's device-plugin intent, in the stack's terms.

    `device_plugin`: `gpuplane:devicePlugin`; with `gpu-operator` Bottlerocket's own plugin
    advertises the GPUs (the operator's `devicePlugin.enabled` must be false);
    `time_slicing_*` mirror `gpuplane:timeSlicing`; `per_gpu_replicas` (resource name to
    replicas) and `resource_name` are intents Bottlerocket cannot express.
    """

    device_plugin: Literal["gpu-operator", "hami"] = "gpu-operator"
    time_slicing_replicas: int = 0
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = False
    resource_name: str = GPU
    per_gpu_replicas: Mapping[str, int] = field(default_factory=dict)
    device_list_strategy: str | tuple[str, ...] | None = None
    device_id_strategy: str | None = None
    pass_device_specs: bool | None = None
    mig_strategy: Literal["none", "single", "mixed"] = "none"

    @classmethod
    def from_time_slicing(cls, time_slicing: Any, device_plugin: str = "gpu-operator",
                          **extra: Any) -> DevicePluginIntent:
        """From a `TimeSlicingConfig`-shaped object (replicas, rename_by_default,
        fail_requests_greater_than_one), as gpuplane.config validates it."""
        return cls(device_plugin=device_plugin,  # type: ignore[arg-type]
                   time_slicing_replicas=time_slicing.replicas,
                   rename_by_default=time_slicing.rename_by_default,
                   fail_requests_greater_than_one=time_slicing.fail_requests_greater_than_one,
                   **extra)


def settings(intent: DevicePluginIntent) -> dict[str, Any]:
    """`settings.kubelet-device-plugins.nvidia` as data; raises PlatformInputError for
    what Bottlerocket's settings cannot say."""
    _refuse(intent)
    nvidia: dict[str, Any] = {}
    if intent.pass_device_specs is not None:
        nvidia["pass-device-specs"] = intent.pass_device_specs
    if intent.device_id_strategy is not None:
        nvidia["device-id-strategy"] = intent.device_id_strategy
    if intent.device_list_strategy is not None:
        strategy = intent.device_list_strategy
        nvidia["device-list-strategy"] = list(strategy) if isinstance(strategy, tuple) \
            else strategy
    if intent.time_slicing_replicas:
        nvidia["device-sharing-strategy"] = "time-slicing"
        nvidia["time-slicing"] = {
            "replicas": intent.time_slicing_replicas,
            "rename-by-default": intent.rename_by_default,
            "fail-requests-greater-than-one": intent.fail_requests_greater_than_one,
        }
    else:
        nvidia["device-sharing-strategy"] = "none"
    if intent.mig_strategy == "single":
        nvidia["device-partitioning-strategy"] = "mig"
    return {"settings": {"kubelet-device-plugins": {"nvidia": nvidia}}}


def _refuse(intent: DevicePluginIntent) -> None:
    if intent.device_plugin != "gpu-operator":
        raise PlatformInputError(
            "gpuplane:devicePlugin",
            f"device plugin {intent.device_plugin!r} on Bottlerocket: the NVIDIA variant runs "
            "its own device plugin, and its settings have no key that turns it off, so a "
            "second plugin would compete for nvidia.com/gpu.",
            "Use `devicePlugin: gpu-operator` with the operator's device plugin off "
            "(Bottlerocket's plugin, configured by these settings, takes its place), or run "
            "HAMi on a node image without a preinstalled plugin.")
    replicas = intent.time_slicing_replicas
    if replicas < 0 or replicas == 1:
        raise PlatformInputError(
            f"{_TS}.replicas", f"replicas {replicas}: Bottlerocket accepts 2 or more "
            "(time-slicing.replicas is bounded below by 2).", "Use 0 for off, or 2 and more.")
    if intent.resource_name != GPU:
        raise PlatformInputError(
            f"{_TS}.resourceName", f"resource {intent.resource_name!r}: Bottlerocket's "
            f"plugin config shares only {GPU}.", f"Share {GPU}, or leave the name unset.")
    if intent.per_gpu_replicas:
        raise PlatformInputError(
            f"{_TS}.replicas", "per-GPU replicas "
            f"({', '.join(sorted(intent.per_gpu_replicas))}): Bottlerocket renders one "
            "time-slicing resource with one replicas count for every GPU of the node.",
            "Use one replicas count, and separate node groups for GPUs that need others.")
    if intent.mig_strategy == "mixed":
        raise PlatformInputError(
            "gpuplane:platform.migStrategy", "MIG strategy 'mixed': Bottlerocket's "
            "plugin config renders migStrategy single (device-partitioning-strategy mig) "
            "or none.", "Use single or none.")
    if intent.mig_strategy == "single" and replicas:
        raise PlatformInputError(
            f"{_TS}.replicas", "time-slicing with MIG: gpuplane does not model how "
            "Bottlerocket's plugin shares MIG devices.", "Turn one of them off.")
    strategies = intent.device_list_strategy
    listed = strategies if isinstance(strategies, tuple) else (strategies,)
    bad = [s for s in listed if s is not None and s not in LIST_STRATEGIES]
    if bad or (isinstance(strategies, tuple) and not strategies):
        raise PlatformInputError(
            "gpuplane:platform.deviceListStrategy",
            f"device-list-strategy {bad or '[]'}: Bottlerocket accepts "
            f"{', '.join(LIST_STRATEGIES)}.", "Pick one of them.")
    if intent.device_id_strategy not in (None, *ID_STRATEGIES):
        raise PlatformInputError(
            "gpuplane:platform.deviceIdStrategy",
            f"device-id-strategy {intent.device_id_strategy!r}: Bottlerocket accepts "
            f"{', '.join(ID_STRATEGIES)}.", "Pick one of them.")


def settings_toml(intent: DevicePluginIntent) -> str:
    """The user-data TOML (tomlkit) for `intent`."""
    return tomlkit.dumps(settings(intent))


def rendered_plugin_config(nvidia: Mapping[str, Any]) -> dict[str, Any]:
    """The device plugin config Bottlerocket's template renders from
    `settings.kubelet-device-plugins.nvidia` (core-kit `nvidia-k8s-device-plugin-conf.in`),
    so gpuplane's time-slicing rule can judge what the plugin will read."""
    partition = nvidia.get("device-partitioning-strategy")
    strategy = nvidia.get("device-list-strategy", "volume-mounts")
    config: dict[str, Any] = {
        "version": "v1",
        "flags": {"migStrategy": "single" if partition == "mig" else "none",
                  "failOnInitError": True,
                  "plugin": {"passDeviceSpecs": nvidia.get("pass-device-specs", True),
                             "deviceListStrategy": strategy,
                             "deviceIDStrategy": nvidia.get("device-id-strategy", "index")}},
    }
    if nvidia.get("device-sharing-strategy") == "time-slicing":
        ts = nvidia.get("time-slicing", {})
        config["sharing"] = {"timeSlicing": {
            "renameByDefault": ts.get("rename-by-default", True),
            "failRequestsGreaterThanOne": ts.get("fail-requests-greater-than-one", True),
            "resources": [{"name": GPU, "replicas": ts.get("replicas", 2)}]}}
    return config


def bottlerocket_settings(intent: DevicePluginIntent) -> PlatformInput:
    """The Bottlerocket user data gpuplane hands the user for `intent`."""
    doc = settings_toml(intent)
    sharing = (f"time-slicing, {intent.time_slicing_replicas} pods per GPU"
               if intent.time_slicing_replicas else "no GPU sharing")
    flat = _flatten(settings(intent))
    return PlatformInput(
        kind="bottlerocket-settings", platform="Bottlerocket (NVIDIA variant)",
        summary=f"add these settings to the node group's user data ({sharing})",
        document=doc, document_format="toml", fields=flat,
        will_not_touch=(
            "the node's files (Bottlerocket changes only through its settings API)",
            "the preinstalled NVIDIA driver, container toolkit and device plugin",
            "the device plugin's time-slicing ConfigMap (Bottlerocket's plugin does not "
            "read it)",
        ),
        sources=SOURCES,
        notes=("on a running node: apiclient set --json with the same keys",
               "keep the GPU Operator's driver, toolkit and device plugin off "
               "(driver.enabled, toolkit.enabled, devicePlugin.enabled = false)"))


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, Mapping):
            out.update(_flatten(value, path))
        else:
            out[path] = value
    return out
