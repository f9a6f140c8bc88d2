"""No traceback for any input: every bad stack file, captured file and policy config
exits 2 naming file:line and the fix, through the real CLI entry (in-process)."""

from __future__ import annotations

import os
import shutil
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplane.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
STACKS = ROOT / "stacks"


def plan(capsys: pytest.CaptureFixture[str], stacks: Path, name: str,
         *extra: str) -> tuple[int, str]:
    code = main(["plan", "--stack", name, "--stacks-dir", str(stacks), *extra])
    return code, capsys.readouterr().err


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project root (Pulumi.yaml) with a copy of the bundled stacks in stacks/."""
    (tmp_path / "Pulumi.yaml").write_text("name: gpuplane\n")
    shutil.copytree(STACKS, tmp_path / "stacks")
    return tmp_path


def _edit(project: Path, name: str, old: str, new: str) -> Path:
    path = project / "stacks" / f"Pulumi.{name}.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


def _line(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_captured_baseline_that_is_not_toml(capsys: pytest.CaptureFixture[str],
                                            project: Path) -> None:
    (project / "nodefiles").mkdir()
    (project / "nodefiles" / "a100.toml").write_text("version = 2\nthis is [[ not toml\n")
    path = _edit(project, "kubeadm-prod", "    nodeAccess: ssh\n",
                 "    nodeAccess: ssh\n    baselineFiles: "
                 "{/etc/containerd/config.toml: nodefiles/a100.toml}\n")
    code, err = plan(capsys, project / "stacks", "kubeadm-prod")
    assert code == 2, err
    assert "Traceback" not in err
    assert (f"Pulumi.kubeadm-prod.yaml:{_line(path, 'baselineFiles')}: "
            "gpuplane:cluster.baselineFiles: nodefiles/a100.toml:2:") in err
    assert "capture the node's file again" in err


def test_stack_file_not_utf8(capsys: pytest.CaptureFixture[str], project: Path) -> None:
    path = project / "stacks" / "Pulumi.kind-smoke.yaml"
    path.write_bytes(path.read_bytes().replace(b"kind", b"k\xe9nd", 3))
    code, err = plan(capsys, project / "stacks", "kind-smoke")
    line = next(i for i, raw in enumerate(path.read_bytes().splitlines(), 1) if b"\xe9" in raw)
    assert code == 2 and f"Pulumi.kind-smoke.yaml:{line}: not UTF-8" in err
    assert "save the stack file as UTF-8" in err


def test_yaml_syntax_error_names_the_stack_file(capsys: pytest.CaptureFixture[str],
                                                project: Path) -> None:
    path = _edit(project, "kind-smoke", "config:\n", "config:\n  gpuplane:bogus: [1, 2\n")
    code, err = plan(capsys, project / "stacks", "kind-smoke")
    assert code == 2
    assert "<unicode string>" not in err
    assert f"{path}:" in err and "not valid YAML" in err and "fix:" in err


@pytest.mark.parametrize("key", ["containerdVersion", "kubernetesVersion"])
def test_unquoted_version_gets_the_quoting_hint(capsys: pytest.CaptureFixture[str],
                                                project: Path, key: str) -> None:
    old = {"containerdVersion": 'containerdVersion: "1.7.24"',
           "kubernetesVersion": 'kubernetesVersion: "1.31.4"'}[key]
    new = {"containerdVersion": "containerdVersion: 1.10",
           "kubernetesVersion": "kubernetesVersion: 1.31"}[key]
    path = _edit(project, "kubeadm-prod", old, new)
    code, err = plan(capsys, project / "stacks", "kubeadm-prod")
    assert code == 2
    assert f":{_line(path, key)}: gpuplane:cluster.{key}: " in err
    assert "YAML number" in err and "quote it" in err


def test_operator_chart_older_than_supported_names_the_line(
        capsys: pytest.CaptureFixture[str], project: Path) -> None:
    path = _edit(project, "kubeadm-prod", "chartVersion: v25.10.1", "chartVersion: v23.9.2")
    code, err = plan(capsys, project / "stacks", "kubeadm-prod")
    assert code == 2 and "Traceback" not in err
    assert (f"Pulumi.kubeadm-prod.yaml:{_line(path, 'chartVersion')}: "
            "gpuplane:gpuOperator.chartVersion: GPU Operator chart v23.9.2 is older than "
            "v24.3.0") in err, err
    assert "set gpuplane:gpuOperator.chartVersion to v24.3.0 or later" in err


def test_quoted_version_still_plans(capsys: pytest.CaptureFixture[str], project: Path) -> None:
    _edit(project, "kubeadm-prod", 'containerdVersion: "1.7.24"', 'containerdVersion: "1.7"')
    code, err = plan(capsys, project / "stacks", "kubeadm-prod")
    assert code == 0, err


def test_hami_values_while_hami_is_off(capsys: pytest.CaptureFixture[str],
                                       project: Path) -> None:
    _edit(project, "hami-shared", "gpuplane:devicePlugin: hami",
          "gpuplane:devicePlugin: gpu-operator")
    path = _edit(project, "hami-shared", "    webhookFailurePolicy: Fail\n",
                 "    webhookFailurePolicy: Fail\n"
                 "    values: {devicePlugin: {deviceSplitCount: 4}}\n")
    code, err = plan(capsys, project / "stacks", "hami-shared")
    assert code == 2
    assert f":{_line(path, 'values:')}: gpuplane:hami.values: HAMi is not installed" in err
    assert "set devicePlugin: hami or remove hami.values" in err


@pytest.mark.parametrize(("config", "message"), [
    ('{"all": "bogus"}', "all: enforcement level 'bogus'"),
    ('{\n  "gpuplane-fm06": {"enforcementLevel": 3}\n}', ":2: gpuplane-fm06: enforcement level 3"),
    ("[1]", "expected a JSON object"),
    ('{"gpuplane-fm99": "advisory"}', "gpuplane-fm99: no such policy"),
    ("{x", "not JSON"),
])
def test_bad_policy_config(capsys: pytest.CaptureFixture[str], tmp_path: Path, config: str,
                           message: str) -> None:
    path = tmp_path / "policy.json"
    path.write_text(config)
    code, err = plan(capsys, STACKS, "kind-smoke", "--policy-pack-config", str(path))
    assert code == 2 and message in err and "Traceback" not in err, err


# --- generated input: any stack YAML and any captured TOML ---------------------------------

_BASE = yaml.safe_load((STACKS / "Pulumi.microk8s-edge.yaml").read_text())["config"]
_KEYS = sorted(_BASE)
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 70), st.floats(0, 3, width=16),
                     st.text(string.ascii_letters + string.digits + ".-/: ", max_size=12))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["name", "host", "gpus", "tag", "values", "canary",
                                     "maxUnavailable", "x"]), inner, max_size=3)), max_leaves=6)
_TOML = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["version = 2\n", "version = 3\n", "version = 'x'\n", "imports = 5\n",
                     "imports = ['/etc/containerd/conf.d/*.toml']\n", "[plugins]\ncri = 1\n",
                     'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
                     'default_runtime_name = 7\n', "[[x]]\n[x]\n", "a = \xff\n"]))


def _mutate(base: dict, key: str, path: list[str], value: object) -> dict:
    """The stack with one value replaced (or one nested key set) somewhere."""
    out = {k: v for k, v in base.items()}
    if not path or not isinstance(out.get(key), dict):
        out[key] = value
    else:
        out[key] = {**out[key], path[0]: value}
    return out


@settings(max_examples=int(os.environ.get("GPUPLANE_FUZZ_EXAMPLES", "40")),
          deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                HealthCheck.too_slow])
@given(key=st.one_of(st.none(), st.sampled_from([*_KEYS, "gpuplane:hami", "gpuplane:rollout",
                                                "gpuplane:bogus"])),
       sub=st.lists(st.sampled_from(["containerdVersion", "distro", "baselineFiles", "values",
                                     "chartVersion", "toolkitImage", "maxUnavailable", "name",
                                     "kubernetesVersion", "nodeAccess"]), max_size=1),
       value=_VALUES, toml=_TOML,
       raw=st.one_of(st.none(), st.none(), st.none(), st.binary(max_size=30)))
def test_no_traceback_for_any_stack_or_captured_file(
        capsys: pytest.CaptureFixture[str], tmp_path_factory: pytest.TempPathFactory,
        key: str | None, sub: list[str], value: object, toml: str, raw: bytes | None) -> None:
    project = tmp_path_factory.mktemp("fuzz")
    (project / "Pulumi.yaml").write_text("name: gpuplane\n")
    (project / "stacks").mkdir()
    (project / "captured.toml").write_bytes(toml.encode("utf-8", "surrogatepass")
                                            if "\xff" not in toml else b"a = \xff\n")
    config = _mutate(_BASE, key, sub, value) if key else dict(_BASE)
    config["gpuplane:cluster"] = {**config.get("gpuplane:cluster", {})} if isinstance(
        config.get("gpuplane:cluster"), dict) else config.get("gpuplane:cluster")
    if isinstance(config["gpuplane:cluster"], dict) and sub != ["baselineFiles"]:
        config["gpuplane:cluster"]["baselineFiles"] = {
            "/var/snap/microk8s/current/args/containerd-template.toml": "captured.toml"}
    text = yaml.safe_dump({"config": config}, allow_unicode=True).encode()
    if raw is not None:   # arbitrary bytes appended: broken YAML, bad UTF-8, …
        text += raw
    (project / "stacks" / "Pulumi.fuzz.yaml").write_bytes(text)
    try:
        code = main(["plan", "--stack", "fuzz", "--stacks-dir", str(project / "stacks"),
                     "--format", "json"])
    except SystemExit as exc:   # argparse's usage errors
        code = exc.code
    err = capsys.readouterr().err
    if os.environ.get("GPUPLANE_FUZZ_LOG"):
        with open(os.environ["GPUPLANE_FUZZ_LOG"], "a") as log:
            log.write(f"{code} {err.splitlines()[-1] if err.strip() else ''}\n")
    assert code in (0, 1, 2), err
    assert "Traceback" not in err
    if code == 2:
        assert "gpuplane:" in err or "Pulumi.fuzz.yaml" in err, err


def test_containerd_check_on_a_file_that_is_not_utf8(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_bytes(b"version = 2\n# caf\xe9\n")
    code = main(["containerd", "check", "--config", str(config), "--containerd-version", "1.7"])
    err = capsys.readouterr().err
    assert code == 2 and f"{config}:2: not UTF-8" in err and "Traceback" not in err


def test_detected_runtime_setup_detection_cannot_serve_names_the_line(
        capsys: pytest.CaptureFixture[str], project: Path) -> None:
    """RKE2 detected mode (gpuplane.distros.rancher_mode) with nvidia as the default runtime, which
    RKE2's detection never makes a runtime: the key's line, why, and the way out."""
    _edit(project, "rke2-operator", "nvidiaDefault: false", "nvidiaDefault: true")
    path = _edit(project, "rke2-operator", "runtimeSetup: auto", "runtimeSetup: detected")
    code, err = plan(capsys, project / "stacks", "rke2-operator")
    assert code == 2 and "Traceback" not in err
    assert (f"Pulumi.rke2-operator.yaml:{_line(path, 'runtimeSetup')}: "
            "gpuplane:gpuOperator.runtimeSetup: detected") in err, err
    assert "gpuplane:runtime.nvidiaDefault is true" in err
    assert "set gpuOperator.runtimeSetup: template" in err
