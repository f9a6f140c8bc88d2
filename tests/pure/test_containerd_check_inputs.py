"""`gpuplane containerd check` on what the user typed: a path that does not exist is an
input error (exit 2), errors under --root name the local file, and the release line used
says where it came from. In-process through the real CLI entry."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpuplane.cli.main import main


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["containerd", "check", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_misspelt_config_path_is_exit_2(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    code, out, err = _check(capsys, "--config", str(tmp_path / "confg.toml"),
                            "--containerd-version", "1.7")
    assert code == 2 and "FM01" not in out
    assert f"{tmp_path / 'confg.toml'}: no such file; fix: " in err, err


def test_misspelt_node_path_under_root_is_exit_2(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    (tmp_path / "etc/containerd").mkdir(parents=True)
    code, _, err = _check(capsys, "--config", "/etc/containerd/confg.toml", "--root",
                          str(tmp_path), "--containerd-version", "1.7")
    assert code == 2, err
    assert (f"{tmp_path}/etc/containerd/confg.toml (node path /etc/containerd/confg.toml): "
            "no such file under --root") in err, err


def test_missing_top_level_under_root_is_still_a_node_without_one(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """containerd's own config.toml absent under --root: containerd runs on its defaults
    (judged, not refused). (A path this host lacks: one it has reads as a local path.)"""
    code, _, err = _check(capsys, "--config", "/var/lib/rancher/k3s/agent/etc/containerd/"
                          "config.toml", "--root",
                          str(tmp_path), "--containerd-version", "1.7")
    assert code in (0, 1) and "no such file" not in err, err


def test_toml_error_under_root_names_the_local_file(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    top = tmp_path / "etc/containerd/config.toml"
    top.parent.mkdir(parents=True)
    top.write_text("version = 2\n[plugins\n")
    code, _, err = _check(capsys, "--config", "/etc/containerd/config.toml", "--root",
                          str(tmp_path), "--containerd-version", "1.7")
    assert code == 2
    assert err.startswith(f"gpuplane: {top} (node path /etc/containerd/config.toml):2:"), err


def test_the_version_source_is_said(capsys: pytest.CaptureFixture[str],
                                    tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("version = 2\n")
    _, out, _ = _check(capsys, "--config", str(config), "--containerd-version", "1.7",
                       "--format", "json")
    assert json.loads(out)["containerd_version_source"] == "--containerd-version"
    _, out, _ = _check(capsys, "--config", str(config), "--containerd-version", "1.7")
    assert out.startswith("containerd 1.7 (from --containerd-version)"), out
    if shutil.which("containerd") is None:
        pytest.skip("no local containerd to detect")
    _, out, _ = _check(capsys, "--config", str(config), "--format", "json")
    source = json.loads(out)["containerd_version_source"]
    assert source.startswith(f"the local `{shutil.which('containerd')} --version`"), source
    _, out, _ = _check(capsys, "--config", str(config))
    assert "(from the local `" in out.splitlines()[0], out
