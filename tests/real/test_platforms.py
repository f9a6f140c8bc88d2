"""Managed platforms (issue #29): the profiles, the stack keys, one broken stack per trap,
and the platform seen from a Node object.

Each broken stack is a bundled platform stack with the one change that walks into the
trap; the bundled stack itself plans clean (tests/pure/test_stacks.py), so the finding comes
from that change alone. The platforms' containerd configs (data/baselines/<platform>)
are held against real containerd in tests/real/test_platform_rules.py.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuplane.cli.plan.run import plan_stack
from gpuplane.config import StackConfigError, parse_stack_config
from gpuplane.containerd import ContainerdVersion, MemoryFiles, effective_config
from gpuplane.distros.profiles import Distro, profile
from gpuplane.doctor.cluster import ClusterView
from gpuplane.doctor.infer import infer
from gpuplane.doctor.snapshot import Snapshot
from gpuplane.platforms.detect import detect_platform
from gpuplane.platforms.profiles import PLATFORMS, Platform, on_platform

STACKS = Path(__file__).resolve().parents[2] / "stacks"


def stack(name: str) -> dict[str, Any]:
    data = yaml.safe_load((STACKS / f"Pulumi.{name}.yaml").read_text(encoding="utf-8"))
    return copy.deepcopy(data["config"])


def plan(tmp_path: Path, config: dict[str, Any]) -> dict[str, Any]:
    (tmp_path / "Pulumi.broken.yaml").write_text(yaml.safe_dump({"config": config}),
                                                 encoding="utf-8")
    return plan_stack("broken", tmp_path)


def errors(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["severity"] == "error"]


def values(config: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    config["gpuplane:gpuOperator"].setdefault("values", {}).update(extra)
    return config


# ---------------------------------------------------------------- profiles


@pytest.mark.parametrize("name", list(Platform))
def test_each_profile_plans_from_the_config_the_platform_writes(name: Platform) -> None:
    """The baseline is the platform's config, with the default runtime its profile says,
    no `imports` (none of them imports drop-ins), on every containerd line it ships."""
    plat = PLATFORMS[name]
    prof = on_platform(profile(Distro.KUBEADM), name)
    assert prof.title == plat.title and prof.owned_by == plat.title
    for line in plat.containerd_lines:   # every image release's line (releases.py)
        version = ContainerdVersion.parse(line)
        files = prof.baseline(version)
        assert list(files) == ["/etc/containerd/config.toml"]
        eff = effective_config(prof.config_path, MemoryFiles(files), version)
        assert eff.starts and eff.default_runtime == plat.default_runtime
        assert not eff.files[0].imports
        if plat.runtime_binary:
            assert eff.runtimes[plat.default_runtime].options["BinaryName"] == \
                plat.runtime_binary
    assert plat.sources and all("@" in s or "core-kit" in s for s in plat.sources)


# ---------------------------------------------------------------- stack keys


@pytest.mark.parametrize(("change", "key", "words"), [
    ({"distro": "rke2"}, "gpuplane:cluster", "remove cluster.distro"),
    # The AMIs went 1.7 -> 2.1 -> 2.2 (gpuplane.platforms.releases): none ships 2.0.
    ({"containerdVersion": "2.0"}, "gpuplane:cluster", "(containerd 1.7)"),
])
def test_platform_contradictions_name_the_key_and_the_fix(
        change: dict[str, Any], key: str, words: str) -> None:
    config = stack("eks-al2023-nvidia")
    config["gpuplane:cluster"].update(change)
    with pytest.raises(StackConfigError) as err:
        parse_stack_config({k.split(":", 1)[1]: v for k, v in config.items()})
    (problem,) = err.value.problems
    assert problem[0].startswith(key) and words in problem[1], problem


def test_gke_containerd_line_follows_the_kubernetes_version() -> None:
    config = stack("gke-cos")
    config["gpuplane:cluster"]["containerdVersion"] = "1.7"
    with pytest.raises(StackConfigError, match=re.escape('containerdVersion: "2.0"')):
        parse_stack_config({k.split(":", 1)[1]: v for k, v in config.items()})
    config["gpuplane:cluster"]["kubernetesVersion"] = "1.32.4"
    parse_stack_config({k.split(":", 1)[1]: v for k, v in config.items()})


def test_device_plugin_platform_needs_a_platform_that_ships_one() -> None:
    config = stack("eks-al2023-nvidia")
    config["gpuplane:devicePlugin"] = "platform"
    with pytest.raises(StackConfigError, match="do not ship; set devicePlugin: gpu-operator"):
        parse_stack_config({k.split(":", 1)[1]: v for k, v in config.items()})
    # On Bottlerocket, timeSlicing becomes the image plugin's settings (platformInput).
    config = stack("bottlerocket-nvidia")
    config["gpuplane:timeSlicing"] = {"replicas": 4}
    parse_stack_config({k.split(":", 1)[1]: v for k, v in config.items()})


def test_host_toolkit_without_node_access_only_where_the_image_configures_it() -> None:
    config = stack("gke-cos")
    config["gpuplane:gpuOperator"]["toolkit"] = "host"
    with pytest.raises(StackConfigError, match="toolkit: host needs node access"):
        parse_stack_config({k.split(":", 1)[1]: v for k, v in config.items()})


def test_cos_gets_the_install_dirs_and_the_file_config_source(tmp_path: Path) -> None:
    report = plan(tmp_path, stack("gke-cos"))
    helm = report["helm"]["gpu-operator"]["values"]
    assert helm["hostPaths"] == {"driverInstallDir": "/home/kubernetes/bin/nvidia"}
    assert helm["toolkit"]["installDir"] == "/home/kubernetes/bin/nvidia"
    env = {e["name"]: e["value"] for e in helm["toolkit"]["env"]}
    assert env["RUNTIME_CONFIG_SOURCE"] == "file=/etc/containerd/config.toml"
    assert helm["driver"] == {"enabled": False} and helm["cdi"] == {"enabled": True}


# ---------------------------------------------------------------- one broken stack per trap


def _one(report: dict[str, Any], rule: str) -> dict[str, Any]:
    found = [f for f in errors(report) if f["id"] == rule]
    assert found, report["findings"]
    return found[0]


def test_trap_operator_toolkit_where_the_image_preinstalls_it(tmp_path: Path) -> None:
    config = stack("eks-al2023-nvidia")
    config["gpuplane:gpuOperator"]["toolkit"] = "operator"
    finding = _one(plan(tmp_path, config), "FM08")
    assert "EKS AL2023 NVIDIA AMI" in finding["message"] and "Toolkit" in finding["message"]
    assert "gpuplane:gpuOperator.toolkit: host" in finding["fix"]


def test_trap_operator_driver_where_the_image_preinstalls_it(tmp_path: Path) -> None:
    config = stack("aks-ubuntu")
    config["gpuplane:gpuOperator"]["driver"] = "managed"
    finding = _one(plan(tmp_path, config), "FM08")
    assert "AKS Ubuntu GPU node image" in finding["message"]
    assert "driver: preinstalled" in finding["fix"]


def test_trap_operator_driver_on_eks_al2023_standard(tmp_path: Path) -> None:
    config = stack("eks-al2023")
    config["gpuplane:gpuOperator"]["driver"] = "managed"
    finding = _one(plan(tmp_path, config), "FM08")
    assert "no Amazon Linux 2023 image" in finding["message"]


@pytest.mark.parametrize("plugin", ["gpu-operator", "hami"])
def test_trap_second_device_plugin_on_bottlerocket(tmp_path: Path, plugin: str) -> None:
    config = stack("bottlerocket-nvidia")
    config["gpuplane:devicePlugin"] = plugin
    if plugin == "hami":   # HAMi shares GPUs itself: the stack's time-slicing cannot stay
        del config["gpuplane:timeSlicing"]
    finding = _one(plan(tmp_path, config), "FM12")
    assert "Bottlerocket" in finding["message"]
    assert "devicePlugin: platform" in finding["fix"]


def test_trap_runtime_class_the_platform_lacks(tmp_path: Path) -> None:
    config = stack("aks-ubuntu")
    config["gpuplane:runtime"]["name"] = "nvidia"
    report = plan(tmp_path, config)
    finding = _one(report, "FM11")
    assert "'nvidia-container-runtime'" in finding["message"]


@pytest.mark.parametrize("name", ["gke-cos", "gke-ubuntu"])
def test_trap_config_dump_source_on_gke_133(tmp_path: Path, name: str) -> None:
    config = values(stack(name), {"toolkit": {"env": [
        {"name": "RUNTIME_CONFIG_SOURCE", "value": "command"}]}})
    finding = _one(plan(tmp_path, config), "FM17")
    assert "nvidia-container-toolkit#1222" in finding["message"]


def test_config_dump_source_before_gke_133_and_off_platform_is_no_error(
        tmp_path: Path) -> None:
    bad = [{"name": "RUNTIME_CONFIG_SOURCE", "value": "command"}]
    config = values(stack("gke-ubuntu"), {"toolkit": {"env": bad}})
    config["gpuplane:cluster"].update(kubernetesVersion="1.32.4", containerdVersion="1.7")
    assert not [f for f in errors(plan(tmp_path, config)) if f["id"] == "FM17"]
    config = values(stack("gke-ubuntu"), {"toolkit": {"env": bad}})
    del config["gpuplane:cluster"]["platform"]   # a self-managed kubeadm node, same env
    assert not [f for f in errors(plan(tmp_path, config)) if f["id"] == "FM17"]


@pytest.mark.parametrize("path", [{"toolkit": {"installDir": "/usr/local/nvidia"}},
                                  {"hostPaths": {"driverInstallDir": "/run/nvidia/driver"}}])
def test_trap_cos_install_dirs(tmp_path: Path, path: dict[str, Any]) -> None:
    finding = _one(plan(tmp_path, values(stack("gke-cos"), path)), "FM15")
    assert "/home/kubernetes/bin/nvidia" in finding["fix"]


def test_trap_node_files_on_a_platform_that_rewrites_them(tmp_path: Path) -> None:
    config = stack("eks-al2023-nvidia")
    config["gpuplane:cluster"]["nodeAccess"] = "ssh"
    config["gpuplane:nodes"] = [{**n, "host": f"10.0.0.{i}"}
                                for i, n in enumerate(config["gpuplane:nodes"], 1)]
    config["gpuplane:gpuOperator"]["toolkit"] = "host"
    config["gpuplane:docker"] = {"nvidiaRuntime": True}   # a file gpuplane would write
    config["gpuplane:sshPrivateKey"] = {"secure": "v1:not-a-key"}
    finding = _one(plan(tmp_path, config), "FM04")
    assert "nodeadm renders it at every boot" in finding["message"]
    assert "gpuplane:cluster.nodeAccess: none" in finding["fix"]


def test_trap_hami_paths_under_cos_read_only_root(tmp_path: Path) -> None:
    config = stack("gke-cos")
    config["gpuplane:devicePlugin"] = "hami"
    config["gpuplane:gpuOperator"]["cdi"] = False
    finding = _one(plan(tmp_path, config), "FM13")
    assert "read-only" in finding["message"]
    config["gpuplane:hami"] = {"values": {
        "global": {"gpuHookPath": "/home/kubernetes/bin/hami"},
        "devicePlugin": {"libPath": "/home/kubernetes/bin/hami/vgpu"}}}
    assert not [f for f in errors(plan(tmp_path, config)) if f["id"] == "FM13"]


@pytest.mark.parametrize("name", ["eks-al2023-nvidia", "aks-ubuntu"])
def test_hami_where_the_platform_has_no_extra_prerequisite(tmp_path: Path, name: str) -> None:
    """EKS's and AKS's images make NVIDIA's runtime the default: HAMi's own needs."""
    config = stack(name)
    config["gpuplane:devicePlugin"] = "hami"
    # the chart's own CDI default (on from v25.10) is FM13 under HAMi
    assert {f["id"] for f in errors(plan(tmp_path, config))} == {"FM13"}
    config["gpuplane:gpuOperator"]["cdi"] = False
    assert errors(plan(tmp_path, config)) == []


# ---------------------------------------------------------------- detection


def node(name: str, labels: dict[str, str], os_image: str, provider: str,
         gpus: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"providerID": provider},
            "status": {"capacity": {"nvidia.com/gpu": str(gpus)},
                       "nodeInfo": {"osImage": os_image,
                                    "containerRuntimeVersion": "containerd://2.1.4",
                                    "kubeletVersion": "v1.33.4-eks-1234"}}}


EKS = node("ip-10-0-1-23.ec2.internal",
           {"eks.amazonaws.com/nodegroup": "gpu", "eks.amazonaws.com/capacityType": "ON_DEMAND",
            "node.kubernetes.io/instance-type": "g6.12xlarge"},
           "Amazon Linux 2023.8.20250808", "aws:///us-east-1a/i-0abc123def4567890")
BOTTLEROCKET = node("ip-10-0-4-8.ec2.internal", {"eks.amazonaws.com/nodegroup": "p5"},
                    "Bottlerocket OS 1.44.0 (aws-k8s-1.33-nvidia)",
                    "aws:///us-east-1a/i-0fedcba9876543210")
COS = node("gke-gpu-pool-1a2b3c4d-x7k2",
           {"cloud.google.com/gke-nodepool": "gpu-pool",
            "cloud.google.com/gke-os-distribution": "cos",
            "cloud.google.com/gke-accelerator": "nvidia-l4"},
           "Container-Optimized OS from Google", "gce://proj/us-central1-a/gke-gpu-pool-x7k2")
GKE_UBUNTU = node("gke-gpu-ubuntu-5e6f7a8b-q9w1",
                  {"cloud.google.com/gke-nodepool": "gpu-ubuntu",
                   "cloud.google.com/gke-os-distribution": "ubuntu"},
                  "Ubuntu 22.04.5 LTS", "gce://proj/us-central1-a/gke-gpu-ubuntu-q9w1")
AKS = node("aks-gpunp-12345678-vmss000000",
           {"kubernetes.azure.com/cluster": "MC_rg_aks_eastus",
            "kubernetes.azure.com/os-sku": "Ubuntu", "kubernetes.azure.com/agentpool": "gpunp"},
           "Ubuntu 24.04.2 LTS",
           "azure:///subscriptions/x/resourceGroups/mc/providers/Microsoft.Compute/"
           "virtualMachineScaleSets/aks-gpunp-12345678-vmss/virtualMachines/0")
KUBEADM = node("a100-01", {"kubernetes.io/hostname": "a100-01"}, "Ubuntu 22.04.4 LTS", "")


@pytest.mark.parametrize(("obj", "runtime", "want"), [
    (EKS, "nvidia", Platform.EKS_AL2023_NVIDIA),
    (EKS, "runc", Platform.EKS_AL2023),
    (BOTTLEROCKET, None, Platform.BOTTLEROCKET_NVIDIA),
    (COS, None, Platform.GKE_COS),
    (GKE_UBUNTU, None, Platform.GKE_UBUNTU),
    (AKS, None, Platform.AKS_UBUNTU),
    (KUBEADM, None, None),
])
def test_detection_from_realistic_node_objects(obj: dict[str, Any], runtime: str | None,
                                                want: Platform | None) -> None:
    found = detect_platform(obj, runtime)
    assert found.platform == want, found
    if want is not None:
        assert found.advice(None) == (
            f"gpuplane:cluster.platform is not set but the node runs {PLATFORMS[want].title} "
            f"({'; '.join(found.evidence)}); set cluster.platform: {want.value}")
        assert found.advice(want.value) is None
    else:
        assert found.advice(None) is None
        assert "remove cluster.platform" in (found.advice("gke-cos") or "")


def test_eks_al2023_without_the_config_names_both_amis() -> None:
    found = detect_platform(EKS)
    assert found.platform is None and found.cloud == "eks"
    advice = found.advice(None) or ""
    assert "eks-al2023-nvidia or eks-al2023" in advice and "default runtime" in advice
    assert found.advice("eks-al2023") is None


def test_a_bottlerocket_variant_without_nvidia_has_no_profile() -> None:
    plain = copy.deepcopy(BOTTLEROCKET)
    plain["status"]["nodeInfo"]["osImage"] = "Bottlerocket OS 1.44.0 (aws-k8s-1.33)"
    found = detect_platform(plain)
    assert found.platform is None and "aws-k8s-*-nvidia" in found.note


def test_the_doctor_infers_the_platform_and_names_the_stack_key() -> None:
    source = infer(ClusterView(Snapshot(nodes=[COS])), {})
    assert source.intent.platform == "gke-cos"
    assert "gpuplane:cluster.platform: gke-cos" in source.inferred["platform"]
    source = infer(ClusterView(Snapshot(nodes=[KUBEADM])), {})
    assert source.intent.platform is None and "platform" not in source.inferred


class _Api:
    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        assert path == f"/api/v1/nodes/{self.obj['metadata']['name']}"
        return self.obj


def test_capture_compares_the_node_with_cluster_platform() -> None:
    from gpuplane.capture.run import platform_problems

    config = stack("eks-al2023-nvidia")
    cfg = parse_stack_config({k.split(":", 1)[1]: v for k, v in config.items()})
    files = cfg.profile.baseline(cfg.containerd)
    assert platform_problems(cfg, _Api(EKS), EKS["metadata"]["name"], files) == []  # type: ignore[arg-type]
    standard = on_platform(profile(Distro.KUBEADM), "eks-al2023").baseline(cfg.containerd)
    (problem,) = platform_problems(cfg, _Api(EKS), EKS["metadata"]["name"], standard)  # type: ignore[arg-type]
    assert "set cluster.platform: eks-al2023" in problem


@pytest.mark.parametrize("name", list(Platform))
def test_bundled_stack_renders_the_values_the_platform_docs_recommend(
        tmp_path: Path, name: Platform) -> None:
    """Each platform's bundled stack gives the operator the values its profile records
    from the platform's (or NVIDIA's) docs."""
    report = plan(tmp_path, stack(name.value))
    helm = report["helm"]["gpu-operator"]["values"]
    for path, want in PLATFORMS[name].operator_values.items():
        if path == "toolkit.env RUNTIME_CONFIG_SOURCE":
            env = {e["name"]: e["value"] for e in helm["toolkit"]["env"]}
            assert env["RUNTIME_CONFIG_SOURCE"].startswith("file="), env
            continue
        node: Any = helm
        for part in path.split("."):
            node = node[part]
        assert node == want, (path, node)
