"""The short path runs a registration at once when it awaits nothing pending, and hands the
rest of it to an RPC task when it must wait (gpuplane.cli.plan.fastreg._run_now)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from pulumi.runtime import settings

from gpuplane.cli.plan import fastreg


def test_a_registration_that_awaits_nothing_pending_runs_at_once_without_a_task() -> None:
    loop = asyncio.new_event_loop()
    try:
        done = loop.create_future()
        done.set_result("urn")
        seen: list[str] = []

        async def register() -> None:
            seen.append(await done)

        before = len(fastreg._PENDING)
        fastreg._run_now(register())
        assert seen == ["urn"]
        assert len(fastreg._PENDING) == before
    finally:
        loop.close()


def test_registrations_waiting_on_one_pending_future_all_finish_once_it_resolves() -> None:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    settings.SETTINGS.rpc_manager.clear()
    try:
        parent = loop.create_future()
        seen: list[tuple[int, str]] = []

        def register(i: int) -> Coroutine[Any, Any, None]:
            async def run() -> None:
                urn = await parent
                await asyncio.sleep(0)
                seen.append((i, urn))
            return run()

        for i in range(3):   # all three await the same future before any task has run
            fastreg._run_now(register(i))
        assert seen == []
        loop.call_soon(parent.set_result, "parent-urn")
        loop.run_until_complete(asyncio.gather(*fastreg._PENDING))
        assert sorted(seen) == [(0, "parent-urn"), (1, "parent-urn"), (2, "parent-urn")]
        assert settings.SETTINGS.rpc_manager.unhandled_exception is None
    finally:
        settings.SETTINGS.rpc_manager.clear()
        asyncio.set_event_loop(asyncio.new_event_loop())   # as a later test finds it
        loop.close()


def test_a_registration_that_fails_at_once_is_the_rpc_managers_unhandled_exception() -> None:
    settings.SETTINGS.rpc_manager.clear()
    try:
        async def register() -> None:
            raise ValueError("bad input")

        fastreg._run_now(register())
        exn = settings.SETTINGS.rpc_manager.unhandled_exception
        assert isinstance(exn, ValueError) and str(exn) == "bad input"
    finally:
        settings.SETTINGS.rpc_manager.clear()
