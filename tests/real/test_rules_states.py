"""Every state of a rollout is judged, and a finding names the state it appears in: as
found, after gpuplane's files, after the toolkit, after the toolkit's uninstall.

The two cases the final state hides (both plan clean when only the end is judged): a
version-3 drop-in lying unread on containerd 1.7, and an nvidia-only drop-in lying unread
on 1.x; gpuplane's `imports` line switches them on, the node agent restarts containerd on
that layout, and only the toolkit's later drop-in would have repaired the second. Real
containerd 1.7 confirms the intermediate layout fails."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import oracle
from support.layouts import host_path, write_layout

from gpuplane.containerd import ContainerdVersion
from gpuplane.core.findings import AFTER_GPUPLANE, AFTER_TOOLKIT, Finding, Severity
from gpuplane.distros.profiles import Distro, profile
from gpuplane.plan.layout import rendered_layout
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node

PROFILE = profile(Distro.KUBEADM)
CRI = "io.containerd.grpc.v1.cri"
V3_DROPIN = ("/etc/containerd/conf.d/50-old.toml",
             'version = 3\n[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]\n'
             '  runtime_type = "io.containerd.runc.v2"\n')
NVIDIA_ONLY = ("/etc/containerd/conf.d/50-nvidia.toml",
               f'version = 2\n[plugins."{CRI}".containerd.runtimes.nvidia]\n'
               '  runtime_type = "io.containerd.runc.v2"\n'
               f'  [plugins."{CRI}".containerd.runtimes.nvidia.options]\n'
               '    BinaryName = "/usr/bin/nvidia-container-runtime"\n    SystemdCgroup = true\n')
OPTIONS = PlanOptions(toolkit=ToolkitMode.OPERATOR, toolkit_version="1.18.1",
                      kubelet_cgroup_driver="systemd")


def _plan(dropin: tuple[str, str] | None, line: str = "1.7"):
    version = ContainerdVersion.parse(line)
    current = {**PROFILE.baseline(version), **dict([dropin] if dropin else [])}
    return plan_node(PROFILE, version, OPTIONS, current=current)


def _errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is Severity.ERROR]


def test_unread_v3_drop_in_switched_on_by_gpuplane_is_an_error_after_gpuplane() -> None:
    errors = _errors(_plan(V3_DROPIN).findings)
    assert errors and {f.state for f in errors} == {AFTER_GPUPLANE}
    assert any(f.id == "FM03" and "version = 3" in f.message for f in errors)


def test_unread_nvidia_only_drop_in_that_drops_runc_is_an_error_after_gpuplane() -> None:
    plan = _plan(NVIDIA_ONLY)
    assert "runc" not in plan.written.runtimes       # between gpuplane and the toolkit
    assert "runc" in plan.effective.runtimes         # the toolkit's copy brings it back
    errors = _errors(plan.findings)
    assert errors and all(f.state == AFTER_GPUPLANE for f in errors)
    assert any(f.id == "FM02" for f in errors)


def test_same_drop_ins_on_containerd_2_1_pass_and_a_clean_node_has_no_findings() -> None:
    assert not _errors(_plan(NVIDIA_ONLY, "2.1").findings)   # 2.x deep-merges: runc stays
    assert _plan(None).findings == []


def test_fm16_final_state_findings_name_the_toolkit_state() -> None:
    """A CDI request on 1.6 is wrong once the toolkit has run (FM16), not before."""
    plan = plan_node(PROFILE, ContainerdVersion.parse("1.6"),
                     PlanOptions(toolkit=ToolkitMode.OPERATOR, toolkit_version="1.18.1", cdi=True,
                                 kubelet_cgroup_driver="systemd"))
    assert {(f.id, f.state) for f in plan.findings} >= {("FM16", AFTER_TOOLKIT)}


@pytest.mark.real
@pytest.mark.parametrize("dropin", [V3_DROPIN, NVIDIA_ONLY], ids=["v3", "nvidia-only"])
def test_real_containerd_1_7_fails_on_the_state_after_gpuplane(dropin: tuple[str, str],
                                                               tmp_path: Path) -> None:
    plan = _plan(dropin)
    oracle.require_line("1.7")
    node = rendered_layout({**plan.baseline, **plan.files}, PROFILE, plan.version)
    write_layout(node, tmp_path / "node")
    dumped = oracle.dump("1.7", host_path(tmp_path / "node", PROFILE.config_path))
    if dumped.ok:   # the nvidia-only drop-in loads, but the CRI table has lost runc
        runtimes = oracle.effective_from_dump("1.7", dumped.config)["runtimes"]
        assert "runc" not in runtimes and "nvidia" in runtimes
    else:
        assert "version" in dumped.error


def test_plan_json_and_text_name_the_state(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    from gpuplane.cli.main import main

    stacks = Path(__file__).resolve().parents[2] / "stacks"
    (tmp_path / "Pulumi.yaml").write_text("name: gpuplane\n")
    shutil.copytree(stacks, tmp_path / "stacks")
    (tmp_path / "old.toml").write_text(V3_DROPIN[1])
    # The node's own top-level file too: a plan is made from the node's files only.
    kubeadm = profile(Distro.KUBEADM)
    (tmp_path / "top.toml").write_text(
        kubeadm.baseline(ContainerdVersion.parse("1.7"))[kubeadm.config_path])
    stack = tmp_path / "stacks" / "Pulumi.kubeadm-prod.yaml"
    stack.write_text(stack.read_text().replace(
        "    nodeAccess: ssh\n",
        f"    nodeAccess: ssh\n    baselineFiles: {{{V3_DROPIN[0]}: old.toml, "
        f"{kubeadm.config_path}: top.toml}}\n"))
    args = ["plan", "--stack", "kubeadm-prod", "--stacks-dir", str(tmp_path / "stacks")]
    assert main([*args, "--format", "json"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert {f["state"] for f in findings if f["severity"] == "error"} == {AFTER_GPUPLANE}
    assert main(args) == 1
    assert f"[{AFTER_GPUPLANE}]" in " ".join(capsys.readouterr().out.split())
