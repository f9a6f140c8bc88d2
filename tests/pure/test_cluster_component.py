"""`GpuCluster` composed into a user's own Pulumi program: typed args, and the user's
Kubernetes provider (e.g. for a cluster created in the same program) reaches every
Kubernetes resource gpuplane creates."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import pytest

from gpuplane import GpuCluster, GpuClusterArgs
from gpuplane.cli.plan.engine import Registered, run_program
from gpuplane.config.stackfile import load_stack_file

STACKS = Path(__file__).resolve().parents[2] / "stacks"
KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\n"


def _compose(stack: str, how: str) -> tuple[str, list[Registered]]:
    cfg = load_stack_file(stack, STACKS).config()

    def program() -> str:
        cluster_provider = k8s.Provider("user-cluster", kubeconfig=KUBECONFIG)
        opts = (pulumi.ResourceOptions(provider=cluster_provider) if how == "provider"
                else pulumi.ResourceOptions(providers=[cluster_provider]))
        GpuCluster("gpu", GpuClusterArgs(config=cfg, private_key="not-a-key",
                                         kubeconfig=KUBECONFIG), opts=opts)
        return "user-cluster"

    _, resources = run_program(program, project="user-program", stack=stack, config={},
                               secret_keys=[])
    provider_urn = next(r.urn for r in resources if r.type == "pulumi:providers:kubernetes")
    return provider_urn, resources


@pytest.mark.parametrize("how", ["provider", "providers"])
@pytest.mark.parametrize("stack", ["kubeadm-prod", "hami-shared", "k8s-snap-dgx"])
def test_every_kubernetes_resource_uses_the_users_provider(stack: str, how: str) -> None:
    provider_urn, resources = _compose(stack, how)
    kube = [r for r in resources if r.type.startswith("kubernetes:")]
    assert len(kube) >= 4
    strays = [f"{r.type} {r.name}: {r.provider or 'default provider'}" for r in kube
              if not r.provider.startswith(provider_urn + "::")]
    assert not strays


def test_the_verdicts_get_the_kubeconfig_and_keep_it_secret() -> None:
    _, resources = _compose("k8s-snap-dgx", "provider")
    dynamic = [r for r in resources if r.type.startswith("pulumi-python:dynamic:")]
    assert dynamic
    for r in dynamic:
        assert r.inputs.get("kubeconfig") == KUBECONFIG, r.name
        assert "kubeconfig" in r.secret_paths or "kubeconfig" in r.additional_secret_outputs
