"""The Pulumi program every stack runs: read `gpuplane:*`, build `GpuCluster`, export.

`__main__.py` only calls `run()`; the offline plan calls it too, under the mock engine.
"""

from __future__ import annotations

import pulumi

from components.config import NAMESPACE, config_from_pulumi
from components.stack.cluster import GpuCluster


def run() -> GpuCluster:
    cfg = config_from_pulumi()
    private_key = pulumi.Config(NAMESPACE).get_secret("sshPrivateKey")
    cluster = GpuCluster("gpu", cfg, private_key=private_key,
                         kube_context=pulumi.Config("kubernetes").get("context"))
    pulumi.export("rolloutBatches", cluster.batches)
    pulumi.export("toolkitEnv", cluster.plan.toolkit_env)
    pulumi.export("gpuOperatorRelease", cluster.operator.release.name)
    if cluster.hami is not None:
        pulumi.export("hamiRelease", cluster.hami.release.name)
    return cluster


__all__ = ["run"]
