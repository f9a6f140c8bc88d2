"""`gpuplane policy-pack config` (#40): Pulumi gives each policy only its own config, so
the cluster facts a foreign stack is judged by are written under every policy from one
set, checked against the pack's own schema, keeping the levels of a config it extends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_foreign_stacks import FACTS, ids, release

from gpuplane.cli.main import main
from gpuplane.cli.plan.project import load_project
from gpuplane.cli.plan.run import plan_stack
from gpuplane.policy.config import load_pack_config
from gpuplane.policy.pack import CONFIG_SCHEMA, policy_names

FLAGS = ["--distro", "kubeadm", "--containerd-version", "1.7", "--driver", "preinstalled",
         "--kubernetes-version", "1.31.0"]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["policy-pack", "config", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_policy_gets_the_same_facts(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    code, out, err = run(capsys, *FLAGS)
    assert code == 0, err
    config = json.loads(out)
    assert config == {name: FACTS for name in policy_names()}
    (tmp_path / "c.json").write_text(out)
    assert load_pack_config(tmp_path / "c.json", policy_names()) == config


def test_the_written_config_judges_a_foreign_release(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    """With the facts spread by the command, the operator's driver on a preinstalled
    driver (FM08) is judged, not held back as advice naming `driver`."""
    out_file = tmp_path / "policy-config.json"
    assert run(capsys, *FLAGS, "--output", str(out_file))[0] == 0
    folder = tmp_path / "infra"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    (folder / "__main__.py").write_text("import pulumi_kubernetes as k8s\n" +
                                        release('{"driver": {"enabled": True}}'))
    (folder / "Pulumi.dev.yaml").write_text("config: {}\n")
    config = load_pack_config(out_file, policy_names())
    report = plan_stack("dev", folder, config, load_project(folder))
    assert "FM08" in ids(report)
    assert not [f for f in report["findings"] if "held back" in f["message"]]


def test_a_base_config_keeps_its_levels(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    base.write_text(json.dumps({
        "gpuplane-fm18": "advisory",
        "gpuplane-fm06-advisory": "disabled",
        "gpuplane-fm11": {"enforcementLevel": "mandatory", "runtimeClass": "gpu"},
    }))
    code, out, err = run(capsys, "--distro", "k3s", "--base", str(base))
    assert code == 0, err
    config = json.loads(out)
    assert config["gpuplane-fm18"] == {"enforcementLevel": "advisory", "distro": "k3s"}
    assert config["gpuplane-fm06-advisory"] == "disabled"    # never runs: no facts
    assert config["gpuplane-fm11"] == {"enforcementLevel": "mandatory",
                                       "runtimeClass": "gpu", "distro": "k3s"}
    assert config["gpuplane-fm01"] == {"distro": "k3s"}


def test_every_bad_fact_is_named_by_its_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--distro", "k3ss", "--containerd-version", "2",
                         "--cdi", "maybe", "--max-gpus-per-node", "-1", "--driver", "foo")
    assert code == 2 and out == "" and "Traceback" not in err
    for said in ("--distro: 'k3ss' is not one of", "--containerd-version: '2' is not a "
                 "version", "--cdi 'maybe': expected true or false",
                 "--max-gpus-per-node: -1 is less than the minimum of 0",
                 "--driver: 'foo' is not one of"):
        assert said in err, err


def test_no_fact_and_a_bad_base_are_refused(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    code, _, err = run(capsys)
    assert code == 2 and "give at least one fact" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "gpuplane-fm99": "mandatory"\n}\n')
    code, _, err = run(capsys, "--distro", "k3s", "--base", str(bad))
    assert code == 2 and f"{bad}:2: gpuplane-fm99: no such policy" in err


def test_the_flags_are_the_packs_schema() -> None:
    """One list of facts: the pack's config schema is what the command's flags set."""
    assert set(CONFIG_SCHEMA.properties) == set(FACTS) | {
        "platform", "nvidiaDefault", "runtimeClass", "devicePlugin", "cdi", "nri", "maxGpusPerNode",
        "containerdBaseDir"}


@pytest.mark.parametrize("version", ["1.10", "3.0"])
def test_a_containerd_line_the_plan_refuses_is_refused_here(
        capsys: pytest.CaptureFixture[str], version: str) -> None:
    """One check for both: `plan` refuses containerd 1.10 (ContainerdVersion.parse), and so
    does the pack's config (its schema's pattern alone takes it)."""
    code, out, err = run(capsys, "--distro", "k3s", "--containerd-version", version)
    assert code == 2 and out == "", out
    assert f"--containerd-version: containerd {version} is not supported" in err, err
