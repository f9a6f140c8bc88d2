"""What the GPU Operator makes of `toolkit.env` before the installer sees it, and which
toolkit each chart ships.

The operator (gpu-operator v25.10.1 `controllers/object_controls.go`, the toolkit
DaemonSet asset `assets/state-container-toolkit/0500_daemonset.yaml`) starts from the
asset's env (`ROOT=/usr/local/nvidia`, ...), adds the CDI settings when `cdi.enabled`,
applies the chart's `toolkit.env` by name, then forces `RUNTIME=containerd`, overwrites
`CONTAINERD_RUNTIME_CLASS` with `operator.runtimeClass` and, from v25.10 (toolkit 1.18),
always sets `RUNTIME_DROP_IN_CONFIG`: the user's value, or `/etc/containerd/conf.d/
99-nvidia.toml` when it is unset or empty. That default is a host-wide directory, which
is why gpuplane always sets the drop-in path itself.
"""

from __future__ import annotations

import re

from gpuplane.toolkit.options import PlanOptions

OPERATOR_ROOT = "/usr/local/nvidia"
DEFAULT_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"

# GPU Operator chart -> the NVIDIA container toolkit it deploys (the chart's values.yaml
# `toolkit.version` at each tag). Patch releases of a chart line ship the same toolkit.
CHART_TOOLKITS: dict[tuple[int, int, int | None], str] = {
    (25, 3, None): "1.17.8",     # v25.3.x
    (25, 10, 0): "1.18.0",
    (25, 10, 1): "1.18.1",
}


def toolkit_for_chart(chart_version: str) -> str:
    """The toolkit version chart `chart_version` deploys; ValueError when gpuplane has not
    measured that chart (its toolkit's output would be a guess)."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)", chart_version.strip())
    if match:
        major, minor, patch = (int(g) for g in match.groups())
        for key in ((major, minor, patch), (major, minor, None)):
            if key in CHART_TOOLKITS:
                return CHART_TOOLKITS[key]
    known = ", ".join(f"v{a}.{b}.{c if c is not None else 'x'}" for a, b, c in CHART_TOOLKITS)
    raise ValueError(f"GPU Operator chart {chart_version!r} is not one gpuplane has measured "
                     f"the toolkit of (known: {known})")


def installer_env(toolkit_env: list[dict[str, str]], options: PlanOptions) -> dict[str, str]:
    """The env the toolkit installer runs with, in node paths."""
    env = {"ROOT": OPERATOR_ROOT, "NVIDIA_VISIBLE_DEVICES": "void"}
    if options.cdi:
        env |= {"CDI_ENABLED": "true", "NVIDIA_RUNTIME_SET_AS_DEFAULT": "false",
                "NVIDIA_CONTAINER_RUNTIME_MODE": "cdi"}
    env |= {e["name"]: e["value"] for e in toolkit_env}
    env["RUNTIME"] = "containerd"
    env["CONTAINERD_RUNTIME_CLASS"] = options.runtime_name
    env.setdefault("CONTAINERD_CONFIG", "/etc/containerd/config.toml")
    if options.toolkit_dropin:
        env["RUNTIME_DROP_IN_CONFIG"] = env.get("RUNTIME_DROP_IN_CONFIG") or DEFAULT_DROPIN
        env["RUNTIME_DROP_IN_CONFIG_HOST_PATH"] = env["RUNTIME_DROP_IN_CONFIG"]
    else:
        env.pop("RUNTIME_DROP_IN_CONFIG", None)
    return env


__all__ = ["CHART_TOOLKITS", "DEFAULT_DROPIN", "OPERATOR_ROOT", "installer_env",
           "toolkit_for_chart"]
