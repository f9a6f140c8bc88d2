"""What a node plan is asked for: who installs the nvidia runtime, and how it is set up.

Its own module, below the planner and the rulebook, because both need the same record:
the planner plans with it, the rules rebuild it from Helm values to check the toolkit env.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gpuplane.intent import CgroupDriver


class ToolkitMode(StrEnum):
    OPERATOR = "operator"  # the GPU Operator's toolkit container writes the nvidia runtime
    HOST = "host"          # nvidia-container-toolkit is installed on the host; gpuplane writes
    NONE = "none"          # no nvidia runtime (e.g. kind smoke clusters)


@dataclass(frozen=True)
class PlanOptions:
    toolkit: ToolkitMode = ToolkitMode.OPERATOR
    nvidia_default: bool = False
    cdi: bool = False
    systemd_cgroup: bool | None = None   # None keeps what the distribution configures
    toolkit_dropin: bool = True          # toolkit >= 1.18 (chart >= v25.10) writes a drop-in
    runtime_name: str = "nvidia"
    kubelet_cgroup_driver: CgroupDriver | None = None  # None: not known, FM07 checks runtimes only
    # False without node access (`cluster.nodeAccess: none`): gpuplane writes nothing on the
    # nodes, so the plan judges what the toolkit does to the node as it is.
    writes_files: bool = True


__all__ = ["PlanOptions", "ToolkitMode"]
