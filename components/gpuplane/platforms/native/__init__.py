"""Platform-native node changes (issue #29): where a managed platform owns node
configuration, gpuplane produces the platform's own input instead of writing node files.

Pure modules, no Pulumi and no I/O: the plan, the stack outputs and `gpuplane plan` wire
them in. Each entry point returns a `PlatformInput` (EKS: inside an
`EksNodeConfigResult` with the merged config and the rulebook's findings) or raises
`PlatformInputError` naming the stack key and the fix.
"""

from gpuplane.platforms.native.aks import AksNodePool, aks_nodepool
from gpuplane.platforms.native.bottlerocket import DevicePluginIntent, bottlerocket_settings
from gpuplane.platforms.native.eks_nodeconfig import (
    AmiVariant,
    EksNode,
    EksNodeConfigResult,
    RuntimeIntent,
    eks_nodeconfig,
)
from gpuplane.platforms.native.gke import GkeNodePool, gke_nodepool
from gpuplane.platforms.native.result import PlatformInput, PlatformInputError

__all__ = [
    "AksNodePool",
    "AmiVariant",
    "DevicePluginIntent",
    "EksNode",
    "EksNodeConfigResult",
    "GkeNodePool",
    "PlatformInput",
    "PlatformInputError",
    "RuntimeIntent",
    "aks_nodepool",
    "bottlerocket_settings",
    "eks_nodeconfig",
    "gke_nodepool",
]
