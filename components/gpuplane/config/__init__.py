"""The stack config: every `gpuplane:*` key, its default and its allowed values, in one place.

Read from `pulumi.Config` inside a program, or from a stack file by the offline plan; both
go through `parse_stack_config`, so an invalid value gets the same error either way: the
stack key, what was wrong, and the allowed values, for every problem of the stack at once.

The package's modules, from the bottom up:

- `errors`: `StackConfigError`, a list of `Problem(key, message)`, and pydantic's errors
  in the stack file's words;
- `sections`: one model per section (`cluster`, `nodes[]`, `runtime`, ...) with the
  checks of single values;
- `releases`: the GPU Operator and HAMi Helm releases, on one shared `ChartRelease`;
- `views`: what the library derives from the keys (`intent()`, `plan_options()`, ...);
- `stack`: `StackConfig` and the checks that compare keys, each yielding keyed problems;
- `pulumi_reader`: `parse_stack_config` and `config_from_pulumi`.

Importers use `gpuplane.config` itself; the names below are its interface.
"""

from __future__ import annotations

from gpuplane.config.errors import NAMESPACE, Problem, StackConfigError, stack_key
from gpuplane.config.pulumi_reader import config_from_pulumi, parse_stack_config
from gpuplane.config.releases import (
    HAMI_CHART,
    HAMI_CHART_REPO,
    OPERATOR_CHART,
    OPERATOR_CHART_REPO,
    ChartRelease,
    GpuOperatorConfig,
    HamiConfig,
    chart_at_least,
)
from gpuplane.config.sections import (
    NODE_NAME_MAX,
    ChecksConfig,
    ClusterConfig,
    DockerConfig,
    ImageConfig,
    NodeConfig,
    NodePodConfig,
    NodePoolConfig,
    RolloutConfig,
    RuntimeConfig,
    SshConfig,
    TimeSlicingConfig,
    VersionStr,
)
from gpuplane.config.stack import KEYS, SECRET_KEYS, StackConfig

__all__ = [
    "HAMI_CHART",
    "HAMI_CHART_REPO",
    "KEYS",
    "NAMESPACE",
    "NODE_NAME_MAX",
    "OPERATOR_CHART",
    "OPERATOR_CHART_REPO",
    "SECRET_KEYS",
    "ChartRelease",
    "ChecksConfig",
    "ClusterConfig",
    "DockerConfig",
    "GpuOperatorConfig",
    "HamiConfig",
    "ImageConfig",
    "NodeConfig",
    "NodePodConfig",
    "NodePoolConfig",
    "Problem",
    "RolloutConfig",
    "RuntimeConfig",
    "SshConfig",
    "StackConfig",
    "StackConfigError",
    "TimeSlicingConfig",
    "VersionStr",
    "chart_at_least",
    "config_from_pulumi",
    "parse_stack_config",
    "stack_key",
]
