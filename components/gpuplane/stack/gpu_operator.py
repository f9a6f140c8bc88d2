"""The NVIDIA GPU Operator as one Helm release in its own privileged namespace."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuplane.config import OPERATOR_CHART, OPERATOR_CHART_REPO
from gpuplane.core.chartsource import UPSTREAM, ChartSource
from gpuplane.stack import child_options


class GpuOperator(pulumi.ComponentResource):
    """The pinned `gpu-operator` chart with the values the stack config derives, in a
    namespace the caller owns (the time-slicing ConfigMap must exist there first).
    `source`: NVIDIA's repository, a local chart, a mirror repository or an OCI reference."""

    release: k8s.helm.v3.Release

    def __init__(self, name: str, *, namespace: str, chart_version: str,
                 values: dict[str, Any], source: ChartSource = UPSTREAM,
                 skip_await: bool = False,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuplane:index:GpuOperator", name, None, opts)
        chart, repo = source.release_chart(OPERATOR_CHART, OPERATOR_CHART_REPO)
        self.release = k8s.helm.v3.Release(
            name,
            name=OPERATOR_CHART,
            chart=chart,
            version=chart_version,
            repository_opts={"repo": repo} if repo else None,
            namespace=namespace,
            values=values,
            timeout=900,
            skip_await=skip_await,
            opts=child_options(self, opts))
        self.register_outputs({"release": self.release.status})
