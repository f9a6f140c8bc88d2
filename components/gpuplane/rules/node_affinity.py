"""How the scheduler reads one node selector requirement (`In`, `NotIn`, `Exists`,
`DoesNotExist`, `Gt`, `Lt`; k8s.io/api core/v1 NodeSelectorOperator), over what a rule
knows of a node's label. Shared by FM32 (where the DRA driver's kubelet plugin runs) and
FM24/FM25 on plain programs (which device plugin profile a pod can reach)."""

from __future__ import annotations

from typing import Any


def operator_matches(op: Any, value: str | None, wanted: list[str], *,
                     unknown: str | None = None) -> bool:
    """Whether a label `value` (None: the node lacks the label) satisfies `op` over
    `wanted`. `unknown` is the caller's stand-in for "some value not known here", which
    may be any of them; an operator this does not know may match."""
    if op == "In":
        return value is not None and (value in wanted or value == unknown)
    if op == "NotIn":
        return value is None or value == unknown or value not in wanted
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or not wanted:
            return False
        if value == unknown:
            return True
        try:
            return int(value) > int(wanted[0]) if op == "Gt" else int(value) < int(wanted[0])
        except ValueError:
            return False
    return True


__all__ = ["operator_matches"]
