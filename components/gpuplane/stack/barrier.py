"""One resource between two batches of a rollout: it depends on every node of batch k,
and every node of batch k+1 depends on it alone.

Why: a node's state record keeps the URNs of everything it depends on, and with every node
of batch k+1 depending on every node of batch k that was one batch's URNs per node (1.6 KB
of a node's 6.5 KB record at batches of 10; more with larger batches; issue 49). With a
barrier a node keeps one URN whatever the batch size, and the barrier keeps the batch's
URNs once.

Why a custom resource and not a `ComponentResource`: the SDK never sends a component as a
dependency; `dependsOn` a component stands for its children, each sent by URN
(`pulumi/runtime/rpc.py` `_add_dependency`, pulumi 3.260.0), which would put the batch's
URNs back into every node's record. A custom resource is a node of the engine's graph of
its own. In `up` it is registered once every node of batch k is (the SDK waits for the
URNs of what a resource depends on, and the engine answers a registration once its step
is done), and batch k+1 once it is; gpuplane registers it only once batch k is released
(gpuplane.stack.batches: over `nodeAccess: pod` after batch k's gate, gpuplane.stack.node_pod;
over SSH once every command of batch k registered, and a failed command fails its
registration, gpuplane.stack.node_rollout), so a failed node stops the rollout before it.
In `destroy` the engine deletes batch k+1 first, then the barrier, then batch k (the dependents of a
resource before the resource). Its provider does nothing: create returns an id, there is
nothing to diff, update or delete. The policies follow a node's dependency through its
barrier to the batch before it (gpuplane.policy.nodes).
"""

from __future__ import annotations

import functools
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider
from pulumi.dynamic.dynamic import PROVIDER_KEY, serialize_provider


class RolloutBarrierProvider(ResourceProvider):
    """Holds nothing: the barrier is only a node of the engine's dependency graph."""

    # The pickled provider captures no secret (no attribute, no closure): in plain text
    # it is a reference to this class, not ciphertext (pulumi/dynamic/dynamic.py
    # `serialize_as_secret_always`, pulumi 3.260.0: still a secret if one was captured).
    serialize_as_secret_always = False

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_="rollout-barrier", outs={})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return DiffResult(changes=False)


@functools.cache
def _serialized_provider() -> str:
    """The provider as `pulumi.dynamic.Resource` would send it, made once: it holds
    nothing, so every barrier's is the same text, and pickling it per barrier (dill, a
    thousand times in a 10,000-node plan) left garbage that only a full collection frees."""
    return serialize_provider(RolloutBarrierProvider())


class RolloutBarrier(pulumi.dynamic.Resource, module="gpuplane", name="RolloutBarrier"):
    """Batch k+1 of a rollout waits for it; it waits for batch k (`opts.depends_on`)."""

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        # What `pulumi.dynamic.Resource.__init__` does for a provider that captured no
        # secret and is not always secret (pulumi/dynamic/dynamic.py, pulumi 3.260.0): the
        # serialized provider as a plain `__provider` input of the dynamic type.
        pulumi.CustomResource.__init__(
            self, f"pulumi-python:{self._resource_type_name}", name,
            {PROVIDER_KEY: _serialized_provider()}, opts)


__all__ = ["RolloutBarrier", "RolloutBarrierProvider"]
