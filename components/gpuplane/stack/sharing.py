"""`Sharing`: what selects each pool's sharing on its nodes, before the operator starts.

The device plugin reads the key its node's `nvidia.com/device-plugin.config` label names
and MIG Manager applies the layout `nvidia.com/mig.config` names, so the labels (and
gpuplane's own mig-parted ConfigMap, where a pool writes its layout out) must exist
before the operator's plugin and MIG Manager come up. The values are rendered by
gpuplane.config.sharing_values; this component only creates them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from gpuplane.config.sharing_values import MIG_PARTED_CONFIGMAP
from gpuplane.stack import child_options
from gpuplane.stack.node_labels import NodeLabels


@dataclass
class SharingArgs:
    """`labels`: node -> its labels (sharing_values.node_labels); `mig_parted`: the data
    of gpuplane's mig-parted ConfigMap, or None (the chart's default config)."""

    namespace: str
    labels: Mapping[str, Mapping[str, str]]
    mig_parted: Mapping[str, str] | None = None
    kubeconfig: pulumi.Input[str] | None = None
    groups: list[tuple[tuple[tuple[str, str], ...], list[str]]] = field(init=False)

    def __post_init__(self) -> None:
        """Nodes with the same labels share one `NodeLabels` (one per pool)."""
        by: dict[tuple[tuple[str, str], ...], list[str]] = {}
        for node, labels in self.labels.items():
            by.setdefault(tuple(sorted(labels.items())), []).append(node)
        self.groups = sorted(by.items(), key=lambda kv: kv[1][0])


class Sharing(pulumi.ComponentResource):
    """The pools' node labels and, where a layout is custom, the mig-parted ConfigMap."""

    resources: list[pulumi.Resource]

    def __init__(self, name: str, args: SharingArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuplane:index:Sharing", name, None, opts)
        self.resources = []
        for i, (labels, nodes) in enumerate(args.groups):
            self.resources.append(NodeLabels(
                f"{name}-labels-{i}", nodes=nodes, labels=dict(labels),
                kubeconfig=args.kubeconfig, opts=child_options(self, opts)))
        if args.mig_parted is not None:
            self.resources.append(k8s.core.v1.ConfigMap(
                f"{name}-mig-parted",
                metadata={"name": MIG_PARTED_CONFIGMAP, "namespace": args.namespace},
                data=dict(args.mig_parted), opts=child_options(self, opts)))
        self.register_outputs({"labelledGroups": len(args.groups)})


__all__ = ["Sharing", "SharingArgs"]
