"""gpuplane: Pulumi components with embedded validation that turn Kubernetes nodes into
working GPU nodes. The public API is curated here; everything else is internal."""

from components.containerd import (
    ConfigError,
    ContainerdVersion,
    EffectiveConfig,
    LocalFiles,
    MemoryFiles,
    effective_config,
)
from components.distros import Distro, DistroProfile, EditMode, profile
from components.findings import Finding, Severity
from components.planner import NodeContainerdPlan, PlanOptions, ToolkitMode, plan_node

__all__ = [
    "ConfigError",
    "ContainerdVersion",
    "Distro",
    "DistroProfile",
    "EditMode",
    "EffectiveConfig",
    "Finding",
    "LocalFiles",
    "MemoryFiles",
    "NodeContainerdPlan",
    "PlanOptions",
    "Severity",
    "ToolkitMode",
    "effective_config",
    "plan_node",
    "profile",
]
