"""The Pulumi program every stack runs: read `gpuplane:*`, build `GpuCluster`, export.

`__main__.py` only calls `run()`; the offline plan calls it too, under the mock engine.
"""

from __future__ import annotations

from pathlib import Path

import pulumi

from components.baselines import node_baselines
from components.config import NAMESPACE, config_from_pulumi
from components.stack.cluster import GpuCluster


def run() -> GpuCluster:
    cfg = config_from_pulumi()
    private_key = pulumi.Config(NAMESPACE).get_secret("sshPrivateKey")
    # Captured node files are named relative to the project root (where Pulumi.yaml is).
    root = Path(pulumi.get_root_directory() or ".")
    cluster = GpuCluster("gpu", cfg, private_key=private_key,
                         kube_context=pulumi.Config("kubernetes").get("context"),
                         baselines=node_baselines(cfg, root))
    pulumi.export("rolloutBatches", cluster.batches)
    pulumi.export("toolkitEnv", cluster.plan.toolkit_env)
    pulumi.export("gpuOperatorRelease", cluster.operator.release.name)
    if cluster.hami is not None:
        pulumi.export("hamiRelease", cluster.hami.release.name)
    return cluster


__all__ = ["run"]
