"""Air-gapped chart sources (`gpuOperator.chart`, `hami.chart`) and image mirrors
(`imageMirror`): validated like every other key (the key, file:line and the fix, never a
traceback), handed to `helm.v3.Release` as Helm takes them, shown by `gpuplane plan`, and
still recognised by the policies."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
from support import charts

from gpuplane.cli.main import main
from gpuplane.cli.plan.run import plan_stack
from gpuplane.config import StackConfigError, parse_stack_config

ROOT = Path(__file__).resolve().parents[2]
STACKS = ROOT / "stacks"
AIRGAP = ROOT / "tests" / "data" / "airgap"


def _config(**extra: Any) -> dict[str, Any]:
    return {"cluster": {"kubernetesVersion": "1.31.4", "containerdVersion": "1.7",
                        "nodeAccess": "none"},
            "gpuOperator": {"chartVersion": "v25.10.1"}, **extra}


def _problems(values: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(StackConfigError) as exc:
        parse_stack_config(values)
    return dict(exc.value.problems)


# ------------------------------------------------------------------ the key's forms

@pytest.mark.parametrize(("chart", "kind"), [
    (None, "upstream"),
    ("charts/gpu-operator", "path"),
    ("/srv/charts/gpu-operator-v25.10.1.tgz", "path"),
    ("https://charts.airgap.internal/nvidia", "http"),
    ("http://10.0.0.5:8080/charts", "http"),
    ("oci://registry.airgap.internal/charts/gpu-operator", "oci"),
    ("oci://registry.airgap.internal:5000/gpu-operator:v25.10.1", "oci"),
])
def test_chart_source_forms(chart: str | None, kind: str) -> None:
    op = {"chartVersion": "v25.10.1", **({"chart": chart} if chart else {})}
    cfg = parse_stack_config(_config(gpuOperator=op))
    assert cfg.gpu_operator.chart_source.kind == kind


@pytest.mark.parametrize(("key", "value", "message"), [
    ("chart", "ftp://mirror/charts", "ftp:// is not a chart source"),
    ("chart", "https://", "has no host"),
    ("chart", "oci://registry.airgap.internal/charts",
     "must end with the chart's name: oci://registry.airgap.internal/charts/gpu-operator"),
    ("chart", "oci://registry.airgap.internal/charts/gpu-operator:v25.3.0",
     "tagged v25.3.0 but chartVersion is v25.10.1"),
    ("chart", "", "empty"),
    ("imageMirror", "https://registry.airgap.internal", "without the scheme"),
    ("imageMirror", "registry.airgap.internal/gpu:v1", "no tag"),
    ("imageMirror", "Registry Airgap", "not a registry"),
])
def test_bad_operator_sources_name_the_key_and_the_fix(key: str, value: str,
                                                        message: str) -> None:
    got = _problems(_config(gpuOperator={"chartVersion": "v25.10.1", key: value}))
    text = got.get(f"gpuplane:gpuOperator.{key}", "")
    assert message in text, got
    assert "fix:" in text, got


def test_bad_hami_source_names_the_hami_chart() -> None:
    got = _problems(_config(devicePlugin="hami",
                            hami={"chartVersion": "2.10.0", "chart": "oci://r.internal/x"}))
    assert "oci://r.internal/x/hami" in got["gpuplane:hami.chart"], got


# ------------------------------------------------------------------ local charts

def _chart_dir(where: Path, name: str = "gpu-operator", version: str = "v25.10.1") -> Path:
    where.mkdir(parents=True)
    (where / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: {version}\n")
    (where / "values.yaml").write_text("{}\n")
    return where


def _tgz(chart: Path, out: Path) -> Path:
    with tarfile.open(out, "w:gz") as tar:
        tar.add(chart, arcname=chart.name)
    return out


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project root (Pulumi.yaml) with a copy of the bundled stacks in stacks/."""
    (tmp_path / "Pulumi.yaml").write_text("name: gpuplane\n")
    shutil.copytree(STACKS, tmp_path / "stacks")
    return tmp_path


def _set(project: Path, section: str, lines: str, name: str = "hami-shared") -> Path:
    """Add `lines` (already indented) right under `gpuplane:<section>:`."""
    path = project / "stacks" / f"Pulumi.{name}.yaml"
    text = path.read_text()
    head = f"  gpuplane:{section}:\n"
    assert head in text
    path.write_text(text.replace(head, head + lines, 1))
    return path


def _line(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def _plan(capsys: pytest.CaptureFixture[str], project: Path, name: str = "hami-shared",
          *extra: str) -> tuple[int, str, str]:
    code = main(["plan", "--stack", name, "--stacks-dir", str(project / "stacks"), *extra])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: None, "no such file or directory"),
    (lambda p: p.mkdir(parents=True), "no Chart.yaml: not a Helm chart"),
    (lambda p: _chart_dir(p, name="hami"), "is the chart hami, not gpu-operator"),
    (lambda p: _chart_dir(p, version="v1.0.0-devel"),
     "is version v1.0.0-devel but gpuOperator.chartVersion is v25.10.1"),
    (lambda p: (p.parent.mkdir(parents=True), p.write_text("not a tarball")),
     "not a chart archive"),
])
def test_bad_local_chart_names_file_line_and_fix(capsys: pytest.CaptureFixture[str],
                                                 project: Path, make: Any,
                                                 message: str) -> None:
    target = project / "charts" / "gpu-operator"
    make(target)
    path = _set(project, "gpuOperator", "    chart: charts/gpu-operator\n")
    code, _, err = _plan(capsys, project)
    assert code == 2, err
    assert "Traceback" not in err
    assert (f"Pulumi.hami-shared.yaml:{_line(path, 'chart: charts')}: "
            "gpuplane:gpuOperator.chart: charts/gpu-operator") in err, err
    assert message in err and "fix:" in err, err


def test_wrong_version_names_the_packaging_fix(capsys: pytest.CaptureFixture[str],
                                               project: Path) -> None:
    _chart_dir(project / "charts" / "gpu-operator", version="v1.0.0-devel")
    _set(project, "gpuOperator", "    chart: charts/gpu-operator\n")
    _, _, err = _plan(capsys, project)
    assert "helm package --version v25.10.1 --app-version v25.10.1" in err, err


@pytest.mark.parametrize("form", ["dir", "tgz", "absolute"])
def test_good_local_chart_goes_to_the_release(capsys: pytest.CaptureFixture[str],
                                              project: Path, form: str) -> None:
    chart = _chart_dir(project / "charts" / "gpu-operator")
    where = {"dir": "charts/gpu-operator",
             "tgz": "charts/gpu-operator-v25.10.1.tgz",
             "absolute": str(chart)}[form]
    if form == "tgz":
        _tgz(chart, project / where)
        shutil.rmtree(chart)
    _set(project, "gpuOperator", f"    chart: {where}\n")
    plan = plan_stack("hami-shared", project / "stacks")
    release = plan["helm"]["gpu-operator"]
    assert (release["chart"], release["repo"], release["source"]) == (where, None, "path")
    assert release["version"] == "v25.10.1"
    assert plan["findings"] == []


def test_http_mirror_and_oci_go_to_the_release(project: Path) -> None:
    _set(project, "gpuOperator", "    chart: https://charts.airgap.internal/nvidia\n")
    _set(project, "hami", "    chart: oci://registry.airgap.internal/charts/hami:2.10.0\n")
    plan = plan_stack("hami-shared", project / "stacks")
    op, hami = plan["helm"]["gpu-operator"], plan["helm"]["hami"]
    assert (op["chart"], op["repo"], op["source"]) == (
        "gpu-operator", "https://charts.airgap.internal/nvidia", "http")
    # The tag agreed with chartVersion; Helm takes the version from `version`.
    assert (hami["chart"], hami["repo"], hami["source"], hami["version"]) == (
        "oci://registry.airgap.internal/charts/hami", None, "oci", "2.10.0")
    assert plan["findings"] == []


def test_unset_is_todays_upstream_repository() -> None:
    plan = plan_stack("hami-shared", STACKS)
    op, hami = plan["helm"]["gpu-operator"], plan["helm"]["hami"]
    assert (op["chart"], op["repo"], op["source"], op["imageMirror"]) == (
        "gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "upstream", None)
    assert (hami["chart"], hami["repo"], hami["source"]) == (
        "hami", "https://project-hami.github.io/HAMi/", "upstream")


# ------------------------------------------------------------------ the real charts

def _real_stack() -> Path:
    """tests/data/airgap, whose HAMi chart is the upstream one in ../shared/charts."""
    charts.chart_dirs("hami")   # skips (fails under GPUPLANE_REQUIRE_REAL) without them
    if not (ROOT.parent / "shared" / "charts" / "hami" / "2.10.0").is_dir():
        from support import oracle
        oracle.unavailable("the airgap stack installs ../shared/charts/hami/2.10.0",
                           "lay the shared test data beside the checkout")
    return AIRGAP


def test_airgap_stack_plans_clean_from_shared_charts(capsys: pytest.CaptureFixture[str]) -> None:
    stacks = _real_stack()
    plan = plan_stack("airgap", stacks)
    assert plan["findings"] == [] and plan["verdict"] == "ok"
    hami = plan["helm"]["hami"]
    assert (hami["chart"], hami["source"], hami["repo"]) == (
        "../shared/charts/hami/2.10.0", "path", None)
    op = plan["helm"]["gpu-operator"]
    assert (op["chart"], op["source"]) == ("oci://registry.airgap.internal/charts/gpu-operator",
                                           "oci")
    assert op["imageMirror"] == hami["imageMirror"] == "registry.airgap.internal"
    assert hami["values"]["scheduler"]["kubeScheduler"]["image"]["registry"] == \
        "registry.airgap.internal"
    # The chart path is one Helm loads (relative to the project root, as Pulumi runs it).
    folder = ROOT / hami["chart"]
    assert charts.render(folder, hami["values"])

    code = main(["plan", "--stack", "airgap", "--stacks-dir", str(stacks)])
    out = capsys.readouterr().out
    assert code == 0
    assert "chart ../shared/charts/hami/2.10.0 2.10.0 (local chart)" in out
    assert "images from registry.airgap.internal" in out
    code = main(["plan", "--stack", "airgap", "--stacks-dir", str(stacks), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert data["helm"]["hami"]["source"] == "path"


def test_shared_operator_chart_is_refused_by_its_devel_version(
        capsys: pytest.CaptureFixture[str], project: Path) -> None:
    """The operator chart at its tag in the source tree says v1.0.0-devel: installing it
    for chartVersion v25.10.1 is refused with the packaging fix (../shared/charts/README)."""
    folder = charts.chart_dirs("gpu-operator")["v25.10.1"]
    rel = os.path.relpath(folder, project)
    _set(project, "gpuOperator", f"    chart: {rel}\n")
    code, _, err = _plan(capsys, project)
    assert code == 2 and "is version v1.0.0-devel" in err and "helm package" in err, err


def test_shared_operator_chart_packaged_at_its_version_plans(project: Path) -> None:
    """The fix that refusal names, done with Helm's own `package`: the .tgz is the
    gpu-operator chart at v25.10.1, the plan takes it, and Helm renders it."""
    folder = charts.chart_dirs("gpu-operator")["v25.10.1"]
    archive = Path(charts.helm().package(folder, destination=project / "charts",
                                         version="v25.10.1", app_version="v25.10.1"))
    _set(project, "gpuOperator", f"    chart: {archive.relative_to(project)}\n")
    plan = plan_stack("hami-shared", project / "stacks")
    release = plan["helm"]["gpu-operator"]
    assert (release["chart"], release["source"]) == ("charts/gpu-operator-v25.10.1.tgz", "path")
    assert plan["findings"] == []
    assert charts.render(archive, release["values"])


def _findings(project: Path) -> list[tuple[str, str]]:
    plan = plan_stack("hami-shared", project / "stacks")
    return sorted((f["id"], f["message"]) for f in plan["findings"])


def test_policies_recognise_a_local_chart(project: Path) -> None:
    """The rulebook judges a release installed from a path as it does the upstream one:
    HAMi's scheduler tag against the cluster (FM13)."""
    folder = charts.chart_dirs("hami")["2.10.0"]
    _set(project, "hami", "    schedulerImageTag: v1.20.0\n")
    upstream = _findings(project)
    assert "FM13" in {rule for rule, _ in upstream}
    _set(project, "hami", f"    chart: {folder}\n")
    assert _findings(project) == upstream


def test_policies_recognise_an_oci_and_a_mirrored_operator_chart(project: Path) -> None:
    """The operator's values are judged from an OCI or HTTP mirror source as from NVIDIA's
    repository (a toolkit env that points at another containerd config)."""
    _set(project, "gpuOperator", "    values: {toolkit: {env: [{name: CONTAINERD_CONFIG, "
         "value: /etc/nope/config.toml}]}}\n")
    upstream = _findings(project)
    assert upstream
    path = _set(project, "gpuOperator",
                "    chart: oci://registry.airgap.internal/charts/gpu-operator\n")
    assert _findings(project) == upstream
    path.write_text(path.read_text().replace(
        "oci://registry.airgap.internal/charts/gpu-operator", "https://charts.airgap.internal"))
    assert _findings(project) == upstream


# ------------------------------------------------------------------ the components

def _releases(project: Path) -> dict[str, dict[str, Any]]:
    """The Helm Releases the program registers under the mock engine: {name: inputs}."""
    from gpuplane.cli.plan.engine import run_program
    from gpuplane.config.stackfile import load_stack_file
    from gpuplane.stack import program

    stack = load_stack_file("hami-shared", project / "stacks")
    stack.config()
    _, resources = run_program(program.run, project="gpuplane", stack="hami-shared",
                               config=stack.pulumi_config(), secret_keys=stack.secret_keys,
                               root_directory=project)
    return {r.inputs["name"]: r.inputs for r in resources
            if r.type == "kubernetes:helm.sh/v3:Release"}


@pytest.mark.parametrize("form", ["upstream", "path", "http", "oci"])
def test_components_hand_each_source_to_the_release(project: Path, form: str) -> None:
    _chart_dir(project / "charts" / "gpu-operator")
    _chart_dir(project / "charts" / "hami", name="hami", version="2.10.0")
    op, hami = {
        "upstream": ("", ""),
        "path": ("charts/gpu-operator", "charts/hami"),
        "http": ("https://charts.airgap.internal/nvidia", "https://charts.airgap.internal/hami"),
        "oci": ("oci://registry.airgap.internal/c/gpu-operator:v25.10.1",
                "oci://registry.airgap.internal/c/hami"),
    }[form]
    if op:
        _set(project, "gpuOperator", f"    chart: {op}\n")
        _set(project, "hami", f"    chart: {hami}\n")
    got = {name: (inputs["chart"], (inputs.get("repositoryOpts") or {}).get("repo"),
                  inputs["version"])
           for name, inputs in _releases(project).items()}
    assert got == {
        "upstream": {"gpu-operator": ("gpu-operator", "https://helm.ngc.nvidia.com/nvidia",
                                      "v25.10.1"),
                     "hami": ("hami", "https://project-hami.github.io/HAMi/", "2.10.0")},
        "path": {"gpu-operator": ("charts/gpu-operator", None, "v25.10.1"),
                 "hami": ("charts/hami", None, "2.10.0")},
        "http": {"gpu-operator": ("gpu-operator", "https://charts.airgap.internal/nvidia",
                                  "v25.10.1"),
                 "hami": ("hami", "https://charts.airgap.internal/hami", "2.10.0")},
        "oci": {"gpu-operator": ("oci://registry.airgap.internal/c/gpu-operator", None,
                                 "v25.10.1"),
                "hami": ("oci://registry.airgap.internal/c/hami", None, "2.10.0")},
    }[form]


def test_skip_await_reaches_each_release(project: Path) -> None:
    """`skipAwait` (clusters whose nodes join later; the engine tests' API server has no
    kubelet) is the Release's own `skipAwait`; unset, Helm waits as before."""
    assert {n: bool(i.get("skipAwait")) for n, i in _releases(project).items()} == {
        "gpu-operator": False, "hami": False}
    _set(project, "gpuOperator", "    skipAwait: true\n")
    _set(project, "hami", "    skipAwait: true\n")
    assert {n: i.get("skipAwait") for n, i in _releases(project).items()} == {
        "gpu-operator": True, "hami": True}
