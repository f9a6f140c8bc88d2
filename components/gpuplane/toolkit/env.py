"""`toolkit.env`: the GPU Operator chart value that points the operator's toolkit container
at the kubelet's containerd. The planner renders it; the rulebook checks a user's value
against it."""

from __future__ import annotations

import posixpath

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.distros.profiles import DistroProfile
from gpuplane.toolkit.operator import OPERATOR_DROPIN_FROM, chart_tuple
from gpuplane.toolkit.options import PlanOptions

TOOLKIT_DROPIN = "99-nvidia.toml"
# RKE2's docs for chart v25.3.x (rancher/rke2-docs docs/add-ons/gpu_operators.md@09157fbd):
# beside the socket, these isolate GPUs (the device plugin gets DEVICE_PLUGIN_ENV).
DETECTED_V25_3_ENV = {
    "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED": "false",
    "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS": "true",
}
DEVICE_PLUGIN_ENV = {"DEVICE_LIST_STRATEGY": "volume-mounts"}


def before_v25_10(chart: str | None) -> bool:
    """Whether chart `chart` is older than v25.10 (RKE2's docs' v25.3.x tab)."""
    at = chart_tuple(chart)
    return at is not None and at < OPERATOR_DROPIN_FROM


def toolkit_env_for(profile: DistroProfile, version: ContainerdVersion,
                    options: PlanOptions) -> list[dict[str, str]]:
    """`toolkit.env` that points the operator's toolkit at the kubelet's containerd; in
    RKE2's/K3s's detected mode (gpuplane.distros.rancher_mode) the socket alone, as RKE2's docs
    give it: the distribution adds the runtimes itself."""
    if options.detected and profile.detects_nvidia_runtime:
        detected = {"CONTAINERD_SOCKET": profile.socket}
        if before_v25_10(options.operator_chart):
            detected |= DETECTED_V25_3_ENV
        return [{"name": k, "value": v} for k, v in detected.items()]
    env = {
        "CONTAINERD_CONFIG": profile.toolkit_config or profile.edit_path(version),
        "CONTAINERD_SOCKET": profile.socket,
        # k0s: the CRI table lives in the file k0s generates from its drop-ins.
        "RUNTIME_CONFIG_SOURCE": "file=" + profile.toolkit_source,
        # 1.18+ reads RUNTIME_CONFIG_SOURCE (the file above). Before 1.18 the installer
        # ignores that and asks `containerd config dump` first, and 1.17.8 runs
        # RUNTIME_EXECUTABLE_PATH for it: left unset, the dump runs only where the
        # distribution's containerd is on the toolkit container's PATH
        # (gpuplane.toolkit.installer), so elsewhere the file is edited as planned.
        "RUNTIME_EXECUTABLE_PATH": profile.containerd_binary if options.toolkit_dropin else "",
        "CONTAINERD_RUNTIME_CLASS": options.runtime_name,
        "CONTAINERD_SET_AS_DEFAULT": "true" if options.nvidia_default and not options.cdi
        else "false",
    }
    if profile.toolkit_dropin_dir and options.toolkit_dropin:
        # Always set: left unset, the operator (v25.10+) writes the host-wide
        # /etc/containerd/conf.d/99-nvidia.toml (gpuplane.toolkit.operator).
        env["RUNTIME_DROP_IN_CONFIG"] = posixpath.join(profile.toolkit_dropin_dir,
                                                       TOOLKIT_DROPIN)
    return [{"name": k, "value": v} for k, v in env.items() if v]


__all__ = ["DETECTED_V25_3_ENV", "DEVICE_PLUGIN_ENV", "TOOLKIT_DROPIN", "before_v25_10",
           "toolkit_env_for"]
