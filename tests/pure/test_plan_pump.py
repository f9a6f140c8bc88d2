"""The plan engine runs the SDK's queued work while the program builds (gpuplane.cli.plan.pump):
plans are the same with and without it, and the work no longer piles up until the
program returns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_stacks import BUNDLED, STACKS

from gpuplane.cli.plan import pump
from gpuplane.cli.plan.run import plan_stack


def _fleet(nodes: int, access: str) -> dict[str, Any]:
    """A kubeadm stack of `nodes` GPU nodes, canary then batches of 10 (benchmarks/plan_scale.py's
    shape)."""
    config: dict[str, Any] = {
        "gpuplane:cluster": {"distro": "kubeadm", "kubernetesVersion": "1.31.4",
                             "containerdVersion": "1.7", "nodeAccess": access},
        "gpuplane:nodes": [{"name": f"gpu-{i:03d}", "host": f"10.0.0.{i + 1}", "gpus": 8,
                            "pool": f"pool-{i % 3}"} for i in range(nodes)],
        "gpuplane:gpuOperator": {"chartVersion": "v25.10.1"},
        "gpuplane:timeSlicing": {"replicas": 2},
        "gpuplane:rollout": {"canary": True, "maxUnavailable": 10},
    }
    if access == "ssh":
        config["gpuplane:ssh"] = {"user": "ubuntu", "sudo": True}
        config["gpuplane:sshPrivateKey"] = {"secure": "v1:test"}
    return {"config": config}


def _plan(name: str, stacks: Path, every: int, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(pump, "EVERY", every)
    return json.dumps(plan_stack(name, stacks), sort_keys=True)


@pytest.mark.parametrize("name", BUNDLED)
def test_a_bundled_stack_plans_the_same_with_the_queue_run_at_every_registration(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _plan(name, STACKS, 1, monkeypatch) == _plan(name, STACKS, 10**9, monkeypatch)


@pytest.mark.parametrize("access", ["ssh", "pod"])
def test_a_fleet_plans_the_same_with_and_without_the_pump(
        access: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "Pulumi.fleet.yaml").write_text(yaml.safe_dump(_fleet(45, access)))
    plans = {every: _plan("fleet", tmp_path, every, monkeypatch) for every in (1, 3, 10**9)}
    assert plans[1] == plans[10**9] and plans[3] == plans[10**9]
    assert len(json.loads(plans[1])["nodes"]) == 45


def test_the_queued_work_is_run_while_the_program_builds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What made a 10,000-node plan peak at 530 MB: every resource's Outputs were still
    pending when the program returned. With the pump, only the last few are."""
    from pulumi.runtime import settings

    from gpuplane.stack import program

    pending: list[int] = []
    run = program.run

    def counting() -> Any:
        result = run()
        pending.append(len(settings.SETTINGS.outputs))
        return result

    monkeypatch.setattr(program, "run", counting)
    (tmp_path / "Pulumi.fleet.yaml").write_text(yaml.safe_dump(_fleet(200, "ssh")))
    every = pump.EVERY
    _plan("fleet", tmp_path, 10**9, monkeypatch)
    _plan("fleet", tmp_path, every, monkeypatch)
    without, with_pump = pending
    assert without > 2000, without          # a dozen Outputs per node resource
    assert with_pump < 200, with_pump


APPLY_PROGRAM = """
import pulumi
import pulumi_kubernetes as k8s

def maps(prefix):
    return [k8s.core.v1.ConfigMap(f"{prefix}-{i}", data={"i": str(i)}) for i in range(12)]

# Resources made inside apply callbacks: while the program runs (the pump's run of the
# queue calls them) and after it returned (the loop calls them).
pulumi.Output.from_input("early").apply(maps)
for i in range(20):
    k8s.core.v1.ConfigMap(f"plain-{i}", data={"i": str(i)})
pulumi.Output.from_input("late").apply(lambda p: [maps(p), maps(p + "-again")])
"""


@pytest.mark.parametrize("every", [1, 2, 8])
def test_resources_made_in_callbacks_plan_the_same(
        every: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuplane.cli.plan.project import load_project

    (tmp_path / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    (tmp_path / "__main__.py").write_text(APPLY_PROGRAM)
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")

    def plan(n: int) -> dict[str, Any]:
        monkeypatch.setattr(pump, "EVERY", n)
        report = plan_stack("dev", tmp_path, None, load_project(tmp_path))
        # A resource made in a callback is constructed when the callback runs, which the
        # pump makes earlier: the same resources, in another order.
        report["resources"].sort(key=lambda r: (r["type"], r["name"]))
        return report

    pumped, plain = plan(every), plan(10**9)
    assert pumped == plain
    assert len(pumped["resources"]) == 56
