"""Judging every state a node passes through during a rollout, not only the last one.

A plan's final layout can be clean while a state on the way is not: gpuplane's `imports`
line switches on drop-ins that were lying unread (a version-3 drop-in on 1.7: containerd
refuses; an nvidia-only drop-in on 1.x: runc gone), the node agent restarts containerd on
that layout, and only later does the operator's toolkit write the file that would have
repaired it. So each state is judged on its own and a finding names the first state it
appears in. A finding only the node as found has, and that the plan repairs, is not
reported: repairing it is the plan's job.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from gpuplane.core.findings import AS_FOUND, Finding, Severity
from gpuplane.rules.containerd import ContainerdFacts, check_containerd


def judge_states(states: Iterable[tuple[str, ContainerdFacts]], *, final: str,
                 extra: Iterable[Finding] = ()) -> list[Finding]:
    """The containerd rules over each `(state, facts)` in rollout order, plus `extra`
    findings that already carry their state; each finding once, labelled with the first
    state it appears in. The node as found counts only for what persists (the plan is
    there to repair it); states between the start and `final` count for their errors
    (containerd refuses, a runtime is gone) — a warning there, such as a drop-in glob
    the toolkit has not filled yet, is transient."""
    judged = [(state, check_containerd(facts)) for state, facts in states]
    kept = {(f.id, f.message) for state, found in judged if state == final for f in found}
    kept |= {(f.id, f.message) for state, found in judged if state not in (AS_FOUND, final)
             for f in found if f.severity is Severity.ERROR}
    kept |= {(f.id, f.message) for f in extra}
    out: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    for state, found in judged:
        for f in found:
            key = (f.id, f.message)
            if key in seen or key not in kept:
                continue
            seen.add(key)
            out.append(replace(f, state=state))
    return out + [f for f in extra if (f.id, f.message) not in seen]


__all__ = ["judge_states"]
