"""The wording of fixes the doctor adds: every fix names the gpuplane stack key and the
raw Helm or containerd change for clusters not managed by gpuplane.

The containerd rules word their fixes in containerd's terms (they also serve
`gpuplane containerd check`, where no stack exists); on a cluster the doctor appends the
stack key that makes gpuplane write the right thing (gpuplane.rules.stack_levers).
"""

from __future__ import annotations

import posixpath
from typing import Any

from gpuplane.core.intent import ClusterIntent
from gpuplane.rules.stack_levers import containerd_stack_hint, distro_keys


def toolkit_env_fix(intent: ClusterIntent, daemon: dict[str, Any], dropin_dir: str) -> str:
    """FM17/FM01 on a live node: the toolkit env values that reach the kubelet's containerd."""
    config = daemon.get("config")
    socket = daemon.get("address")
    dropin = posixpath.join(dropin_dir, "99-nvidia.toml")
    return (f"Set {distro_keys(intent)} to what the node runs (gpuplane derives the toolkit's "
            "paths from them; do not override toolkit.env in `gpuplane:gpuOperator.values`); "
            f"without gpuplane set the GPU Operator's Helm value toolkit.env to "
            f"CONTAINERD_CONFIG={config}, CONTAINERD_SOCKET={socket} and "
            f"RUNTIME_DROP_IN_CONFIG={dropin} (the kubelet's containerd).")


__all__ = ["containerd_stack_hint", "toolkit_env_fix"]
