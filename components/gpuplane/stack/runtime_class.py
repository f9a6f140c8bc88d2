"""A RuntimeClass for the nvidia containerd runtime, for clusters where the operator
does not create one (`gpuplane:runtime.createRuntimeClass: true`)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from gpuplane.stack import child_options


@dataclass
class NvidiaRuntimeClassArgs:
    """`runtime_name`: the containerd runtime (the RuntimeClass's name and handler)."""

    runtime_name: str


class NvidiaRuntimeClass(pulumi.ComponentResource):
    """The RuntimeClass GPU pods name (`runtimeClassName`): without it, and without nvidia
    as containerd's default runtime, they run under runc and see no GPU (FM11)."""

    runtime_class: k8s.node.v1.RuntimeClass

    def __init__(self, name: str, args: NvidiaRuntimeClassArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuplane:index:NvidiaRuntimeClass", name, None, opts)
        self.runtime_class = k8s.node.v1.RuntimeClass(
            name,
            metadata={"name": args.runtime_name},
            handler=args.runtime_name,
            opts=child_options(self, opts))
        self.register_outputs({"name": args.runtime_name})


__all__ = ["NvidiaRuntimeClass", "NvidiaRuntimeClassArgs"]
