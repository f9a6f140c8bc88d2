"""NVIDIA's DRA driver for GPUs as one Helm release, after the GPU Operator that keeps the
driver and the toolkit (and, with `draDriver.gpus`, runs without its device plugin)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuplane.config.dra import DRA_CHART_REPO
from gpuplane.core.chartsource import UPSTREAM, ChartSource
from gpuplane.stack import child_options
from gpuplane.stack.helm import ChartReleaseArgs, helm_release


@dataclass
class DraDriverArgs:
    """The release: its chart (`nvidia-dra-driver-gpu` for v25.x, `dra-driver-nvidia-gpu`
    from v0.4.0), namespace (created by the release), pinned version, the values the stack
    config derives (`gpuplane.config.helm_values.dra_values`), where the chart comes from
    and whether to skip waiting for its workloads."""

    chart: str
    namespace: str
    chart_version: str
    values: dict[str, Any]
    source: ChartSource = UPSTREAM
    skip_await: bool = False


class DraDriver(pulumi.ComponentResource):
    """The pinned DRA driver chart with the values the stack config derives."""

    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: DraDriverArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuplane:index:DraDriver", name, None, opts)
        self.release = helm_release(name, ChartReleaseArgs(
            chart=args.chart, repo=DRA_CHART_REPO, namespace=args.namespace,
            chart_version=args.chart_version, values=args.values, source=args.source,
            skip_await=args.skip_await, timeout=600, create_namespace=True),
            child_options(self, opts))
        self.register_outputs({"release": self.release.status})


__all__ = ["DraDriver", "DraDriverArgs"]
