"""`gpuplane nodes capture --stack NAME` finds the stack file where `gpuplane plan` does:
in one's own project, its `stackConfigDir` (run from the project, no --stacks-dir)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplane.cli.main import main

STACK = """config:
  gpuplane:cluster: {distro: kubeadm}
"""


@pytest.fixture
def own_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "Pulumi.yaml").write_text(
        "name: mygpus\nruntime: python\nstackConfigDir: config\n")
    (tmp_path / "__main__.py").write_text("import gpuplane\n")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "Pulumi.dev.yaml").write_text(STACK)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    return tmp_path


def test_capture_and_plan_read_the_same_stack_file(capsys: pytest.CaptureFixture[str],
                                                   own_project: Path) -> None:
    stack = own_project / "config" / "Pulumi.dev.yaml"
    assert main(["plan", "--stack", "dev"]) == 2
    plan_err = capsys.readouterr().err
    assert main(["nodes", "capture", "--stack", "dev"]) == 2
    capture_err = capsys.readouterr().err
    assert str(stack) in plan_err, plan_err
    assert str(stack) in capture_err and "no such stack file" not in capture_err, capture_err
