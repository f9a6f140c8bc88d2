"""The wording of fixes the doctor adds: every fix names the gpuplane stack key and the
raw Helm or containerd change for clusters not managed by gpuplane.

The containerd rules word their fixes in containerd's terms (they also serve
`gpuplane containerd check`, where no stack exists); on a cluster the doctor appends the
stack key that makes gpuplane write the right thing.
"""

from __future__ import annotations

import posixpath
from dataclasses import replace
from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent


def containerd_stack_hint(finding: Finding, intent: ClusterIntent) -> Finding:
    """The rule's finding with the stack key that fixes it appended (once)."""
    if "gpuplane:" in finding.fix or finding.severity is Severity.INFO:
        return finding
    hint = _HINTS.get(finding.id)
    if hint is None:
        return finding
    return replace(finding, fix=f"{finding.fix} With gpuplane: {hint(intent)}")


def _distro(intent: ClusterIntent) -> str:
    base = (f" and `gpuplane:cluster.containerdBaseDir: {intent.containerd_base_dir}`"
            if intent.containerd_base_dir else "")
    return f"`gpuplane:cluster.distro: {intent.distro}`{base}"


_HINTS: dict[str, Any] = {
    "FM01": lambda i: (f"set {_distro(i)} to what the node runs; gpuplane then writes the "
                       "drop-in where this containerd reads it and points the toolkit there."),
    "FM02": lambda i: ("set `gpuplane:cluster.containerdVersion` to the node's containerd "
                       f"(now {i.containerd_version}); on < 2.1 gpuplane writes the whole CRI "
                       "table (runc and nvidia) into one drop-in."),
    "FM03": lambda i: ("set `gpuplane:cluster.containerdVersion` to the node's containerd "
                       f"(now {i.containerd_version}) so every file gets that line's config "
                       "version, and pin `gpuplane:gpuOperator.chartVersion` to v24.9.2 or "
                       "later for containerd 2.x (toolkit >= 1.17.4; v24.9.0/v24.9.1 pin "
                       "1.17.0/1.17.3)."),
    "FM07": lambda i: ("set `gpuplane:runtime.systemdCgroup` and "
                       "`gpuplane:cluster.kubeletCgroupDriver` to the kubelet's cgroup "
                       "driver; gpuplane writes it into every runc-based runtime."),
    "FM09": lambda i: ("keep `gpuplane:runtime.nvidiaDefault: false` unless nvidia must be the "
                       "default; gpuplane's node agent restores runc as the default when the "
                       "stack is destroyed."),
    "FM16": lambda i: ("set `gpuplane:gpuOperator.cdi: false`, or upgrade containerd and set "
                       "`gpuplane:cluster.containerdVersion` accordingly."),
}


def toolkit_env_fix(intent: ClusterIntent, daemon: dict[str, Any], dropin_dir: str) -> str:
    """FM17/FM01 on a live node: the toolkit env values that reach the kubelet's containerd."""
    config = daemon.get("config")
    socket = daemon.get("address")
    dropin = posixpath.join(dropin_dir, "99-nvidia.toml")
    return (f"Set {_distro(intent)} to what the node runs (gpuplane derives the toolkit's "
            "paths from them; do not override toolkit.env in `gpuplane:gpuOperator.values`); "
            f"without gpuplane set the GPU Operator's Helm value toolkit.env to "
            f"CONTAINERD_CONFIG={config}, CONTAINERD_SOCKET={socket} and "
            f"RUNTIME_DROP_IN_CONFIG={dropin} (the kubelet's containerd).")


__all__ = ["containerd_stack_hint", "toolkit_env_fix"]
