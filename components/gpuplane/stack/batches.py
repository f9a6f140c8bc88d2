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
batch's. Each step settles once it has made the next one, and the rollout's end is one
Output of its own (`_End`): a step that waited for the rest of the chain would keep every
batch's outputs pending to the end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pulumi

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
    end = _End()

    def batch(index: int, depends_on: list[pulumi.Input[pulumi.Resource]]) -> None:
        released = release(make(batches[index], depends_on))
        if index + 1 == len(batches):
            end.watch(released, last=True)
        else:
            end.watch(released.apply(lambda urns: following(index, urns)))

    def following(index: int, urns: list[str]) -> None:
        """Batch `index` + 1, once batch `index` (`urns`) is released."""
        previous: list[pulumi.Input[pulumi.Resource]] = [stand_in(u) for u in urns]
        if barrier is None:
            batch(index + 1, previous)
            return
        # The nodes depend on the barrier's URN (a stand-in): nothing behind it to walk.
        gate = barrier(index, previous).urn
        end.watch(gate.apply(lambda urn: batch(index + 1, [stand_in(urn)])))

    batch(0, list(after))
    return [end.output.apply(_nth(i)) for i in range(len(batches[-1]))]


class _End:
    """How a rollout ended, as one Output: the last batch's URNs once it is released, or
    the error or unknown of the first step that stopped it.

    Each step (a batch released, its barrier registered) is its own Output that settles
    as soon as it has made the next step, so one batch is pending at a time. Chained
    instead (each step's Output the next step's), every step of the rollout stays pending
    until the last batch, and the SDK waits on all of them again each time any output
    settles (`wait_for_rpcs`, pulumi/runtime/stack.py, pulumi 3.260.0): a cost that grows
    with the fleet's size squared (issue 49; tests/pure/test_node_pod_scale.py)."""

    def __init__(self) -> None:
        loop = asyncio.get_event_loop()
        # (known, value) of the rollout, or the exception that stopped it.
        self.outcome: asyncio.Future[tuple[bool, list[str]]] = loop.create_future()

        async def value() -> list[str]:
            return (await self.outcome)[1]

        async def known() -> bool:
            try:
                return (await self.outcome)[0]
            except Exception:   # value() raises it
                return False

        async def secret() -> bool:
            return False

        self.output: pulumi.Output[list[str]] = pulumi.Output(
            set(), asyncio.ensure_future(value()), asyncio.ensure_future(known()),
            asyncio.ensure_future(secret()))

    def watch(self, step: pulumi.Output[Any], last: bool = False) -> None:
        """Settle the outcome from `step` if it stopped the rollout (an error, an unknown
        value), or if it is the `last` batch's release."""

        async def settle() -> None:
            try:
                known = await step.is_known()
                value = await step.future(with_unknowns=True)
            except Exception as exn:   # a failed gate: the rollout stopped there
                self._set(exception=exn)
                return
            if not known:
                self._set((False, []))
            elif last:
                self._set((True, list(value or [])))

        _SETTLING.add(task := asyncio.ensure_future(settle()))
        task.add_done_callback(_SETTLING.discard)

    def _set(self, result: tuple[bool, list[str]] = (False, []),
             exception: BaseException | None = None) -> None:
        if self.outcome.done():
            return
        if exception is not None:
            self.outcome.set_exception(exception)
        else:
            self.outcome.set_result(result)


# Keeps the settling tasks referenced until they are done (asyncio holds tasks weakly).
_SETTLING: set[asyncio.Task[None]] = set()


def stand_in(urn: str) -> pulumi.Resource:
    """A resource known by its URN alone: a dependency on that URN for the engine, with no
    dependencies of its own for the SDK to walk."""
    return pulumi.resource.DependencyResource(urn)


def _nth(i: int) -> Callable[[list[str]], pulumi.Resource]:
    return lambda urns: stand_in(urns[i])


__all__ = ["Barrier", "Make", "Release", "in_batches", "stand_in", "urns_of"]
