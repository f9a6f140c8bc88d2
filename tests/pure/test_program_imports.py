"""A user's program that imports a package gpuplane's Python lacks: the plan says it runs
the program with its own Python, and, where Pulumi.yaml names a virtualenv, how to run
gpuplane from it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from gpuplane.cli.main import main

STACKS = Path(__file__).resolve().parents[2] / "stacks"


def _project(root: Path, runtime: str) -> Path:
    (root / "Pulumi.yaml").write_text(f"name: mygpus\nruntime:\n{runtime}")
    (root / "__main__.py").write_text("import pulumi_no_such_provider\n")
    (root / "stacks").mkdir()
    shutil.copy(STACKS / "Pulumi.kind-smoke.yaml", root / "stacks" / "Pulumi.dev.yaml")
    return root


@pytest.mark.parametrize("with_venv", [True, False])
def test_missing_import_names_the_python_and_the_virtualenv(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, with_venv: bool) -> None:
    runtime = ("  name: python\n  options:\n    virtualenv: venv\n" if with_venv
               else "  name: python\n")
    root = _project(tmp_path, runtime)
    code = main(["plan", "--stack", "dev", "--stacks-dir", str(root / "stacks")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert "ModuleNotFoundError: No module named 'pulumi_no_such_provider'" in err, err
    assert f"gpuplane runs the program with its own Python ({sys.executable})" in err, err
    if with_venv:
        venv = (tmp_path / "venv").resolve()
        assert f"not the virtualenv Pulumi.yaml names ({venv}); fix: install gpuplane " \
            "into that virtualenv and run it from there" in err, err
        assert f"`{venv}/bin/gpuplane plan`" in err
    else:
        assert "virtualenv" not in err
