"""A node without a top-level containerd config (issue #39), held against real containerd:
a file of only the line's native `version` is exactly the built-in defaults the node runs
on (what the planner starts from, gpuplane.plan.node.native_config), and what the planner
writes onto "no file" merges in real containerd as the model says."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import oracle
from support.layouts import host_path, write_layout

from gpuplane.containerd import ContainerdVersion
from gpuplane.core.findings import Severity
from gpuplane.distros.profiles import Distro, profile
from gpuplane.plan.node import PlanOptions, ToolkitMode, native_config, plan_node


def _without_imports(text: str) -> list[str]:
    # 1.x lists the files it read under `imports` (the dumped file itself): not a setting.
    return [ln for ln in text.splitlines() if not ln.startswith("imports")]


@pytest.mark.real
def test_a_file_of_only_the_native_version_is_containerds_defaults(
        containerd_line: str, tmp_path: Path) -> None:
    line = containerd_line
    seed = tmp_path / "config.toml"
    seed.write_text(native_config(ContainerdVersion.parse(line)))
    # The defaults: 2.x dumps them for a missing file; 1.x's `config dump` refuses a
    # missing file (its daemon runs on the defaults), so an empty file stands in there.
    missing = tmp_path / "absent.toml"
    if line.startswith("1."):
        assert not oracle.dump(line, missing).ok
        missing = Path("/dev/null")
    defaults, written = oracle.dump(line, missing), oracle.dump(line, seed)
    assert defaults.ok and written.ok, (defaults.error, written.error)
    assert _without_imports(written.text) == _without_imports(defaults.text)


@pytest.mark.real
@pytest.mark.parametrize("mode", list(ToolkitMode))
def test_a_plan_from_no_file_matches_real_containerd(containerd_line: str, mode: ToolkitMode,
                                                     tmp_path: Path) -> None:
    line = containerd_line
    plan = plan_node(profile(Distro.KUBEADM), ContainerdVersion.parse(line),
                     PlanOptions(toolkit=mode, systemd_cgroup=True), current={})
    assert not [f for f in plan.findings if f.severity is Severity.ERROR], plan.findings
    assert plan.bases[plan.profile.config_path] is None
    write_layout(plan.layout, tmp_path)
    real = oracle.dump(line, host_path(tmp_path, plan.profile.config_path))
    assert real.ok, real.error
    assert oracle.effective_from_dump(line, real.config) == plan.effective.to_dict()
    if mode is not ToolkitMode.NONE:
        assert {"runc", "nvidia"} <= set(plan.effective.runtimes)
