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
    """The stack with that node access; SSH settings only where it is ssh."""
    text = STACK.replace("{ACCESS}", access).replace("{KEY}", key if access == "ssh" else "")
    if access != "ssh":
        text = text.replace("  gpuplane:ssh: {user: ubuntu, sudo: true}\n", "")
    (folder / "Pulumi.dev.yaml").write_text(text)


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
    stack(project, "pod", key="")   # valid as it is; the program turns it to ssh
    (project / "__main__.py").write_text(textwrap.dedent("""
        import pulumi
        from gpuplane import GpuCluster, GpuClusterArgs, parse_stack_config
        cfg = {k: pulumi.Config("gpuplane").get_object(k) for k in
               ("cluster", "nodes", "gpuOperator")}
        cfg["cluster"]["nodeAccess"] = "ssh"
        cfg["sshPrivateKey"] = "unused"
        GpuCluster("gpu", GpuClusterArgs(config=parse_stack_config(cfg)))
    """))
    code, _, err = plan(capsys)
    assert code == 2 and "Traceback" not in err, err
    assert "gpuplane:sshPrivateKey" in err and "pulumi config set --secret" in err


# ---- keys without a namespace, read as the Pulumi CLI reads them -----------------------

BARE_STACK = """\
config:
  gpuplane:cluster:
    distro: kubeadm
    kubernetesVersion: "1.31.4"
    containerdVersion: "1.7"
    nodeAccess: pod
  gpuplane:nodes:
    - {name: n1, gpus: 8}
    - {name: n2, gpus: 8}
    - {name: n3, gpus: 8}
    - {name: n4, gpus: 8}
  gpuplane:gpuOperator: {chartVersion: v25.10.1}
  rollout:
    canary: true
    maxUnavailable: 3
"""


def bare_project(tmp_path: Path, name: str, extra: str = "") -> Path:
    (tmp_path / "Pulumi.yaml").write_text(f"name: {name}\nruntime: python\n")
    (tmp_path / "__main__.py").write_text(textwrap.dedent(DOCS_PROGRAM))
    (tmp_path / "Pulumi.dev.yaml").write_text(BARE_STACK + extra)
    return tmp_path


def test_a_bare_key_in_a_project_named_gpuplane_is_gpuplanes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`rollout:` in a project named gpuplane is `gpuplane:rollout` to the Pulumi CLI
    (stackConfigNamespacedWithProject, sdk/go/common/workspace/loaders.go@v3.260.0)."""
    folder = bare_project(tmp_path, "gpuplane")
    code = main(["plan", "--stack", "dev", "--format", "json", "--project", str(folder)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert json.loads(out.out)["batches"] == [["n1"], ["n2", "n3", "n4"]]


def test_a_bare_unknown_key_in_a_project_named_gpuplane_is_an_error_at_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = bare_project(tmp_path, "gpuplane", "  rolout: {canary: false}\n")
    code = main(["plan", "--stack", "dev", "--format", "json", "--project", str(folder)])
    err = capsys.readouterr().err
    line = BARE_STACK.count("\n") + 1
    assert code == 2 and f"Pulumi.dev.yaml:{line}: gpuplane:rolout: unknown key" in err, err


def test_a_bare_gpuplane_key_in_another_project_is_warned_about(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Pulumi gives `rollout:` to the project `infra` (`infra:rollout`), not to gpuplane:
    the plan says so with the line and the fix instead of planning batches of 1 in
    silence; the project's own keys that gpuplane does not know are not warned about."""
    folder = bare_project(tmp_path, "infra", "  replicas: 3\n")
    code = main(["plan", "--stack", "dev", "--format", "json", "--project", str(folder)])
    out = capsys.readouterr()
    assert code == 0, out.err
    line = BARE_STACK.index("  rollout:")
    line = BARE_STACK[:line].count("\n") + 1
    assert (f"Pulumi.dev.yaml:{line}: `rollout` has no namespace, so Pulumi reads it as "
            "`infra:rollout`") in out.err
    assert "fix: write `gpuplane:rollout`" in out.err and "replicas" not in out.err
    assert json.loads(out.out)["batches"] == [["n1"], ["n2"], ["n3"], ["n4"]]


# ---- blocks the configuration turns off: errors, never dropped in silence ---------------

@pytest.mark.parametrize(("extra", "key", "says"), [
    ("  gpuplane:hami: {deviceSplitCount: 4, namespace: hami}\n", "gpuplane:hami",
     "deviceSplitCount, namespace set, but HAMi is not installed"),
    ("  gpuplane:nodePod: {image: 'busybox:1.37'}\n", "gpuplane:nodePod",
     "image set, but cluster.nodeAccess is ssh"),
])
def test_a_block_the_config_turns_off_is_an_error_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, key: str,
        says: str) -> None:
    stack = BARE_STACK.replace("  rollout:\n    canary: true\n    maxUnavailable: 3\n", "")
    stack = stack.replace("nodeAccess: pod", "nodeAccess: ssh").replace(
        "{name: n1, gpus: 8}", "{name: n1, host: h1, gpus: 8}")
    stack = stack.replace("{name: n2, gpus: 8}", "{name: n2, host: h2, gpus: 8}").replace(
        "{name: n3, gpus: 8}", "{name: n3, host: h3, gpus: 8}").replace(
        "{name: n4, gpus: 8}", "{name: n4, host: h4, gpus: 8}")
    (tmp_path / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    (tmp_path / "__main__.py").write_text(textwrap.dedent(DOCS_PROGRAM))
    (tmp_path / "Pulumi.dev.yaml").write_text(stack + KEY + extra)
    code = main(["plan", "--stack", "dev", "--project", str(tmp_path)])
    err = capsys.readouterr().err
    line = (stack + KEY).count("\n") + 1
    assert code == 2 and f"Pulumi.dev.yaml:{line}: {key}: {says}" in err, err
    assert f"remove {key}" in err


def test_time_slicing_settings_beside_hami_are_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not only `replicas`: a renamed resource or ConfigMap would be dropped as well."""
    from support.stack_cases import config_of

    from gpuplane.config import StackConfigError, parse_stack_config

    cfg = {k.removeprefix("gpuplane:"): v for k, v in config_of("hami-shared").items()}
    cfg["timeSlicing"] = {"renameByDefault": True}
    with pytest.raises(StackConfigError) as err:
        parse_stack_config(cfg)
    assert [p.key for p in err.value.problems] == ["gpuplane:timeSlicing"]


def test_under_pulumi_a_bad_captured_file_is_one_clean_error(tmp_path: Path) -> None:
    """Outside the offline plan (`pulumi up` runs one's own program): a `baselineFiles`
    entry that cannot be read is a `pulumi.RunError` naming the key and the fix, which
    Pulumi prints without a traceback, and nothing is registered."""
    import pulumi

    from gpuplane import GpuCluster, GpuClusterArgs
    from gpuplane.cli.plan.engine import run_program
    from gpuplane.config import parse_stack_config

    cfg = parse_stack_config({
        "cluster": {"distro": "kubeadm", "kubernetesVersion": "1.31.4",
                    "containerdVersion": "1.7", "nodeAccess": "pod",
                    "baselineFiles": {CONFIG: "captured/missing.toml"}},
        "nodes": [{"name": "n1", "gpus": 8}],
        "gpuOperator": {"chartVersion": "v25.10.1"}})
    with pytest.raises(pulumi.RunError) as err:
        run_program(lambda: GpuCluster("gpu", GpuClusterArgs(config=cfg)), project="infra",
                    stack="dev", config={}, secret_keys=[], root_directory=tmp_path)
    assert "gpuplane:cluster.baselineFiles" in str(err.value)
    assert "cannot read captured/missing.toml" in str(err.value)


@pytest.mark.parametrize(("access", "extra", "key"), [
    ("pod", {"ssh": {"user": "ubuntu"}}, "gpuplane:ssh"),
    ("pod", {"sshPrivateKey": "<secret>"}, "gpuplane:sshPrivateKey"),
    ("none", {"rollout": {"maxUnavailable": 2}}, "gpuplane:rollout"),
])
def test_settings_the_node_access_never_reads_are_errors(
        access: str, extra: dict[str, object], key: str) -> None:
    from gpuplane.config import StackConfigError, parse_stack_config

    cfg = {"cluster": {"distro": "kubeadm", "kubernetesVersion": "1.31.4",
                       "containerdVersion": "1.7", "nodeAccess": access},
           "nodes": [{"name": "n1", "gpus": 8}],
           "gpuOperator": {"chartVersion": "v25.10.1"}}
    parse_stack_config(cfg)   # valid without them
    with pytest.raises(StackConfigError) as err:
        parse_stack_config({**cfg, **extra})
    assert [p.key for p in err.value.problems] == [key]
    assert f"remove {key}" in err.value.problems[0].message or "config rm" in str(err.value)


def test_own_program_checks_a_local_chart_as_the_bundled_one_does(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack(project, "pod")
    text = (project / "Pulumi.dev.yaml").read_text().replace(
        "{chartVersion: v25.10.1}", "{chartVersion: v25.10.1, chart: ./charts/gpu-operator}")
    (project / "Pulumi.dev.yaml").write_text(text)
    code, _, err = plan(capsys)
    assert code == 2 and "Traceback" not in err, err
    assert "gpuplane:gpuOperator.chart" in err and "charts/gpu-operator" in err, err
