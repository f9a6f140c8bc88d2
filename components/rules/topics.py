"""Docs of the checks added under an existing failure mode: what each one finds, why it
breaks nodes, an example, the fix and the upstream source of the fact (file@tag).

`gpuplane explain FM06` prints them after the rule's own doc; `gpuplane explain
FM06-all-at-once` prints one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    """One check within a failure mode."""

    id: str          # <rule>-<slug>, e.g. FM06-all-at-once
    title: str
    why: str
    example: str
    fix: str
    upstream: str    # where the fact comes from, file@tag


TOPICS: dict[str, Topic] = {t.id: t for t in [
    Topic(
        "FM06-all-at-once", "a rollout that can take down every GPU node at once",
        "When one batch holds every GPU node (no canary, rollout.maxUnavailable at least "
        "the node count), a change that breaks containerd — or a containerd that does not "
        "come back after the restart — stops every GPU workload together, and no node has "
        "proved the change first.",
        "5 GPU nodes, rollout.canary: false, rollout.maxUnavailable: 5: one batch restarts "
        "containerd on all five.",
        "Keep rollout.canary: true and rollout.maxUnavailable below the GPU node count; to "
        "accept the outage (a maintenance window), set rollout.allowAllAtOnce: true, which "
        "the plan then shows as a warning.",
        "kubernetes/kubernetes pkg/controller/daemon/update.go@v1.31.4 (the same "
        "maxUnavailable model DaemonSet rolling updates use)"),
]}


def topics_of(rule_id: str) -> list[Topic]:
    """The topics under one rule, in catalogue order."""
    return [t for t in TOPICS.values() if t.id.split("-", 1)[0] == rule_id]


def explain_topic(topic: Topic) -> str:
    return "\n".join([f"{topic.id}: {topic.title}", "", f"Why it breaks: {topic.why}",
                      f"Example: {topic.example}", f"Fix: {topic.fix}",
                      f"Upstream: {topic.upstream}"])


__all__ = ["TOPICS", "Topic", "explain_topic", "topics_of"]
