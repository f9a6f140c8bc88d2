"""Post-deploy GPU checks: per-node CUDA probe Jobs, sharing proofs and the allocatable
check, each failing `pulumi up` with a rulebook finding when the GPU path is broken.

`manifests` builds the Kubernetes objects, `verdicts` judges recorded objects and logs,
`live` reads the cluster, `provider` holds the dynamic resources, `component` the
`GpuChecks` component. The Pulumi-heavy names load on first use.
"""

from __future__ import annotations

from typing import Any

from gpuplane.checks.manifests import CheckJob, job_manifest, plan_checks, probe_configmap
from gpuplane.checks.settings import ChecksSettings

__all__ = [
    "CheckJob",
    "ChecksSettings",
    "GpuChecks",
    "GpuChecksArgs",
    "job_manifest",
    "plan_checks",
    "probe_configmap",
]


def __getattr__(name: str) -> Any:
    if name in ("GpuChecks", "GpuChecksArgs"):
        from gpuplane.checks import component

        return getattr(component, name)
    raise AttributeError(name)
