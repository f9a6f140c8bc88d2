"""Rules over the node commands: the files each node gets, merged with the node's config
(captured originals the command carries, else the distribution's model; Docker's
daemon.json, which a command may also carry, is left out) under that
containerd's rules (FM01-FM03, FM07, FM09, FM16, FM04), and the order in which nodes
restart (FM06, FM09). The files are read back from the command's `stdin`, exactly what
would be sent to the node; a `NodeAgentPod` (`nodeAccess: pod`) names the ConfigMap of the
stack that holds that program (`program`: gpuplane.stack.node_pod), and it is read there.
The order is read from the commands' dependencies: on the commands of the batch before, or
on a rollout barrier that depends on them (gpuplane.stack.barrier)."""

from __future__ import annotations

import graphlib
from collections.abc import Mapping, Sequence
from dataclasses import replace

from gpuplane.containerd import ConfigError
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.distros.profiles import DistroProfile
from gpuplane.plan.node import NodeContainerdPlan, PlanOptions, ToolkitMode, assess
from gpuplane.policy.views import StackFindings, View, intent_profile
from gpuplane.rules.nodefiles import check_node_files
from gpuplane.rules.platform import check_platform_node_writes
from gpuplane.rules.rollout import RolloutStep, check_rollout

ROLLOUT_WHERE = "node rollout (gpuplane:rollout)"


CONFIGMAP = "kubernetes:core/v1:ConfigMap"


def plan_programs(views: Sequence[View]) -> dict[tuple[str, str], str]:
    """The node agent programs the stack's plan ConfigMaps hold, by (namespace, name)."""
    from gpuplane.agent.pod import PLAN_PREFIX, PROGRAM_KEY

    found: dict[tuple[str, str], str] = {}
    for v in views:
        meta = v.props.get("metadata") or {}
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if v.type != CONFIGMAP or not isinstance(name, str) or \
                not name.startswith(PLAN_PREFIX):
            continue
        program = (v.props.get("data") or {}).get(PROGRAM_KEY)
        if isinstance(program, str):
            found[(str(meta.get("namespace") or "default"), name)] = program
    return found


# `nodeAccess: pod`: the same agent program, run from a pod (gpuplane.stack.node_pod).
NODE_AGENT_POD = "pulumi-python:dynamic/gpuplane:NodeAgentPod"


def _stdin(view: View, programs: Mapping[tuple[str, str], str]) -> str | None:
    """The program a node command runs: its own `stdin`, or its plan ConfigMap's."""
    stdin = view.props.get("stdin")
    if isinstance(stdin, str):
        return stdin
    ref = view.props.get("program")
    if isinstance(ref, str):
        return programs.get((str(view.props.get("namespace") or "default"), ref))
    return None


def _restores(view: View) -> bool:
    """Whether deleting the node's resource puts its config back: an SSH command's
    `delete` runs the agent's restore; a `NodeAgentPod`'s provider always does (its
    `delete`, gpuplane.stack.node_pod), so its record carries no script for it."""
    return view.type == NODE_AGENT_POD or "restore" in str(view.props.get("delete") or "")


def _payload(stdin: str | None) -> tuple[dict[str, str], dict[str, str]] | None:
    """(files, captured originals) a node program carries; None if it carries no plan."""
    from gpuplane.agent.payload import payload_base_texts, payload_docker_config, payload_files

    if not isinstance(stdin, str):
        return None
    files = payload_files(stdin)
    if files is None:
        return None
    # Docker's daemon.json is no containerd file: the containerd rules do not judge it.
    docker = payload_docker_config(stdin)
    captured = payload_base_texts(stdin)
    return ({p: t for p, t in files.items() if p != docker},
            {p: t for p, t in captured.items() if p != docker})


def node_findings(commands: list[View], intent: ClusterIntent, out: StackFindings, *,
                  toolkit: str, operator_chart: str | None = None,
                  programs: Mapping[tuple[str, str], str] | None = None,
                  barriers: Mapping[str, Sequence[str]] | None = None) -> None:
    """`programs`: the plan ConfigMaps' programs (:func:`plan_programs`), for the
    commands that name one rather than carry their `stdin`; `barriers`: the dependencies
    of each rollout barrier by its URN (gpuplane.stack.barrier), which a command that
    depends on a barrier waits for."""
    commands = [replace(v, dependencies=through_barriers(v.dependencies, barriers or {}))
                for v in commands]
    profile, version = intent_profile(intent)
    options = PlanOptions(
        toolkit=ToolkitMode(intent.toolkit), nvidia_default=intent.nvidia_default,
        cdi=intent.cdi, toolkit_version=toolkit, runtime_name=intent.runtime_class,
        operator_chart=operator_chart, kubelet_cgroup_driver=intent.kubelet_cgroup_driver)
    # The node commands (not the per-node agent installs, which carry no plan).
    node_of = {v.urn: v.name.removeprefix("containerd-") for v in commands
               if v.name.startswith("containerd-")}
    judged: dict[str, NodeContainerdPlan] = {}
    steps: list[RolloutStep] = []
    depth: dict[str, int] = {}
    payloads: dict[str, tuple[dict[str, str], dict[str, str], str] | None] = {}
    for view in _in_dependency_order(commands):
        stdin = _stdin(view, programs or {})
        key_ = stdin if isinstance(stdin, str) else ""
        if key_ not in payloads:   # nodes sharing a plan share its program: parse it once
            read = _payload(stdin)
            payloads[key_] = None if read is None else (
                *read, repr((sorted(read[0].items()), sorted(read[1].items()))))
        payload = payloads[key_]
        if payload is None:
            continue
        files, captured, key = payload
        if key not in judged:
            try:
                # Judged on the node's captured originals where the plan was made from
                # them, else on the distribution's model, as the planner did.
                judged[key] = assessed = assess(profile, version, options, files,
                                                {**profile.baseline(version), **captured})
            except ConfigError as exc:
                out.add([unreadable(exc, view.name)], view.urn)
                continue
            out.add(assessed.findings + written_file_findings(
                profile, version, files, where=f"Command {view.name}")
                + check_platform_node_writes(intent, files, where=f"Command {view.name}"),
                view.urn)
        plan = judged.get(key)
        if plan is None:
            continue
        depth[view.urn] = 1 + max((depth[d] for d in view.dependencies if d in depth),
                                  default=-1)
        steps.append(rollout_step(
            node_of[view.urn], depth[view.urn], plan, intent,
            after=frozenset(node_of[d] for d in view.dependencies if d in node_of),
            restores_on_delete=_restores(view)))
    if steps:
        out.add(check_rollout(steps, intent, where=ROLLOUT_WHERE), None)


def through_barriers(dependencies: Sequence[str],
                     barriers: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """`dependencies` with each barrier replaced by what it depends on (and so on through
    a barrier behind a barrier): what a step waits for."""
    out: dict[str, None] = {}
    todo, seen = list(dependencies), set()
    while todo:
        urn = todo.pop(0)
        if urn in seen:
            continue
        seen.add(urn)
        if urn in barriers:
            todo.extend(barriers[urn])
        else:
            out[urn] = None
    return tuple(out)


def rollout_step(node: str, batch: int, plan: NodeContainerdPlan, intent: ClusterIntent, *,
                 after: frozenset[str], restores_on_delete: bool) -> RolloutStep:
    """One node's step of the rollout, as FM06/FM09 judge it."""
    return RolloutStep(node=node, batch=batch, after=after, restarts=plan.restarts,
                       restores_on_delete=restores_on_delete,
                       sets_nvidia_default=plan.written.default_runtime == intent.runtime_class)


def judge_rollout(intent: ClusterIntent, batches: Sequence[Sequence[str]],
                  plans: Mapping[str, NodeContainerdPlan]) -> list[Finding]:
    """FM06/FM09 on the rollout gpuplane's components build from `batches` (each batch
    after the one before; every node's delete restores it), before it is built: the same
    steps the pack reads back from the registered node commands."""
    steps = [rollout_step(node, i, plans[node], intent, after=frozenset(batches[i - 1])
                          if i else frozenset(), restores_on_delete=True)
             for i, batch in enumerate(batches) for node in batch
             if plans[node].files or plans[node].docker]
    return check_rollout(steps, intent, where=ROLLOUT_WHERE) if steps else []


def written_file_findings(profile: DistroProfile, version: ContainerdVersion,
                          files: Mapping[str, str] | Sequence[str], *,
                          where: str) -> list[Finding]:
    """FM04 on the node files a plan writes: a file the distribution regenerates."""
    return check_node_files(profile, files, where=where, version=version)


def unreadable(exc: ConfigError, command: str) -> Finding:
    """A file containerd cannot parse: it would refuse to start after the restart."""
    return Finding("FM03", Severity.ERROR,
                   f"containerd cannot read a planned file and would refuse to start: {exc}",
                   f"Command {command}: {exc.path}",
                   "Fix the file's TOML (gpuplane renders it from the stack config; a raw "
                   "edit of the command's stdin is not supported).")


def _in_dependency_order(commands: list[View]) -> list[View]:
    """Commands so that each comes after the commands it depends on: wave by wave (a
    wave's commands depend only on earlier waves), each wave by name. Linear in commands
    and dependencies (a fleet is thousands of nodes in hundreds of batches)."""
    by_urn = {v.urn: v for v in commands}
    order = graphlib.TopologicalSorter({v.urn: [d for d in v.dependencies if d in by_urn]
                                        for v in commands})
    ordered: list[View] = []
    try:
        order.prepare()
    except graphlib.CycleError:   # a cycle cannot come from the engine; keep them by name
        return sorted(commands, key=lambda v: v.name)
    while order.is_active():
        wave = sorted((by_urn[u] for u in order.get_ready()), key=lambda v: v.name)
        ordered += wave
        order.done(*(v.urn for v in wave))
    return ordered


__all__ = ["NODE_AGENT_POD", "ROLLOUT_WHERE", "judge_rollout", "node_findings", "plan_programs",
           "rollout_step", "through_barriers", "written_file_findings"]
