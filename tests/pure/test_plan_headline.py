"""The plan's first line says what the stack runs and does, in correct English: the
platform (not the kubeadm layout its nodes share), counts with their noun's number, and
files written even where containerd does not restart."""

from __future__ import annotations

import pytest

from gpuplane.cli.main import main


def _headline(capsys: pytest.CaptureFixture[str], stack: str) -> str:
    assert main(["plan", "--stack", stack]) == 0
    return capsys.readouterr().out.splitlines()[0]


@pytest.mark.parametrize(("stack", "platform"), [
    ("eks-al2023-nvidia", "EKS AL2023 NVIDIA AMI"), ("gke-cos", "GKE Container-Optimized OS")])
def test_platform_stacks_name_the_platform(capsys: pytest.CaptureFixture[str], stack: str,
                                           platform: str) -> None:
    line = _headline(capsys, stack)
    assert line.startswith(f"gpuplane plan {stack}: {platform}, Kubernetes "), line
    assert "kubeadm" not in line


def test_one_node_is_singular(capsys: pytest.CaptureFixture[str]) -> None:
    line = _headline(capsys, "gke-cos")
    assert ", 1 GPU node, " in line and "0 containerd restarts" in line, line
    assert "1 GPU nodes" not in line


def test_files_written_without_a_restart_are_said(capsys: pytest.CaptureFixture[str]) -> None:
    """kubeadm-prod rewrites config.toml (an imports line) without changing what
    containerd runs: the headline says the files are written, and why no restart."""
    line = _headline(capsys, "kubeadm-prod")
    assert "files written on 5 nodes, 0 containerd restarts (containerd's merged config " \
           "is unchanged" in line, line


def test_counted() -> None:
    from gpuplane.cli.plan.render import counted

    assert [counted(n, "resource") for n in (0, 1, 2)] == [
        "0 resources", "1 resource", "2 resources"]
    assert counted(1, "batch", "batches") == "1 batch"
    assert counted(3, "batch", "batches") == "3 batches"


@pytest.mark.parametrize(("stack", "line"), [
    ("k8s-snap-dgx", "GPU sharing: time-slicing, 4 pods per GPU (gpuplane:timeSlicing.replicas"),
    ("kubeadm-prod", "GPU sharing: off, one pod per GPU (gpuplane:timeSlicing.replicas: 0;"),
    ("hami-shared", "GPU sharing: HAMi"),
    # gpuplane:sharing stacks: each pool's profile, not the unused timeSlicing keys
    ("h100-mig", "GPU sharing (gpuplane:sharing, ConfigMap device-plugin-config): default: "
                 "whole GPUs, one pod per GPU (L40S); pool h100: MIG mixed, profile "
                 "all-balanced (H100-80GB)"),
    ("inference-mps", "GPU sharing (gpuplane:sharing, ConfigMap device-plugin-config): "
                      "default: MPS, 4 clients per GPU (L4)"),
    ("two-pools", "pool notebooks: time-slicing, 4 pods per GPU (A10)"),
    ("hami-pools", "GPU sharing under HAMi (gpuplane:sharing, HAMi's nodeconfig): default: "
                   "HAMi's cluster settings (gpuplane:hami); pool training: MIG (HAMi's mig "
                   "mode) (A100-80GB); pool inference: HAMi core, 20 tasks per GPU (L4)"),
    ("kubeadm-dra", "GPU sharing: ResourceClaims through the DRA driver on every GPU node "
                    "(gpuplane:draDriver)"),
    ("kubeadm-dra-pools", "ResourceClaims through the DRA driver on pool training; default: "
                          "whole GPUs, one pod per GPU; pool inference: time-slicing, 4 pods"),
])
def test_sharing_is_said_in_text_and_markdown(capsys: pytest.CaptureFixture[str], stack: str,
                                              line: str) -> None:
    """Time-slicing's replicas, or that sharing is off (`replicas: 0`), in both plans; a
    stack with gpuplane:sharing or the DRA driver is described by its pools' profiles."""
    assert main(["plan", "--stack", stack]) == 0
    assert line in capsys.readouterr().out.splitlines()[2]
    assert main(["plan", "--stack", stack, "--format", "markdown"]) == 0
    assert line in capsys.readouterr().out
