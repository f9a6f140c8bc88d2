"""The plan path derives what a node plan says once per plan, not once per node: a
fleet's nodes share one plan, and the report, the rollout rules and the node policies
each used to recompute its effective runtimes (and the intent record's JSON) per node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuplane.cli.plan.run import plan_stack
from gpuplane.containerd.effective import EffectiveConfig
from gpuplane.core.intent import ClusterIntent


def _stack(folder: Path, nodes: int) -> Path:
    """A kubeadm stack over SSH with `nodes` GPU nodes, every node planned from the model
    (one plan for all), canary then batches of 10, as benchmarks/plan_scale.py plans."""
    folder.mkdir()
    (folder / "Pulumi.fleet.yaml").write_text(yaml.safe_dump({"config": {
        "gpuplane:cluster": {"distro": "kubeadm", "kubernetesVersion": "1.31.4",
                             "containerdVersion": "1.7", "nodeAccess": "ssh"},
        "gpuplane:ssh": {"user": "ubuntu", "sudo": True},
        "gpuplane:sshPrivateKey": {"secure": "v1:test"},
        "gpuplane:nodes": [{"name": f"gpu-{i:03d}", "host": f"10.0.0.{i + 1}", "gpus": 8}
                           for i in range(nodes)],
        "gpuplane:gpuOperator": {"chartVersion": "v25.10.1"},
        "gpuplane:runtime": {"systemdCgroup": True},
        "gpuplane:rollout": {"canary": True, "maxUnavailable": 10},
    }}))
    return folder


def _reads(folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict[str, Any]]:
    """How often the plan of the stack in `folder` read a plan's effective runtimes
    (`EffectiveConfig.to_dict`), and the plan."""
    calls: list[None] = []
    to_dict = EffectiveConfig.to_dict

    def counted(self: EffectiveConfig) -> dict[str, Any]:
        calls.append(None)
        return to_dict(self)

    monkeypatch.setattr(EffectiveConfig, "to_dict", counted)
    plan = plan_stack("fleet", folder)
    return len(calls), plan


def test_a_shared_plan_is_derived_once_however_many_nodes_use_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small, small_plan = _reads(_stack(tmp_path / "small", 3), monkeypatch)
    large, large_plan = _reads(_stack(tmp_path / "large", 40), monkeypatch)
    assert small_plan["verdict"] == large_plan["verdict"] == "ok"
    assert small_plan["summary"]["nodes"] == 3 and large_plan["summary"]["nodes"] == 40
    assert all(n["batch"] is not None and n["files"] for n in large_plan["nodes"]), \
        "every node's entry still says it all"
    assert {n["effectiveSha"] for n in large_plan["nodes"]} == \
        {n["effectiveSha"] for n in small_plan["nodes"]}
    assert large == small, \
        "the plan's runtimes are read as often for 40 nodes as for 3 (once per plan)"


def test_the_intent_record_is_serialised_once() -> None:
    """It lists every node (MBs for a fleet), and the program, its checks and the
    policies each ask for it."""
    intent = ClusterIntent(nodes=())
    assert intent.to_json() is intent.to_json()
