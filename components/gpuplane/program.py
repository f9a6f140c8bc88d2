"""The Pulumi program every stack runs: read `gpuplane:*`, build `GpuCluster`, export.

`__main__.py` only calls `run()`; the offline plan calls it too, under the mock engine.
"""

from __future__ import annotations

from pathlib import Path

import pulumi

from gpuplane.baselines import node_baselines
from gpuplane.chartsource import local_chart_problem
from gpuplane.config import (
    HAMI_CHART,
    NAMESPACE,
    OPERATOR_CHART,
    GpuOperatorConfig,
    HamiConfig,
    StackConfig,
    StackConfigError,
    config_from_pulumi,
)
from gpuplane.stack.cluster import GpuCluster, GpuClusterArgs


def run() -> GpuCluster:
    cfg = config_from_pulumi()
    private_key = pulumi.Config(NAMESPACE).get_secret("sshPrivateKey")
    # Captured node files are named relative to the project root (where Pulumi.yaml is).
    root = Path(pulumi.get_root_directory() or ".")
    check_local_charts(cfg, root)
    cluster = GpuCluster("gpu", GpuClusterArgs(
        config=cfg, private_key=private_key, baselines=node_baselines(cfg, root),
        kube_context=pulumi.Config("kubernetes").get("context")))
    pulumi.export("rolloutBatches", cluster.batches)
    pulumi.export("toolkitEnv", cluster.plan.toolkit_env)
    pulumi.export("gpuOperatorRelease", cluster.operator.release.name)
    if cluster.hami is not None:
        pulumi.export("hamiRelease", cluster.hami.release.name)
    return cluster


def check_local_charts(cfg: StackConfig, root: Path) -> None:
    """A local `chart` (relative to the project root, as Helm reads it when Pulumi runs
    the program there) must be that chart at `chartVersion`; StackConfigError naming the
    key and the fix otherwise."""
    releases: list[tuple[str, GpuOperatorConfig | HamiConfig, str]] = [
        ("gpuOperator", cfg.gpu_operator, OPERATOR_CHART)]
    if cfg.device_plugin == "hami":
        releases.append(("hami", cfg.hami, HAMI_CHART))
    problems = []
    for key, section, chart in releases:
        problem = local_chart_problem(section.chart_source, root, chart,
                                      section.chart_version, f"{key}.chartVersion")
        if problem:
            problems.append((f"{NAMESPACE}:{key}.chart", problem))
    if problems:
        raise StackConfigError(problems)


__all__ = ["check_local_charts", "run"]
