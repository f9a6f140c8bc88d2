"""FM06 and FM09 over the per-node rollout gpuplane builds (one `containerd-<node>`
command per node): how many nodes restart containerd at once, whether each batch waits for
the one before, whether a single canary goes first, and whether deleting a step restores
the node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules._shared import at, finding, names


@dataclass(frozen=True)
class RolloutStep:
    """One node's containerd change as the rollout orders it."""

    node: str
    batch: int
    after: frozenset[str]          # nodes whose step must finish before this one starts
    restarts: bool                 # the step restarts containerd (the node's pods stall)
    restores_on_delete: bool       # deleting the step puts the node's config back
    sets_nvidia_default: bool      # the step makes nvidia containerd's default runtime


def _batches(steps: Iterable[RolloutStep]) -> dict[int, list[RolloutStep]]:
    out: dict[int, list[RolloutStep]] = {}
    for step in steps:
        out.setdefault(step.batch, []).append(step)
    return {b: sorted(out[b], key=lambda s: s.node) for b in sorted(out)}


def check_rollout(steps: list[RolloutStep], intent: ClusterIntent, *,
                  where: str) -> list[Finding]:
    """FM06 (batch size, ordering, canary) and FM09 (restore on delete)."""
    batches = _batches(steps)
    return _batch_size(batches, intent, where) + _all_at_once(batches, intent, where) + \
        _ordering(batches, where) + _canary(batches, intent, where) + _restore(batches, where)


def _step_at(where: str, step: RolloutStep, key: str) -> str:
    return at(where, f"node {step.node} (containerd-{step.node})", key)


def _batch_size(batches: dict[int, list[RolloutStep]], intent: ClusterIntent,
                where: str) -> list[Finding]:
    out = []
    limit = intent.max_unavailable
    for batch, steps in batches.items():
        restarting = [s.node for s in steps if s.restarts]
        if len(restarting) <= limit:
            continue
        out.append(finding(
            "FM06",
            f"batch {batch} restarts containerd on {len(restarting)} nodes at once "
            f"({names(restarting)}) but gpuplane:rollout.maxUnavailable is {limit}: their "
            "pods stall together.",
            at(where, f"batch {batch}", "gpuplane:rollout.maxUnavailable"),
            f"Split the batch so at most {limit} node(s) restart together (gpuplane batches "
            "by `gpuplane:rollout.maxUnavailable`); by hand restart containerd node by node "
            "and wait for each to be Ready.", severity=Severity.ERROR))
    return out


def _all_at_once(batches: dict[int, list[RolloutStep]], intent: ClusterIntent,
                 where: str) -> list[Finding]:
    """One batch holding every node of a rollout of two or more: a bad change (or a
    containerd that does not come back) takes down every GPU node together, before any
    node has proved it. An error unless the stack accepts it (`rollout.allowAllAtOnce`),
    and then still shown in the plan."""
    every = {s.node for steps in batches.values() for s in steps}
    if len(every) < 2:
        return []
    for batch, steps in batches.items():
        if {s.node for s in steps} != every:
            continue
        key = "gpuplane:rollout.allowAllAtOnce"
        if intent.allow_all_at_once:
            return [finding(
                "FM06",
                f"batch {batch} changes containerd on all {len(every)} GPU nodes at once; "
                f"accepted by {key}: true.",
                at(where, f"batch {batch}", key),
                "Remove gpuplane:rollout.allowAllAtOnce and roll a canary first when the "
                "GPU nodes must stay up.", severity=Severity.WARNING)]
        return [finding(
            "FM06",
            f"batch {batch} changes containerd on every GPU node at once ({len(every)} nodes, "
            f"gpuplane:rollout.maxUnavailable {intent.max_unavailable}, canary "
            f"{'on' if intent.canary else 'off'}): one bad change takes the whole GPU fleet "
            "down before any node has proved it.",
            at(where, f"batch {batch}", "gpuplane:rollout"),
            "Set gpuplane:rollout.canary: true and gpuplane:rollout.maxUnavailable below the "
            f"GPU node count ({len(every)}); to accept the outage (e.g. a maintenance "
            f"window), set {key}: true.", severity=Severity.ERROR)]
    return []


def _ordering(batches: dict[int, list[RolloutStep]], where: str) -> list[Finding]:
    out = []
    for prev, batch in pairwise(batches):
        before = {s.node for s in batches[prev]}
        for step in batches[batch]:
            missing = before - step.after
            if not missing:
                continue
            out.append(finding(
                "FM06",
                f"node {step.node} (batch {batch}) does not wait for {names(missing)} of "
                f"batch {prev}: a failure there does not stop the rollout, and the batches "
                "can overlap.",
                _step_at(where, step, "gpuplane:rollout"),
                "Make each step depend on every step of the previous batch (gpuplane does "
                "this from `gpuplane:rollout`); in Pulumi: dependsOn=[the previous batch's "
                "commands].", severity=Severity.ERROR))
    return out


def _canary(batches: dict[int, list[RolloutStep]], intent: ClusterIntent,
            where: str) -> list[Finding]:
    if not intent.canary or not batches:
        return []
    first, steps = next(iter(batches.items()))
    if len(steps) == 1:
        return []
    return [finding(
        "FM06",
        f"gpuplane:rollout.canary is true but the first batch ({first}) has {len(steps)} "
        f"nodes ({names(s.node for s in steps)}): a bad change reaches them all before any "
        "node has proved it.",
        at(where, f"batch {first}", "gpuplane:rollout.canary"),
        "Roll one node alone first and make every other step wait for it (gpuplane does this "
        "with `gpuplane:rollout.canary: true`).")]


def _restore(batches: dict[int, list[RolloutStep]], where: str) -> list[Finding]:
    out = []
    for steps in batches.values():
        for step in steps:
            if step.restores_on_delete:
                continue
            here = _step_at(where, step, "gpuplane:cluster.nodeAccess")
            fix = ("Give the step a delete that runs the node agent's restore (gpuplane "
                   "does with `gpuplane:cluster.nodeAccess: ssh` or `pod`); by hand set "
                   "default_runtime_name = \"runc\" and remove the nvidia runtime before "
                   "uninstalling.")
            if step.sets_nvidia_default:
                out.append(finding(
                    "FM09",
                    f"the step on {step.node} makes nvidia containerd's default runtime, "
                    "and deleting it restores nothing: once the toolkit is gone, "
                    "`default_runtime_name = \"nvidia\"` names a runtime that fails every "
                    "pod on the node.", here, fix))
            else:
                out.append(finding(
                    "FM09",
                    f"deleting the step on {step.node} restores nothing: gpuplane's "
                    "containerd changes stay on the node after the stack is gone.",
                    here, fix, severity=Severity.WARNING))
    return out


__all__ = ["RolloutStep", "check_rollout"]
