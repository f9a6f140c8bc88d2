"""A node without a top-level containerd config (issue #39), held against real containerd:
a file of only the line's native `version` is exactly the built-in defaults the node runs
on (what the planner starts from, gpuplane.plan.node.native_config), and what the planner
writes onto "no file" merges in real containerd as the model says."""

from __future__ import annotations

import os
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


def _dump_at_etc(line: str, etc_containerd: Path) -> oracle.DumpResult:
    """`config dump` of /etc/containerd/config.toml with `etc_containerd` mounted over
    /etc/containerd in a private mount namespace: containerd's defaults name the absolute
    /etc/containerd/conf.d, which no stand-in root can move."""
    import shutil
    import subprocess
    import tomllib

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        oracle.unavailable("a private mount namespace needs root and unshare(1)")
    exe = oracle.binary(line)
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", 'mount --bind "$1" /etc/containerd && exec "$2" '
         "--config /etc/containerd/config.toml config dump", "sh", str(etc_containerd),
         str(exe)], capture_output=True, text=True, timeout=60, check=False, cwd="/")
    if proc.returncode != 0:
        return oracle.DumpResult(False, None, proc.stderr.strip(), proc.returncode)
    return oracle.DumpResult(True, tomllib.loads(proc.stdout), proc.stderr.strip(),
                             proc.returncode, proc.stdout)


@pytest.mark.real
def test_check_of_a_drop_in_without_a_top_level_file_matches_real_containerd(
        containerd_line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A drop-in in /etc/containerd/conf.d on a node without config.toml: real containerd
    (2.x: its `config dump` runs on the defaults) does not read it; `gpuplane containerd
    check` says so, and its printed fix makes real containerd read it."""
    import json

    from gpuplane.cli.main import main

    line = containerd_line
    if line.startswith("1."):
        pytest.skip("1.x's `config dump` refuses a missing file (see the test above)")
    etc = tmp_path / "node" / "etc" / "containerd"
    (etc / "conf.d").mkdir(parents=True)
    key = oracle.cri_runtime_table_key(line)
    (etc / "conf.d" / "99-nvidia.toml").write_text(
        f'version = 3\n[plugins."{key}".containerd.runtimes.nvidia]\n'
        'runtime_type = "io.containerd.runc.v2"\n')
    argv = ["containerd", "check", "--root", str(tmp_path / "node"), "--config",
            "/etc/containerd/config.toml", "--containerd-version", line, "--format", "json"]

    assert main(argv) == 1
    out = json.loads(capsys.readouterr().out)
    real = _dump_at_etc(line, etc)
    assert real.ok, real.error
    assert "nvidia" not in oracle.effective_from_dump(line, real.config)["runtimes"]
    assert out["no_file"] and "nvidia" not in out["effective"]["runtimes"]
    finding = next(f for f in out["findings"] if "99-nvidia.toml" in f["message"])
    version = finding["fix"].split("`version = ")[1].split("`")[0]
    (etc / "config.toml").write_text(
        f'version = {version}\nimports = ["/etc/containerd/conf.d/*.toml"]\n')
    real = _dump_at_etc(line, etc)
    assert real.ok, real.error
    assert "nvidia" in oracle.effective_from_dump(line, real.config)["runtimes"]
    assert main(argv) == 0, capsys.readouterr().out
