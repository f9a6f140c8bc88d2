"""The plan tells what the GPU Operator's toolkit writes on the nodes and what it would
drop from a node if gpuplane wrote nothing first (issue: prove every node prediction
against the real toolkit). The toolkit model itself is held against the real installers
in tests/real/test_toolkit_differential.py; here the plan's account of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.stack_cases import config_of, write_stack

from gpuplane.cli.main import main

STACKS = Path(__file__).resolve().parents[2] / "stacks"


def plan_json(capsys: pytest.CaptureFixture[str], stack: str,
              stacks_dir: Path = STACKS) -> tuple[int, dict]:
    code = main(["plan", "--stack", stack, "--stacks-dir", str(stacks_dir),
                 "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_rke2_lab_explains_what_the_toolkit_would_drop_and_how_it_is_avoided(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, plan = plan_json(capsys, "rke2-lab")
    assert code == 0
    view = plan["toolkit"]
    etc = "/var/lib/rancher/rke2/agent/etc/containerd"
    assert view["writes"] == [f"{etc}/conf.d/99-nvidia.toml", f"{etc}/config-v3.toml.tmpl"]
    assert any("io.containerd.internal.v1.opt.path" in lost
               for lost in view["withoutGpuplane"])
    assert view["avoidedBy"]["files"] == [f"{etc}/config-v3.toml.tmpl"]
    assert view["avoidedBy"]["toolkitEnv"]["RUNTIME_DROP_IN_CONFIG"] == (
        f"{etc}/conf.d/99-nvidia.toml")
    assert not [f for f in plan["findings"] if f["id"] == "FM05"]


def test_without_node_access_the_loss_is_a_finding_not_an_avoidance(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # nodeAccess: none, without the SSH settings and key it would refuse as unused.
    cfg = config_of("rke2-lab")
    cfg["gpuplane:cluster"]["nodeAccess"] = "none"
    for key in ("gpuplane:ssh", "gpuplane:sshPrivateKey", "gpuplane:rollout"):
        cfg.pop(key, None)
    write_stack(tmp_path, "rke2-none", cfg)
    code, plan = plan_json(capsys, "rke2-none", tmp_path)
    assert code == 1
    view = plan["toolkit"]
    assert view["withoutGpuplane"] and view["avoidedBy"] is None
    assert [f for f in plan["findings"] if f["id"] == "FM05" and f["severity"] == "error"]


def test_a_drop_in_distro_loses_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    code, plan = plan_json(capsys, "kubeadm-prod")
    assert code == 0
    view = plan["toolkit"]
    assert view["writes"] == ["/etc/containerd/conf.d/99-nvidia.toml",
                              "/etc/containerd/config.toml"]
    assert view["withoutGpuplane"] == [] and view["avoidedBy"] is None


def test_the_text_plan_says_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--stack", "rke2-lab", "--stacks-dir", str(STACKS)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "left to itself on this node it would drop settings" in out
    assert "this plan avoids that: gpuplane writes" in out
