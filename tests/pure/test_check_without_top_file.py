"""`gpuplane containerd check` on a node without a top-level config file: judged as
containerd's built-in defaults, as the planner does (one code path:
gpuplane.rules.nodecheck.check_node_config), whatever the machine running the check
holds at that path. A drop-in next to the missing file is never read, and the check
says so with a fix that, applied, makes containerd read it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplane.cli.main import main
from gpuplane.containerd import ContainerdVersion, LocalFiles

CONFIG = "/etc/containerd/config.toml"
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
NVIDIA = """version = 3
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]
runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
BinaryName = "/usr/bin/nvidia-container-runtime"
"""


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "node"
    (root / "etc/containerd/conf.d").mkdir(parents=True)
    (root / DROPIN.lstrip("/")).write_text(NVIDIA)
    return root


def _check(capsys: pytest.CaptureFixture[str], root: Path, config: str,
           *extra: str) -> tuple[int, dict]:
    code = main(["containerd", "check", "--root", str(root), "--config", config,
                 "--containerd-version", "2.1", "--format", "json", *extra])
    out, err = capsys.readouterr()
    assert code != 2, err
    return code, json.loads(out)


@pytest.mark.parametrize("spelling", ["node path", "path under --root"])
@pytest.mark.parametrize("runtime", ["nvidia", ""])
def test_a_drop_in_without_a_top_level_file_is_never_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], spelling: str,
        runtime: str) -> None:
    root = _root(tmp_path)
    config = CONFIG if spelling == "node path" else str(root / CONFIG.lstrip("/"))
    code, out = _check(capsys, root, config, "--runtime-name", runtime)
    assert out["no_file"] and out["files"] == [CONFIG]
    assert "nvidia" not in out["effective"]["runtimes"]
    named = [f for f in out["findings"] if DROPIN in f["message"]]
    assert named, out["findings"]
    # nvidia judged as used: an error (pods fail); judged as unused: a warning.
    assert code == (1 if runtime else 0)
    assert named[0]["severity"] == ("error" if runtime else "warning")
    assert 'imports = ["/etc/containerd/conf.d/*.toml"]' in named[0]["fix"]
    assert f"Create {CONFIG}" in named[0]["fix"]


def test_the_printed_fix_applied_makes_the_drop_in_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path)
    _, out = _check(capsys, root, CONFIG)
    fix = next(f["fix"] for f in out["findings"] if DROPIN in f["message"])
    version = fix.split("`version = ")[1].split("`")[0]
    assert version == str(ContainerdVersion.parse("2.1").max_config_version)
    (root / CONFIG.lstrip("/")).write_text(
        f'version = {version}\nimports = ["/etc/containerd/conf.d/*.toml"]\n')
    code, out = _check(capsys, root, CONFIG, "--runtime-name", "")
    assert code == 0 and not out["no_file"]
    assert out["files"] == [CONFIG, DROPIN] and "nvidia" in out["effective"]["runtimes"]
    assert not [f for f in out["findings"] if f["severity"] != "info"], out["findings"]


def test_a_relative_path_outside_the_root_is_an_input_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = _root(tmp_path)
    monkeypatch.chdir(tmp_path)
    code = main(["containerd", "check", "--root", str(root), "--config", "config.toml",
                 "--containerd-version", "2.1"])
    err = capsys.readouterr().err
    assert code == 2 and "not under --root" in err and CONFIG in err
    assert LocalFiles(root).read(DROPIN) == NVIDIA
