"""The Pulumi program every stack runs: read `gpuplane:*`, build `GpuCluster`, export.

`__main__.py` only calls `main()`; the offline plan calls `run()`, under the mock engine,
and reports bad input its own way.
"""

from __future__ import annotations

import pulumi

from gpuplane.config import NAMESPACE, StackConfigError, config_from_pulumi
from gpuplane.containerd.errors import ConfigError
from gpuplane.stack.cluster import GpuCluster, GpuClusterArgs
from gpuplane.stack.inputs import check_local_charts, invalid_stack, plain_errors


def main() -> None:
    """`run()` for `pulumi preview`/`up`: bad input (a stack key, a captured node file) is
    one clean error naming the key and the fix, as `gpuplane plan` prints it, instead of a
    Python traceback (`pulumi.RunError` is reported as its message alone)."""
    try:
        run()
    except StackConfigError as exc:
        raise invalid_stack(exc) from None
    except ConfigError as exc:
        raise invalid_stack(captured_file_problem(exc)) from None


def captured_file_problem(exc: ConfigError) -> StackConfigError:
    """A captured node file the containerd model cannot read, as a stack-key problem."""
    return StackConfigError([(
        f"{NAMESPACE}:cluster.baselineFiles",
        f"{exc}: a captured file (or what it imports) is not a config containerd would "
        "load; capture the node's files again")])


def run() -> GpuCluster:
    # The captured node files, the local charts and the SSH key are read by GpuCluster
    # itself, as in a user's own program (gpuplane.stack.inputs).
    cluster = GpuCluster("gpu", GpuClusterArgs(
        config=config_from_pulumi(), kube_context=pulumi.Config("kubernetes").get("context")))
    pulumi.export("rolloutBatches", cluster.batches)
    pulumi.export("toolkitEnv", cluster.plan.toolkit_env)
    if cluster.operator is not None:   # HAMi alone installs no operator
        pulumi.export("gpuOperatorRelease", cluster.operator.release.name)
    # The managed platform's own node input (docs/platform-inputs.md); None elsewhere.
    pulumi.export("platformInput",
                  cluster.platform_input.to_output() if cluster.platform_input else None)
    if cluster.hami is not None:
        pulumi.export("hamiRelease", cluster.hami.release.name)
    return cluster


__all__ = ["captured_file_problem", "check_local_charts", "main", "plain_errors", "run"]
