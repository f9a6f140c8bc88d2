"""`gpuplane containerd check` and the runtimes' BinaryName: a root holding only the
config files (what users capture and bug reports attach) says nothing about binaries, so
they are reported as not checked, never as missing. A binary is judged where the root
shows its directory, or where `gpuplane nodes capture` recorded it (--binaries FILE)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_capture import CONFIG, Sshd, capture, node_root, project, sshd  # noqa: F401

from gpuplane.capture.remote import capture_script, parse_answer
from gpuplane.cli.main import main
from gpuplane.distros.profiles import Distro, profile

RUNC = "/usr/sbin/runc"
NVIDIA = "/usr/bin/nvidia-container-runtime"
V2 = '"io.containerd.grpc.v1.cri"'
# K3s, Kubespray, the EKS AL2023 AMIs: runc named by its absolute path, as they ship it.
TOP = f"""version = 2
[plugins.{V2}.containerd]
default_runtime_name = "runc"
[plugins.{V2}.containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
[plugins.{V2}.containerd.runtimes.runc.options]
BinaryName = "{RUNC}"
[plugins.{V2}.containerd.runtimes.nvidia]
runtime_type = "io.containerd.runc.v2"
[plugins.{V2}.containerd.runtimes.nvidia.options]
BinaryName = '{NVIDIA}'
"""


def _root(tmp_path: Path, extra: dict[str, str | None] | None = None) -> Path:
    """A node copy: config.toml, plus files (text) or empty directories (None)."""
    root = tmp_path / "node"
    for path, text in {CONFIG: TOP, **(extra or {})}.items():
        target = root / path.lstrip("/")
        if text is None:
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def _check(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> tuple[int, dict]:
    code = main(["containerd", "check", "--root", str(root), "--config", CONFIG,
                 "--containerd-version", "1.7", "--format", "json", *extra])
    out, err = capsys.readouterr()
    assert code != 2, err
    return code, json.loads(out)


def _binary_findings(out: dict) -> list[dict]:
    return [f for f in out["findings"] if RUNC in f["message"] or NVIDIA in f["message"]]


def test_only_config_files_leave_the_binaries_unchecked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _check(capsys, _root(tmp_path))
    found = _binary_findings(out)
    assert code == 0, found
    assert [(f["id"], f["severity"]) for f in found] == [("FM01", "info")]
    assert "not checked" in found[0]["message"]
    assert RUNC in found[0]["message"] and NVIDIA in found[0]["message"]
    assert "does not exist" not in found[0]["message"]


def test_a_directory_the_root_shows_is_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """usr/sbin/ is there without runc: missing. usr/bin/ is not: nvidia not checked."""
    code, out = _check(capsys, _root(tmp_path, {"/usr/sbin": None}))
    found = {f["severity"]: f["message"] for f in _binary_findings(out)}
    assert code == 1 and set(found) == {"error", "info"}
    assert f'BinaryName = "{RUNC}", which does not exist' in found["error"]
    assert NVIDIA in found["info"] and RUNC not in found["info"]
    code, out = _check(capsys, _root(tmp_path, {RUNC: "#!/bin/sh\n", NVIDIA: "#!/bin/sh\n"}))
    assert code == 0 and not _binary_findings(out)


@pytest.mark.parametrize("present", [True, False])
def test_a_capture_record_decides(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  present: bool) -> None:
    record = tmp_path / "n1.binaries.json"
    record.write_text(json.dumps({"node": "n1", "binaries": {RUNC: True, NVIDIA: present}}))
    code, out = _check(capsys, _root(tmp_path), "--binaries", str(record))
    found = _binary_findings(out)
    assert code == (0 if present else 1)
    assert [f["severity"] for f in found] == ([] if present else ["error"])


@pytest.mark.parametrize("text, why", [
    ("{", "not JSON"), ('{"node": "n1", "binaries": {"runc": true}}', "not absolute"),
    ('{"node": "n1", "binaries": {"/usr/sbin/runc": "yes"}}', "binaries./usr/sbin/runc"),
])
def test_a_bad_record_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        text: str, why: str) -> None:
    record = tmp_path / "bad.json"
    record.write_text(text)
    code = main(["containerd", "check", "--root", str(_root(tmp_path)), "--config", CONFIG,
                 "--containerd-version", "1.7", "--binaries", str(record)])
    err = capsys.readouterr().err
    assert code == 2 and str(record) in err and why in err and "Traceback" not in err


def test_the_capture_script_records_each_binary_the_files_name(tmp_path: Path) -> None:
    root = _root(tmp_path, {RUNC: "#!/bin/sh\n",
                            "/etc/containerd/conf.d/99-x.toml":
                            'BinaryName = "/opt/x/runtime"\n'})
    done = subprocess.run(["sh", "-s"], input=capture_script(profile(Distro.KUBEADM),
                                                             str(root)),
                          capture_output=True, text=True, timeout=60, check=True)
    report = parse_answer(done.stdout)
    assert report.binaries == {RUNC: True, NVIDIA: False, "/opt/x/runtime": False}


def test_capture_writes_the_record_the_check_reads(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, sshd: Sshd) -> None:  # noqa: F811
    node_root(sshd, "a1", {CONFIG: TOP, RUNC: "#!/bin/sh\n"})
    stacks = project(tmp_path, sshd, ["{name: a1, host: a1, gpus: 8}"])
    code, out = capture(capsys, sshd, stacks)
    assert code == 0, out
    assert f"{RUNC} present" in out and f"{NVIDIA} ABSENT" in out
    record = stacks / "captured" / "t" / "a1.binaries.json"
    assert json.loads(record.read_text()) == {"node": "a1",
                                              "binaries": {NVIDIA: False, RUNC: True}}
    # The copied config alone, judged with the record: nvidia's binary is missing.
    code, out = _check(capsys, _root(tmp_path), "--binaries", str(record))
    found = _binary_findings(out)
    assert code == 1 and [f["severity"] for f in found] == ["error"]
    assert NVIDIA in found[0]["message"] and "does not exist" in found[0]["message"]


BASELINES = Path(__file__).resolve().parents[2] / "components/gpuplane/data/baselines"
TOPS = ("etc/containerd/config.toml", "var/lib/rancher/k3s/agent/etc/containerd/config.toml",
        "var/lib/rancher/rke2/agent/etc/containerd/config.toml", "etc/k0s/containerd.toml",
        "var/snap/microk8s/current/args/containerd.toml")


def _baselines() -> list[tuple[str, str]]:
    return [(d.name, top) for d in sorted(BASELINES.iterdir()) if d.is_dir()
            for top in TOPS if (d / top).is_file()]


@pytest.mark.parametrize("name, top", _baselines(), ids=[n for n, _ in _baselines()])
def test_a_platforms_own_config_files_alone_never_call_a_binary_missing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, top: str) -> None:
    """The configs as each distribution and platform ships them (gpuplane's baselines),
    copied without their binaries: what a user captures or a bug report attaches."""
    import re
    import shutil

    root = tmp_path / name
    shutil.copytree(BASELINES / name, root)
    text = (root / top).read_text()
    line = "2.1" if re.search(r"^version\s*=\s*3", text, re.M) else "1.7"
    code = main(["containerd", "check", "--root", str(root), "--config", "/" + top,
                 "--containerd-version", line, "--format", "json"])
    out, err = capsys.readouterr()
    assert code != 2, err
    findings = json.loads(out)["findings"]
    assert not [f for f in findings if "does not exist on the node" in f["message"]]
    default = json.loads(out)["effective"]["default_runtime"]
    binary = json.loads(out)["effective"]["runtimes"].get(default, {}).get(
        "options", {}).get("BinaryName", "")
    if binary.startswith("/"):
        # The runtime pods use by default: its binary named as not checked.
        assert [f["severity"] for f in findings
                if "not checked" in f["message"] and binary in f["message"]] == ["info"]
