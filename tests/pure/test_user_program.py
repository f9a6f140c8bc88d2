"""`gpuplane plan` in a user's own Pulumi project: its program (Pulumi.yaml's `main`) is
what is planned, with the resources it adds; a program that fails gives its own error;
a GpuCluster refusal in it still gives the rejected report."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.stack_cases import broken_config, config_of, write_stack

from gpuplane.cli.main import main

GPU_DEPLOYMENT = """
k8s.apps.v1.Deployment("trainer", metadata={"name": "trainer", "namespace": "apps"}, spec={
    "selector": {"matchLabels": {"app": "t"}},
    "template": {"metadata": {"labels": {"app": "t"}}, "spec": {
        "runtimeClassName": "nvidia",
        "containers": [{"name": "t", "image": "trainer:1.0",
                        "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}})
"""

WITH_CLUSTER = """
import pulumi_kubernetes as k8s
from gpuplane import GpuCluster, GpuClusterArgs
from gpuplane.config import config_from_pulumi

k8s.core.v1.Namespace("apps", metadata={"name": "apps"})
GpuCluster("gpu", GpuClusterArgs(config=config_from_pulumi()))
""" + GPU_DEPLOYMENT


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """An empty project of the user's own, the working directory of the test."""
    folder = tmp_path / "myproj"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text("name: myproj\nruntime:\n  name: python\n")
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield folder
    finally:
        os.chdir(before)


def program(folder: Path, text: str, where: str = "__main__.py") -> None:
    (folder / where).parent.mkdir(parents=True, exist_ok=True)
    (folder / where).write_text(textwrap.dedent(text))


def plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict | None, str]:
    code = main(["plan", "--stack", "dev", "--format", "json", *args])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if out.out.strip() else None), out.err


def test_the_users_program_is_planned_with_what_it_adds(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program(project, WITH_CLUSTER)
    write_stack(project, "dev", config_of("kind-smoke"))
    code, report, err = plan(capsys)
    assert code == 0, err
    assert report is not None and report["verdict"] == "ok"
    names = {(r["type"], r["name"]) for r in report["resources"]}
    assert {("kubernetes:core/v1:Namespace", "apps"),
            ("kubernetes:apps/v1:Deployment", "trainer"),
            ("gpuplane:index:GpuCluster", "gpu")} <= names
    assert report["cluster"]["distro"] == "kubeadm" and report["config"] is not None
    assert "gpu-operator" in report["helm"]


def test_the_users_workload_is_judged_by_the_pack(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program(project, WITH_CLUSTER.replace('"runtimeClassName": "nvidia",', ""))
    cfg = config_of("kind-smoke")
    # CDI off (chart v25.10 turns it on): under CDI a pod needs no nvidia RuntimeClass
    cfg["gpuplane:gpuOperator"] = {**cfg["gpuplane:gpuOperator"], "cdi": False}
    write_stack(project, "dev", cfg)
    code, report, _ = plan(capsys)
    assert code == 1 and report is not None
    assert {f["id"] for f in report["findings"] if f["severity"] == "error"} == {"FM11"}


def test_a_program_that_raises_gives_its_own_error(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the bundled program was planned instead (`verdict: OK`, exit 0)."""
    program(project, "import helper\n")
    program(project, "x = 1\nraise ValueError('no cluster name given')\n", "helper.py")
    write_stack(project, "dev", config_of("kind-smoke"))
    code, report, err = plan(capsys)
    assert code == 2 and report is None
    assert f"{project / 'helper.py'}:2: the program failed: ValueError: no cluster name " \
           "given" in err
    assert "Traceback" not in err


def test_a_run_error_is_its_message_alone(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program(project, "import pulumi\nraise pulumi.RunError('set myproj:region')\n")
    write_stack(project, "dev", {})
    code, _, err = plan(capsys)
    assert code == 2 and "the program failed: set myproj:region" in err


def test_a_program_without_a_gpu_cluster_is_planned_and_judged(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program(project, "import pulumi_kubernetes as k8s\n" + GPU_DEPLOYMENT.replace(
        '"runtimeClassName": "nvidia",', ""))
    write_stack(project, "dev", {"myproj:region": "eu"})
    code, report, _ = plan(capsys)
    assert report is not None
    assert [r["name"] for r in report["resources"]] == ["trainer"]
    assert report["cluster"]["distro"] is None and report["nodes"] == []
    assert code == 1 and {f["id"] for f in report["findings"]} == {"FM11"}
    main(["plan", "--stack", "dev"])
    text = capsys.readouterr().out
    assert "no GpuCluster in the program" in text and "FM11" in text


def test_a_refusing_gpu_cluster_in_a_users_program_gives_the_rejected_report(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program(project, WITH_CLUSTER)
    write_stack(project, "dev", broken_config("kubeadm-prod/FM07-cgroupfs-kubelet", tmp_path))
    code, report, _ = plan(capsys)
    assert code == 1 and report is not None and report["verdict"] == "rejected"
    assert "FM07" in {f["id"] for f in report["findings"]}
    assert report["withheldResources"]       # what it would have created


def test_project_flag_main_and_stack_config_dir(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "Pulumi.yaml").write_text(
        "name: myproj\nruntime: python\nmain: src/\nstackConfigDir: envs\n")
    program(project, WITH_CLUSTER, "src/__main__.py")
    write_stack(project / "envs", "dev", config_of("kind-smoke"))
    os.chdir(tmp_path)   # elsewhere: the project is named
    code, report, err = plan(capsys, "--project", str(project))
    assert code == 0, err
    assert report is not None and "trainer" in {r["name"] for r in report["resources"]}


@pytest.mark.parametrize(("yaml_text", "expected"), [
    ("name: p\nruntime: nodejs\n", "runtime is 'nodejs'"),
    ("name: p\nruntime: python\nmain: nowhere/\n", "`main: nowhere/` has no program"),
    ("runtime: python\n", "`name` is missing"),
])
def test_a_bad_pulumi_yaml_is_named(project: Path, capsys: pytest.CaptureFixture[str],
                                    yaml_text: str, expected: str) -> None:
    (project / "Pulumi.yaml").write_text(yaml_text)
    program(project, WITH_CLUSTER)
    write_stack(project, "dev", {})
    code, _, err = plan(capsys)
    assert code == 2 and f"{project / 'Pulumi.yaml'}:" in err and expected in err


def test_a_missing_project_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = plan(capsys, "--project", str(tmp_path))
    assert code == 2 and "Pulumi.yaml: no such file" in err
