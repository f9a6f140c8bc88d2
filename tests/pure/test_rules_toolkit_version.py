"""FM03: the operator's toolkit older than 1.17.4 on containerd 2.x (chart pin or a
`toolkitImage` tag override) is an error."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from gpuplane.cli.main import main
from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules.toolkit_version import check_toolkit_containerd
from gpuplane.toolkit import operator as toolkit_operator

STACKS = Path(__file__).resolve().parents[2] / "stacks"


def fm03(values: dict[str, Any], containerd: str, chart: str = "v25.10.1") -> list[Finding]:
    return check_toolkit_containerd(values, ClusterIntent(containerd_version=containerd),
                                    chart_version=chart, where="Release gpu-operator")



@pytest.mark.parametrize("tag", ["v1.17.3-ubuntu20.04", "v1.16.2", "1.17.0"])
def test_old_toolkit_override_on_containerd_2_is_an_error(tag: str) -> None:
    [f] = fm03({"toolkit": {"version": tag}}, "2.0")
    assert f.id == "FM03" and f.severity is Severity.ERROR
    assert "gpuplane:gpuOperator.toolkitImage" in f.where and "1.17.4" in f.fix


@pytest.mark.parametrize(("values", "containerd"), [
    ({"toolkit": {"version": "v1.17.3"}}, "1.7"),          # 1.x reads version 2
    ({"toolkit": {"version": "v1.17.4-ubi8"}}, "2.1"),     # new enough
    ({"toolkit": {"version": "v1.17.3", "enabled": False}}, "2.0"),   # host toolkit
    ({"toolkit": {"version": "latest"}}, "2.0"),           # unknown: FM18's
    ({}, "2.1"),                                           # v25.10.1 pins 1.18.1
])
def test_new_enough_or_not_applicable_passes(values: dict[str, Any], containerd: str) -> None:
    assert fm03(values, containerd) == []


@pytest.mark.parametrize(("chart", "toolkit"), [
    ("v24.3.0", "1.15.0"), ("v24.6.2", "1.16.2"), ("v24.9.0", "1.17.0"), ("v24.9.1", "1.17.3")])
def test_chart_pin_of_an_old_toolkit_is_an_error(chart: str, toolkit: str) -> None:
    """A chart whose pinned toolkit is older than 1.17.4 (the chart -> toolkit map:
    deployments/gpu-operator/values.yaml `toolkit.version` at each tag)."""
    [f] = fm03({}, "2.0", chart=chart)
    assert "gpuplane:gpuOperator.chartVersion" in f.where and f"toolkit {toolkit} " in f.message


@pytest.mark.parametrize("chart", ["v24.9.2", "v25.3.0", "v26.3.2", "v26.7.0"])
def test_chart_pinning_1_17_4_or_later_passes_on_containerd_2(chart: str) -> None:
    assert fm03({}, "2.0", chart=chart) == []
    version = tuple(int(p) for p in toolkit_operator.toolkit_for_chart(chart).split("."))
    assert version >= (1, 17, 4)


def test_fix_names_the_oldest_chart_that_pins_a_new_enough_toolkit() -> None:
    [f] = fm03({}, "2.0", chart="v24.9.0")
    assert "v24.9.2 or later" in f.fix


def test_plan_of_rke2_on_containerd_2_with_an_old_toolkit_image_fails(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    shutil.copytree(STACKS, stacks)
    path = stacks / "Pulumi.rke2-lab.yaml"
    text = path.read_text()
    assert "containerdVersion: \"2.0\"" in text and "    toolkit: operator\n" in text
    path.write_text(text.replace("    toolkit: operator\n", "    toolkit: operator\n"
                                 "    toolkitImage: {repository: nvcr.io/nvidia/k8s/"
                                 "container-toolkit, tag: v1.17.3-ubuntu20.04}\n"))
    code = main(["plan", "--stack", "rke2-lab", "--stacks-dir", str(stacks), "--format", "json"])
    out = capsys.readouterr().out
    assert code == 1 and '"FM03"' in out and "toolkit 1.17.3" in out
