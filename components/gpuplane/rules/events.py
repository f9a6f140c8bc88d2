"""The one table from what the cluster says (event messages, pod states, scheduler
conditions) to the rules that can explain it; first match wins.

The post-deploy checks (`gpuplane.checks.verdicts.classify`) and the doctor
(`gpuplane.doctor.symptoms.classify`) both read a text through `first_cause`, so a text
names the same cause in both. They used to keep a table each, in different orders, and a
text that named two symptoms (say a pod refused for a missing RuntimeClass whose earlier
scheduling attempt said `Insufficient nvidia.com/gpu`) was blamed on FM11 by the checks
and on the device plugin by the doctor. Each user still decides what to do with a cause
(the checks pick one rule id from the stack's intent and name a stack key to fix; the
doctor points at the findings the rules made and ignores causes that say nothing about
GPUs), but which cause a text is belongs here.

The order goes from the most specific text to the least:

| cause | text | rules (most likely first) |
| --- | --- | --- |
| no-runtime | `no runtime for "nvidia" is configured` | FM17, FM01, FM02, FM04, FM11 |
| no-runtimeclass | `RuntimeClass "x" not found` | FM11 |
| cdi | `unresolvable CDI devices` | FM13, FM16, FM01 |
| glibc | `GLIBC_x.y not found` | FM15 |
| admission | `UnexpectedAdmissionError` | FM12, FM13, FM10, FM01 |
| insufficient-shares | `Insufficient nvidia.com/gpumem`, `gpucores` | FM13, FM14, FM12 |
| insufficient | `Insufficient nvidia.com/<resource>` | FM10, FM12, FM14, FM13, FM01 |
| node-not-ready | taint `node.kubernetes.io/not-ready` | FM02, FM03, FM09, FM01, FM15, FM17 |
| node-affinity | `didn't match Pod's node affinity/selector` | FM01, FM10, FM13 |
| untolerated-taint | `untolerated taint` | FM01, FM10, FM13 |
| image-pull | `ErrImagePull`, `ImagePullBackOff`, `InvalidImageName` | FM01, FM11 |
| oom | `OOMKilled` | FM01, FM11 |

Texts that name one component's failure (a runtime, a RuntimeClass, CDI, glibc) come
first: they say what broke. The kubelet's admission error comes next (a device plugin
refused what the scheduler had counted). The scheduler's summaries come after them: one
`0/3 nodes are available: ...` line lists every node's reason, so it often contains a
second, less telling pattern; HAMi's shares before the plain GPU count (a HAMi pod asks for
both), and a node that is not ready before the generic `untolerated taint` that the same
words also match. Pod states that are not about GPUs at all (an image that cannot be
pulled, a container out of memory) come last, so they never hide a GPU cause.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from gpuplane.rules.messages import (
    CDI_UNRESOLVABLE,
    GLIBC_MISSING,
    INSUFFICIENT,
    INSUFFICIENT_SHARES,
    NO_RUNTIME,
    NO_RUNTIMECLASS,
    NODE_NOT_READY,
)


@dataclass(frozen=True)
class EventCause:
    """One row of the table: a text pattern and the rules that can explain it."""

    key: str
    pattern: re.Pattern[str]
    ids: tuple[str, ...]      # the rules that can explain the text, most likely first
    gpu: bool = True          # False: the text says nothing about GPUs by itself


# What breaks a GPU node's runtime badly enough for the node to go NotReady.
NODE_DOWN_IDS = ("FM02", "FM03", "FM09", "FM01", "FM15", "FM17")

EVENT_CAUSES: tuple[EventCause, ...] = (
    EventCause("no-runtime", NO_RUNTIME, ("FM17", "FM01", "FM02", "FM04", "FM11")),
    EventCause("no-runtimeclass", NO_RUNTIMECLASS, ("FM11",)),
    EventCause("cdi", CDI_UNRESOLVABLE, ("FM13", "FM16", "FM01")),
    EventCause("glibc", GLIBC_MISSING, ("FM15",)),
    EventCause("admission", re.compile(r"\bUnexpectedAdmissionError\b"),
               ("FM12", "FM13", "FM10", "FM01")),
    EventCause("insufficient-shares", INSUFFICIENT_SHARES, ("FM13", "FM14", "FM12")),
    EventCause("insufficient", INSUFFICIENT, ("FM10", "FM12", "FM14", "FM13", "FM01")),
    EventCause("node-not-ready", NODE_NOT_READY, NODE_DOWN_IDS),
    EventCause("node-affinity", re.compile(r"didn't match Pod's node affinity/selector",
                                           re.I), ("FM01", "FM10", "FM13"), gpu=False),
    EventCause("untolerated-taint", re.compile(r"untolerated taint", re.I),
               ("FM01", "FM10", "FM13"), gpu=False),
    EventCause("image-pull", re.compile(r"ErrImagePull|ImagePullBackOff|InvalidImageName",
                                        re.I), ("FM01", "FM11"), gpu=False),
    EventCause("oom", re.compile(r"OOMKilled", re.I), ("FM01", "FM11"), gpu=False),
)
CAUSES: dict[str, EventCause] = {c.key: c for c in EVENT_CAUSES}


def first_cause(texts: Iterable[str]) -> tuple[EventCause, re.Match[str]] | None:
    """The first cause of the table that any of `texts` shows, with its match (from the
    first text that shows it); None when no text shows one. Table order, not text order:
    a pod's list of events is judged by its most specific symptom, wherever it is."""
    texts = [t for t in texts if t]
    for cause in EVENT_CAUSES:
        for text in texts:
            if match := cause.pattern.search(text):
                return cause, match
    return None


def causes_of(rule_id: str) -> tuple[EventCause, ...]:
    """The table's rows that can point at `rule_id` (how the rule shows in the cluster)."""
    return tuple(c for c in EVENT_CAUSES if rule_id in c.ids)


__all__ = ["CAUSES", "EVENT_CAUSES", "NODE_DOWN_IDS", "EventCause", "causes_of",
           "first_cause"]
