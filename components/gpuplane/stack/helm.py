"""The one way gpuplane installs a chart: a `helm.v3.Release` named after the chart, from
wherever its `ChartSource` says (NVIDIA's or HAMi's repository, a mirror, a local chart,
an OCI reference), with the values the stack config derives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuplane.core.chartsource import UPSTREAM, ChartSource


@dataclass
class ChartReleaseArgs:
    """One chart release: `chart` and `repo` name the upstream chart, `source` where it is
    installed from; `timeout` in seconds; `skip_await`: do not wait for its workloads."""

    chart: str
    repo: str
    namespace: str
    chart_version: str
    values: dict[str, Any]
    source: ChartSource = UPSTREAM
    skip_await: bool = False
    timeout: int = 600
    create_namespace: bool = False


def helm_release(name: str, args: ChartReleaseArgs,
                 opts: pulumi.ResourceOptions) -> k8s.helm.v3.Release:
    chart, repo = args.source.release_chart(args.chart, args.repo)
    return k8s.helm.v3.Release(
        name,
        name=args.chart,
        chart=chart,
        version=args.chart_version,
        repository_opts={"repo": repo} if repo else None,
        namespace=args.namespace,
        create_namespace=args.create_namespace or None,
        values=args.values,
        timeout=args.timeout,
        skip_await=args.skip_await,
        opts=opts)


__all__ = ["ChartReleaseArgs", "helm_release"]
