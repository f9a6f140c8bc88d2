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
from components.intent import ClusterIntent, NodeIntent
from components.planner import NodeContainerdPlan, PlanOptions, ToolkitMode, plan_node

# Pulumi components and the stack config load on first use: the CLI's containerd check and
# the doctor must not pay for importing the Pulumi SDK.
_LAZY = {
    "GpuCluster": "components.stack.cluster",
    "ContainerdRollout": "components.stack.node_rollout",
    "GpuOperator": "components.stack.gpu_operator",
    "Hami": "components.stack.hami",
    "NvidiaRuntimeClass": "components.stack.runtime_class",
    "TimeSlicing": "components.stack.time_slicing",
    "GpuChecks": "components.checks.component",
    "GpuChecksArgs": "components.checks.component",
    "StackConfig": "components.config",
    "StackConfigError": "components.config",
    "parse_stack_config": "components.config",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'components' has no attribute {name!r}")

__all__ = [
    "ClusterIntent",
    "ConfigError",
    "ContainerdRollout",
    "ContainerdVersion",
    "Distro",
    "DistroProfile",
    "EditMode",
    "EffectiveConfig",
    "Finding",
    "GpuChecks",
    "GpuChecksArgs",
    "GpuCluster",
    "GpuOperator",
    "Hami",
    "LocalFiles",
    "MemoryFiles",
    "NodeContainerdPlan",
    "NodeIntent",
    "NvidiaRuntimeClass",
    "PlanOptions",
    "Severity",
    "StackConfig",
    "StackConfigError",
    "TimeSlicing",
    "ToolkitMode",
    "effective_config",
    "parse_stack_config",
    "plan_node",
    "profile",
]
