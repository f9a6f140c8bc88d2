"""Small helpers the cluster-level rules share: Helm-value lookup with chart defaults,
Kubernetes quantities, version strings and the wording of `where`.

Helm values and Kubernetes objects arrive as plain dicts in API shape (camelCase), from
the Pulumi engine at preview time and from the API server in the doctor, so every helper
tolerates missing keys and odd types instead of assuming a schema.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.rules.catalogue import RULES


def finding(rule_id: str, message: str, where: str, fix: str,
            severity: Severity | None = None,
            changes: tuple[tuple[str, object], ...] = ()) -> Finding:
    """A finding with the catalogue's default severity unless one is given; `changes`: the
    fix as stack changes (Finding.changes), where it is one."""
    return Finding(rule_id, severity or RULES[rule_id].severity, message, where, fix,
                   changes=changes)


def lookup(values: Any, path: str, default: Any = None) -> Any:
    """`values` at the dotted `path`, or `default` where a key is absent or null.

    A null in Helm values removes the key, so the chart's default applies: that is why
    None is treated like an absent key.
    """
    node = values
    for part in path.split("."):
        if not isinstance(node, Mapping) or node.get(part) is None:
            return default
        node = node[part]
    return node


def present(values: Any, path: str) -> bool:
    """Whether the dotted `path` is set (not null) in `values`."""
    return lookup(values, path, _ABSENT) is not _ABSENT


_ABSENT = object()
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0", ""}


def flag(values: Any, path: str, default: bool) -> bool:
    """A boolean Helm value with the chart's default; "false" strings (from --set or a
    YAML-1.1 round trip) count as false, as they do once rendered into a manifest."""
    value = lookup(values, path, default)
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    return bool(value)


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def quantity(value: Any) -> float:
    """A Kubernetes quantity ("1", "1024", "10Gi", "500m", 2) as a float.

    Raises ValueError for anything the API server would refuse (booleans, "1x", NaN).
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    # Imported here: importing any part of the kubernetes client costs ~0.2 s, which the
    # CLI's start (`gpuplane --help`, `explain`) must not pay.
    from kubernetes.utils import parse_quantity

    try:
        number = float(parse_quantity(value))
    except (ValueError, ArithmeticError) as exc:
        raise ValueError(f"{value!r} is not a Kubernetes quantity") from exc
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    return number


_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def version_tuple(text: Any) -> tuple[int, int, int] | None:
    """(major, minor, patch) of "v25.10.1", "2.10.0", "1.31" (patch 0); None otherwise."""
    if not isinstance(text, str):
        return None
    match = _VERSION.match(text.strip())
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def at(where: str, path: str, stack_key: str | None = None) -> str:
    """`<where> <path> (<stack key>)`, e.g.
    "Release gpu-operator values.driver.enabled (gpuplane:gpuOperator.driver)"."""
    text = f"{where} {path}" if where else path
    return f"{text} ({stack_key})" if stack_key else text


def names(values: Iterable[str]) -> str:
    return ", ".join(sorted(set(values)))
