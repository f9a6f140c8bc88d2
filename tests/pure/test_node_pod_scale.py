"""A fleet's node rollout (`nodeAccess: pod`, and the SSH one) costs the same per node
at any fleet size (issue #49: a 1,000-node preview took 8x as long as a 300-node one under
the real engine). What grew was not a node's inputs but what the SDK holds and walks for
it: every node made at once left all of them pending while the batches went by in order,
and the SDK re-waits on every pending output each time one batch returns
(`pulumi.runtime.stack.wait_for_rpcs`); and each dependency on the batch before walked the
whole chain of batches behind it for cycles (`pulumi.runtime.resource_cycle_breaker`).
Measured here under the SDK's mocks, for two fleet sizes: each must be the same."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from pulumi.runtime import resource_cycle_breaker
from pulumi.runtime.settings import SETTINGS
from test_checks_component import Recorder, RecordingMonitor

from gpuplane.containerd import ContainerdVersion
from gpuplane.distros.profiles import profile
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node
from gpuplane.stack.node_pod import ContainerdPodRollout, ContainerdPodRolloutArgs
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
            self.request_bytes[request.name] = request.object.ByteSize() + sum(
                len(d) for d in request.dependencies)
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
    # not every node's; the chain of batches adds two per batch.
    assert large["pending"] - small["pending"] <= 2 * (121 - 31) // 10, (small, large)
