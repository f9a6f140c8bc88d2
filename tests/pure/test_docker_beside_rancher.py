"""Issue #39 item 3: K3s/RKE2 beside Docker's containerd. In detected mode toolkit.env sets
only the socket (RKE2's docs), so the toolkit's config path (/etc/containerd/config.toml)
and config source (`containerd config dump` through the host's PATH) are Docker's
containerd's: the toolkit rewrites that daemon's config. That was an INFO; it is an error
whose fix (runtimeSetup: template) plans clean."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.stack_cases import config_of, write_stack
from test_fix_convergence import converge

from gpuplane.containerd import ContainerdVersion
from gpuplane.core.findings import Severity
from gpuplane.distros.docker_daemon import DockerSettings
from gpuplane.distros.profiles import profile
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node

V2 = ContainerdVersion.parse("2.0")


@pytest.mark.parametrize("distro", ["rke2", "k3s"])
def test_detected_mode_beside_docker_is_an_error(distro: str) -> None:
    plan = plan_node(profile(distro), V2, PlanOptions(
        toolkit=ToolkitMode.OPERATOR, runtime_setup="detected"), docker=DockerSettings())
    [found] = [f for f in plan.findings if f.id == "FM17"]
    assert found.severity is Severity.ERROR, found
    assert "CONTAINERD_CONFIG is not set, so it is /etc/containerd/config.toml" in found.message
    assert found.changes == (("gpuplane:gpuOperator.runtimeSetup", "template"),)


@pytest.mark.parametrize("distro", ["rke2", "k3s"])
def test_template_mode_beside_docker_stays_information(distro: str) -> None:
    plan = plan_node(profile(distro), V2, PlanOptions(
        toolkit=ToolkitMode.OPERATOR, runtime_setup="template"), docker=DockerSettings())
    [found] = [f for f in plan.findings if f.id == "FM17"]
    assert found.severity is Severity.INFO, found


def test_the_rke2_operator_stack_beside_docker_converges(tmp_path: Path) -> None:
    cfg = config_of("rke2-operator")
    cfg["gpuplane:cluster"]["nodeAccess"] = "pod"
    cfg["gpuplane:docker"] = {"nvidiaRuntime": True}
    write_stack(tmp_path / "as-is", "case", cfg)
    rounds = converge(cfg, tmp_path / "fix")
    assert rounds[0] == ["FM17"] and rounds[-1] == [], rounds
