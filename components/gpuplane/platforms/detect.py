"""Which managed platform a Kubernetes Node runs on, from what its object shows: the
labels the platform's node set-up adds, `status.nodeInfo.osImage` and `spec.providerID`.

A pure function over the Node object, so `gpuplane doctor` (inferring the intent of a
cluster) and `gpuplane nodes capture --via kubernetes` (comparing a node with its stack)
name the same `gpuplane:cluster.platform` value for the same node. Where the object
cannot tell two profiles apart (the EKS AL2023 NVIDIA and standard AMIs report the same
osImage), the default runtime of the node's containerd config decides when it is known.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuplane.platforms.profiles import PLATFORMS, Platform

STACK_KEY = "gpuplane:cluster.platform"

# Labels each platform's node set-up puts on every node (key prefix -> cloud).
_LABELS = (("eks.amazonaws.com/", "eks"), ("cloud.google.com/gke-", "gke"),
           ("kubernetes.azure.com/", "aks"))
_PROVIDERS = (("aws://", "eks"), ("gce://", "gke"), ("azure://", "aks"))


@dataclass(frozen=True)
class NodePlatform:
    """What a Node shows about its platform."""

    platform: Platform | None               # the profile to set; None: none fits
    cloud: str | None                       # eks / gke / aks, when any evidence says so
    evidence: tuple[str, ...] = ()          # what was read, for the report
    note: str = ""                          # why no profile fits, or what stays open
    candidates: tuple[Platform, ...] = field(default_factory=tuple)

    def advice(self, configured: str | None) -> str | None:
        """The stack change to make, or None when the stack already agrees."""
        seen = "; ".join(self.evidence) or "no platform label, osImage or providerID"
        if self.platform is None:
            if configured and self.cloud is None:
                return (f"{STACK_KEY} is {configured} but the node shows no managed platform "
                        f"({seen}); remove cluster.platform for self-managed nodes")
            if self.candidates and configured not in self.candidates:
                return (f"the node is {' or '.join(c.value for c in self.candidates)} "
                        f"({seen}); {self.note} Set {STACK_KEY} to the "
                        "one it is")
            return None
        if configured == self.platform.value:
            return None
        now = f"is {configured}" if configured else "is not set"
        return (f"{STACK_KEY} {now} but the node runs {PLATFORMS[self.platform].title} "
                f"({seen}); set cluster.platform: {self.platform.value}")


def _node_info(node: Mapping[str, Any]) -> Mapping[str, Any]:
    return (node.get("status") or {}).get("nodeInfo") or {}


def detect_platform(node: Mapping[str, Any],
                    default_runtime: str | None = None) -> NodePlatform:
    """The platform of `node` (a Node object as the API returns it); `default_runtime`,
    when known, is the default runtime of the node's containerd config."""
    labels: Mapping[str, str] = (node.get("metadata") or {}).get("labels") or {}
    os_image = str(_node_info(node).get("osImage") or "")
    provider = str((node.get("spec") or {}).get("providerID") or "")
    evidence: list[str] = []
    cloud = None
    for prefix, name in _LABELS:
        keys = sorted(k for k in labels if k.startswith(prefix))
        if keys:
            cloud = cloud or name
            evidence.append(f"label {keys[0]}={labels[keys[0]]}")
    for prefix, name in _PROVIDERS:
        if provider.startswith(prefix):
            cloud = cloud or name
            evidence.append(f"providerID {provider.split('/')[0]}//...")
    if os_image:
        evidence.append(f"osImage {os_image!r}")
    image = os_image.lower()
    found = tuple(evidence)
    if image.startswith("bottlerocket"):
        if "nvidia" in image:
            return NodePlatform(Platform.BOTTLEROCKET_NVIDIA, cloud or "eks", found)
        return NodePlatform(None, cloud or "eks", found,
                            "a Bottlerocket variant without NVIDIA's driver: gpuplane has no "
                            "profile for it (use an aws-k8s-*-nvidia variant).")
    if "container-optimized os" in image or labels.get(
            "cloud.google.com/gke-os-distribution") == "cos":
        return NodePlatform(Platform.GKE_COS, "gke", found)
    if cloud == "gke":
        if image.startswith("ubuntu") or labels.get(
                "cloud.google.com/gke-os-distribution") == "ubuntu":
            return NodePlatform(Platform.GKE_UBUNTU, "gke", found)
        return NodePlatform(None, "gke", found, "a GKE node image gpuplane has no profile for.")
    if cloud == "aks":
        if image.startswith("ubuntu"):
            return NodePlatform(Platform.AKS_UBUNTU, "aks", found)
        return NodePlatform(None, "aks", found,
                            "an AKS node image other than Ubuntu (Azure Linux): gpuplane has "
                            "no profile for it.")
    if cloud == "eks" or image.startswith("amazon linux 2023"):
        if not image.startswith("amazon linux 2023"):
            return NodePlatform(None, "eks", found,
                                "an EKS node image other than AL2023 or Bottlerocket (Ubuntu "
                                "EKS images are self-managed nodes to gpuplane: leave "
                                "cluster.platform unset).")
        if default_runtime == "nvidia":
            return NodePlatform(Platform.EKS_AL2023_NVIDIA, "eks",
                                (*found, "containerd default runtime nvidia"))
        if default_runtime:
            return NodePlatform(Platform.EKS_AL2023, "eks",
                                (*found, f"containerd default runtime {default_runtime}"))
        return NodePlatform(None, "eks", found,
                            "The NVIDIA AMI's containerd config makes `nvidia` the default "
                            "runtime, the standard AMI's `runc` (`gpuplane nodes capture` "
                            "reads it).",
                            (Platform.EKS_AL2023_NVIDIA, Platform.EKS_AL2023))
    return NodePlatform(None, cloud, found)


__all__ = ["STACK_KEY", "NodePlatform", "detect_platform"]
