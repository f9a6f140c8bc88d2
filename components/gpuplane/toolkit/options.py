"""What a node plan is asked for: who installs the nvidia runtime, and how it is set up.

Its own module, below the planner and the rulebook, because both need the same record:
the planner plans with it, the rules rebuild it from Helm values to check the toolkit env.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gpuplane.core.intent import CgroupDriver
from gpuplane.toolkit.installer import Installer

# The toolkit of the newest chart gpuplane supports (GPU Operator v26.7.0 ships 1.20.0):
# what a plan assumes when nothing names a chart.
NEWEST_TOOLKIT = "1.20.0"


class ToolkitMode(StrEnum):
    OPERATOR = "operator"  # the GPU Operator's toolkit container writes the nvidia runtime
    HOST = "host"          # nvidia-container-toolkit is installed on the host; gpuplane writes
    NONE = "none"          # no nvidia runtime (e.g. kind smoke clusters)


@dataclass(frozen=True)
class PlanOptions:
    toolkit: ToolkitMode = ToolkitMode.OPERATOR
    nvidia_default: bool = False
    cdi: bool = False
    # The GPU Operator's NRI plugin mode (`cdi.nriPluginEnabled`): the operator's toolkit
    # configures no runtime, and gpuplane's files only switch NRI on where it is off.
    nri: bool = False
    systemd_cgroup: bool | None = None   # None keeps what the distribution configures
    # The operator's toolkit release (the chart's pin or the image override): what its
    # installer does differs by release (gpuplane.toolkit.installer).
    toolkit_version: str = NEWEST_TOOLKIT
    runtime_name: str = "nvidia"
    # The GPU Operator chart (e.g. v25.3.4): what its operator gives the toolkit container
    # differs by tag (gpuplane.toolkit.operator). None: the newest chart's behaviour.
    operator_chart: str | None = None
    kubelet_cgroup_driver: CgroupDriver | None = None  # None: not known, FM07 checks runtimes only
    # False without node access (`cluster.nodeAccess: none`): gpuplane writes nothing on the
    # nodes, so the plan judges what the toolkit does to the node as it is.
    writes_files: bool = True
    # RKE2/K3s with the operator's toolkit: `detected` leaves the nvidia runtimes to the
    # distribution's own detection (socket-only toolkit.env, no node file), `template`
    # writes the whole template (gpuplane.distros.rancher_mode chooses; `why` says why).
    runtime_setup: str = "template"
    runtime_setup_why: tuple[str, ...] = ()
    # Host systemd units the node agent stops, disables and masks beside the files (the
    # preinstalled driver's nvidia-imex.service under ComputeDomains, FM35); restore puts
    # each back as it was. Nothing of the containerd plan depends on them.
    mask_units: tuple[str, ...] = ()

    @property
    def installer(self) -> Installer:
        return Installer.of(self.toolkit_version)

    @property
    def detected(self) -> bool:
        """Whether RKE2's/K3s's detection, not a written template, adds the runtimes."""
        return self.toolkit is ToolkitMode.OPERATOR and self.runtime_setup == "detected"

    @property
    def toolkit_configures_runtime(self) -> bool:
        """Whether the operator's toolkit writes containerd's nvidia runtime: in NRI mode
        it does not (nvidia-container-toolkit cmd/nvidia-ctk-installer/container/runtime/
        runtime.go@v1.19.0: a no-op configurer when the NRI plugin is on)."""
        return self.toolkit is ToolkitMode.OPERATOR and not self.nri

    @property
    def toolkit_dropin(self) -> bool:
        """Toolkit 1.18 and later (chart v25.10 and later) write a drop-in."""
        return self.installer.writes_dropin


__all__ = ["NEWEST_TOOLKIT", "PlanOptions", "ToolkitMode"]
