"""Every command answers `--help` (exit 0, a description, its own name) and the tool
answers `--version`, through the real console entry in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "components")}
    return subprocess.run([sys.executable, "-m", "gpuplane.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_version() -> None:
    run = _run("--version")
    assert run.returncode == 0 and run.stdout.startswith("gpuplane "), run
    assert run.stdout.split()[1][0].isdigit() or "not installed" in run.stdout


def test_node_agent_help_exits_0_and_says_what_it_prints() -> None:
    run = _run("node-agent", "--help")
    assert run.returncode == 0, run
    assert run.stdout.startswith("usage: gpuplane node-agent") and "sh agent.sh help" in run.stdout
    assert _run("node-agent", "apply").returncode == 2


def test_probe_help_names_the_command() -> None:
    run = _run("probe", "--help")
    assert run.returncode == 0, run
    assert run.stdout.startswith("usage: gpuplane probe ") and "cuda_probe.py" not in run.stdout


@pytest.mark.parametrize("command", ["explain", "plan", "doctor", "nodes", "containerd"])
def test_help_has_a_description(command: str) -> None:
    run = _run(command, "--help")
    assert run.returncode == 0, run
    # usage, a blank line, then the description (argparse prints it only when given)
    lines = run.stdout.splitlines()
    blank = lines.index("")
    assert lines[blank + 1] and not lines[blank + 1].startswith(("positional", "options")), \
        run.stdout
