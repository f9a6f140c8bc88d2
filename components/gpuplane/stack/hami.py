"""HAMi (GPU sharing scheduler + device plugin) as a Helm release, and the `gpu=on`
labels its device plugin DaemonSet selects on (one `NodeLabels` for every GPU node)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuplane.config import HAMI_CHART, HAMI_CHART_REPO
from gpuplane.core.chartsource import UPSTREAM, ChartSource
from gpuplane.rules.hami import NODE_LABEL
from gpuplane.stack import child_options
from gpuplane.stack.helm import ChartReleaseArgs, helm_release
from gpuplane.stack.node_labels import NodeLabels


@dataclass
class HamiArgs:
    """The release (namespace, pinned chart version, the values the stack config derives,
    chart source, skip waiting) and the GPU nodes to label for its device plugin;
    `kubeconfig`: where the labels are written (default like kubectl)."""

    namespace: str
    chart_version: str
    values: dict[str, Any]
    gpu_nodes: Sequence[str]
    source: ChartSource = UPSTREAM
    skip_await: bool = False
    kubeconfig: pulumi.Input[str] | None = None


class Hami(pulumi.ComponentResource):
    """HAMi's chart, installed once its device plugin's nodes carry `gpu=on`: the
    DaemonSet selects on that label, so without it HAMi advertises no GPU."""

    release: k8s.helm.v3.Release
    labels: NodeLabels

    def __init__(self, name: str, args: HamiArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuplane:index:Hami", name, None, opts)
        self.labels = NodeLabels(f"{name}-node-labels", nodes=args.gpu_nodes,
                                 labels=dict([NODE_LABEL]), kubeconfig=args.kubeconfig,
                                 opts=child_options(self, opts))
        self.release = helm_release(name, ChartReleaseArgs(
            chart=HAMI_CHART, repo=HAMI_CHART_REPO, namespace=args.namespace,
            chart_version=args.chart_version, values=args.values, source=args.source,
            skip_await=args.skip_await, timeout=600, create_namespace=True),
            child_options(self, opts, depends_on=[self.labels]))
        self.register_outputs({"release": self.release.status})


__all__ = ["Hami", "HamiArgs"]
