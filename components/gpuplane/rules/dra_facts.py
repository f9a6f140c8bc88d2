"""What NVIDIA's DRA driver for GPUs is, per release: its charts, the DeviceClasses each
release creates, the device attributes it publishes, and the kubelet paths its plugin
registers under. Facts only (file@tag), read by the DRA rules (`gpuplane.rules.dra`) and
by the stack config that renders the chart's values.

Sources: NVIDIA/k8s-dra-driver-gpu at v25.8.1, v25.12.0, v0.4.0 and
kubernetes-sigs/dra-driver-nvidia-gpu at v0.4.1 (the project moved there at v0.4.0,
docs/upgrade.md@v0.4.0).
"""

from __future__ import annotations

import re

from gpuplane.rules.platform import DRA_CHARTS

DRA_CHART_V25, DRA_CHART = DRA_CHARTS   # Chart.yaml `name`@v25.12.0, @v0.4.0
# The releases whose facts gpuplane carries, oldest first.
DRA_KNOWN = ("v25.8.1", "v25.12.0", "v0.4.0", "v0.4.1")
DRA_NEWEST = DRA_KNOWN[-1]
_EXACT = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")

GPU_DRIVER = "gpu.nvidia.com"                 # cmd/gpu-kubelet-plugin/main.go@every tag
CD_DRIVER = "compute-domain.nvidia.com"       # cmd/compute-domain-kubelet-plugin/main.go
# DeviceClasses: templates/deviceclass-*.yaml@each tag; the GPU part's with
# resources.gpus.enabled, the ComputeDomain part's with resources.computeDomains.enabled.
GPU_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com")
VFIO_CLASS = "vfio.gpu.nvidia.com"            # deviceclass-vfio-gpu.yaml, from v25.12.0
CD_CLASSES = ("compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com")
# Device attributes under `device.attributes['gpu.nvidia.com']` (cmd/gpu-kubelet-plugin/
# deviceinfo.go, mig.go@each tag). `index` and `minor` were removed before v25.8.0
# (commit 36fc80ab); the PCI bus ID is `pcieBusID` in v25.8.1 and moved to
# `resource.kubernetes.io/pciBusID` from v25.12.0 (partitions.go@v25.12.0).
_GPU_ATTRS = ("type", "uuid", "productName", "brand", "architecture",
              "cudaComputeCapability", "driverVersion", "cudaDriverVersion")
_MIG_ATTRS = ("parentUUID", "profile")
_VFIO_ATTRS = ("deviceID", "vendorID", "numa", "iommuFDEnabled")
_CD_ATTRS = ("type", "id")      # cmd/compute-domain-kubelet-plugin/deviceinfo.go@v0.4.1
# The kubelet's root directory where a distribution moves it: k0s keeps kubelet state in
# its data dir (k0sproject/k0s pkg/constant/constant_posix.go: DataDirDefault
# /var/lib/k0s; the kubelet's root is `<dataDir>/kubelet`).
KUBELET_ROOT = {"k0s": "/var/lib/k0s/kubelet"}
DEFAULT_KUBELET_ROOT = "/var/lib/kubelet"   # kubeletPlugin.*DirectoryPath@every tag
# Where the driver serves some pools only (`draDriver.pools`): the label its kubelet
# plugin selects (kubeletPlugin.nodeSelector, templates/kubeletplugin.yaml@every tag), and
# the GPU Operator's per-node switch for its device plugin. The operator's DaemonSet
# selects `nvidia.com/gpu.deploy.device-plugin: "true"` (assets/state-device-plugin/
# 0500_daemonset.yaml), and it sets that label only where the node has none
# (addGPUStateLabels, controllers/state_manager.go@v24.3.0..v26.3.3; @v26.7.0 also where
# it is empty), so a "false" set first keeps the plugin off that node. MIG Manager keeps a
# "false" through a layout change too (maybeSetTrue, pkg/mig/reconfigure/reconfigure.go,
# NVIDIA/mig-parted@v0.14.0).
DRA_NODE_LABEL = "gpuplane.dev/dra-driver"
DEVICE_PLUGIN_DEPLOY = "nvidia.com/gpu.deploy.device-plugin"


def dra_node_labels(gpus: bool) -> dict[str, str]:
    """The labels of a node the driver serves where it serves some pools only: the
    kubelet plugin's selector, and (with GPUs by claim) the operator's device plugin off."""
    return {DRA_NODE_LABEL: "true", **({DEVICE_PLUGIN_DEPLOY: "false"} if gpus else {})}


def dra_order(version: str) -> tuple[int, int, int] | None:
    """A release's place in time: v25.x came before v0.4 (the project restarted its
    numbering when it moved), so a 0.x release sorts after every 25.x."""
    match = _EXACT.match(version.strip())
    if match is None:
        return None
    major, minor, patch = (int(p) for p in match.groups())
    return (100 + major, minor, patch) if major == 0 else (major, minor, patch)


def dra_chart_of(version: str) -> str:
    """The chart a release is published as: 0.x the renamed chart, v25.x the old one."""
    order = dra_order(version)
    return DRA_CHART_V25 if order is not None and order[0] < 100 else DRA_CHART


def dra_image_path(version: str) -> str:
    """The driver image's path in its registry (values.yaml `image.repository`@each tag:
    nvcr.io/nvidia/k8s-dra-driver-gpu for v25.x, registry.k8s.io/dra-driver-nvidia/
    dra-driver-nvidia-gpu from v0.4.0)."""
    if dra_chart_of(version) == DRA_CHART_V25:
        return "nvidia/k8s-dra-driver-gpu"
    return "dra-driver-nvidia/dra-driver-nvidia-gpu"


def known_release(version: str | None) -> str:
    """The known release a version names, else the newest (a range, a tag, unknown)."""
    order = dra_order(version or "")
    for tag in DRA_KNOWN:
        if order is not None and dra_order(tag) == order:
            return tag
    return DRA_NEWEST


def _from_v25_12(version: str) -> bool:
    return (dra_order(known_release(version)) or (0, 0, 0)) >= (25, 12, 0)


def device_classes(version: str | None, *, gpus: bool = True,
                   compute_domains: bool = True) -> tuple[str, ...]:
    """The DeviceClasses release `version` creates with these parts enabled."""
    release = known_release(version)
    out: list[str] = []
    if gpus:
        out += [*GPU_CLASSES, *([VFIO_CLASS] if _from_v25_12(release) else [])]
    if compute_domains:
        out += CD_CLASSES
    return tuple(out)


def gpu_attributes(version: str | None) -> tuple[str, ...]:
    """The attributes the GPU driver publishes under its own domain at `version`."""
    release = known_release(version)
    pci = () if _from_v25_12(release) else ("pcieBusID",)
    addressing = ("addressingMode",) if _from_v25_12(release) else ()
    return (*_GPU_ATTRS, *_MIG_ATTRS, *_VFIO_ATTRS, *pci, *addressing)


def attributes(driver: str, version: str | None) -> tuple[str, ...] | None:
    """The attributes `driver` publishes under its own domain; None for another driver."""
    if driver == GPU_DRIVER:
        return gpu_attributes(version)
    if driver == CD_DRIVER:
        return _CD_ATTRS
    return None


def kubelet_root(distro: str) -> str:
    """The kubelet's root directory on a distribution."""
    return KUBELET_ROOT.get(distro, DEFAULT_KUBELET_ROOT)


__all__ = [
    "CD_DRIVER",
    "DEVICE_PLUGIN_DEPLOY",
    "DRA_CHART",
    "DRA_CHARTS",
    "DRA_CHART_V25",
    "DRA_KNOWN",
    "DRA_NEWEST",
    "DRA_NODE_LABEL",
    "GPU_DRIVER",
    "attributes",
    "device_classes",
    "dra_chart_of",
    "dra_image_path",
    "dra_node_labels",
    "dra_order",
    "gpu_attributes",
    "known_release",
    "kubelet_root",
]
