"""Issue #29 wired in: each bundled platform stack's plan carries the platform's own node
input (`platformInput`), the text plan prints it with what gpuplane will not touch, the
Pulumi program exports it, and a bad `gpuplane:nodePool` is a stack-key error."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from gpuplane.cli.main import main
from gpuplane.cli.plan.engine import run_program
from gpuplane.cli.plan.run import plan_stack
from gpuplane.config import NAMESPACE
from gpuplane.config.stackfile import load_stack_file

ROOT = Path(__file__).resolve().parents[2]
STACKS = ROOT / "stacks"


def stack_values(name: str) -> dict[str, Any]:
    return yaml.safe_load((STACKS / f"Pulumi.{name}.yaml").read_text())["config"]


def platform_input(name: str, stacks: Path = STACKS) -> Any:
    plan = plan_stack(name, stacks)
    assert plan["verdict"] == "ok", plan["findings"]
    return plan["platformInput"]


@pytest.mark.parametrize(("stack", "kind"), [
    ("eks-al2023-nvidia", "eks-nodeconfig"), ("eks-al2023", "eks-nodeconfig"),
    ("bottlerocket-nvidia", "bottlerocket-settings"), ("aks-ubuntu", "aks-nodepool"),
    ("gke-cos", "gke-nodepool"), ("gke-ubuntu", "gke-nodepool")])
def test_each_platform_stack_has_its_input(stack: str, kind: str) -> None:
    out = platform_input(stack)
    assert out["kind"] == kind
    assert out["willNotTouch"], "the plan must say what gpuplane leaves to the platform"


def test_self_managed_stack_has_none() -> None:
    assert platform_input("kubeadm-prod") is None


def test_eks_standard_ami_snippet_adds_the_operators_nvidia_runtime() -> None:
    out = platform_input("eks-al2023")
    doc = yaml.safe_load(out["document"])
    assert doc["kind"] == "NodeConfig"
    snippet = tomllib.loads(doc["spec"]["containerd"]["config"])
    runtimes = snippet["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
    assert runtimes["nvidia"]["options"]["BinaryName"] == \
        "/usr/local/nvidia/toolkit/nvidia-container-runtime"


def test_eks_nvidia_ami_keeps_nvidia_default_and_adds_runc() -> None:
    out = platform_input("eks-al2023-nvidia")
    snippet = tomllib.loads(yaml.safe_load(out["document"])["spec"]["containerd"]["config"])
    runtimes = snippet["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
    assert set(runtimes) == {"runc"}
    assert "default runtime 'nvidia'" in out["summary"]


def test_bottlerocket_settings_carry_the_stacks_time_slicing() -> None:
    replicas = stack_values("bottlerocket-nvidia")[f"{NAMESPACE}:timeSlicing"]["replicas"]
    out = platform_input("bottlerocket-nvidia")
    assert out["documentFormat"] == "toml"
    nvidia = tomllib.loads(out["document"])["settings"]["kubelet-device-plugins"]["nvidia"]
    assert nvidia["device-sharing-strategy"] == "time-slicing"
    assert nvidia["time-slicing"]["replicas"] == replicas


def test_aks_and_gke_commands_use_the_node_pool_section() -> None:
    pool = stack_values("aks-ubuntu")[f"{NAMESPACE}:nodePool"]
    aks = platform_input("aks-ubuntu")
    assert aks["command"][:4] == ["az", "aks", "nodepool", "add"]
    assert aks["fields"]["vmSize"] == pool["vmSize"]
    assert aks["fields"]["resourceGroupName"] == pool["resourceGroup"]
    pool = stack_values("gke-cos")[f"{NAMESPACE}:nodePool"]
    gke = platform_input("gke-cos")
    assert f"type={pool['acceleratorType']},count=1,gpu-driver-version=disabled" \
        in gke["command"]
    assert gke["fields"]["nodeConfig"]["labels"] == {
        "gke-no-default-nvidia-gpu-device-plugin": "true"}


def test_without_node_pool_the_plan_names_the_key() -> None:
    assert f"{NAMESPACE}:nodePool" not in stack_values("gke-ubuntu")
    out = platform_input("gke-ubuntu")
    assert "set gpuplane:nodePool (cluster, name, acceleratorType)" in out["summary"]
    assert "command" not in out


def test_text_plan_prints_the_input_and_what_it_will_not_touch(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--stack", "bottlerocket-nvidia", "--stacks-dir", str(STACKS)]) == 0
    out = capsys.readouterr().out
    assert "Platform input" in out
    assert "      replicas = 4" in out
    assert "  gpuplane will not touch the node's files" in out


def test_the_program_exports_platform_input(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuplane.stack import program

    exported: dict[str, Any] = {}
    monkeypatch.setattr(pulumi, "export", lambda key, value: exported.__setitem__(key, value))
    stack = load_stack_file("aks-ubuntu", STACKS)
    run_program(program.run, project=NAMESPACE, stack="aks-ubuntu",
                config=stack.pulumi_config(), secret_keys=stack.secret_keys,
                root_directory=ROOT)
    assert exported["platformInput"] == platform_input("aks-ubuntu")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "Pulumi.yaml").write_text("name: gpuplane\n")
    shutil.copytree(STACKS, tmp_path / "stacks")
    return tmp_path


@pytest.mark.parametrize(("stack", "old", "new", "expected"), [
    ("aks-ubuntu", "    vmSize: Standard_NC24ads_A100_v4\n", "",
     "gpuplane:nodePool.vmSize: required on aks-ubuntu; add vmSize under gpuplane:nodePool"),
    ("aks-ubuntu", "    vmSize: Standard_NC24ads_A100_v4\n",
     "    vmSize: Standard_NC24ads_A100_v4\n    labels: {'bad key!': x}\n",
     "gpuplane:nodePool.labels: label key 'bad key!' is not a Kubernetes label key. Fix:"),
    ("eks-al2023", "    toolkit: operator\n",
     "    toolkit: operator\n  gpuplane:nodePool: {cluster: a, name: b}\n",
     "gpuplane:nodePool: describes an AKS or GKE node pool, but cluster.platform is "
     "eks-al2023; remove nodePool"),
])
def test_bad_node_pool_is_a_stack_key_error(capsys: pytest.CaptureFixture[str], project: Path,
                                            stack: str, old: str, new: str,
                                            expected: str) -> None:
    path = project / "stacks" / f"Pulumi.{stack}.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    code = main(["plan", "--stack", stack, "--stacks-dir", str(project / "stacks")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert f"Pulumi.{stack}.yaml:" in err
    assert expected in err
