"""A GPU Operator installed from a local chart (air-gapped: a directory or a `.tgz` beside
the program) with no `version`: Helm installs the chart as it is, and the Kubernetes
provider's Check records its Chart.yaml version as the release's, so the real preview
passes. `gpuplane plan` judges it by that version too, never as FM18's "not set"; a chart
a repository resolves keeps FM18. Paths are relative to the program's directory, where
Pulumi runs the program and its providers, wherever `gpuplane plan` is started from."""

from __future__ import annotations

import os
import shutil
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.charts import chart_dirs
from test_foreign_stacks import FACTS, OPERATOR_REPO, ids

from gpuplane.cli.plan.project import load_project
from gpuplane.cli.plan.run import plan_stack
from gpuplane.policy.pack import policy_names

OPERATOR = "v25.10.1"
GOOD = '{"driver": {"enabled": False}}'


def _project(tmp_path: Path, chart_form: str) -> tuple[Path, str]:
    """A user's project with the operator's chart (Chart.yaml stating OPERATOR, as `helm
    package --version` writes it) under charts/; the `chart` value naming it."""
    folder = tmp_path / "infra"
    target = folder / "charts" / "gpu-operator"
    shutil.copytree(chart_dirs("gpu-operator")[OPERATOR], target)
    meta = yaml.safe_load((target / "Chart.yaml").read_text())
    meta["version"] = OPERATOR
    (target / "Chart.yaml").write_text(yaml.safe_dump(meta))
    if chart_form == "tgz":
        with tarfile.open(folder / "charts" / f"gpu-operator-{OPERATOR}.tgz", "w:gz") as tar:
            tar.add(target, arcname="gpu-operator")
        shutil.rmtree(target)
        return folder, f"charts/gpu-operator-{OPERATOR}.tgz"
    return folder, "./charts/gpu-operator" if chart_form == "dot" else "charts/gpu-operator"


def _plan(folder: Path, body: str, where: Path) -> dict[str, Any]:
    (folder / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    (folder / "__main__.py").write_text(
        "import pulumi_kubernetes as k8s\n" + textwrap.dedent(body))
    (folder / "Pulumi.dev.yaml").write_text("config: {}\n")
    config = {name: dict(FACTS) for name in policy_names()}
    before = Path.cwd()
    os.chdir(where)
    try:
        return plan_stack("dev", folder, config, load_project(folder))
    finally:
        os.chdir(before)


def release(chart: str, values: str = GOOD, extra: str = "") -> str:
    return (f'k8s.helm.v3.Release("gpu-operator", name="gpu-operator", chart="{chart}",'
            f' namespace="gpu-operator", values={values}{extra})\n')


def chart_v4(chart: str, values: str = GOOD, extra: str = "") -> str:
    return (f'k8s.helm.v4.Chart("gpu-operator", chart="{chart}", namespace="gpu-operator",'
            f' values={values}{extra})\n')


@pytest.mark.parametrize("form", [release, chart_v4], ids=["release-v3", "chart-v4"])
@pytest.mark.parametrize("chart_form", ["dir", "dot", "tgz"])
def test_a_local_chart_without_a_version_is_pinned_by_its_content(
        tmp_path: Path, form: Any, chart_form: str) -> None:
    folder, chart = _project(tmp_path, chart_form)
    report = _plan(folder, form(chart), where=tmp_path)   # started outside the project
    assert "FM18" not in ids(report) | ids(report, "warning"), report["findings"]
    assert ids(report) == set() and report["verdict"] == "ok"
    # The rules still run on it, by the chart's own version.
    broken = _plan(folder, form(chart, '{"driver": {"enabled": True}}'), where=tmp_path)
    assert ids(broken) == {"FM08"}


@pytest.mark.parametrize("form", [release, chart_v4], ids=["release-v3", "chart-v4"])
def test_a_chart_a_repository_resolves_keeps_fm18(tmp_path: Path, form: Any) -> None:
    folder, _ = _project(tmp_path, "dir")
    # A repository named: Helm downloads the chart even where a folder of its name exists.
    report = _plan(folder, form("charts/gpu-operator",
                                extra=f", repository_opts={OPERATOR_REPO}"), where=folder)
    assert "FM18" in ids(report)
    # A repo alias (`helm repo add nvidia ...`): no such folder, so a repository resolves it.
    report = _plan(folder, form("nvidia/gpu-operator"), where=folder)
    assert "FM18" in ids(report)


def test_the_local_version_is_the_charts_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    from gpuplane.core.chartsource import chart_version_of

    folder, chart = _project(tmp_path, "tgz")
    monkeypatch.chdir(folder)
    assert chart_version_of(chart, None) == OPERATOR
    assert chart_version_of(chart, "") == OPERATOR
    # Helm installs the local chart whatever `version` says; the provider records its own.
    assert chart_version_of(chart, "v25.3.0") == OPERATOR
    assert chart_version_of("gpu-operator", "v25.3.0") == "v25.3.0"   # a repository's
    assert chart_version_of(chart, None, "https://helm.ngc.nvidia.com/nvidia") is None
    assert chart_version_of("missing/gpu-operator", None) is None
