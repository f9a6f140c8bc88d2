"""Pulumi's dependency-cycle check, same answers, bounded work.

The SDK refuses a dependency `frm -> to` when `frm` is already reachable from `to`, and
finds out by walking the whole dependency closure of `to` every time. With rollout
batches each depending on the previous one that closure holds every earlier node, so a
1000-node plan spent most of its time there (quadratic in nodes).

`DependencyOrder` answers the same question with an incrementally maintained topological
order (Pearce & Kelly, "A dynamic topological sort algorithm for directed acyclic
graphs", 2006): every resource has a position below all of its dependents. A new edge
that already agrees with the order cannot close a cycle (O(1)); otherwise only the
resources positioned between its two ends are searched and re-ordered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pulumi.resource import Resource


class DependencyOrder:
    """Declared dependencies between resources, kept acyclic."""

    def __init__(self) -> None:
        self.position: dict[Any, int] = {}
        self.deps: dict[Any, set[Any]] = {}
        self.dependents: dict[Any, set[Any]] = {}
        self._top = 0
        self._bottom = 0

    def declare(self, frm: Any, to: Any) -> bool:
        """Record that `frm` depends on `to`; False (nothing recorded) if that closes a
        cycle, like `pulumi.runtime.resource_cycle_breaker.declare_dependency`."""
        if frm is to:
            return False
        if to in self.deps.get(frm, ()):
            return True
        low = self._place(frm, top=True)
        high = self._place(to, top=False)
        if high > low and not self._reorder(frm, to, low, high):
            return False
        self.deps.setdefault(frm, set()).add(to)
        self.dependents.setdefault(to, set()).add(frm)
        return True

    def _place(self, res: Any, *, top: bool) -> int:
        """A resource's position; one seen for the first time has no edges yet, so it may
        go anywhere: dependents on top, dependencies at the bottom."""
        pos = self.position.get(res)
        if pos is None:
            if top:
                self._top += 1
                pos = self._top
            else:
                self._bottom -= 1
                pos = self._bottom
            self.position[res] = pos
        return pos

    def _reorder(self, frm: Any, to: Any, low: int, high: int) -> bool:
        """Make room for `frm -> to` where `to` sits above `frm`; False on a cycle.

        A path from `to` down to `frm` can only pass resources positioned in (low, high],
        so that window is all that is searched: `to`'s dependencies there must move below
        `frm` and its dependents there, keeping their relative order."""
        pos = self.position
        ahead = _collect(to, self.deps, lambda r: pos[r] > low, stop=frm)
        if ahead is None:
            return False
        behind = _collect(frm, self.dependents, lambda r: pos[r] < high, stop=None)
        assert behind is not None
        ahead.sort(key=pos.__getitem__)
        behind.sort(key=pos.__getitem__)
        slots = sorted(pos[r] for r in ahead + behind)
        for res, slot in zip(ahead + behind, slots, strict=True):
            pos[res] = slot
        return True


def _collect(start: Any, edges: dict[Any, set[Any]], inside: Callable[[Any], bool],
             stop: Any) -> list[Any] | None:
    """Resources reachable from `start` along `edges` without leaving the window; None if
    `stop` is among them."""
    found = [start]
    seen = {id(start)}
    stack = [start]
    while stack:
        for nxt in edges.get(stack.pop(), ()):
            if nxt is stop:
                return None
            if id(nxt) not in seen and inside(nxt):
                seen.add(id(nxt))
                found.append(nxt)
                stack.append(nxt)
    return found


@contextmanager
def installed(order: DependencyOrder) -> Iterator[None]:
    """Route the SDK's cycle check through `order` while the block runs (the mock engine
    only). `rpc` imported `declare_dependency` by name, so that reference is replaced."""
    from pulumi.runtime import rpc

    def declare_dependency(from_resource: Resource, to_resource: Resource) -> bool:
        return order.declare(from_resource, to_resource)   # the SDK function's signature

    original = rpc.declare_dependency
    rpc.declare_dependency = declare_dependency
    try:
        yield
    finally:
        rpc.declare_dependency = original


__all__ = ["DependencyOrder", "installed"]
