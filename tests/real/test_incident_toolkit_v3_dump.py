"""Public incident NVIDIA/gpu-operator#2060 (EKS 1.33, AL2023, containerd 2.1.5, whose
`config dump` is version 3): a toolkit image override older than 1.17.4 fails with
"unable to load config: unsupported config version: 3"; the fix the reporter confirmed
was to drop the override and run the chart's own toolkit (1.18.1 at v25.10.1).

Held against the real installers and real containerd 2.0/2.1/2.2 on the EKS AL2023
node's config (gpuplane's baseline of it, version 3): the old toolkit is refused (FM03)
and the real one fails; the confirmed fix, and toolkit 1.17.8 (chart v25.3.4, which
rewrites the config from that version-3 dump: predicted now, no longer refused), plan
clean and write what the real installer writes (issue #46 item 8)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_toolkit_differential import _plan_from, assert_toolkit_agrees

from gpuplane.core.findings import Severity
from gpuplane.distros.profiles import Distro, profile

BASELINES = Path(__file__).resolve().parents[2] / "components/gpuplane/data/baselines"
TOP = "/etc/containerd/config.toml"
EKS_NODE = {TOP: (BASELINES / "eks-al2023" / TOP.lstrip("/")).read_text()}
LINES = ["2.0", "2.1", "2.2"]


@pytest.mark.real
@pytest.mark.parametrize("line", LINES)
def test_fm03_toolkit_before_1_17_4_on_a_v3_dump_is_refused_as_it_fails(
        line: str, tmp_path: Path) -> None:
    plan = _plan_from(profile(Distro.KUBEADM), line, "1.17.3", {}, dict(EKS_NODE))
    errors = [f for f in plan.findings if f.severity is Severity.ERROR]
    assert [f for f in errors if f.id == "FM03" and "the installer fails" in f.message], errors
    assert "v25.10.0 or later" in errors[0].fix
    assert_toolkit_agrees(plan, "1.17.3", tmp_path)   # the real 1.17.3 fails there


@pytest.mark.real
@pytest.mark.parametrize("toolkit", ["1.18.1", "1.17.8"])
@pytest.mark.parametrize("line", LINES)
def test_fm03_the_confirmed_fix_plans_clean_as_the_real_installer_writes(
        line: str, toolkit: str, tmp_path: Path) -> None:
    plan = _plan_from(profile(Distro.KUBEADM), line, toolkit, {}, dict(EKS_NODE))
    assert not [f for f in plan.findings if f.severity is Severity.ERROR], plan.findings
    assert plan.toolkit_files, "the toolkit's files are predicted"
    assert {"nvidia", "runc"} <= set(plan.effective.runtimes)
    assert_toolkit_agrees(plan, toolkit, tmp_path)
