"""HAMi (GPU sharing scheduler + device plugin) as a Helm release, and the `gpu=on`
labels its device plugin DaemonSet selects on (one `NodeLabels` for every GPU node)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuplane.config import HAMI_CHART, HAMI_CHART_REPO
from gpuplane.core.chartsource import UPSTREAM, ChartSource
from gpuplane.rules.hami import NODE_LABEL
from gpuplane.stack import child_options
from gpuplane.stack.node_labels import NodeLabels


class Hami(pulumi.ComponentResource):
    release: k8s.helm.v3.Release

    def __init__(self, name: str, *, namespace: str, chart_version: str,
                 values: dict[str, Any], gpu_nodes: Sequence[str],
                 source: ChartSource = UPSTREAM, skip_await: bool = False,
                 kubeconfig: pulumi.Input[str] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuplane:index:Hami", name, None, opts)
        labels = NodeLabels(f"{name}-node-labels", nodes=gpu_nodes, labels=dict([NODE_LABEL]),
                            kubeconfig=kubeconfig, opts=child_options(self, opts))
        chart, repo = source.release_chart(HAMI_CHART, HAMI_CHART_REPO)
        self.release = k8s.helm.v3.Release(
            name,
            name=HAMI_CHART,
            chart=chart,
            version=chart_version,
            repository_opts={"repo": repo} if repo else None,
            namespace=namespace,
            create_namespace=True,
            values=values,
            timeout=600,
            skip_await=skip_await,
            opts=child_options(self, opts).merge(pulumi.ResourceOptions(depends_on=[labels])))
        self.register_outputs({"release": self.release.status})
