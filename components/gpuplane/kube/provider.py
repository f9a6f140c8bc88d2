"""The base of gpuplane's dynamic providers that talk to the cluster (the GPU checks, the
node labels): they reach the cluster the stack deploys to, the one the Kubernetes
provider's stack config names, unless the resource names a kubeconfig itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi.dynamic import ConfigureRequest, ResourceProvider


class KubeResourceProvider(ResourceProvider):
    """Keeps `kubernetes:kubeconfig` and `kubernetes:context` from the stack config, which
    the engine hands each dynamic provider in `configure()`."""

    stack_kubeconfig: str | None = None
    stack_context: str | None = None

    def configure(self, req: ConfigureRequest) -> None:
        self.stack_kubeconfig = req.config.get("kubernetes:kubeconfig") or None
        self.stack_context = req.config.get("kubernetes:context") or None

    def kubeconfig(self, props: Mapping[str, Any]) -> str | None:
        """The resource's own kubeconfig, else the stack's (else kubectl's default)."""
        return props.get("kubeconfig") or self.stack_kubeconfig


__all__ = ["KubeResourceProvider"]
