"""A fleet's node resources register without the SDK's debug messages, and with a short
stack trace.

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

The SDK also sends, with every registration, the Python call stack under the resource's
constructor (`_get_stack_trace`, pulumi/runtime/resource.py, pulumi 3.260.0), and the
engine keeps it in the resource's state record (`getFromRequest`,
pkg/resource/deploy/source_eval.go, pulumi v3.260.0). For a node of a rollout that is
gpuplane's few frames, then the SDK's and asyncio's that ran the callback making its batch
(or the whole program's, for the canary): 17 frames, about 2 KB of every node's 4.9 KB
record, and `traceback.extract_stack`, which reads every frame's source line, was a sixth
of the program's time in a 3,000-node preview. Inside :func:`quiet_registrations` the
trace is its first frame alone, found without reading any source: the resource's source
position, the line of gpuplane that made it, which the SDK derives from that frame
(`_get_source_position`) and the engine keeps beside the trace. The frames above it are
the same rollout code for every node of a fleet (about 260 B of each node's record).
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime.resource as sdk_resource
from pulumi.runtime.proto import source_pb2

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
    """Route `pulumi.log.debug` and `pulumi.runtime.resource._get_stack_trace` (which the
    SDK looks up at every call) through :func:`_debug` and :func:`_stack_trace`, once per
    process."""
    if getattr(sdk_resource._get_stack_trace, "__wrapped__", None) is None:
        sdk_trace = sdk_resource._get_stack_trace

        def _trace() -> source_pb2.StackTrace:
            return _stack_trace() if _QUIET.get() else sdk_trace()

        _trace.__wrapped__ = sdk_trace   # type: ignore[attr-defined]
        sdk_resource._get_stack_trace = _trace
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


def _stack_trace() -> source_pb2.StackTrace:
    """The first frame of the SDK's stack trace (the frame under the resource's
    constructor: below the third `__init__` up from the registration), its source line
    unread."""
    frames = iter(traceback.walk_stack(None))
    inits = 0
    for frame, _ in frames:
        if frame.f_code.co_name == "__init__":
            inits += 1
            if inits == 3:
                break
    for frame, line in frames:
        return source_pb2.StackTrace(frames=[
            source_pb2.StackFrame(pc=_position(frame.f_code.co_filename, line))])
    return source_pb2.StackTrace(frames=[])


def _position(filename: str, line: int | None) -> source_pb2.SourcePosition | None:
    """The frame's position as the SDK writes it (`_get_source_position_for_frame`)."""
    uri = _uri(filename)
    return None if uri is None or line is None else source_pb2.SourcePosition(uri=uri,
                                                                              line=line)


@cache
def _uri(filename: str) -> str | None:
    if filename == "":
        return None
    try:
        return Path(filename).as_uri()
    except ValueError:   # a relative path or a pseudo-file ("<string>")
        return None


__all__ = ["is_quiet", "quiet_registrations"]
