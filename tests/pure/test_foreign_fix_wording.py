"""Fixes in a program gpuplane did not make (a plain GPU Operator Release judged with the
pack config's facts) name what that user can change: the release's values and the pack
config's keys, never a `gpuplane:` stack key the program does not have. FM17's printed
fix, applied to the release, clears it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuplane.cli.plan.project import load_project
from gpuplane.cli.plan.run import plan_stack
from gpuplane.policy.pack import policy_names

RELEASE = """import pulumi_kubernetes as k8s
k8s.helm.v3.Release("gpu-operator", name="gpu-operator", chart="gpu-operator",
    version="v25.10.1", repository_opts={{"repo": "https://helm.ngc.nvidia.com/nvidia"}},
    namespace="gpu-operator", values={values!r})
"""
V17 = {"containerdVersion": "1.7.27", "kubernetesVersion": "1.32.3", "driver": "preinstalled"}


def _env(**env: str) -> dict[str, Any]:
    return {"driver": {"enabled": False},
            "toolkit": {"env": [{"name": k, "value": v} for k, v in env.items()]}}


def _plan(tmp_path: Path, values: dict[str, Any], facts: dict[str, str]) -> list[dict]:
    folder = tmp_path / "infra"
    folder.mkdir(exist_ok=True)
    (folder / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    (folder / "__main__.py").write_text(RELEASE.format(values=values))
    (folder / "Pulumi.dev.yaml").write_text("config: {}\n")
    config = {name: dict(facts) for name in policy_names()}
    report = plan_stack("dev", folder, config, load_project(folder))
    return [f for f in report["findings"] if f["severity"] != "info"]


CASES = {
    # toolkit.env at another distribution's containerd
    "kubeadm-k0s-path": (_env(CONTAINERD_CONFIG="/etc/k0s/containerd.d/nvidia.toml"),
                         {"distro": "kubeadm", **V17}, {"FM17"}),
    # RKE2 detected mode pointed at the file RKE2 generates (FM04) and the socket (FM17)
    "rke2-generated": (_env(CONTAINERD_CONFIG="/var/lib/rancher/rke2/agent/etc/containerd/"
                                              "config.toml"),
                       {"distro": "rke2", **V17}, {"FM04", "FM17"}),
    # GKE 1.33+: the config dump source
    "gke-dump": ({"toolkit": {"env": []}},
                 {"platform": "gke-ubuntu", "containerdVersion": "2.0",
                  "kubernetesVersion": "1.33.3"}, {"FM17"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fm17_foreign_fixes_name_no_stack_key(case: str, tmp_path: Path) -> None:
    values, facts, ids = CASES[case]
    found = _plan(tmp_path, values, facts)
    assert ids <= {f["id"] for f in found}, found
    for f in found:
        assert "gpuplane:" not in f["fix"], (f["id"], f["fix"])
    fm17 = next(f for f in found if f["id"] == "FM17")
    assert "the release's values, raw Helm toolkit.env:" in fm17["fix"]
    if "distro" in facts:
        assert "set `distro` (and `containerdBaseDir`) in the pack's config" in fm17["fix"]


def test_fm17_foreign_fix_applied_to_the_release_clears_it(tmp_path: Path) -> None:
    values, facts, _ = CASES["kubeadm-k0s-path"]
    [fm17] = [f for f in _plan(tmp_path, values, facts) if f["id"] == "FM17"]
    entries = [line.removeprefix("- {name: ").removesuffix("}").split(", value: ")
               for line in fm17["fix"].splitlines() if line.startswith("- {name: ")]
    fixed = _env(**dict(entries))
    assert not [f for f in _plan(tmp_path, fixed, facts) if f["id"] == "FM17"]


HAMI = """import pulumi_kubernetes as k8s
k8s.helm.v3.Release("hami", name="hami", chart="hami", version="2.10.0",
    repository_opts={{"repo": "https://project-hami.github.io/HAMi/"}},
    namespace="hami-system", values={values!r})
"""
COS = {"platform": "gke-cos", "containerdVersion": "1.7", "kubernetesVersion": "1.34.2"}


def _plan_hami(tmp_path: Path, values: dict[str, Any]) -> list[dict]:
    folder = tmp_path / "hami"
    folder.mkdir(exist_ok=True)
    (folder / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    (folder / "__main__.py").write_text(HAMI.format(values=values))
    (folder / "Pulumi.dev.yaml").write_text("config: {}\n")
    config = {name: dict(COS) for name in policy_names()}
    report = plan_stack("dev", folder, config, load_project(folder))
    return [f for f in report["findings"] if f["severity"] != "info"]


def test_fm15_plain_program_hami_release_on_cos_is_judged_for_its_driver_root(
        tmp_path: Path) -> None:
    """A HAMi Release in a plain program on GKE COS (pack facts only): FM15 names
    devicePlugin.nvidiaDriverRoot, every fix names the release's values, not
    `gpuplane:hami.*`, and the driver root the fix gives clears FM15."""
    found = _plan_hami(tmp_path, {})
    [fm15] = [f for f in found if f["id"] == "FM15"]
    assert "nvidiaDriverRoot" in fm15["message"] and fm15["severity"] == "error"
    for f in found:
        assert "gpuplane:" not in f["fix"], (f["id"], f["fix"])
    root = {"devicePlugin": {"nvidiaDriverRoot": "/home/kubernetes/bin/nvidia"}}
    assert not [f for f in _plan_hami(tmp_path, root) if f["id"] == "FM15"]
