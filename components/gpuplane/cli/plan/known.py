"""`Output.secret` of an input type whose values the plan already knows, without the loop.

Each generated `pulumi_command` resource makes its connection secret:
`Output.secret(ConnectionArgs(...))`. The SDK unwraps the input type field by field
(`Output.from_input` → `Output.all` → `apply`), an Output with its own future and task
per field, about 100 µs a resource: at 10,000 nodes, 2 s of a plan for a value the plan
already has (plain text, and a secret key that is resolved by then).

:func:`installed` answers those calls with one resolved Output holding exactly what the
SDK's chain would resolve to: the input type rebuilt from its fields' values (`typ(**d)`),
the fields' resources, known, secret. It does so only when every field is a plain scalar
or an Output that is already resolved, known, and holds a plain scalar; anything else
(nested types, lists, pending or unknown Outputs, awaitables) goes the SDK's way.
tests/pure/test_plan_known.py checks, with hypothesis, that both ways resolve to the same
data, and that plans are the same with and without it.

It also answers `contains_unknowns` (pulumi/output.py, pulumi 3.260.0) for a plain scalar
without the SDK's walk: every Output the SDK makes asks it of its value, and a URN, an
id or a name is a string, never the unknown sentinel (an `Unknown` instance). The walk
(a closure and a set per call) was a twelfth of a 10,000-node plan's program.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pulumi.output
from pulumi import Output, _types
from pulumi.output import _OutputData

_SCALARS = (str, int, float, bool, type(None))


class _NotKnown(Exception):
    """A field this path does not resolve: the SDK's own chain takes the call."""


def _field(value: Any, resources: set[Any]) -> Any:
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Output):
        future = value._data
        if not future.done() or future.cancelled() or future.exception() is not None:
            raise _NotKnown
        data = future.result()
        if not data.is_known or not isinstance(data.value, _SCALARS):
            raise _NotKnown
        resources |= data.resources
        return data.value
    raise _NotKnown


def known_secret(val: Any) -> Output[Any] | None:
    """The resolved secret Output of input type `val`, or None where the SDK must do it."""
    typ = type(val)
    if not _types.is_input_type(typ):
        return None
    resources: set[Any] = set()
    try:
        fields = {key: _field(value, resources) for key, value in val.__dict__.items()}
    except _NotKnown:
        return None
    future: asyncio.Future[_OutputData[Any]] = asyncio.Future()
    future.set_result(_OutputData(resources=resources, value=typ(**fields) if fields else typ(),
                                  is_known=True, is_secret=True))
    return Output._from_data(future)


def contains_unknowns(val: Any) -> bool:
    """`pulumi.output.contains_unknowns(val)`: False for a plain scalar, else the SDK's."""
    return False if type(val) in _PLAIN else _SDK_CONTAINS_UNKNOWNS(val)


_PLAIN = frozenset(_SCALARS)
_SDK_CONTAINS_UNKNOWNS: Callable[[Any], bool] = pulumi.output.contains_unknowns


@contextmanager
def installed() -> Iterator[None]:
    """`Output.secret` takes the short way for known input types, and `contains_unknowns`
    for scalars, while the block runs."""
    original: Callable[[Any], Output[Any]] = Output.secret
    unknowns = pulumi.output.contains_unknowns

    def secret(val: Any) -> Output[Any]:
        return known_secret(val) or original(val)

    Output.secret = staticmethod(secret)  # type: ignore[method-assign]
    pulumi.output.contains_unknowns = contains_unknowns
    try:
        yield
    finally:
        Output.secret = staticmethod(original)  # type: ignore[method-assign,assignment]
        pulumi.output.contains_unknowns = unknowns


__all__ = ["contains_unknowns", "installed", "known_secret"]
