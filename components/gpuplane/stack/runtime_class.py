"""A RuntimeClass for the nvidia containerd runtime, for clusters where the operator
does not create one (`gpuplane:runtime.createRuntimeClass: true`)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpuplane.stack import child_options


class NvidiaRuntimeClass(pulumi.ComponentResource):
    def __init__(self, name: str, *, runtime_name: str,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuplane:index:NvidiaRuntimeClass", name, None, opts)
        self.runtime_class = k8s.node.v1.RuntimeClass(
            name,
            metadata={"name": runtime_name},
            handler=runtime_name,
            opts=child_options(self, opts))
        self.register_outputs({"name": runtime_name})
