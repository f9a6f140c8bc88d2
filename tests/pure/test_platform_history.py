"""Managed platforms across their image history (issue #39 item 4): each profile lists the
node-image releases still in use with the containerd line and config each ships
(gpuplane.platforms.releases); the stack's containerdVersion selects the release, every
listed release plans clean (from the model and from a node captured from it), and a
version no listed release ships is a stack-key error naming them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuplane.cli.plan.run import plan_stack
from gpuplane.config import StackConfigError, parse_stack_config
from gpuplane.containerd import ContainerdVersion, MemoryFiles, effective_config
from gpuplane.distros.profiles import Distro, profile
from gpuplane.platforms.profiles import PLATFORMS, Platform, on_platform

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "/etc/containerd/config.toml"
# The informations a bundled platform stack may have (tests/pure/test_stacks.py): FM07 on
# containerd 2.x's built-in runc or AKS's `untrusted`, the platform's own runtimes.
INFOS = {"aks-ubuntu": ["FM07"], "bottlerocket-nvidia": ["FM07"], "eks-al2023-nvidia": ["FM07"]}
CASES = [(p, r.name, line) for p in Platform for r in PLATFORMS[p].releases for line in r.lines]


def stack_values(name: Platform, line: str) -> dict[str, Any]:
    """The bundled stack of platform `name` with its nodes on containerd `line` (and a
    Kubernetes minor whose images ship 1.7 when `line` is 1.x: GKE ties the two)."""
    data = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name.value}.yaml").read_text())
    cluster = data["config"]["gpuplane:cluster"]
    cluster["containerdVersion"] = line
    if line.startswith("1."):
        cluster["kubernetesVersion"] = "1.32.9"
    return data


def plan_of(tmp_path: Path, name: Platform, line: str, captured: str | None = None) -> dict:
    data = stack_values(name, line)
    if captured is not None:
        (tmp_path / "node-config.toml").write_text(captured)
        data["config"]["gpuplane:cluster"]["baselineFiles"] = {CONFIG: "node-config.toml"}
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / f"Pulumi.{name.value}.yaml").write_text(yaml.safe_dump(data))
    return plan_stack(name.value, stacks)


def assert_clean(plan: dict, name: Platform) -> None:
    assert [f for f in plan["findings"] if f["severity"] != "info"] == [], plan["findings"]
    assert {f["id"] for f in plan["findings"]} <= set(INFOS.get(name.value, []))
    assert plan["summary"]["errors"] == 0 and plan["summary"]["restarts"] == 0


@pytest.mark.parametrize(("name", "release", "line"), CASES)
def test_each_listed_release_plans_clean(name: Platform, release: str, line: str,
                                         tmp_path: Path) -> None:
    assert_clean(plan_of(tmp_path, name, line), name)


@pytest.mark.parametrize(("name", "release", "line"), CASES)
def test_the_release_config_is_the_baseline_and_has_the_profiles_runtime(
        name: Platform, release: str, line: str) -> None:
    plat, version = PLATFORMS[name], ContainerdVersion.parse(line)
    chosen = plat.release_for(version)
    assert chosen is not None and chosen.name == release
    assert chosen.sources and all("@" in s or "#" in s or "https://" in s
                                  for s in chosen.sources)
    files = on_platform(profile(Distro.KUBEADM), name).baseline(version)
    assert list(files) == [CONFIG]
    text = files[CONFIG]
    assert f"version = {chosen.config_version}\n" in text
    eff = effective_config(CONFIG, MemoryFiles(files), version)
    assert eff.starts and eff.default_runtime == plat.default_runtime
    assert not eff.files[0].imports


def test_early_2025_eks_nvidia_node_on_containerd_17_plans_from_its_capture(
        tmp_path: Path) -> None:
    """An AL2023 NVIDIA AMI of early 2025 runs containerd 1.7 and nodeadm's version-2
    config: the stack says 1.7, the node's own file is the baseline, and it plans clean."""
    name = Platform.EKS_AL2023_NVIDIA
    release = PLATFORMS[name].release_for(ContainerdVersion(1, 7))
    assert release is not None and release.baseline == "eks-al2023-nvidia-containerd1"
    captured = on_platform(profile(Distro.KUBEADM), name).baseline(ContainerdVersion(1, 7))
    text = captured[CONFIG]
    assert "version = 2" in text and '"io.containerd.grpc.v1.cri"' in text
    plan = plan_of(tmp_path, name, "1.7.25", captured="# captured from ip-10-0-1-23\n" + text)
    assert_clean(plan, name)
    assert plan["nodes"][0]["baselineFiles"] == {CONFIG: "node-config.toml"}


@pytest.mark.parametrize("name", list(Platform))
def test_a_node_captured_from_each_release_plans(name: Platform, tmp_path: Path) -> None:
    for index, release in enumerate(PLATFORMS[name].releases):
        line = release.lines[-1]
        files = on_platform(profile(Distro.KUBEADM), name).baseline(ContainerdVersion.parse(line))
        where = tmp_path / str(index)
        where.mkdir()
        assert_clean(plan_of(where, name, line, captured=files[CONFIG]), name)


@pytest.mark.parametrize(("name", "line"), [(Platform.EKS_AL2023_NVIDIA, "2.0"),
                                            (Platform.EKS_AL2023, "1.6"),
                                            (Platform.AKS_UBUNTU, "1.6"),
                                            (Platform.GKE_COS, "2.1"),
                                            (Platform.BOTTLEROCKET_NVIDIA, "1.6")])
def test_an_unlisted_containerd_version_is_a_stack_key_error_naming_the_releases(
        name: Platform, line: str) -> None:
    values = {k.removeprefix("gpuplane:"): v
              for k, v in stack_values(name, line)["config"].items()}
    with pytest.raises(StackConfigError) as exc:
        parse_stack_config(values)
    problems = dict(exc.value.problems)
    message = problems["gpuplane:cluster"]
    assert f"containerdVersion: {line} " in message
    for release in PLATFORMS[name].releases:
        assert release.name in message
        assert f"containerd {', '.join(release.lines)}" in message


def test_the_platform_page_has_every_release_with_its_line_and_sources() -> None:
    page = (ROOT / "docs" / "platforms.md").read_text()
    for plat in PLATFORMS.values():
        for release in plat.releases:
            row = next(line for line in page.splitlines() if line.startswith(f"| {release.name} |"))
            assert f"| {', '.join(release.lines)} |" in row and f"`{release.baseline}`" in row
            assert all(source.split(" (")[0] in row for source in release.sources)
