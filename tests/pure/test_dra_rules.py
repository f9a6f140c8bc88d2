"""FM30-FM37, NVIDIA's DRA driver: each rule on the values and facts that break it, and
silent on the ones that work (gpuplane.rules.dra, gpuplane.rules.dra_workloads)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuplane.core.intent import ClusterIntent
from gpuplane.rules.dra import check_dra_release, check_operator_dra
from gpuplane.rules.dra_workloads import check_claim
from gpuplane.rules.workloads import check_workload

# A working cluster for the driver: Kubernetes 1.34, containerd 2.x, host driver.
GOOD = ClusterIntent(kubernetes_version="1.34.3", containerd_version="2.1", dra=True,
                     dra_chart_version="v0.4.1")
# The values gpuplane renders for it (gpuplane.config.helm_values.dra_release_values).
VALUES: dict[str, Any] = {
    "nvidiaDriverRoot": "/", "gpuResourcesEnabledOverride": True,
    "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
    "kubeletPlugin": {"kubeletRegistrarDirectoryPath": "/var/lib/kubelet/plugins_registry",
                      "kubeletPluginsDirectoryPath": "/var/lib/kubelet/plugins"}}
OPERATOR_OFF = {"devicePlugin": {"enabled": False}}


def ids(values: dict[str, Any] = VALUES, intent: ClusterIntent = GOOD,
        **kw: Any) -> list[str]:
    return [f.id for f in check_dra_release(values, intent, where="Release dra", **kw)]


def with_(values: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {**values, **top}


def test_good_release_is_clean() -> None:
    assert ids(operator=OPERATOR_OFF) == []


def test_fm30_containerd_1_6_and_1_7_without_cdi() -> None:
    assert ids(intent=replace(GOOD, containerd_version="1.6")) == ["FM30"]
    found = check_dra_release(VALUES, replace(GOOD, containerd_version="1.7"), where="R")
    assert [f.id for f in found] == ["FM30"]
    assert "gpuplane:gpuOperator.cdi" in found[0].where
    assert found[0].changes == (("gpuplane:gpuOperator.cdi", True),)   # the fix
    assert ids(intent=replace(GOOD, containerd_version="1.7", cdi=True)) == []
    assert ids(intent=replace(GOOD, containerd_version="2.0")) == []


def test_fm31_driver_root_for_host_and_operator_driver() -> None:
    managed = replace(GOOD, driver_preinstalled=False)
    found = check_dra_release(VALUES, managed, where="R")
    assert [f.id for f in found] == ["FM31"] and "/run/nvidia/driver" in found[0].fix
    assert ids(with_(VALUES, nvidiaDriverRoot="/run/nvidia/driver/"), managed) == []
    assert ids(with_(VALUES, nvidiaDriverRoot="/run/nvidia/driver")) == ["FM31"]
    # A plain install: the operator in the same program decides (driver.enabled).
    assert ids(driver_managed=True, intent=replace(GOOD, dra=False)) == ["FM31"]
    # GKE COS is FM15's (gpuplane.rules.platform.check_dra_driver_root), not FM31's.
    assert ids(intent=replace(GOOD, platform="gke-cos")) == []


def test_fm32_operator_device_plugin_beside_the_driver() -> None:
    assert ids(operator={}) == ["FM32"]                       # the chart's default: on
    assert ids(operator={"devicePlugin": {"enabled": "true"}}) == ["FM32"]
    assert ids(operator=OPERATOR_OFF) == []
    off = with_(VALUES, resources={"gpus": {"enabled": False},
                                   "computeDomains": {"enabled": True}})
    assert "FM32" not in ids(off, operator={})               # ComputeDomains only
    assert ids(intent=replace(GOOD, device_plugin="hami")) == ["FM32"]


def test_fm32_pod_asks_for_nvidia_gpu_and_a_claim() -> None:
    pod = {"kind": "Pod", "spec": {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
        "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}],
                                                   "limits": {"nvidia.com/gpu": 1}}}]}}
    intent = replace(GOOD, cdi=True)
    assert [f.id for f in check_workload(pod, intent, "Pod ns/p")] == ["FM32"]
    del pod["spec"]["containers"][0]["resources"]["limits"]
    assert check_workload(pod, intent, "Pod ns/p") == []


def test_fm33_kubernetes_before_1_34() -> None:
    old = check_dra_release(VALUES, replace(GOOD, kubernetes_version="1.31.4"), where="R")
    assert [(f.id, f.severity.value) for f in old] == [("FM33", "error")]
    beta = check_dra_release(VALUES, replace(GOOD, kubernetes_version="1.33.2"), where="R")
    assert [(f.id, f.severity.value) for f in beta] == [("FM33", "warning")]
    assert ids(intent=replace(GOOD, kubernetes_version="1.35.0")) == []


def test_fm34_cluster_policy_and_gpu_cluster() -> None:
    both = {"gpuCluster": {"deployCR": True}}
    assert [f.id for f in check_operator_dra(both, where="R")] == ["FM34"]
    alone = {"gpuCluster": {"deployCR": True}, "clusterPolicy": {"deployCR": False}}
    assert check_operator_dra(alone, where="R") == []
    assert [f.id for f in check_operator_dra(alone, where="R", dra_release=True)] == ["FM34"]
    assert check_operator_dra({}, where="R", dra_release=True) == []


def test_fm35_imex_with_compute_domains_on_preinstalled_driver() -> None:
    cds = with_(VALUES, resources={"gpus": {"enabled": True},
                                   "computeDomains": {"enabled": True}})
    found = check_dra_release(cds, GOOD, where="R", operator=OPERATOR_OFF)
    assert [(f.id, f.severity.value) for f in found] == [("FM35", "warning")]
    assert "mask nvidia-imex.service" in found[0].fix
    managed = replace(GOOD, driver_preinstalled=False)
    assert ids(with_(cds, nvidiaDriverRoot="/run/nvidia/driver"), managed,
               operator=OPERATOR_OFF) == []


def test_fm35_says_where_gpuplane_masks_the_unit() -> None:
    """Where the node agent masks nvidia-imex.service (node access), FM35 names the nodes
    and leaves no command to run; a program gpuplane did not write keeps the commands."""
    from gpuplane.core.intent import NodeIntent

    cds = with_(VALUES, resources={"gpus": {"enabled": True},
                                   "computeDomains": {"enabled": True}})
    masks = replace(GOOD, dra_compute_domains=True, dra_masks_imex=True,
                    nodes=(NodeIntent("gpu-a"), NodeIntent("gpu-b"), NodeIntent("cpu", 0)))
    (found,) = check_dra_release(cds, masks, where="R", operator=OPERATOR_OFF)
    assert found.id == "FM35" and found.severity.value == "warning"
    assert "gpuplane masks it on gpu-a, gpu-b " in found.message
    assert "systemctl" not in found.fix
    assert "gpuplane:draDriver.computeDomains: false" in found.fix
    foreign = replace(masks, dra=False)   # the pack judging a release it did not make
    (found,) = check_dra_release(cds, foreign, where="R", operator=OPERATOR_OFF)
    assert "systemctl mask nvidia-imex.service" in found.fix
    assert ClusterIntent.from_json(masks.to_json()).dra_masks_imex is True


def test_fm36_k0s_kubelet_plugin_paths() -> None:
    k0s = replace(GOOD, distro="k0s")
    assert ids(intent=k0s, operator=OPERATOR_OFF) == ["FM36", "FM36"]
    # The chart's defaults: the paths under /var/lib/kubelet (and ComputeDomains on: FM35).
    assert ids({}, k0s, operator=OPERATOR_OFF) == ["FM35", "FM36", "FM36"]
    moved = with_(VALUES, kubeletPlugin={
        "kubeletRegistrarDirectoryPath": "/var/lib/k0s/kubelet/plugins_registry",
        "kubeletPluginsDirectoryPath": "/var/lib/k0s/kubelet/plugins"})
    assert ids(moved, k0s, operator=OPERATOR_OFF) == []
    assert ids(moved, GOOD, operator=OPERATOR_OFF) == ["FM36", "FM36"]


def claim(request: dict[str, Any], kind: str = "ResourceClaimTemplate") -> dict[str, Any]:
    devices = {"requests": [{"name": "gpu", **request}]}
    spec = {"spec": {"devices": devices}} if kind == "ResourceClaimTemplate" \
        else {"devices": devices}
    return {"kind": kind, "spec": spec}


def test_fm37_device_class_the_driver_does_not_create() -> None:
    def found(name: str, intent: ClusterIntent = GOOD, **kw: Any) -> list[str]:
        return [f.id for f in check_claim(claim({"exactly": {"deviceClassName": name}}, **kw),
                                          intent, "RCT ns/x")]

    assert found("gpu.nvidia.com") == [] and found("mig.nvidia.com") == []
    assert found("imex.nvidia.com") == ["FM37"]              # the stale demo's class
    assert found("my-own-class") == []                        # not the driver's to judge
    # VFIO from v25.12.0; ComputeDomain classes only with computeDomains on.
    assert found("vfio.gpu.nvidia.com", replace(GOOD, dra_chart_version="v25.8.1")) == ["FM37"]
    assert found("compute-domain-daemon.nvidia.com") == ["FM37"]
    assert found("compute-domain-daemon.nvidia.com",
                 replace(GOOD, dra_compute_domains=True)) == []
    # v1beta1's shape (the class on the request) and a ResourceClaim.
    beta = claim({"deviceClassName": "imex.nvidia.com"}, kind="ResourceClaim")
    assert [f.id for f in check_claim(beta, GOOD, "RC ns/x")] == ["FM37"]


def test_fm37_selector_on_an_attribute_the_driver_does_not_publish() -> None:
    def found(expression: str, intent: ClusterIntent = GOOD) -> list[str]:
        request = {"exactly": {"deviceClassName": "gpu.nvidia.com",
                               "selectors": [{"cel": {"expression": expression}}]}}
        return [f.id for f in check_claim(claim(request), intent, "RCT ns/x")]

    assert found("device.attributes['gpu.nvidia.com'].index == 0") == ["FM37"]
    assert found('device.attributes["gpu.nvidia.com"]["minor"] == 1') == ["FM37"]
    assert found("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100'") == []
    assert found("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'") == []
    # The PCI bus ID left the driver's domain at v25.12.0.
    pci = "device.attributes['gpu.nvidia.com'].pcieBusID == '0000:3b:00.0'"
    assert found(pci, replace(GOOD, dra_chart_version="v25.8.1")) == []
    assert found(pci) == ["FM37"]
    # Another driver's attributes are not this rulebook's.
    assert found("device.attributes['example.com'].index == 0") == []
