"""The NVIDIA GPU Operator as one Helm release in its own privileged namespace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuplane.config import OPERATOR_CHART, OPERATOR_CHART_REPO
from gpuplane.core.chartsource import UPSTREAM, ChartSource
from gpuplane.stack import child_options
from gpuplane.stack.helm import ChartReleaseArgs, helm_release


@dataclass
class GpuOperatorArgs:
    """The release: its namespace (the caller owns it: the time-slicing ConfigMap must
    exist there first), the pinned chart version, the values the stack config derives
    (`gpuplane.config.helm_values.operator_values`), where the chart comes from (NVIDIA's
    repository, a local chart, a mirror or an OCI reference) and whether to skip waiting."""

    namespace: str
    chart_version: str
    values: dict[str, Any]
    source: ChartSource = UPSTREAM
    skip_await: bool = False


class GpuOperator(pulumi.ComponentResource):
    """The pinned `gpu-operator` chart with the values the stack config derives."""

    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: GpuOperatorArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuplane:index:GpuOperator", name, None, opts)
        self.release = helm_release(name, ChartReleaseArgs(
            chart=OPERATOR_CHART, repo=OPERATOR_CHART_REPO, namespace=args.namespace,
            chart_version=args.chart_version, values=args.values, source=args.source,
            skip_await=args.skip_await, timeout=900), child_options(self, opts))
        self.register_outputs({"release": self.release.status})


__all__ = ["GpuOperator", "GpuOperatorArgs"]
