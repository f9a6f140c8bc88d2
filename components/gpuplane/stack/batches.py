"""A rollout's batches under the SDK, at a cost per node that does not grow with the fleet
(issue 49; docs/benchmarks.md, "A node as a resource").

Made all at once, with every node of batch k depending on the nodes of batch k-1, a
fleet's nodes cost the SDK more the larger the fleet: each waiting node's outputs stay
pending until the chain reaches it, and the SDK waits on every pending output again each
time one finishes (`wait_for_rpcs`, pulumi/runtime/stack.py, pulumi 3.260.0); each
dependency is walked back through the whole chain for cycles
(pulumi/runtime/resource_cycle_breaker.py). Here a batch is made when the one before it is
released, and depends on that batch's URNs through `pulumi.resource.DependencyResource`
stand-ins: the engine gets the same `dependsOn`, only one batch is pending at a time, and
a stand-in has no dependencies of its own to walk.

With a `barrier` (gpuplane.stack.barrier), batch k+1 depends on one resource that depends
on batch k, made once batch k is released: each node's state keeps one URN there, not its
batch's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar, cast

import pulumi

from gpuplane.stack.sdk_debug import quiet_registrations

T = TypeVar("T")

Make = Callable[[Sequence[str], list[pulumi.Input[pulumi.Resource]]], list[pulumi.Resource]]
"""Makes one batch's resources (its node names, what they depend on)."""
Release = Callable[[list[pulumi.Resource]], pulumi.Output[list[str]]]
"""When the next batch may start: the URNs of a batch's resources, once it may."""
Barrier = Callable[[int, list[pulumi.Input[pulumi.Resource]]], pulumi.Resource]
"""Makes the resource that batch `index` + 1 waits for (what it depends on: batch `index`)."""


def urns_of(resources: Sequence[pulumi.Resource]) -> pulumi.Output[list[str]]:
    """Released as soon as the engine registered the batch (in `up`: once it is done)."""
    return pulumi.Output.all(*[r.urn for r in resources])


def in_batches(batches: Sequence[Sequence[str]], make: Make,
               after: Sequence[pulumi.Input[pulumi.Resource]] = (),
               release: Release = urns_of,
               barrier: Barrier | None = None) -> list[pulumi.Output[pulumi.Resource]]:
    """Make `batches` in order, the first after `after`, each later one after the one
    before it (through `barrier`'s resource when given); return the last batch's
    resources (stand-ins), each once the whole rollout is released, for what comes after
    it."""
    if not batches:
        return []

    def batch(index: int, depends_on: list[pulumi.Input[pulumi.Resource]]
              ) -> pulumi.Output[list[str]]:
        released = release(make(batches[index], depends_on))
        if index + 1 == len(batches):
            return bare(released)
        return bare(released.apply(lambda urns: following(index, urns)))

    def following(index: int, urns: list[str]) -> pulumi.Output[list[str]]:
        """Batch `index` + 1, once batch `index` (`urns`) is released."""
        previous: list[pulumi.Input[pulumi.Resource]] = [stand_in(u) for u in urns]
        if barrier is None:
            return batch(index + 1, previous)
        # The nodes depend on the barrier's URN (a stand-in): nothing behind it to walk.
        gate = bare(barrier(index, previous).urn)
        return bare(gate.apply(lambda urn: batch(index + 1, [stand_in(urn)])))

    # The batches (made now and in the callbacks this schedules) register without the
    # SDK's debug messages: thousands of blocking calls to the engine (gpuplane.stack.sdk_debug).
    with quiet_registrations():
        last = batch(0, list(after))
    return [bare(last.apply(_nth(i))) for i in range(len(batches[-1]))]


def stand_in(urn: str) -> pulumi.Resource:
    """A resource known by its URN alone: a dependency on that URN for the engine, with no
    dependencies of its own for the SDK to walk."""
    return pulumi.resource.DependencyResource(urn)


def _nth(i: int) -> Callable[[list[str]], pulumi.Resource]:
    return lambda urns: stand_in(urns[i])


def bare(output: pulumi.Output[T]) -> pulumi.Output[T]:
    """`output` without the resources it was computed from: what depends on it depends on
    its value (a batch's URNs), not on every node of the chain before it."""

    async def known() -> bool:
        try:
            return await output.is_known()
        except Exception:   # the value's own future raises it
            return False

    async def secret() -> bool:
        try:
            return await output.is_secret()
        except Exception:   # the value's own future raises it
            return False

    # Tasks, not coroutines: a failed value (a stopped rollout) leaves neither un-awaited.
    value = cast("Awaitable[T]", output.future())
    return pulumi.Output(set(), value, asyncio.ensure_future(known()),
                         asyncio.ensure_future(secret()))


__all__ = ["Barrier", "Make", "Release", "bare", "in_batches", "stand_in", "urns_of"]
