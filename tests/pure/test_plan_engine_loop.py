"""The plan engine runs a program when its caller left no event loop set
(`asyncio.set_event_loop(None)`, as a test or an embedding program may leave it)."""

from __future__ import annotations

import asyncio

import pulumi

from gpuplane.cli.plan.engine import run_program


def _program() -> None:
    pulumi.CustomResource("test:index:Thing", "thing", {"size": 1})


def test_a_program_plans_after_its_caller_cleared_the_event_loop() -> None:
    asyncio.set_event_loop(None)
    try:
        _, resources = run_program(_program, project="p", stack="s", config={},
                                   secret_keys=[])
        assert [r.name for r in resources if r.type == "test:index:Thing"] == ["thing"]
    finally:
        asyncio.set_event_loop(asyncio.new_event_loop())
