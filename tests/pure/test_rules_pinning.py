"""FM18 blocks by default for the GPU Operator chart and the toolkit/driver images
(ranges, `latest`, missing tags); other images stay advice; the policy config lowers it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from gpuplane.cli.main import main
from gpuplane.core.findings import Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules.operator import check_operator_values

STACKS = Path(__file__).resolve().parents[2] / "stacks"
BASE: dict[str, Any] = {"driver": {"enabled": False}}


def fm18(values: dict[str, Any], chart: str = "v25.10.1") -> list[Severity]:
    return [f.severity for f in check_operator_values(values, ClusterIntent(),
                                                      chart_version=chart, where="Release x")
            if f.id == "FM18"]


@pytest.mark.parametrize("chart", ["~25.10", "25.10", "", "^25", "latest"])
def test_operator_chart_range_or_missing_is_an_error(chart: str) -> None:
    assert fm18(BASE, chart) == [Severity.ERROR]


@pytest.mark.parametrize(("values", "expected"), [
    ({"toolkit": {"version": "latest"}}, [Severity.ERROR]),
    ({"toolkit": {"repository": "nvcr.io/nvidia/k8s", "image": "container-toolkit",
                  "version": ""}}, [Severity.ERROR]),
    ({"driver": {"enabled": False, "version": "latest"}}, [Severity.ERROR]),
    ({"driver": {"enabled": False, "image": "nvcr.io/nvidia/driver"}}, [Severity.ERROR]),
    ({"dcgmExporter": {"version": "latest"}}, [Severity.WARNING]),  # not a node-config image
    ({"driver": {"enabled": False, "manager": {"version": "latest"}}}, [Severity.WARNING]),
])
def test_toolkit_and_driver_tags_block_others_advise(values: dict[str, Any],
                                                     expected: list[Severity]) -> None:
    assert fm18({**BASE, **values}) == expected


def test_pinned_chart_and_tags_pass() -> None:
    assert fm18({**BASE, "toolkit": {"version": "v1.17.8-ubuntu20.04"},
                 "driver": {"enabled": False, "version": "570.86.15"}}) == []


def _plan(tmp_path: Path, old: str, new: str, *extra: str) -> int:
    stacks = tmp_path / "stacks"
    shutil.copytree(STACKS, stacks)
    path = stacks / "Pulumi.kubeadm-prod.yaml"
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))
    return main(["plan", "--stack", "kubeadm-prod", "--stacks-dir", str(stacks),
                 "--format", "json", *extra])


def test_toolkit_image_latest_blocks_the_plan_unless_lowered(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`latest` blocks the plan; the stack lowers FM18 with `gpuplane:rules` (which the
    program and the pack both apply), never with the pack's config alone: the program,
    which refuses before creating anything, does not read the pack's config."""
    latest = ("    toolkit: operator\n",
              "    toolkit: operator\n    toolkitImage: {repository: nvcr.io/nvidia/k8s/"
              "container-toolkit, tag: latest}\n")
    assert _plan(tmp_path, *latest) == 1
    capsys.readouterr()
    config = tmp_path / "policy.json"
    config.write_text('{"gpuplane-fm18": "advisory"}')
    shutil.rmtree(tmp_path / "stacks")
    assert _plan(tmp_path, *latest, "--policy-pack-config", str(config)) == 1
    capsys.readouterr()
    shutil.rmtree(tmp_path / "stacks")
    text = (STACKS / "Pulumi.kubeadm-prod.yaml").read_text()
    # `toolkit: operator` is the last key of gpuplane:gpuOperator there.
    assert text.count("    toolkit: operator\n  gpuplane:rollout:") == 1
    lowered = ("    toolkit: operator\n", "    toolkit: operator\n    toolkitImage: {repository: "
               "nvcr.io/nvidia/k8s/container-toolkit, tag: latest}\n"
               "  gpuplane:rules: {FM18: advisory}\n")
    assert _plan(tmp_path, *lowered) == 0
    assert '"FM18"' in capsys.readouterr().out
