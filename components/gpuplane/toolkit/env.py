"""`toolkit.env`: the GPU Operator chart value that points the operator's toolkit container
at the kubelet's containerd. The planner renders it; the rulebook checks a user's value
against it."""

from __future__ import annotations

import posixpath

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.distros import DistroProfile
from gpuplane.toolkit.options import PlanOptions

TOOLKIT_DROPIN = "99-nvidia.toml"


def toolkit_env_for(profile: DistroProfile, version: ContainerdVersion,
                    options: PlanOptions) -> list[dict[str, str]]:
    """`toolkit.env` that points the operator's toolkit at the kubelet's containerd."""
    env = {
        "CONTAINERD_CONFIG": profile.edit_path(version),
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


__all__ = ["TOOLKIT_DROPIN", "toolkit_env_for"]
