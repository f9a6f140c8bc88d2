"""Issue #39 item 3: every distribution gpuplane models has a stack that plans clean with the
GPU Operator's toolkit (or an explicit refusal that names the working alternative).

k0s was the gap: gpuplane rendered `CONTAINERD_CONFIG=/etc/k0s/containerd.toml`, the toolkit
rewrote that file without k0s's `# k0s_managed=true` marker, and gpuplane's own FM05 then
rejected the plan it had rendered. gpuplane now renders what k0s's docs give
(k0sproject/k0s docs/runtime.md@v1.35.1+k0s.0: `CONTAINERD_CONFIG` in
`/etc/k0s/containerd.d/`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.stack_cases import write_stack

from gpuplane.cli.plan.run import plan_stack
from gpuplane.distros.profiles import Distro

# (kubernetesVersion, containerdVersion) a node of each distribution runs.
VERSIONS = {
    Distro.KUBEADM: ("1.33.4", "2.0"),
    Distro.K8S_SNAP: ("1.33.4", "1.7"),
    Distro.RKE2: ("1.31.6", "2.0"),
    Distro.K3S: ("1.31.6", "2.0"),
    Distro.MICROK8S: ("1.33.4", "1.7"),
    Distro.K0S: ("1.33.4", "1.7"),
}


def _stack(distro: Distro, chart: str, access: str, default: bool) -> dict[str, Any]:
    kube, ctd = VERSIONS[distro]
    return {
        "gpuplane:cluster": {"distro": distro.value, "kubernetesVersion": kube,
                             "containerdVersion": ctd, "nodeAccess": access},
        "gpuplane:nodes": [{"name": "gpu-1", "gpus": 1, "os": "ubuntu22.04", "pool": "gpu"}],
        "gpuplane:runtime": {"name": "nvidia", "nvidiaDefault": default},
        # nvidia as the default runtime needs CDI off: from v25.10 the chart turns it on
        # (FM11 otherwise; tests/pure/test_sharing_contradictions.py)
        "gpuplane:gpuOperator": {"chartVersion": chart, "driver": "preinstalled",
                                 "toolkit": "operator", **({"cdi": False} if default else {})},
    }


def test_every_distribution_is_covered() -> None:
    assert set(VERSIONS) == set(Distro)


@pytest.mark.parametrize("default", [False, True], ids=["runtime-class", "nvidia-default"])
@pytest.mark.parametrize("access", ["none", "pod"])
@pytest.mark.parametrize("chart", ["v25.3.4", "v25.10.1"])
@pytest.mark.parametrize("distro", list(Distro), ids=str)
def test_the_operators_toolkit_plans_clean_on_every_distribution(
        distro: Distro, chart: str, access: str, default: bool, tmp_path: Path) -> None:
    cfg = _stack(distro, chart, access, default)
    write_stack(tmp_path / "as-is", "case", cfg)
    report = plan_stack("case", tmp_path / "as-is")
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    refusal = _refusal(distro, chart, access, default)
    if refusal is None:
        assert errors == [], errors
        return
    rule, (section, key, value) = refusal
    named = [f for f in errors if f["id"] == rule]
    assert named, errors
    assert f"{section}.{key}" in named[0]["fix"], named[0]["fix"]
    cfg[section][key] = value   # the working alternative the refusal names
    write_stack(tmp_path / "fixed", "case", cfg)
    fixed = plan_stack("case", tmp_path / "fixed")
    assert [f for f in fixed["findings"] if f["severity"] == "error"] == []


def _refusal(distro: Distro, chart: str, access: str,
             default: bool) -> tuple[str, tuple[str, str, str]] | None:
    """The refusals a stack gets, with the alternative its fix names: on RKE2/K3s nvidia
    as the default needs gpuplane's template, so node access (FM05). (The toolkit of
    chart v25.3.x, 1.17.8, rewriting a containerd 2.x config from `config dump` is
    predicted and plans clean.)"""
    if distro in (Distro.RKE2, Distro.K3S) and default and access == "none":
        return "FM05", ("gpuplane:cluster", "nodeAccess", "pod")
    return None


def test_on_k0s_the_toolkit_writes_only_into_k0s_drop_in_dir(tmp_path: Path) -> None:
    write_stack(tmp_path, "case", _stack(Distro.K0S, "v25.10.1", "pod", False))
    report = plan_stack("case", tmp_path)
    values = report["helm"]["gpu-operator"]["values"]
    env = {e["name"]: e["value"] for e in values["toolkit"]["env"]}
    assert env["CONTAINERD_CONFIG"] == "/etc/k0s/containerd.d/nvidia.toml"
    assert env["RUNTIME_DROP_IN_CONFIG"] == "/etc/k0s/containerd.d/99-nvidia.toml"
    assert env["RUNTIME_CONFIG_SOURCE"] == "file=/run/k0s/containerd-cri.toml"
    assert sorted(report["toolkit"]["writes"]) == ["/etc/k0s/containerd.d/99-nvidia.toml",
                                                  "/etc/k0s/containerd.d/nvidia.toml"]
