"""Rollout order for node changes: a canary node first, then batches of maxUnavailable.

Pure planning, so the plan report, the Pulumi components and the FM06 rule agree on
which node restarts containerd when, and after which others.
"""

from __future__ import annotations

from collections.abc import Sequence


def batches(nodes: Sequence[str], *, canary: bool, max_unavailable: int) -> list[list[str]]:
    """Nodes grouped into batches in rollout order; each batch waits for the one before."""
    if max_unavailable < 1:
        raise ValueError("max_unavailable must be at least 1")
    rest = list(nodes)
    out: list[list[str]] = []
    if canary and rest:
        out.append([rest.pop(0)])
    out.extend(rest[i:i + max_unavailable] for i in range(0, len(rest), max_unavailable))
    return out


__all__ = ["batches"]
