"""A fleet's node rollout (`nodeAccess: pod`, and the SSH one) costs the same per node
at any fleet size (issue #49: a 1,000-node preview took 8x as long as a 300-node one under
the real engine). What grew was not a node's inputs but what the SDK holds and walks for
it: every node made at once left all of them pending while the batches went by in order,
and the SDK re-waits on every pending output each time one batch returns
(`pulumi.runtime.stack.wait_for_rpcs`); and each dependency on the batch before walked the
whole chain of batches behind it for cycles (`pulumi.runtime.resource_cycle_breaker`).
Measured here under the SDK's mocks, for two fleet sizes: each must be the same."""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any

import pulumi
import pytest
from google.protobuf import json_format
from pulumi.runtime import resource_cycle_breaker
from pulumi.runtime.settings import SETTINGS
from test_checks_component import Recorder, RecordingMonitor

from gpuplane.agent.script import agent_plan, plan_stdin
from gpuplane.containerd import ContainerdVersion
from gpuplane.distros.profiles import profile
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node
from gpuplane.stack.node_pod import (
    PROVIDER_KEY,
    ContainerdPodRollout,
    ContainerdPodRolloutArgs,
    NodeAgentPodProvider,
)
from gpuplane.stack.node_rollout import ContainerdRollout, ContainerdRolloutArgs, NodeTarget

PLAN = plan_node(profile("kubeadm"), ContainerdVersion.parse("1.7"),
                 PlanOptions(toolkit=ToolkitMode.HOST))


class Sizing(RecordingMonitor):
    """At each node's registration: the outputs the SDK holds pending, and the bytes of
    the node's request (its inputs and its dependencies)."""

    def __init__(self, mocks: Recorder) -> None:
        super().__init__(mocks)
        self.pending: list[int] = []
        self.request_bytes: dict[str, int] = {}

    def RegisterResource(self, request: Any) -> Any:
        if request.type.endswith((":NodeAgentPod", "remote:Command")):
            self.pending.append(len(SETTINGS.outputs))
            # A number in a URN counts as one byte: a rollout barrier's name holds the
            # number of its batch (more digits in a larger fleet, not more bytes per node).
            self.request_bytes[request.name] = request.object.ByteSize() + sum(
                len(re.sub(r"\d+", "#", d)) for d in request.dependencies)
        return super().RegisterResource(request)


def _rollout(names: list[str], batches: list[list[str]], access: str) -> Any:
    if access == "pod":
        return ContainerdPodRollout("r", ContainerdPodRolloutArgs(
            plans=dict.fromkeys(names, PLAN), batches=batches, namespace="ns",
            image="busybox:1.36", timeout_seconds=60))
    return ContainerdRollout("r", ContainerdRolloutArgs(
        targets=[NodeTarget(n, n, "ubuntu", 22, True) for n in names],
        plans=dict.fromkeys(names, PLAN), batches=batches, private_key="key"))


def _measure(nodes: int, preview: bool, access: str) -> dict[str, int]:
    names = [f"gpu-{i:05d}" for i in range(nodes)]
    batches = [names[:1]] + [names[i:i + 10] for i in range(1, nodes, 10)]
    mocks = Recorder()
    monitor = Sizing(mocks)
    pulumi.runtime.set_mocks(mocks, project="gpuplane", stack="test", preview=preview,
                             monitor=monitor)
    made: list[ContainerdPodRollout] = []

    def program() -> Any:
        made.append(_rollout(names, batches, access))
        return made[0].finished

    pulumi.runtime.test(program)()
    last = made[0].commands[names[-1]]
    reach = sum(1 for _ in resource_cycle_breaker._with_transitive_deps(last, set()))
    assert len(monitor.pending) == nodes, "every node registered"
    return {"pending": max(monitor.pending), "walked": reach,
            "bytes": monitor.request_bytes[f"containerd-{names[-1]}"]}


@pytest.mark.parametrize("access", ["pod", "ssh"])
@pytest.mark.parametrize("preview", [True, False], ids=["preview", "up"])
def test_a_nodes_cost_to_the_sdk_does_not_grow_with_the_fleet(preview: bool,
                                                              access: str) -> None:
    small, large = _measure(31, preview, access), _measure(121, preview, access)
    # The last node's request: its own plan and the URNs of one batch, never the fleet's.
    assert large["bytes"] == small["bytes"], (small, large)
    # What the SDK walks for the last node's dependencies: itself, one batch (and over SSH
    # its agent upload), at any size.
    assert large["walked"] == small["walked"] <= 12, (small, large)
    # Pending outputs while the rollout goes by batch: one batch's (about 20 per node),
    # not every node's (which made about 20 more per added node). How many are still
    # pending when a node registers depends on how far the SDK's threads got (a loaded
    # machine lets some batches' outputs linger), so the bound is half of that growth.
    assert large["pending"] - small["pending"] <= 10 * (121 - 31), (small, large)


# -- the state a node leaves after `up` (issue 49: at most 2 KB per node) -----------------

BASE = profile("kubeadm").baseline(ContainerdVersion.parse("1.7"))
# The same node with its captured original config (a long one): a program of about 14 KB
# against PLAN's 4 KB.
BIG = plan_node(profile("kubeadm"), ContainerdVersion.parse("1.7"),
                PlanOptions(toolkit=ToolkitMode.HOST),
                {p: t + "".join(f"# site note {i}\n" for i in range(400))
                 for p, t in BASE.items()})
# What the agent prints after an apply (gpuplane/data/agent/60-state.sh gp_json_result).
RESULT = json.dumps({
    "mode": "apply", "ok": True, "changed": True, "restarted": True,
    "written": sorted(PLAN.files), "plan_id": "0123456789abcdef", "distro": "kubeadm",
    "config": "/etc/containerd/config.toml", "default_runtime": "runc", "cdi": False,
    "runtimes": {n: {"runtime_type": "io.containerd.runc.v2",
                     "binary_name": f"/usr/bin/{n}-runtime", "systemd_cgroup": True}
                 for n in ("runc", "nvidia", "nvidia-cdi")},
    "config_sha256": "0" * 64, "timings_ms": {"total": 4000, "restart": 900,
                                              "cri_ready": 1200}})


class Registered(RecordingMonitor):
    """The registered inputs of every NodeAgentPod and plan ConfigMap."""

    def __init__(self, mocks: Recorder) -> None:
        super().__init__(mocks)
        self.inputs: dict[str, dict[str, Any]] = {}

    def RegisterResource(self, request: Any) -> Any:
        if request.type.endswith((":NodeAgentPod", ":ConfigMap")):
            self.inputs[request.name] = json_format.MessageToDict(request.object)
        return super().RegisterResource(request)


class Cluster:
    """The plan ConfigMaps the rollout registered, and agent pods that apply."""

    def __init__(self, maps: list[dict[str, Any]]) -> None:
        self.maps = {f"/api/v1/namespaces/{m['metadata']['namespace']}/configmaps/"
                     f"{m['metadata']['name']}": m for m in maps}

    def get(self, path: str, params: Any = None) -> Any:
        if path in self.maps:
            return self.maps[path]
        return {"status": {"phase": "Succeeded",
                           "containerStatuses": [{"state": {"terminated": {"exitCode": 0}}}]}}

    def get_text(self, path: str, params: Any = None) -> str:
        return f"gpuplane-agent: applied\n{RESULT}\n"

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return body

    def delete(self, path: str) -> None:
        pass


def _node_state(plan: Any) -> tuple[int, dict[str, Any]]:
    """The bytes one node's resource keeps in the state after `up`: its registered inputs
    and the outputs its provider returns (the SDK adds the pickled provider to both)."""
    mocks = Recorder()
    monitor = Registered(mocks)
    pulumi.runtime.set_mocks(mocks, project="gpuplane", stack="test", preview=False,
                             monitor=monitor)
    names = ["gpu-0", "gpu-1", "gpu-2"]
    pulumi.runtime.test(lambda: ContainerdPodRollout("r", ContainerdPodRolloutArgs(
        plans=dict.fromkeys(names, plan), batches=[names[:1], names[1:]], namespace="ns",
        image="busybox:1.36", timeout_seconds=60)).finished)()
    inputs = monitor.inputs["containerd-gpu-2"]
    provider = NodeAgentPodProvider()
    provider.client_factory = lambda *_: Cluster(
        [v for k, v in monitor.inputs.items() if not k.startswith("containerd-")])
    provider.poll_seconds = 0.0
    outs = provider.create(dict(inputs)).outs
    outs[PROVIDER_KEY] = inputs[PROVIDER_KEY]
    assert outs.get("error") is None and outs["result"]["changed"], outs
    return len(json.dumps(inputs)) + len(json.dumps(outs)), inputs


def test_a_nodes_state_after_up_is_small_and_does_not_grow_with_its_program() -> None:
    """A node's inputs and outputs carry its plan id and a reference to its plan's
    program, which nodes sharing a plan share: never the program itself, in the inputs or
    again in the outputs (about 7 KB per node before), nor the restore script its
    provider runs at delete (387 B), nor the agent's whole report (its digest, timings,
    each runtime's settings): 1 KB at most, the same for any program."""
    small, small_inputs = _node_state(PLAN)
    large, large_inputs = _node_state(BIG)
    program = len(plan_stdin(agent_plan(BIG)))
    assert program > 3 * len(plan_stdin(agent_plan(PLAN))), "BIG's program is larger"
    assert large == small <= 1024, (small, large)
    assert "stdin" not in large_inputs and "stdin" not in small_inputs


# -- the rollout's order in a node's record (issue 49: its `dependencies`) -----------------

def _order(batch_size: int, access: str
           ) -> tuple[dict[str, dict[str, Any]], list[list[str]]]:
    """What a rollout of a canary and two batches of `batch_size` registered."""
    names = [f"gpu-{i:05d}" for i in range(1 + 2 * batch_size)]
    batches = [names[:1], names[1:1 + batch_size], names[1 + batch_size:]]
    mocks = Recorder()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="gpuplane", stack="test", preview=False,
                             monitor=monitor)
    pulumi.runtime.test(lambda: _rollout(names, batches, access).finished)()
    return monitor.registered, batches


NODE_TYPES = (":NodeAgentPod", "remote:Command")


def _waits_for(registered: dict[str, dict[str, Any]], name: str) -> set[str]:
    """The nodes `name` waits for: its dependencies, through any barrier, by node name."""
    by_urn = {r["urn"]: (n, r) for n, r in registered.items()}
    out, todo = set(), list(registered[name]["deps"])
    while todo:
        found, res = by_urn[todo.pop()]
        if res["type"].endswith(NODE_TYPES):
            out.add(found.removeprefix("containerd-"))
        elif res["type"].endswith(":RolloutBarrier"):
            todo += res["deps"]
    return out


def _plan_configmap(registered: dict[str, dict[str, Any]], name: str) -> bool:
    """Whether `name` waits for a plan ConfigMap: its own dependency, or its barrier's."""
    by_urn = {r["urn"]: (n, r) for n, r in registered.items()}
    todo = list(registered[name]["deps"])
    while todo:
        found, res = by_urn[todo.pop()]
        if res["type"] == "kubernetes:core/v1:ConfigMap" and "gpuplane-plan-" in found:
            return True
        if res["type"].endswith(":RolloutBarrier"):
            todo += res["deps"]
    return False


@pytest.mark.parametrize("access", ["pod", "ssh"])
def test_a_nodes_dependencies_do_not_grow_with_the_batch_size(access: str) -> None:
    """A node of a later batch depends on one resource of the rollout's order (the
    barrier that waits for the batch before it), not on each node of that batch: its
    record keeps one URN there, at batches of 10 or 50 (before: 10 or 50 URNs, 1.6 KB of a
    6.5 KB record at 10). It still waits for every node of the batch before it, and only
    for those; over SSH it also waits for its own agent upload. Through a pod, its plan's
    ConfigMap is waited for by that barrier, not named again by every node."""
    kept = {}
    for size in (10, 50):
        registered, batches = _order(size, access)
        names = {r["urn"]: n for n, r in registered.items()}
        node = batches[-1][-1]
        last = registered[f"containerd-{node}"]
        kept[size] = sorted(names[d].replace(node, "<node>") for d in last["deps"])
        for i, batch in enumerate(batches):
            for node in batch:
                waits = _waits_for(registered, f"containerd-{node}")
                assert waits == (set(batches[i - 1]) if i else set()), (size, node, waits)
                deps = {names[d] for d in registered[f"containerd-{node}"]["deps"]}
                if access == "ssh":
                    assert f"gpuplane-agent-copy-{node}" in deps, (node, deps)
                else:
                    assert _plan_configmap(registered, f"containerd-{node}"), (node, deps)
    # The barrier before the last batch (over SSH: and the node's agent upload), at
    # either size.
    assert kept[10] == kept[50], kept
    assert "r-after-batch-1" in kept[10] and len(kept[10]) == (2 if access == "ssh" else 1), kept


class Failing(Recorder):
    """A node command whose create fails (the agent refused), as the engine reports it,
    once the `siblings` of its batch were registered: the engine runs a batch's commands
    side by side, and the program may stop as soon as one fails."""

    def __init__(self, node: str, siblings: set[str]) -> None:
        super().__init__()
        self.node, self.waiting = node, {f"containerd-{n}" for n in siblings}
        self.siblings_done = threading.Event()

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        if args.name == f"containerd-{self.node}":
            self.siblings_done.wait(10)
            raise RuntimeError(f"the agent failed on {self.node}")
        result = super().new_resource(args)
        self.waiting.discard(args.name)
        if not self.waiting:
            self.siblings_done.set()
        return result


def test_an_ssh_batch_that_fails_stops_the_rollout_before_its_barrier() -> None:
    """Over SSH a failed command fails its registration: the barrier after its batch is
    never made, so no later batch is (the barrier after the canary was made, since the
    canary succeeded)."""
    names = [f"gpu-{i:05d}" for i in range(7)]
    batches = [names[:1], names[1:4], names[4:]]
    mocks = Failing(names[2], {names[1], names[3]})
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="gpuplane", stack="test", preview=False,
                             monitor=monitor)
    with pytest.raises(Exception, match="the agent failed on gpu-00002"):
        pulumi.runtime.test(lambda: _rollout(names, batches, "ssh").finished)()
    # What the mocks were asked to create: a sibling's registration is recorded there
    # before the failing command raises, while the monitor records it only after the mock
    # returns, on the sibling's own thread, which may not have run by the time the failure
    # ends the program.
    made = set(mocks.inputs)
    assert {"r-after-batch-0", "containerd-gpu-00001", "containerd-gpu-00003"} <= made, made
    assert "r-after-batch-1" not in made, made
    assert not {f"containerd-{n}" for n in batches[2]} & made, made


def test_the_barriers_provider_is_pickled_once_and_sent_as_the_sdk_sends_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every barrier sends the same `__provider` (its provider holds nothing): pickled once
    per program, not once per barrier (a thousand dill pickles in a 10,000-node plan), and
    the text `pulumi.dynamic.Resource` itself would send."""
    import dill
    from pulumi.dynamic.dynamic import serialize_provider

    from gpuplane.stack import barrier

    barrier._serialized_provider.cache_clear()
    expected = serialize_provider(barrier.RolloutBarrierProvider())
    pickles: list[None] = []
    dumps = dill.dumps
    monkeypatch.setattr(dill, "dumps", lambda *a, **k: pickles.append(None) or dumps(*a, **k))
    mocks = Recorder()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="gpuplane", stack="test", preview=False,
                             monitor=monitor)
    names = [f"gpu-{i:05d}" for i in range(31)]
    batches = [names[:1]] + [names[i:i + 10] for i in range(1, 31, 10)]
    pulumi.runtime.test(lambda: _rollout(names, batches, "ssh").finished)()
    made = {n: r for n, r in monitor.registered.items() if "-after-batch-" in n}
    assert len(made) == 3 and all(r["type"] == "pulumi-python:dynamic/gpuplane:RolloutBarrier"
                                  for r in made.values())
    assert {mocks.inputs[n]["__provider"] for n in made} == {expected}
    assert len(pickles) <= 1, len(pickles)


class _Messages(logging.Handler):
    """The debug messages the program sent to the (mock) engine."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.debug: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == logging.DEBUG:
            self.debug.append(record.getMessage())


@pytest.mark.parametrize("access", ["pod", "ssh"])
def test_a_rollouts_resources_register_without_the_sdks_debug_messages(access: str) -> None:
    """Each registration cost four blocking debug calls to the engine (half of the
    program's time in a 3,000-node `pulumi preview`); the rollout's node resources,
    uploads and barriers send none (gpuplane.stack.sdk_debug), and a resource made outside
    it still sends the SDK's four."""
    names = [f"gpu-{i:05d}" for i in range(21)]
    batches = [names[:1]] + [names[i:i + 10] for i in range(1, 21, 10)]
    messages = _Messages()
    logger = logging.getLogger(f"gpuplane-test-sdk-debug-{access}")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(messages)
    mocks = Recorder()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="gpuplane", stack="test", preview=True,
                             monitor=monitor, logger=logger)

    def program() -> Any:
        pulumi.CustomResource("test:index:Outside", "outside", {})
        return _rollout(names, batches, access).finished

    pulumi.runtime.test(program)()
    rollout = {n for n in monitor.registered if n.startswith(
        ("containerd-", "gpuplane-agent-copy-", "r-after-batch-"))}
    assert len(rollout) == (21 + 2 + (21 if access == "ssh" else 0)), sorted(monitor.registered)
    about = [m for m in messages.debug if any(f"name={n}" in m for n in rollout)]
    assert about == [], about[:4]
    outside = [m for m in messages.debug if "name=outside" in m]
    assert len(outside) == 2 and "registering resource" in outside[0], outside


class _Traces(RecordingMonitor):
    """The stack trace each registration sent, by resource name."""

    def __init__(self, mocks: Recorder) -> None:
        super().__init__(mocks)
        self.traces: dict[str, list[tuple[str, int]]] = {}

    def RegisterResource(self, request: Any) -> Any:
        self.traces[request.name] = [(f.pc.uri, f.pc.line) for f in request.stackTrace.frames]
        return super().RegisterResource(request)


def _frames(trace: Any) -> list[tuple[str, int]]:
    return [(f.pc.uri, f.pc.line) for f in trace.frames]


@pytest.mark.parametrize("access", ["pod", "ssh"])
def test_a_rollouts_resources_send_only_the_first_frame_of_the_sdks_stack_trace(
        access: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine keeps each registration's stack trace in the resource's state: 17
    frames (about 2 KB of a node's 4.9 KB record), mostly the SDK's and asyncio's, and
    reading their source lines was a sixth of a 3,000-node preview's program time. The
    rollout's resources send the SDK's first frame alone (gpuplane.stack.sdk_debug): the
    same source position, in gpuplane's package; a resource made outside the rollout sends
    the SDK's whole trace."""
    from pathlib import Path

    import pulumi.runtime.resource as sdk_resource

    import gpuplane
    from gpuplane.stack.sdk_debug import quiet_registrations

    with quiet_registrations():   # installs gpuplane's wrapper, if it has one
        pass
    current = sdk_resource._get_stack_trace
    sdk_own = getattr(current, "__wrapped__", current)
    pairs: list[tuple[list[tuple[str, int]], list[tuple[str, int]]]] = []

    def recorder() -> Any:
        sent = current()
        pairs.append((_frames(sent), _frames(sdk_own())))
        return sent

    recorder.__wrapped__ = sdk_own   # type: ignore[attr-defined]
    monkeypatch.setattr(sdk_resource, "_get_stack_trace", recorder)

    class Outside(pulumi.CustomResource):
        def __init__(self) -> None:
            super().__init__("test:index:Outside", "outside", {})

    names = [f"gpu-{i:05d}" for i in range(21)]
    batches = [names[:1]] + [names[i:i + 10] for i in range(1, 21, 10)]
    mocks = Recorder()
    monitor = _Traces(mocks)
    pulumi.runtime.set_mocks(mocks, project="gpuplane", stack="test", preview=True,
                             monitor=monitor)

    def program() -> Any:
        Outside()
        return _rollout(names, batches, access).finished

    pulumi.runtime.test(program)()
    package = Path(gpuplane.__file__).parent.as_uri() + "/"   # as its frames name it
    rollout = {n: t for n, t in monitor.traces.items() if n.startswith(
        ("containerd-", "gpuplane-agent-copy-", "r-after-batch-"))}
    assert len(rollout) == (21 + 2 + (21 if access == "ssh" else 0))
    for name, trace in rollout.items():
        assert len(trace) == 1 and trace[0][0].startswith(package), (name, trace)
    sent_by_the_rollout = {tuple(t) for t in rollout.values()}
    for sent, sdk in pairs:
        if tuple(sent) in sent_by_the_rollout:
            assert sent == sdk[:1] and len(sdk) > 1, (sent, sdk)
    outside = monitor.traces["outside"]
    assert outside and (outside, outside) in pairs
    assert not all(uri.startswith(package) for uri, _ in outside)
