"""FM15: HAMi's device plugin on a platform that keeps the driver outside `/` (GKE COS:
/home/kubernetes/bin/nvidia) needs devicePlugin.nvidiaDriverRoot there: gpuplane renders it
for its own HAMi release and checks it on a release it did not write."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuplane.cli.plan.run import plan_stack
from gpuplane.core.intent import ClusterIntent
from gpuplane.platforms.profiles import COS_NVIDIA_DIR
from gpuplane.rules.hami import check_hami_values

STACKS = Path(__file__).resolve().parents[2] / "stacks"
WHERE = "Release hami"
COS_PATHS = {"global": {"gpuHookPath": "/home/kubernetes/bin/hami"},
             "devicePlugin": {"libPath": "/home/kubernetes/bin/hami/vgpu"}}


def fm15(values: dict[str, Any], platform: str = "gke-cos") -> list[Any]:
    intent = ClusterIntent(platform=platform, device_plugin="hami",
                           containerd_version="1.7.27", kubernetes_version="1.32.3")
    found = check_hami_values(values, intent, chart_version="2.10.0", where=WHERE)
    return [f for f in found if f.id == "FM15" and "nvidiaDriverRoot" in f.message]


@pytest.mark.parametrize("root", [None, "/", "/run/nvidia/driver"])
def test_fm15_foreign_hami_without_the_cos_driver_root(root: str | None) -> None:
    values = copy.deepcopy(COS_PATHS)
    if root is not None:
        values["devicePlugin"]["nvidiaDriverRoot"] = root
    [f] = fm15(values)
    assert "values.devicePlugin.nvidiaDriverRoot" in f.where
    assert f"--set devicePlugin.nvidiaDriverRoot={COS_NVIDIA_DIR}" in f.fix


def test_fm15_the_printed_fix_clears_it_and_other_platforms_are_not_judged() -> None:
    values = copy.deepcopy(COS_PATHS)
    values["devicePlugin"]["nvidiaDriverRoot"] = COS_NVIDIA_DIR + "/"
    assert fm15(values) == []
    assert fm15({}, platform="gke-ubuntu") == []


def test_fm15_gpuplane_renders_the_cos_driver_root_for_its_hami(tmp_path: Path) -> None:
    config = yaml.safe_load((STACKS / "Pulumi.gke-cos.yaml").read_text())["config"]
    config["gpuplane:devicePlugin"] = "hami"
    config["gpuplane:gpuOperator"]["cdi"] = False
    config["gpuplane:hami"] = {"values": copy.deepcopy(COS_PATHS)}
    (tmp_path / "Pulumi.cos.yaml").write_text(yaml.safe_dump({"config": config}))
    report = plan_stack("cos", tmp_path)
    assert not [f for f in report["findings"] if f["id"] == "FM15"]


DRA = """
k8s.helm.v3.Release("dra", name="nvidia-dra-driver-gpu", chart="nvidia-dra-driver-gpu",
    version="25.12.0", repository_opts={"repo": "https://helm.ngc.nvidia.com/nvidia"},
    namespace="nvidia-dra-driver-gpu", values={VALUES})
"""


def _plan_foreign(tmp_path: Path, values: str) -> list[dict[str, Any]]:
    from gpuplane.cli.plan.project import load_project
    from gpuplane.policy.pack import policy_names

    folder = tmp_path / "infra"
    folder.mkdir(exist_ok=True)
    (folder / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    (folder / "__main__.py").write_text("import pulumi_kubernetes as k8s\n"
                                        + DRA.replace("{VALUES}", values))
    (folder / "Pulumi.dev.yaml").write_text("config: {}\n")
    facts = {"platform": "gke-cos", "containerdVersion": "1.7", "kubernetesVersion": "1.34.2"}
    config = {name: dict(facts) for name in policy_names()}
    report = plan_stack("dev", folder, config, load_project(folder))
    return [f for f in report["findings"] if f["id"] == "FM15"]


def test_fm15_foreign_dra_driver_release_on_cos(tmp_path: Path) -> None:
    [f] = _plan_foreign(tmp_path, "{}")
    assert "nvidiaDriverRoot is not set" in f["message"] and f["severity"] == "error"
    assert f"nvidiaDriverRoot: {COS_NVIDIA_DIR}" in f["fix"]
    assert _plan_foreign(tmp_path, f'{{"nvidiaDriverRoot": "{COS_NVIDIA_DIR}"}}') == []
