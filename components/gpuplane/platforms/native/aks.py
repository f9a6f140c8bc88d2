"""AKS: the node-pool flags and fields for a GPU pool, per NVIDIA's and Microsoft's
recipes.

Why: AKS GPU node images preinstall the driver and the toolkit, and AgentBaker writes
containerd's config; gpuplane writes no node file there. Either keep the preinstalled
stack (the operator with `driver.enabled=false`, `toolkit.enabled=false`,
`operator.runtimeClass=nvidia-container-runtime`: NVIDIA cloud-native-docs
`gpu-operator/microsoft-aks.rst`), or create the pool without the driver and let the
operator install it. Facts:

- `az aks nodepool add --gpu-driver none` skips the driver; it needs Azure CLI >= 2.72.2
  (learn.microsoft.com/azure/aks/nvidia-gpu-operator). Older CLIs had the preview flag
  `--skip-gpu-driver-install` (NVIDIA `microsoft-aks.rst`, "Skip GPU driver installation").
- The same setting in the ARM AgentPool: `properties.gpuProfile.driver`, "Install" (the
  default) or "None" (@azure/arm-containerservice `GPUProfile.driver`). Pulumi's
  azure-native `containerservice.AgentPool` takes `resourceGroupName`, `resourceName`
  (the cluster), `agentPoolName`, `vmSize`, `count`, `nodeLabels` and `gpuProfile`
  (the resource uses ARM API 2025-08-01 in azure-native 3.12.0, unpkg
  `@pulumi/azure-native@3.12.0/containerservice/agentPool.js`).
- The setting applies to new nodes only; existing nodes keep their driver.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from gpuplane.platforms.native.labels import check_labels
from gpuplane.platforms.native.result import PlatformInput, PlatformInputError

SOURCES = (
    "NVIDIA/cloud-native-docs gpu-operator/microsoft-aks.rst",
    "learn.microsoft.com/azure/aks/nvidia-gpu-operator (--gpu-driver none, CLI >= 2.72.2)",
    "@azure/arm-containerservice GPUProfile.driver (Install | None)",
)
GPU_DRIVER_FLAG_FROM = (2, 72, 2)
_KEY = "gpuplane:platform.aks"


@dataclass(frozen=True)
class AksNodePool:
    """A GPU node pool to create. `driver`: who installs the NVIDIA driver and toolkit,
    `aks` (the node image's, kept) or `operator` (the pool is created without them)."""

    resource_group: str
    cluster: str
    name: str
    vm_size: str
    node_count: int = 1
    driver: Literal["aks", "operator"] = "aks"
    az_cli_version: str = "2.72.2"
    labels: Mapping[str, str] = field(default_factory=dict)


def _cli(version: str) -> tuple[int, int, int]:
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?", version.strip())
    if not match:
        raise PlatformInputError(f"{_KEY}.azCliVersion", f"Azure CLI version {version!r} is "
                                 "not X.Y.Z.", "Set the output of `az version`, e.g. 2.72.2.")
    return int(match[1]), int(match[2]), int(match[3] or 0)


def aks_nodepool(pool: AksNodePool) -> PlatformInput:
    """The `az aks nodepool add` command and the AgentPool fields for `pool`."""
    labels = check_labels(pool.labels, f"{_KEY}.labels")
    if pool.node_count < 0:
        raise PlatformInputError(f"{_KEY}.nodeCount", f"node count {pool.node_count}.",
                                 "Use 0 or more.")
    argv = ["az", "aks", "nodepool", "add", "--resource-group", pool.resource_group,
            "--cluster-name", pool.cluster, "--name", pool.name,
            "--node-vm-size", pool.vm_size, "--node-count", str(pool.node_count)]
    fields: dict[str, object] = {
        "resourceGroupName": pool.resource_group, "resourceName": pool.cluster,
        "agentPoolName": pool.name, "vmSize": pool.vm_size, "count": pool.node_count}
    notes: list[str] = []
    if pool.driver == "operator":
        if _cli(pool.az_cli_version) >= GPU_DRIVER_FLAG_FROM:
            argv += ["--gpu-driver", "none"]
        else:
            argv += ["--skip-gpu-driver-install"]
            notes.append(f"Azure CLI {pool.az_cli_version} predates --gpu-driver (2.72.2); "
                         "--skip-gpu-driver-install is the older preview flag")
        fields["gpuProfile"] = {"driver": "None"}
        notes.append("the GPU Operator installs the driver and toolkit: driver.enabled and "
                     "toolkit.enabled stay true")
        summary = "create the GPU pool without AKS's NVIDIA driver"
        untouched: tuple[str, ...] = ("containerd's config on the node (AgentBaker writes it)",)
    else:
        notes.append("keep the image's stack: driver.enabled=false, toolkit.enabled=false, "
                     "operator.runtimeClass=nvidia-container-runtime")
        summary = "create the GPU pool with AKS's preinstalled NVIDIA driver and toolkit"
        untouched = ("containerd's config on the node (AgentBaker writes it)",
                     "the preinstalled NVIDIA driver and container toolkit")
    if labels:
        argv += ["--labels", *(f"{k}={v}" for k, v in labels.items())]
        fields["nodeLabels"] = labels
    return PlatformInput(kind="aks-nodepool", platform="AKS", summary=summary,
                         fields=fields, command=tuple(argv), will_not_touch=untouched,
                         sources=SOURCES, notes=(*notes, "applies to new nodes only"))
