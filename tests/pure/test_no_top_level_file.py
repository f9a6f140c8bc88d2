"""A node with no top-level containerd config file (issue #39): containerd runs on its
built-in defaults there, and gpuplane plans from that, writing a new top-level file.

In a stack, `baselineFiles: {/etc/containerd/config.toml: null}` (or `~`) says the node
has no such file; `gpuplane nodes capture` writes that for a node without one."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from gpuplane.agent.script import agent_plan
from gpuplane.cli.main import main
from gpuplane.containerd.effective import effective_config
from gpuplane.containerd.files import MemoryFiles
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.distros.profiles import Distro, profile
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "/etc/containerd/config.toml"
LINES = ("1.6", "1.7", "2.0", "2.1", "2.2")


def defaults(line: str) -> dict:
    version = ContainerdVersion.parse(line)
    return effective_config(CONFIG, MemoryFiles({}), version, missing_ok=True).to_dict()


@pytest.mark.parametrize("line", LINES)
def test_a_file_holding_only_the_native_version_is_the_defaults(line: str) -> None:
    """What the planner starts from on a node without a file: the model agrees that
    `version = 2` (1.x) / `version = 3` (2.x) alone is containerd's built-in defaults
    (tests/real/test_no_top_level_file_dump.py holds it against each line's `config dump`)."""
    version = ContainerdVersion.parse(line)
    seed = f"version = {3 if line.startswith('2.') else 2}\n"
    assert effective_config(CONFIG, MemoryFiles({CONFIG: seed}), version).to_dict() == \
        defaults(line)


@pytest.mark.parametrize("line", LINES)
def test_kubeadm_without_a_top_level_file_gets_a_new_one(line: str) -> None:
    version = ContainerdVersion.parse(line)
    plan = plan_node(profile(Distro.KUBEADM), version,
                     PlanOptions(toolkit=ToolkitMode.HOST), current={})
    assert not [f for f in plan.findings if f.severity == "error"], plan.findings
    top = plan.files[CONFIG]
    assert f"version = {3 if line.startswith('2.') else 2}" in top
    assert "/etc/containerd/conf.d/*.toml" in top
    assert "/etc/containerd/conf.d/50-gpuplane.toml" in plan.files
    # Planned from "no file": the agent refuses a node where one has appeared since.
    assert plan.bases[CONFIG] is None
    assert plan.baseline == {}
    assert plan.before.to_dict() == defaults(line)
    assert "nvidia" in plan.written.runtimes and plan.restarts
    assert agent_plan(plan).bases[CONFIG] is None


def test_nothing_to_add_writes_no_file_and_needs_no_restart() -> None:
    plan = plan_node(profile(Distro.KUBEADM), ContainerdVersion.parse("2.1"),
                     PlanOptions(toolkit=ToolkitMode.NONE), current={})
    assert plan.files == {} and not plan.restarts
    assert plan.before.to_dict() == plan.written.to_dict() == defaults("2.1")


@pytest.mark.parametrize("systemd", [None, True])
@pytest.mark.parametrize("toolkit", ["1.17.8", "newest"])
@pytest.mark.parametrize("line", ["1.7", "2.1"])
def test_operator_toolkit_sees_gpuplanes_new_file(line: str, toolkit: str,
                                                  systemd: bool | None) -> None:
    version = ContainerdVersion.parse(line)
    plan = plan_node(profile(Distro.KUBEADM), version,
                     PlanOptions(toolkit=ToolkitMode.OPERATOR, systemd_cgroup=systemd,
                                 **({"toolkit_version": toolkit} if toolkit != "newest"
                                    else {})),
                     current={})
    errors = [f for f in plan.findings if f.severity == "error"]
    assert not errors, errors
    if toolkit == "1.17.8" and line.startswith("2."):
        # Toolkit 1.17.8 writes back 2.x's `config dump` there: version 3, runc's built-in
        # table folded in (predicted, no longer refused).
        written = tomllib.loads(plan.toolkit_files[CONFIG])
        assert written["version"] == 3
        runc = written["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
        assert runc["runc"]["sandboxer"] == "podsandbox" and "nvidia" in runc
    assert CONFIG in plan.files and plan.bases[CONFIG] is None
    assert ("SystemdCgroup = true" in plan.files[CONFIG]) == bool(systemd)
    assert plan.toolkit_files, "the modelled toolkit writes its part"
    assert "nvidia" in plan.effective.runtimes and "runc" in plan.effective.runtimes
    assert plan.restarts == bool(systemd)


def test_template_distros_refuse_with_the_alternative() -> None:
    """RKE2 renders its config.toml at every start: no such file means it never started,
    and the refusal says what plans instead."""
    from gpuplane.containerd.errors import ConfigError

    with pytest.raises(ConfigError, match=r"file not found: RKE2 renders it from its "
                       r"template at every start.*plan from gpuplane's model"):
        plan_node(profile(Distro.RKE2), ContainerdVersion.parse("2.1"),
                  PlanOptions(toolkit=ToolkitMode.HOST), current={})


# The stack spelling: a node path mapped to null.

STACK = """\
config:
  gpuplane:cluster:
    distro: DISTRO
    kubernetesVersion: "1.31.4"
    containerdVersion: "LINE"
    kubeletCgroupDriver: systemd
    baselineFiles:
      PATH: VALUE
  gpuplane:ssh: {user: ubuntu, sudo: true}
  gpuplane:sshPrivateKey: {secure: v1:x}
  gpuplane:nodes:
    - {name: a1, host: 10.0.0.1, gpus: 8}
  gpuplane:runtime: {systemdCgroup: true}
  gpuplane:gpuOperator: {chartVersion: v25.10.1}
"""


def project(tmp_path: Path, value: str, distro: str = "kubeadm", line: str = "2.1") -> Path:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.t.yaml").write_text(
        STACK.replace("VALUE", value).replace("DISTRO", distro)
        .replace("PATH", profile(distro).config_path).replace("LINE", line))
    return tmp_path / "stacks"


def plan(capsys: pytest.CaptureFixture[str], stacks: Path) -> tuple[int, dict | None, str]:
    code = main(["plan", "--stack", "t", "--stacks-dir", str(stacks), "--format", "json"])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code != 2 else None), out.err


@pytest.mark.parametrize("spelling", ["null", "~"])
def test_a_path_mapped_to_null_is_planned_as_absent(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, spelling: str) -> None:
    code, report, err = plan(capsys, project(tmp_path, spelling))
    assert code == 0 and report is not None, err
    (a1,) = report["nodes"]
    assert a1["baselineFiles"] == {CONFIG: None}
    assert a1["effectiveRuntimes"]["asFound"] == defaults("2.1")
    assert 'version = 3' in a1["files"][CONFIG] and a1["restart"]
    code = main(["plan", "--stack", "t", "--stacks-dir", str(tmp_path / "stacks")])
    assert code == 0 and f"a1: captured {CONFIG} absent (null)" in capsys.readouterr().out
    # The node command tells the agent the top-level file was planned absent.
    stdin = next(r["inputs"]["stdin"] for r in report["resources"]
                 if r["name"] == "containerd-a1")
    assert f"absent {CONFIG}" in stdin


def test_a_bad_value_names_the_stack_key(capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    code, _, err = plan(capsys, project(tmp_path, "5"))
    assert code == 2 and "gpuplane:cluster.baselineFiles" in err
    assert "null" in err, err   # says how to spell "absent"


def test_a_template_distro_refuses_an_absent_top_level_file_naming_the_alternative(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = plan(capsys, project(tmp_path, "null", distro="rke2", line="1.7"))
    assert code == 2 and "gpuplane:cluster.baselineFiles" in err, err
    assert "/var/lib/rancher/rke2/agent/etc/containerd/config.toml" in err
    assert "renders" in err and "without baselineFiles" in err
