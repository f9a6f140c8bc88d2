"""Resource inputs as plain data for the rulebook.

The policy SDK hands a policy each resource's inputs behind read-only proxies
(`pulumi_policy.proxy`: `Mapping`/`Sequence` subclasses, not `dict`/`list`) that raise
`UnknownValueError` where a value is not known yet: during `pulumi preview`, the outputs
of resources not created yet. The rules check `isinstance(x, dict)` and `list` like any
parsed config, so the pack converts once, at its boundary. An unknown value becomes None:
a rule sees it as not set, and judges it at `pulumi up`, when it is known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy.proxy import UnknownValueError


def plain(value: Any) -> Any:
    """`value` with every mapping a dict and every sequence (but strings) a list."""
    if isinstance(value, str | int | float) or value is None:   # most values: no ABC check
        return value
    if isinstance(value, Mapping):
        return {key: _item(value, key) for key in value}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_item(value, i) for i in range(len(value))]
    return value


def _item(container: Any, key: Any) -> Any:
    try:
        return plain(container[key])
    except UnknownValueError:
        return None


__all__ = ["plain"]
