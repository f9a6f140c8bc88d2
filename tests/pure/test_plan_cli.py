"""`gpuplane plan`: JSON contract, markdown, the --base diff, exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpuplane.cli.main import main

STACKS = Path(__file__).resolve().parents[2] / "stacks"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_plan_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--stack", "kubeadm-prod", "--format", "json")
    assert code == 0
    plan = json.loads(out)
    assert set(plan) == {"format", "stack", "verdict", "cluster", "platformInput",
                         "effectiveRuntimes", "toolkit",
                         "resources", "helm", "withheldResources", "batches", "withheldBatches",
                         "config", "nodes",
                         "findings", "summary", "warnings"}
    assert plan["verdict"] == "ok" and plan["withheldBatches"] == []
    assert plan["config"]["rollout"] == {"canary": True, "maxUnavailable": 2,
                                         "allowAllAtOnce": False}
    assert plan["config"]["sshPrivateKey"] == "[secret]"
    assert plan["batches"] == [["a100-01"], ["a100-02", "a100-03"], ["l40s-01", "l40s-02"]]
    node = plan["nodes"][0]
    assert set(node) == {"name", "pool", "gpus", "batch", "baselineFiles", "files",
                         "withheldFiles", "hostUnits", "withheldHostUnits", "restart",
                         "dockerRestart", "effectiveSha", "effectiveRuntimes"}
    assert node["hostUnits"] == [] and node["withheldHostUnits"] == []
    assert node["dockerRestart"] is False and plan["cluster"]["dockerRestartCommand"] is None
    assert node["files"]["/etc/containerd/config.toml"].count('"/etc/containerd/conf.d/*.toml"')
    assert plan["summary"]["nodes"] == 5


def test_diff_against_base_lists_disrupted_nodes_in_order(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _, out, _ = run(capsys, "--stack", "kubeadm-prod", "--format", "json")
    base = tmp_path / "base.json"
    base.write_text(out)
    stacks = tmp_path / "stacks"
    shutil.copytree(STACKS, stacks)
    stack = stacks / "Pulumi.kubeadm-prod.yaml"
    stack.write_text(stack.read_text().replace("systemdCgroup: true", "systemdCgroup: false")
                     .replace("kubeletCgroupDriver: systemd", "kubeletCgroupDriver: cgroupfs"))
    _, out, _ = run(capsys, "--stack", "kubeadm-prod", "--stacks-dir", str(stacks),
                    "--format", "json", "--base", str(base))
    diff = json.loads(out)["diff"]
    assert [d["node"] for d in diff["disrupted"]] == [
        "a100-01", "a100-02", "a100-03", "l40s-01", "l40s-02"]
    assert [d["batch"] for d in diff["disrupted"]] == [0, 1, 1, 2, 2]
    text = diff["files"]["a100-01"]["/etc/containerd/config.toml"]
    assert "-        SystemdCgroup = true" in text and "+        SystemdCgroup = false" in text
    assert diff["resources"]["added"] == diff["resources"]["removed"] == []
    _, md, _ = run(capsys, "--stack", "kubeadm-prod", "--stacks-dir", str(stacks),
                      "--format", "markdown", "--base", str(base))
    assert "- containerd restarts on 5 nodes, in order; containerd's effective config " \
        "changes (/etc/containerd/config.toml): `a100-01` (batch 0), `a100-02` (batch 1), " \
        "`a100-03` (batch 1), `l40s-01` (batch 2), `l40s-02` (batch 2)" in md
    assert "```diff" in md


def test_same_plan_as_base_disrupts_nothing(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    _, out, _ = run(capsys, "--stack", "microk8s-edge", "--format", "json")
    (tmp_path / "base.json").write_text(out)
    _, out, _ = run(capsys, "--stack", "microk8s-edge", "--format", "json",
                    "--base", str(tmp_path / "base.json"))
    diff = json.loads(out)["diff"]
    assert diff["disrupted"] == [] and diff["files"] == {} and diff["values"] == {}


def test_values_diff(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _, out, _ = run(capsys, "--stack", "hami-shared", "--format", "json")
    (tmp_path / "base.json").write_text(out)
    stacks = tmp_path / "stacks"
    shutil.copytree(STACKS, stacks)
    stack = stacks / "Pulumi.hami-shared.yaml"
    stack.write_text(stack.read_text().replace("deviceSplitCount: 10", "deviceSplitCount: 4"))
    _, out, _ = run(capsys, "--stack", "hami-shared", "--stacks-dir", str(stacks),
                    "--format", "json", "--base", str(tmp_path / "base.json"))
    diff = json.loads(out)["diff"]
    assert list(diff["values"]) == ["hami"]
    assert "-    deviceSplitCount: 10" in diff["values"]["hami"]
    assert "+    deviceSplitCount: 4" in diff["values"]["hami"]


def test_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--stack", "k8s-snap-dgx")
    assert code == 0
    assert "k8s-snap-dgx: k8s-snap" in out
    assert "/var/lib/k8s-containerd/k8s-containerd/etc/containerd/config.toml" in out


@pytest.mark.parametrize(("args", "message"), [
    (["--stack", "nope"], "no such stack file"),
    (["--stack", "kind-smoke", "--base", "/nonexistent.json"], "--base"),
])
def test_bad_input_exits_2(capsys: pytest.CaptureFixture[str], args: list[str],
                           message: str) -> None:
    code, _, err = run(capsys, *args)
    assert code == 2 and message in err


@pytest.mark.parametrize(("base", "where"), [
    ([], "the top level"),
    ({"kind": "Deployment"}, "stack"),
    ({"stack": "a", "resources": [{"name": "x"}], "nodes": [], "findings": []},
     "resources.0.type"),
])
def test_a_base_that_is_not_a_plan_exits_2_naming_the_field(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, base: object, where: str) -> None:
    """Any other JSON file given as --base would diff as "everything is new"."""
    path = tmp_path / "base.json"
    path.write_text(json.dumps(base))
    code, out, err = run(capsys, "--stack", "kind-smoke", "--base", str(path))
    assert code == 2 and out == ""
    assert f"--base {path}: not a gpuplane plan at {where}" in err
    assert "Traceback" not in err


def test_invalid_stack_config_exits_2_with_file_line(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    shutil.copytree(STACKS, stacks)
    stack = stacks / "Pulumi.rke2-lab.yaml"
    stack.write_text(stack.read_text().replace("distro: rke2", "distro: rke3"))
    code, _, err = run(capsys, "--stack", "rke2-lab", "--stacks-dir", str(stacks))
    assert code == 2
    line = stack.read_text().splitlines().index("    distro: rke3") + 1
    assert f"Pulumi.rke2-lab.yaml:{line}: gpuplane:cluster.distro" in err
