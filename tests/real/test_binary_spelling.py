"""FM01's shadowed-binary form: Kubespray <= 2.27 spells runc's `binaryName`; the GPU
Operator's toolkit copies runc's options into its nvidia runtime and sets `BinaryName`;
containerd 2.x reads the last spelling in byte order, so GPU pods would run plain runc.
The rule reports it, the plan spells runc's option once before the toolkit runs, and the
real installer plus real containerd show both the hazard and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import oracle, toolkit_oracle
from support.layouts import host_path, write_layout

from gpuplane.containerd import ContainerdVersion, MemoryFiles
from gpuplane.containerd.effective import effective_config
from gpuplane.distros.profiles import Distro, profile
from gpuplane.plan.node import NodeContainerdPlan, plan_node
from gpuplane.rules.containerd import ContainerdFacts, check_containerd
from gpuplane.toolkit.options import PlanOptions, ToolkitMode

TOP = "/etc/containerd/config.toml"
CRI = '"io.containerd.grpc.v1.cri"'
KUBESPRAY = {TOP: (
    f'version = 2\n[plugins.{CRI}.containerd]\ndefault_runtime_name = "runc"\n'
    f'[plugins.{CRI}.containerd.runtimes.runc]\nruntime_type = "io.containerd.runc.v2"\n'
    f'[plugins.{CRI}.containerd.runtimes.runc.options]\n'
    'systemdCgroup = true\nbinaryName = "/usr/local/bin/runc"\n')}
TOOLKIT = "1.18.1"


def _nvidia_spelled_twice(line: str) -> list[str]:
    text = KUBESPRAY[TOP] + (
        f'[plugins.{CRI}.containerd.runtimes.nvidia]\nruntime_type = "io.containerd.runc.v2"\n'
        f'[plugins.{CRI}.containerd.runtimes.nvidia.options]\n'
        'binaryName = "/usr/local/bin/runc"\n'
        'BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"\n')
    eff = effective_config(TOP, MemoryFiles({TOP: text}), ContainerdVersion.parse(line))
    return [f.message for f in check_containerd(ContainerdFacts(eff)) if f.id == "FM01"]


def test_the_rule_reports_an_nvidia_binary_containerd_2_does_not_read() -> None:
    found = _nvidia_spelled_twice("2.1")
    assert len(found) == 1 and 'reads binaryName = "/usr/local/bin/runc"' in found[0]
    assert not _nvidia_spelled_twice("1.7"), "1.x reads BinaryName itself"


def _plan(line: str) -> NodeContainerdPlan:
    return plan_node(profile(Distro.KUBEADM), ContainerdVersion.parse(line), PlanOptions(
        toolkit=ToolkitMode.OPERATOR, toolkit_version=TOOLKIT, systemd_cgroup=True,
        operator_chart=toolkit_oracle.chart_of(TOOLKIT)), current=KUBESPRAY)


@pytest.mark.parametrize("line", ["1.7", "2.1"])
def test_the_plan_spells_runcs_binary_once_before_the_toolkit_copies_it(line: str) -> None:
    plan = _plan(line)
    written = plan.files[TOP]
    assert "binaryName" not in written and 'BinaryName = "/usr/local/bin/runc"' in written
    assert not [f for f in plan.findings if f.severity == "error"], plan.findings
    nvidia = plan.effective.runtimes["nvidia"].options
    assert "nvidia-container-runtime" in str(nvidia.get("BinaryName"))


@pytest.mark.real
@pytest.mark.parametrize("planned", [False, True], ids=["as-found", "planned"])
def test_real_toolkit_and_containerd_2_run_runc_for_nvidia_unless_planned(
        planned: bool, tmp_short: Path) -> None:
    """The hazard is real (the installer's copy on the node as found makes containerd 2.1
    run runc for nvidia), and the plan's top-level file removes it."""
    line = "2.1"
    oracle.require_line(line)
    plan = _plan(line)
    if not planned:
        plan.files = {}
    node, real = toolkit_oracle.run_on_plan(plan, TOOLKIT, tmp_short)
    write_layout({**node, **real.written}, tmp_short / "node")
    dumped = oracle.dump(line, host_path(tmp_short / "node", TOP))
    assert dumped.ok, dumped.error
    assert dumped.config is not None
    cri = dumped.config["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
    options = cri["nvidia"]["options"]
    binary = [v for k, v in options.items() if k.lower() == "binaryname"]
    read = options.get("binaryName", options.get("BinaryName"))
    assert ("nvidia-container-runtime" in str(read)) is planned, (binary, options)
