"""A fleet's node resources register without the SDK's debug messages.

The Python SDK sends four debug messages for every resource it registers ("registering
resource", "resource registration prepared", "resource registration successful" in
pulumi/runtime/resource.py `register_resource`, "beginning rpc" in
pulumi/runtime/rpc_manager.py `do_rpc`, pulumi 3.260.0). Each is a blocking gRPC call to
the engine from the program's event loop (pulumi/log.py `_log`), and the engine drops it
unless the CLI runs with `--debug` or `-v`. A rollout registers one or two resources per
GPU node and one barrier per batch: in a `pulumi preview` of 3,000 pod-access nodes those
calls were half of the program's time, and the CLI spent more answering them
(docs/benchmarks.md, "A node as a resource"). Upstream dropped other per-resource debug
messages from the SDK for the same cost (pulumi/pulumi#7295).

Only resources constructed inside :func:`quiet_registrations` lose them: the block sets a
context variable that the SDK's registration tasks inherit (asyncio copies the context
into every task it creates), so the Outputs and callbacks made there (the next batch, made
when this one is released) are quiet too, and every other resource, message and severity
of the program is untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import pulumi

_QUIET: ContextVar[bool] = ContextVar("gpuplane_quiet_registrations", default=False)


@contextmanager
def quiet_registrations() -> Iterator[None]:
    """Resources constructed in the block (and in the callbacks it schedules) register
    without the SDK's debug messages."""
    _install()
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def is_quiet() -> bool:
    """Whether the SDK's debug messages are dropped here."""
    return _QUIET.get()


def _install() -> None:
    """Route `pulumi.log.debug` (which the SDK looks up at every call) through
    :func:`_debug`, once per process."""
    if getattr(pulumi.log.debug, "__wrapped__", None) is not None:
        return
    sdk_debug = pulumi.log.debug

    def _debug(msg: str, resource: Any = None, stream_id: int | None = None,
               ephemeral: bool | None = None) -> None:
        if not _QUIET.get():
            sdk_debug(msg, resource, stream_id, ephemeral)

    _debug.__wrapped__ = sdk_debug   # type: ignore[attr-defined]
    _debug.__doc__ = sdk_debug.__doc__
    pulumi.log.debug = _debug


__all__ = ["is_quiet", "quiet_registrations"]
