"""The platforms' containerd configs and the drop-in-version trap, held against real
containerd (issue #29).

- Each platform's config (data/baselines/<platform>) loads in real containerd on the
  lines the platform ships, and the model's view of it is the daemon's.
- A drop-in newer than its root (FM03-dropin-newer): real containerd 2.0-2.2 accept a
  version-3 drop-in under a version-2 root and refuse a version-4 one; the model says the
  same, and the rule warns on 2.0-2.2 (containerd 2.3 refuses the first too, NVIDIA/aicr
  #1688: no 2.3 here, so that half is the field report's) and errs on 2.3.
- AKS's version-2 root with version-3 names: a version-2 drop-in's runtimes are dropped
  by real 2.x (why the toolkit cannot configure a `--gpu-driver none` pool from the file
  alone; docs/platforms.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import oracle
from support.layouts import host_path, write_layout

from gpuplane.containerd import ContainerdVersion, MemoryFiles, effective_config
from gpuplane.core.findings import Severity
from gpuplane.distros.profiles import Distro, profile
from gpuplane.platforms.profiles import PLATFORMS, Platform, on_platform
from gpuplane.rules.nodecheck import check_node_config

TOP = "/etc/containerd/config.toml"
DROP = "/etc/containerd/conf.d/99-nvidia.toml"
ROOT_V2 = """version = 2
imports = ["/etc/containerd/conf.d/*.toml"]
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
"""


def dropin(version: int) -> str:
    return (f"version = {version}\n"
            "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.nvidia]\n"
            "  runtime_type = \"io.containerd.runc.v2\"\n"
            "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.nvidia.options]\n"
            "  BinaryName = \"/usr/bin/nvidia-container-runtime\"\n")


def newer(line: str, version: int) -> list:
    files = {TOP: ROOT_V2, DROP: dropin(version)}
    checked = check_node_config(MemoryFiles(files), TOP, ContainerdVersion.parse(line))
    return [f for f in checked.findings if f.id == "FM03"]


def test_dropin_newer_than_root_warns_before_23_and_errs_from_23() -> None:
    (warning,) = newer("2.1", 3)
    assert warning.severity is Severity.WARNING and "aicr#1688" in warning.message
    assert "99-nvidia.toml" in warning.where
    (error,) = newer("2.3", 3)
    assert error.severity is Severity.ERROR
    assert newer("2.1", 2) == []   # the same version as the root: nothing to say


def test_dropin_version_4_is_the_refusal_once() -> None:
    (refusal,) = newer("2.1", 4)
    assert refusal.severity is Severity.ERROR and "`version = 4`" in refusal.message


# Every containerd line a listed image release ships (gpuplane.platforms.releases), each
# with that release's config: EKS AL2023's 1.7 AMIs (nodeadm's version-2 template), AKS
# Ubuntu 22.04 (1.7) and the others; a line the suite has no build of (2.3) is left out.
CASES = [(p, line) for p in Platform for line in PLATFORMS[p].containerd_lines
         if line in oracle.LINES]


@pytest.mark.real
@pytest.mark.parametrize(("name", "line"), CASES)
def test_platform_configs_load_in_real_containerd(name: Platform, line: str,
                                                  tmp_path: Path) -> None:
    oracle.require_line(line)
    version = ContainerdVersion.parse(line)
    files = on_platform(profile(Distro.KUBEADM), name).baseline(version)
    write_layout(files, tmp_path / "node")
    dumped = oracle.dump(line, host_path(tmp_path / "node", TOP))
    assert dumped.ok, dumped.error
    model = effective_config(TOP, MemoryFiles(files), version)
    assert oracle.effective_from_dump(line, dumped.config) == model.to_dict()
    assert model.default_runtime == PLATFORMS[name].default_runtime


@pytest.mark.real
@pytest.mark.parametrize("line", ["2.0", "2.1", "2.2"])
@pytest.mark.parametrize("version", [3, 4])
def test_real_containerd_on_a_dropin_newer_than_its_root(line: str, version: int,
                                                         tmp_path: Path) -> None:
    """Version 3 under 2: accepted, nvidia merged; version 4: refused, as the model says."""
    oracle.require_line(line)
    files = {TOP: ROOT_V2, DROP: dropin(version)}
    write_layout(files, tmp_path / "node")
    dumped = oracle.dump(line, host_path(tmp_path / "node", TOP))
    model = effective_config(TOP, MemoryFiles(files), ContainerdVersion.parse(line))
    assert dumped.ok is model.starts is (version == 3), (dumped.error, model.refusals)
    if version == 3:
        assert oracle.effective_from_dump(line, dumped.config) == model.to_dict()
        assert "nvidia" in model.runtimes
    else:
        assert "got `4`" in dumped.error and "got `4`" in model.refusals[0]


AKS_ROOT = "/etc/containerd/config.toml"


@pytest.mark.real
@pytest.mark.parametrize("line", ["2.0", "2.1", "2.2"])
def test_aks_root_drops_a_version_2_dropins_runtimes(line: str, tmp_path: Path) -> None:
    """AKS's version-2 root already has a version-3 runtime table: the version-2 CRI table
    of a drop-in (what the toolkit writes reading that file) is not migrated into it."""
    oracle.require_line(line)
    version = ContainerdVersion.parse(line)
    root = on_platform(profile(Distro.KUBEADM), Platform.AKS_UBUNTU).baseline(version)[AKS_ROOT]
    root = root.replace("version = 2\n",
                        'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n', 1)
    v2_dropin = ("version = 2\n"
                 "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
                 "  runtime_type = \"io.containerd.runc.v2\"\n")
    files = {AKS_ROOT: root, DROP: v2_dropin}
    write_layout(files, tmp_path / "node")
    dumped = oracle.dump(line, host_path(tmp_path / "node", AKS_ROOT))
    assert dumped.ok, dumped.error
    real = oracle.effective_from_dump(line, dumped.config)
    assert "nvidia" not in real["runtimes"]
    assert real == effective_config(AKS_ROOT, MemoryFiles(files), version).to_dict()
