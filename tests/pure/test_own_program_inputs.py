"""A user's own program written as docs/own-program.md shows it
(`GpuCluster("gpu", GpuClusterArgs(config=config_from_pulumi()))`) plans what the bundled
program plans from the same stack (#50): the captured node files (`baselineFiles`), the
stack's SSH key, and the "planned from" line made from what was planned."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuplane.cli.main import main

CONFIG = "/etc/containerd/config.toml"
DOCS_PROGRAM = """
import pulumi_kubernetes as k8s
from gpuplane import GpuCluster, GpuClusterArgs
from gpuplane.config import config_from_pulumi

k8s.core.v1.Namespace("apps", metadata={"name": "apps"})
cluster = GpuCluster("gpu", GpuClusterArgs(config=config_from_pulumi()))   # gpuplane:* keys
"""
CAPTURED = """\
# captured from h100-01
version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
"""
STACK = """\
config:
  gpuplane:cluster:
    distro: kubeadm
    kubernetesVersion: "1.31.4"
    containerdVersion: "1.7"
    nodeAccess: {ACCESS}
    baselineFiles:
      /etc/containerd/config.toml: captured/dev/config.toml
  gpuplane:ssh: {user: ubuntu, sudo: true}
{KEY}  gpuplane:nodes:
    - {name: h100-01, host: 10.0.0.1, gpus: 8}
    - {name: h100-02, host: 10.0.0.2, gpus: 8}
  gpuplane:gpuOperator: {chartVersion: v25.10.1}
"""
KEY = "  gpuplane:sshPrivateKey: {secure: v1:x}\n"


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "infra"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    (folder / "__main__.py").write_text(textwrap.dedent(DOCS_PROGRAM))
    (folder / "captured" / "dev").mkdir(parents=True)
    (folder / "captured" / "dev" / "config.toml").write_text(CAPTURED)
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield folder
    finally:
        os.chdir(before)


def stack(folder: Path, access: str, key: str = KEY) -> None:
    (folder / "Pulumi.dev.yaml").write_text(
        STACK.replace("{ACCESS}", access).replace("{KEY}", key))


def plan(capsys: pytest.CaptureFixture[str], fmt: str = "json") -> tuple[int, str, str]:
    code = main(["plan", "--stack", "dev", "--format", fmt])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_own_program_plans_from_the_captured_files(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack(project, "pod")
    code, out, err = plan(capsys)
    assert code == 0, err
    report = json.loads(out)
    for node in report["nodes"]:
        written = node["files"][CONFIG]
        assert "# captured from h100-01" in written and "pause:3.10" in written
        assert node["baselineFiles"] == {CONFIG: "captured/dev/config.toml"}
        assert node["effectiveRuntimes"]["source"]["kind"] == "captured"


def test_own_program_with_its_own_baselines_is_not_said_to_use_the_stacks(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`baselines=` given by the program wins, and the plan says so, not the stack's."""
    (project / "__main__.py").write_text(textwrap.dedent(DOCS_PROGRAM).replace(
        "config=config_from_pulumi()",
        "config=config_from_pulumi(), baselines={}"))
    stack(project, "pod")
    code, out, err = plan(capsys, "text")
    assert code == 0, err
    assert "captured/dev/config.toml" not in out
    assert "planned from: h100-01, h100-02: gpuplane's kubeadm model" in out


def test_own_program_on_an_ssh_stack_uses_the_stacks_key(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack(project, "ssh")
    code, out, err = plan(capsys)
    assert code == 0, err
    report = json.loads(out)
    assert report["nodes"][0]["files"][CONFIG]
    assert any(r["type"] == "command:remote:Command" for r in report["resources"])


def test_a_missing_ssh_key_names_the_key_and_the_fix(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The stack check finds it before the program runs; a program that builds its
    config itself meets the component's own check, which names the key as well."""
    stack(project, "ssh", key="")
    code, _, err = plan(capsys)
    assert code == 2 and "gpuplane:sshPrivateKey" in err and "Traceback" not in err
    (project / "__main__.py").write_text(textwrap.dedent("""
        import pulumi
        from gpuplane import GpuCluster, GpuClusterArgs, parse_stack_config
        cfg = {k: pulumi.Config("gpuplane").get_object(k) for k in
               ("cluster", "ssh", "nodes", "gpuOperator")}
        cfg["sshPrivateKey"] = "unused"
        GpuCluster("gpu", GpuClusterArgs(config=parse_stack_config(cfg)))
    """))
    code, _, err = plan(capsys)
    assert code == 2 and "Traceback" not in err, err
    assert "gpuplane:sshPrivateKey" in err and "pulumi config set --secret" in err
