"""gpuplane: Pulumi components with embedded validation that turn Kubernetes nodes into
working GPU nodes.

The public API is curated here and everything else is internal. Nothing is imported
until it is first used (PEP 562 `__getattr__`): `gpuplane --help` and `gpuplane explain`
must not pay for the Pulumi SDK, pydantic or the Kubernetes client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

_LAZY = {
    # Pulumi components
    "GpuCluster": "gpuplane.stack.cluster",
    "GpuClusterArgs": "gpuplane.stack.cluster",
    "ContainerdRollout": "gpuplane.stack.node_rollout",
    "ContainerdRolloutArgs": "gpuplane.stack.node_rollout",
    "ContainerdPodRollout": "gpuplane.stack.node_pod",
    "ContainerdPodRolloutArgs": "gpuplane.stack.node_pod",
    "GpuOperator": "gpuplane.stack.gpu_operator",
    "GpuOperatorArgs": "gpuplane.stack.gpu_operator",
    "Hami": "gpuplane.stack.hami",
    "HamiArgs": "gpuplane.stack.hami",
    "NvidiaRuntimeClass": "gpuplane.stack.runtime_class",
    "NvidiaRuntimeClassArgs": "gpuplane.stack.runtime_class",
    "TimeSlicing": "gpuplane.stack.time_slicing",
    "TimeSlicingArgs": "gpuplane.stack.time_slicing",
    "Sharing": "gpuplane.stack.sharing",
    "SharingArgs": "gpuplane.stack.sharing",
    "PlanRejected": "gpuplane.stack.refusal",
    "GpuChecks": "gpuplane.checks.component",
    "GpuChecksArgs": "gpuplane.checks.component",
    # stack config
    "StackConfig": "gpuplane.config",
    "StackConfigError": "gpuplane.config",
    "parse_stack_config": "gpuplane.config",
    "config_from_pulumi": "gpuplane.config",
    "ChartSource": "gpuplane.core.chartsource",
    "parse_chart_source": "gpuplane.core.chartsource",
    # planning and the rulebook
    "NodeContainerdPlan": "gpuplane.plan.node",
    "plan_node": "gpuplane.plan.node",
    "PlanOptions": "gpuplane.toolkit.options",
    "ToolkitMode": "gpuplane.toolkit.options",
    "Finding": "gpuplane.core.findings",
    "Severity": "gpuplane.core.findings",
    "ClusterIntent": "gpuplane.core.intent",
    "NodeIntent": "gpuplane.core.intent",
    "Distro": "gpuplane.distros.profiles",
    "DistroProfile": "gpuplane.distros.profiles",
    "EditMode": "gpuplane.distros.profiles",
    "profile": "gpuplane.distros.profiles",
    # the containerd model
    "ConfigError": "gpuplane.containerd",
    "ContainerdVersion": "gpuplane.containerd",
    "EffectiveConfig": "gpuplane.containerd",
    "LocalFiles": "gpuplane.containerd",
    "MemoryFiles": "gpuplane.containerd",
    "effective_config": "gpuplane.containerd",
    # the command line
    "main": "gpuplane.cli.main",
}

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time `__getattr__` loads these
    from gpuplane.checks.component import GpuChecks, GpuChecksArgs
    from gpuplane.cli.main import main
    from gpuplane.config import (
        StackConfig,
        StackConfigError,
        config_from_pulumi,
        parse_stack_config,
    )
    from gpuplane.containerd import (
        ConfigError,
        ContainerdVersion,
        EffectiveConfig,
        LocalFiles,
        MemoryFiles,
        effective_config,
    )
    from gpuplane.core.chartsource import ChartSource, parse_chart_source
    from gpuplane.core.findings import Finding, Severity
    from gpuplane.core.intent import ClusterIntent, NodeIntent
    from gpuplane.distros.profiles import Distro, DistroProfile, EditMode, profile
    from gpuplane.plan.node import NodeContainerdPlan, plan_node
    from gpuplane.stack.cluster import GpuCluster, GpuClusterArgs
    from gpuplane.stack.gpu_operator import GpuOperator, GpuOperatorArgs
    from gpuplane.stack.hami import Hami, HamiArgs
    from gpuplane.stack.node_pod import ContainerdPodRollout, ContainerdPodRolloutArgs
    from gpuplane.stack.node_rollout import ContainerdRollout, ContainerdRolloutArgs
    from gpuplane.stack.refusal import PlanRejected
    from gpuplane.stack.runtime_class import NvidiaRuntimeClass, NvidiaRuntimeClassArgs
    from gpuplane.stack.sharing import Sharing, SharingArgs
    from gpuplane.stack.time_slicing import TimeSlicing, TimeSlicingArgs
    from gpuplane.toolkit.options import PlanOptions, ToolkitMode


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gpuplane' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [  # the same names as _LAZY (tests/pure/test_package.py holds them equal)
    "ChartSource",
    "ClusterIntent",
    "ConfigError",
    "ContainerdPodRollout",
    "ContainerdPodRolloutArgs",
    "ContainerdRollout",
    "ContainerdRolloutArgs",
    "ContainerdVersion",
    "Distro",
    "DistroProfile",
    "EditMode",
    "EffectiveConfig",
    "Finding",
    "GpuChecks",
    "GpuChecksArgs",
    "GpuCluster",
    "GpuClusterArgs",
    "GpuOperator",
    "GpuOperatorArgs",
    "Hami",
    "HamiArgs",
    "LocalFiles",
    "MemoryFiles",
    "NodeContainerdPlan",
    "NodeIntent",
    "NvidiaRuntimeClass",
    "NvidiaRuntimeClassArgs",
    "PlanOptions",
    "PlanRejected",
    "Severity",
    "Sharing",
    "SharingArgs",
    "StackConfig",
    "StackConfigError",
    "TimeSlicing",
    "TimeSlicingArgs",
    "ToolkitMode",
    "config_from_pulumi",
    "effective_config",
    "main",
    "parse_chart_source",
    "parse_stack_config",
    "plan_node",
    "profile",
]
