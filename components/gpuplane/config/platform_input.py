"""The stack config -> the managed platform's own node input (issue #29).

Why here: the pure builders (`eks_nodeconfig`, `bottlerocket_settings`, `aks_nodepool`,
`gke_nodepool`) speak the platform's terms; this module is the one place that reads them
out of `gpuplane:*`, so `gpuplane plan` and the stack output `platformInput` agree. A
refusal (`PlatformInputError`) becomes a `StackConfigError` on the stack key the user
writes, so the plan and `pulumi up` report it like any other bad key.
"""

from __future__ import annotations

from typing import Literal

from gpuplane.config import NAMESPACE, StackConfig, StackConfigError
from gpuplane.core.findings import Finding
from gpuplane.platforms.native.aks import AksNodePool, aks_nodepool
from gpuplane.platforms.native.bottlerocket import DevicePluginIntent, bottlerocket_settings
from gpuplane.platforms.native.eks_nodeconfig import (
    NVIDIA_BINARY,
    AmiVariant,
    EksNode,
    RuntimeIntent,
    eks_nodeconfig,
)
from gpuplane.platforms.native.gke import GkeNodePool, gke_nodepool
from gpuplane.platforms.native.result import PlatformInput, PlatformInputError
from gpuplane.platforms.profiles import Platform
from gpuplane.toolkit.operator import OPERATOR_ROOT

_EKS = {Platform.EKS_AL2023_NVIDIA: AmiVariant.NVIDIA, Platform.EKS_AL2023: AmiVariant.STANDARD}
_GKE_IMAGE = {Platform.GKE_COS: "COS_CONTAINERD", Platform.GKE_UBUNTU: "UBUNTU_CONTAINERD"}
# The builders' own key names -> the stack keys a user writes.
_KEYS = {
    f"{NAMESPACE}:platform.kubeletVersion": f"{NAMESPACE}:cluster.kubernetesVersion",
    f"{NAMESPACE}:platform.containerdVersion": f"{NAMESPACE}:cluster.containerdVersion",
    f"{NAMESPACE}:platform": f"{NAMESPACE}:cluster.containerdVersion",
}
_POOL_PREFIXES = (f"{NAMESPACE}:platform.aks.", f"{NAMESPACE}:platform.gke.")


def platform_input(cfg: StackConfig) -> tuple[PlatformInput | None, list[Finding]]:
    """The input to feed the platform (None on self-managed nodes) and the rulebook's
    findings on what the platform makes of it (EKS: nodeadm's merged containerd config).
    Raises StackConfigError naming the stack key and the fix."""
    plat = cfg.cluster.platform
    if plat is None:
        return None, []
    try:
        if plat in _EKS:
            result = eks_nodeconfig(_eks_node(cfg, _EKS[plat]), _runtime_intent(cfg, _EKS[plat]))
            return result.platform_input, list(result.findings)
        if plat is Platform.BOTTLEROCKET_NVIDIA:
            if cfg.device_plugin == "hami":
                # No setting turns the image's plugin off: FM12 rejects the plan with the
                # fix, and there is no input to hand out.
                return None, []
            return bottlerocket_settings(DevicePluginIntent.from_time_slicing(
                cfg.time_slicing, device_plugin="gpu-operator")), []
        if plat is Platform.AKS_UBUNTU:
            return _aks(cfg), []
        return _gke(cfg, _GKE_IMAGE[plat]), []
    except PlatformInputError as exc:
        key = _KEYS.get(exc.key, exc.key)
        for prefix in _POOL_PREFIXES:
            if key.startswith(prefix):
                key = f"{NAMESPACE}:nodePool.{key.removeprefix(prefix)}"
        raise StackConfigError([(key, f"{exc.problem} Fix: {exc.fix}")]) from None


def _eks_node(cfg: StackConfig, ami: AmiVariant) -> EksNode:
    return EksNode(ami=ami, kubelet_version=cfg.cluster.kubernetes_version,
                   containerd_version=cfg.cluster.containerd_version)


def _runtime_intent(cfg: StackConfig, ami: AmiVariant) -> RuntimeIntent:
    """`runtime.*` and `gpuOperator.cdi` as nodeadm's snippet needs them: on the standard
    AMI the runtime is the binary the operator's toolkit installs (`toolkit.installDir`);
    `nvidiaDefault: false` and `cdi: false` keep nodeadm's own choice."""
    if ami is AmiVariant.NVIDIA:
        binary = NVIDIA_BINARY
    else:
        toolkit = cfg.gpu_operator.values.get("toolkit") if cfg.gpu_operator else None
        root = toolkit.get("installDir") if isinstance(toolkit, dict) else None
        binary = f"{str(root or OPERATOR_ROOT).rstrip('/')}/toolkit/nvidia-container-runtime"
    return RuntimeIntent(runtime_name=cfg.runtime.name, nvidia_binary=binary,
                         default_runtime=cfg.runtime.name if cfg.runtime.nvidia_default else None,
                         enable_cdi=True if cfg.gpu_operator and cfg.gpu_operator.cdi else None)


def _aks(cfg: StackConfig) -> PlatformInput:
    pool = cfg.node_pool
    driver: Literal["aks", "operator"] = \
        "operator" if cfg.gpu_operator and cfg.gpu_operator.driver == "managed" else "aks"
    if pool is None:
        return _pool_missing("aks-nodepool", "AKS", "`az aks nodepool add` command",
                             "cluster, name, resourceGroup, vmSize",
                             ("containerd's config on the node (AgentBaker writes it)",))
    assert pool.resource_group and pool.vm_size   # gpuplane.config (stack.py) requires them on AKS
    return aks_nodepool(AksNodePool(
        resource_group=pool.resource_group, cluster=pool.cluster, name=pool.name,
        vm_size=pool.vm_size, node_count=pool.node_count, driver=driver,
        az_cli_version=pool.az_cli_version, labels=pool.labels))


def _gke(cfg: StackConfig, image: str) -> PlatformInput:
    pool = cfg.node_pool
    if pool is None:
        return _pool_missing("gke-nodepool", f"GKE ({image})",
                             "`gcloud container node-pools create` command",
                             "cluster, name, acceleratorType",
                             ("the node's files (GKE manages the node image)",))
    assert pool.accelerator_type   # gpuplane.config (stack.py) requires it on GKE
    return gke_nodepool(GkeNodePool(
        cluster=pool.cluster, name=pool.name, accelerator_type=pool.accelerator_type,
        accelerator_count=pool.accelerator_count, machine_type=pool.machine_type,
        location=pool.location, image_type=image, labels=pool.labels))


def _pool_missing(kind: str, platform: str, what: str, keys: str,
                  untouched: tuple[str, ...]) -> PlatformInput:
    """Without `nodePool` the stack lacks the pool's own facts: say which keys give the
    command instead of printing one with made-up names."""
    return PlatformInput(
        kind=kind, platform=platform,  # type: ignore[arg-type]
        summary=f"set {NAMESPACE}:nodePool ({keys}) to get the {what} and its fields",
        will_not_touch=untouched, notes=("docs/platform-inputs.md shows the command",))


__all__ = ["platform_input"]
