"""The whole effective config (#39 items 1 and 2): settings beside the runtimes that a
layout ignores today, a disabled CRI plugin, no top-level file, and `containerd check`
judging the GPU runtime as used. Claims about containerd are held against the real
binaries (skipped without them, failed under GPUPLANE_REQUIRE_REAL=1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import oracle, oracle_settings

from gpuplane.containerd import ContainerdVersion
from gpuplane.containerd.files import LocalFiles, MemoryFiles
from gpuplane.core.findings import Severity
from gpuplane.rules.nodecheck import check_node_config

TOP = "/etc/containerd/config.toml"
V2 = '"io.containerd.grpc.v1.cri"'
ROOT_V2 = f"""version = 2
imports = ["/etc/containerd/conf.d/*.toml"]
[plugins.{V2}]
sandbox_image = "example.org/pause:3.10"
[plugins.{V2}.registry]
config_path = "/etc/containerd/certs.d"
[plugins.{V2}.registry.mirrors."docker.io"]
endpoint = ["https://mirror.example.org"]
[plugins.{V2}.cni]
conf_dir = "/srv/cni/net.d"
"""
NVIDIA_V2 = f"""version = 2
[plugins.{V2}.containerd.runtimes.nvidia]
runtime_type = "io.containerd.runc.v2"
[plugins.{V2}.containerd.runtimes.nvidia.options]
BinaryName = "/usr/bin/nvidia-container-runtime"
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.replace("/etc/containerd/", f"{root}/etc/containerd/"))
    return root / TOP.lstrip("/")


@pytest.mark.parametrize("line", ["2.0", "2.1", "2.2"])
def test_fm03_v3_dropin_over_v2_root_loses_mirrors_sandbox_and_cni_now(line: str,
                                                                  tmp_path: Path) -> None:
    layout = {TOP: ROOT_V2, "/etc/containerd/conf.d/99-empty.toml": "version = 3\n"}
    checked = check_node_config(MemoryFiles(layout), TOP, ContainerdVersion.parse(line))
    fm03 = [f for f in checked.findings if f.id == "FM03" and f.severity is Severity.ERROR]
    assert fm03, checked.findings
    text = " ".join(f.message for f in fm03)
    for lost in ("sandbox_image", "registry.config_path", "registry.mirrors", "cni.conf_dir"):
        assert lost in text, text
    assert "when containerd is upgraded" not in text
    # The real containerd agrees: the dump shows its own defaults for all four.
    oracle.require_line(line)
    real = oracle.dump(line, _write(tmp_path, layout))
    assert real.ok and real.config is not None, real.error
    assert oracle_settings.beyond_defaults(
        line, oracle_settings.settings_from_dump(line, real.config)) == {}


@pytest.mark.parametrize("line", oracle.LINES)
@pytest.mark.parametrize("text", [
    'disabled_plugins = ["cri"]\n',
    'version = 2\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n'])
def test_fm03_disabled_cri_plugin_is_an_error(line: str, text: str, tmp_path: Path) -> None:
    checked = check_node_config(MemoryFiles({TOP: text}), TOP, ContainerdVersion.parse(line))
    assert checked.effective.cri_disabled
    assert any(f.id == "FM03" and f.severity is Severity.ERROR and "CRI" in f.message
               for f in checked.findings), checked.findings
    oracle.require_line(line)
    real = oracle.dump(line, _write(tmp_path, {TOP: text}))
    assert real.ok and real.config is not None
    assert not oracle_settings.cri_served(line, real.config)


@pytest.mark.parametrize("line", ["1.7", "2.1", "2.2"])
def test_fm01_no_top_level_file_is_judged_as_the_defaults(line: str) -> None:
    checked = check_node_config(MemoryFiles({}), TOP, ContainerdVersion.parse(line),
                                runtime_name="nvidia")
    assert checked.effective.no_file and set(checked.effective.runtimes) == {"runc"}
    assert any(f.id == "FM01" and f.severity is Severity.ERROR and "nvidia" in f.message
               for f in checked.findings), checked.findings


def test_fm01_unread_dropin_with_the_only_nvidia_runtime_is_an_error() -> None:
    layout = {TOP: "version = 2\n", "/etc/containerd/conf.d/99-nvidia.toml": NVIDIA_V2}
    checked = check_node_config(MemoryFiles(layout), TOP, ContainerdVersion.parse("2.1"),
                                runtime_name="nvidia")
    assert any(f.id == "FM01" and f.severity is Severity.ERROR for f in checked.findings), \
        checked.findings


def test_nvidia_systemd_cgroup_differing_from_runc_is_an_error() -> None:
    text = f"""version = 2
[plugins.{V2}.containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
[plugins.{V2}.containerd.runtimes.runc.options]
SystemdCgroup = true
""" + NVIDIA_V2.replace("version = 2\n", "")
    checked = check_node_config(MemoryFiles({TOP: text, "/usr/bin/nvidia-container-runtime":
                                             "#!/bin/sh\n"}), TOP,
                                ContainerdVersion.parse("2.1"), runtime_name="nvidia")
    (fm07,) = [f for f in checked.findings if f.id == "FM07"]
    assert fm07.severity is Severity.ERROR


def test_fm01_missing_binary_name_is_a_finding(tmp_path: Path) -> None:
    top = f"version = 2\n{NVIDIA_V2.replace('version = 2', '')}"
    root = tmp_path / "node"
    _write(root, {TOP: top})
    # The config alone says nothing of the binary: not checked, never missing.
    checked = check_node_config(LocalFiles(root), TOP, ContainerdVersion.parse("2.1"),
                                runtime_name="nvidia")
    assert [f.severity for f in checked.findings
            if "/usr/bin/nvidia-container-runtime" in f.message] == [Severity.INFO]
    # The root shows /usr/bin/ without the binary: missing.
    (root / "usr" / "bin").mkdir(parents=True)
    checked = check_node_config(LocalFiles(root), TOP, ContainerdVersion.parse("2.1"),
                                runtime_name="nvidia")
    assert any(f.id == "FM01" and "/usr/bin/nvidia-container-runtime" in f.message
               and f.severity is Severity.ERROR for f in checked.findings), checked.findings
    _write(root, {"/usr/bin/nvidia-container-runtime": "#!/bin/sh\n"})
    checked = check_node_config(LocalFiles(root), TOP, ContainerdVersion.parse("2.1"),
                                runtime_name="nvidia")
    assert not any("does not exist" in f.message for f in checked.findings)
