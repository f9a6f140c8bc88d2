"""Run the SDK's queued work while the program is still building its resources.

A Pulumi program's function only constructs resources; what the SDK does for each of
them (resolving its Outputs, registering it) is queued on the event loop, and that loop
only runs once the function has returned. At 10,000 nodes that is 20,000 resources'
pending Outputs and tasks alive at once: about 340 MB, most of a plan's peak memory,
and slower to work through than a few at a time (benchmarks/plan_scale.py).

Under the plan engine, :class:`Pump` runs the queue empty every few registrations, from
inside the program. The nested run is the one the SDK itself uses to wait synchronously
(`pulumi.runtime.sync_await._sync_await`): leave the program's task, run the loop's
ready callbacks, re-enter the task, and leave the outer loop as many handles to take as
it expects. The same callbacks run, only earlier; nothing waits for a callback that is
not ready (an RPC in a thread), and the loop still finishes everything after the function
returns. tests/pure/test_plan_pump.py checks that plans are equal with and without it.

The SDK sends each registration to the monitor on a worker thread; under the plan engine
the monitor is plain Python, so :func:`inline_executor` calls it at once on the loop's
thread instead. Otherwise a run of the queue would find a component still waiting on a
thread, and every child registration waiting on that component's URN.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# Registrations between two runs of the queue: measured at 10,000 nodes, every 1 to 30
# are within noise of each other (8.5-9.0 s) and 1000 is 1.5 s slower.
EVERY = 8
# A run stops after this many loop iterations even if callbacks keep coming (a program
# polling with sleep(0)); the loop finishes the rest after the function returns.
_MAX_ITERATIONS = 10_000


class Pump:
    """Run the program inside :meth:`running`, and call :meth:`tick` after each
    registration.

    The queue is only run from the program's own step, never from inside a callback: a
    resource made in an `apply` (during a run of the queue, or by the loop after the
    program returned) would otherwise run the queue inside a loop iteration whose
    remaining handles it cannot count."""

    def __init__(self, every: int | None = None) -> None:
        self.every = every or EVERY
        self._count = 0
        self._loop: Any = None
        self._outer = 0
        self._busy = True   # until the program runs

    @contextmanager
    def running(self) -> Iterator[None]:
        """The program's step: remember the loop and how many ready handles its running
        iteration will still take (the SDK's own bookkeeping in `_sync_await`)."""
        self._loop = asyncio.get_running_loop()
        self._outer = len(self._loop._ready)
        self._busy = False
        try:
            yield
        finally:
            self._busy = True

    def tick(self) -> None:
        self._count += 1
        if not self._busy and self._count % self.every == 0:
            self._busy = True
            try:
                self.drain()
            finally:
                self._busy = False

    def drain(self) -> None:
        """Run the loop until nothing is ready."""
        loop = self._loop
        task = asyncio.current_task(loop)
        if task is not None:
            asyncio.tasks._leave_task(loop, task)
        try:
            for _ in range(_MAX_ITERATIONS):
                if not loop._ready:
                    break
                loop._run_once()
        finally:
            while len(loop._ready) < self._outer:
                handle = asyncio.Handle(lambda: None, (), loop)
                handle.cancel()
                loop._ready.append(handle)
            if task is not None:
                asyncio.tasks._enter_task(loop, task)


class _Inline(concurrent.futures.ThreadPoolExecutor):
    """An executor that runs each call when it is submitted (a ThreadPoolExecutor only
    because the event loop accepts no other kind as its default; it never starts one)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
               ) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:   # handed to the coroutine that awaits it
            future.set_exception(exc)
        return future


@contextmanager
def inline_executor(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """`loop.run_in_executor(None, f)` calls `f` at once while the block runs."""
    original = getattr(loop, "_default_executor", None)
    loop.set_default_executor(_Inline())
    try:
        yield
    finally:
        loop._default_executor = original  # type: ignore[attr-defined]


__all__ = ["EVERY", "Pump", "inline_executor"]
