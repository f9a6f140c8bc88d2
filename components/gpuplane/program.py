"""The Pulumi program every stack runs: read `gpuplane:*`, build `GpuCluster`, export.

`__main__.py` only calls `run()`; the offline plan calls it too, under the mock engine.
"""

from __future__ import annotations

from pathlib import Path

import pulumi

from gpuplane.baselines import node_baselines
from gpuplane.config import NAMESPACE, config_from_pulumi
from gpuplane.stack.cluster import GpuCluster, GpuClusterArgs


def run() -> GpuCluster:
    cfg = config_from_pulumi()
    private_key = pulumi.Config(NAMESPACE).get_secret("sshPrivateKey")
    # Captured node files are named relative to the project root (where Pulumi.yaml is).
    root = Path(pulumi.get_root_directory() or ".")
    cluster = GpuCluster("gpu", GpuClusterArgs(
        config=cfg, private_key=private_key, baselines=node_baselines(cfg, root),
        kube_context=pulumi.Config("kubernetes").get("context")))
    pulumi.export("rolloutBatches", cluster.batches)
    pulumi.export("toolkitEnv", cluster.plan.toolkit_env)
    pulumi.export("gpuOperatorRelease", cluster.operator.release.name)
    if cluster.hami is not None:
        pulumi.export("hamiRelease", cluster.hami.release.name)
    return cluster


__all__ = ["run"]
