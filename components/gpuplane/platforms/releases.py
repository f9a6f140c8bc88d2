"""The node-image releases of each managed platform that are still in use, with the
containerd line each ships and the containerd config it writes.

A platform's image changes containerd line over its history (EKS AL2023 went 1.7 -> 2.1
-> 2.2, Bottlerocket 1.7 -> 2.0 -> 2.1 -> 2.2, GKE 1.7 -> 2.0, AKS Ubuntu 22.04 -> 24.04),
and the config it writes changes with it (EKS's nodeadm picks its version-2 template on
containerd 1.x and its version-3 template on 2.x). A stack's `containerdVersion` selects
the release, and the release's `baseline` (a folder under data/baselines) is the config
the plan starts from. Every release names where its facts were read (file@commit, or a
documentation page); what was not read there is said in its `unverified`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplane.containerd import ContainerdVersion


@dataclass(frozen=True)
class ImageRelease:
    """One family of a platform's node images that ship the same containerd line(s)."""

    name: str                     # which images: versions, variants or Kubernetes minors
    dates: str                    # when they were published (or from when)
    lines: tuple[str, ...]        # containerd "major.minor" lines these images run
    config_version: int           # the config file's `version`
    config: str                   # the config shape: version, default runtime, imports
    baseline: str                 # folder under data/baselines with that config
    sources: tuple[str, ...]      # file@commit or documentation URL, for each fact
    unverified: str = ""          # what of the above was not read at a source

    def ships(self, version: ContainerdVersion) -> bool:
        return str(version) in self.lines

    def summary(self) -> str:
        return f"{self.name} (containerd {', '.join(self.lines)})"


_EKS_AMI = "awslabs/amazon-eks-ami"
_NODEADM = f"{_EKS_AMI} nodeadm/internal/containerd"
_EKS_SWITCH = (f"{_EKS_AMI}#2470 (the AL2023 AMIs' move from containerd 1.7 to 2.1: "
               "Kubernetes 1.34 at v20250915, 1.33 at v20251016, the older minors after)",
               f"{_EKS_AMI}#2517 (2025-11: the last 1.7 override, Kubernetes 1.30, removed)")
_EKS_V2 = (f"{_NODEADM}/config.template.toml@e48b98ad (version 2, grpc.v1.cri tables, "
           "default runtime `{{.RuntimeName}}` with SystemdCgroup, sandbox_image, "
           "enable_cdi templated, no imports)",
           f"{_NODEADM}/config.go@ed5cea81 (the containerd 1.x era: that one template, "
           "EnableCDI from kubelet v1.32, the user's NodeConfig snippet merged over it)",
           f"{_NODEADM}/config.go@v20260724 (81fec2e: config.template.toml on containerd "
           "1.x, config2.template.toml on 2.x; gpuplane.platforms.native.eks_nodeconfig)")
_EKS_V3 = (f"{_NODEADM}/config2.template.toml@3477d8f1 (version 3, cri.v1.runtime / "
           "cri.v1.images tables, no imports)",)


def _eks(nvidia: bool) -> tuple[ImageRelease, ...]:
    runtime = ('default runtime "nvidia" (/usr/bin/nvidia-container-runtime)' if nvidia
               else 'default runtime "runc" (/usr/sbin/runc)')
    folder = "eks-al2023-nvidia" if nvidia else "eks-al2023"
    kind = "NVIDIA" if nvidia else "standard"
    return (
        ImageRelease(
            name=f"AL2023 {kind} AMIs before the containerd 2.1 switch",
            dates="2024 until the switch (Kubernetes 1.34: before v20250915; 1.33: before "
                  "v20251016; 1.30-1.32: until late 2025)",
            lines=("1.7",),
            config_version=2,
            config=f"version 2, no imports, {runtime}, SystemdCgroup = true, "
                   "enable_cdi from kubelet 1.32",
            baseline=f"{folder}-containerd1",
            sources=(*_EKS_V2, *_EKS_SWITCH,
                     f"{_EKS_AMI}#1950 (an AL2023 AMI of v20240828 runs containerd 1.7.20)"),
            unverified="the exact last 1.7 AMI per Kubernetes minor below 1.33 (#2470's "
                       "table, read as an excerpt)",
        ),
        ImageRelease(
            name=f"AL2023 {kind} AMIs from the containerd 2.1 switch",
            dates="v20250915 (Kubernetes 1.34), v20251016 (1.33), late 2025 (older minors)",
            lines=("2.1",),
            config_version=3,
            config=f"version 3, no imports, {runtime}, SystemdCgroup = true, "
                   "enable_cdi from kubelet 1.32",
            baseline=folder,
            sources=(*_EKS_V3, *_EKS_SWITCH),
        ),
        ImageRelease(
            name=f"AL2023 {kind} AMIs v20260714 and later",
            dates="2026-07 onwards",
            lines=("2.2",),
            config_version=3,
            config=f"version 3, no imports, {runtime}, SystemdCgroup = true, "
                   "enable_cdi from kubelet 1.32",
            baseline=folder,
            sources=(*_EKS_V3, f"{_EKS_AMI} CHANGELOG.md@v20260714 (containerd 2.2.x)"),
            unverified="CHANGELOG.md at v20260714 from the researched reference, not "
                       "re-read here",
        ),
    )


_BR = "bottlerocket-os/bottlerocket"
_BR_TEMPLATE = (f"{_BR} packages/containerd/containerd-config-toml_k8s_nvidia_containerd_"
                "sock@7b67f911 (version 2, default runtime nvidia, nvidia-oci)")
_BR_CONFIG = ('version 2 (the same template on every containerd line), no imports, '
              'default runtime "nvidia" (nvidia-oci), SystemdCgroup = true')
BOTTLEROCKET = (
    ImageRelease(
        name="aws-k8s-1.31-nvidia and aws-k8s-1.32-nvidia",
        dates="the variants still built (aws-k8s-1.30-nvidia dropped 2026-07, #4880)",
        lines=("1.7",), config=_BR_CONFIG, baseline="bottlerocket-nvidia",
        config_version=2,
        sources=(_BR_TEMPLATE, f"{_BR}#4515 (CHANGELOG v1.39.0: containerd-1.7 kept for "
                 "the pre-1.33 variants)", f"{_BR}#4880 (k8s 1.30 variants dropped)"),
    ),
    ImageRelease(
        name="aws-k8s-1.33-nvidia, Bottlerocket v1.39.0 until the 2.1 bump",
        dates="2025-05-06 (v1.39.0) to 2025-11 (#4687)",
        lines=("2.0",), config=_BR_CONFIG, baseline="bottlerocket-nvidia",
        config_version=2,
        sources=(_BR_TEMPLATE, f"{_BR}#4515 (CHANGELOG v1.39.0: containerd-2.0 on all "
                 "k8s 1.33 variants)", f"{_BR}#4686 (containerd 2.0 end of life)"),
        unverified="superseded: nodes still run it until their Bottlerocket is updated",
    ),
    ImageRelease(
        name="aws-k8s-1.33/1.34/1.35-nvidia on containerd 2.1",
        dates="2025-11 (#4687; 1.35 variants from v1.53.0, 2026-01) to 2026-06 (#4869)",
        lines=("2.1",), config=_BR_CONFIG, baseline="bottlerocket-nvidia",
        config_version=2,
        sources=(_BR_TEMPLATE, f"{_BR}#4687 (1.33 variants to containerd-2.1)",
                 f"{_BR}#4737 (CHANGELOG v1.53.0: k8s 1.35 variants use containerd-2.1)"),
    ),
    ImageRelease(
        name="aws-k8s-1.33/1.34/1.35-nvidia on containerd 2.2",
        dates="2026-06-27 (#4869) onwards",
        lines=("2.2",), config=_BR_CONFIG, baseline="bottlerocket-nvidia",
        config_version=2,
        sources=(_BR_TEMPLATE, f"{_BR}#4869 (containerd-2.1 variants bumped to 2.2)"),
    ),
)

GKE_DOC = "https://cloud.google.com/kubernetes-engine/docs/deprecations/migrate-containerd-2"
_GKE_CONFIG = ("not published; gpuplane's model: version 2, no imports, default runtime "
               '"runc" with SystemdCgroup')


def _gke(image: str) -> tuple[ImageRelease, ...]:
    folder = "gke-cos" if image == "COS" else "gke-ubuntu"
    return (
        ImageRelease(name=f"GKE {image} node images, GKE 1.32 and earlier", dates="to GKE 1.32",
                     lines=("1.7",), config=_GKE_CONFIG, baseline=folder,
                     config_version=2,
                     sources=(f"{GKE_DOC} (GKE 1.32 and earlier: containerd 1.7)",),
                     unverified="the config's contents (modelled)"),
        ImageRelease(name=f"GKE {image} node images, GKE 1.33 and later",
                     dates="from GKE 1.33", lines=("2.0",), config=_GKE_CONFIG,
                     config_version=2, baseline=folder,
                     sources=(f"{GKE_DOC} (GKE 1.33: containerd 2.0)",),
                     unverified="the config's contents (modelled); the page names 2.0 for "
                                "1.33 and no later line"),
    )


_AGENTBAKER = "Azure/AgentBaker aks-node-controller/parser/templates"
_AKS_OS = "https://learn.microsoft.com/en-us/azure/aks/upgrade-os-version"
AKS = (
    ImageRelease(
        name="AKS Ubuntu 22.04 GPU node images",
        dates="the default Ubuntu for Kubernetes 1.25-1.34",
        lines=("1.7",),
        config_version=2,
        config='version 2 with grpc.v1.cri tables, no imports, default runtime '
               '"nvidia-container-runtime" (/usr/bin/nvidia-container-runtime, '
               'SystemdCgroup on cgroup v2), plus `untrusted`',
        baseline="aks-ubuntu-2204",
        sources=(f"{_AGENTBAKER}/containerd.toml.gtpl@03d34a25 (version 2, grpc.v1.cri, "
                 "getEnableNvidia: nvidia-container-runtime default)",
                 "Azure/AgentBaker#7802 (moby-containerd 1.7.30 for Ubuntu 22.04)",
                 "Azure/AgentBaker parts/common/components.json@000c8ef1 (moby-containerd "
                 "1.7.34 for Ubuntu 22.04)",
                 f"{_AKS_OS} (Ubuntu 22.04 default for Kubernetes 1.25-1.34)"),
    ),
    ImageRelease(
        name="AKS Ubuntu 24.04 GPU node images",
        dates="the default Ubuntu from Kubernetes 1.35 (opt-in os-sku Ubuntu2404 before)",
        lines=("2.0", "2.1", "2.2", "2.3"),
        config_version=2,
        config='version 2 with the version-3 plugin names, no imports, default runtime '
               '"nvidia-container-runtime", SystemdCgroup, plus `untrusted`',
        baseline="aks-ubuntu",
        sources=(f"{_AGENTBAKER}/containerd_v2.toml.gtpl@e3422a58",
                 f"{_AKS_OS} (Ubuntu 24.04 default from Kubernetes 1.35)",
                 "NVIDIA/aicr#1688 (containerd 2.3.x on these images in the field)",
                 "Azure/AgentBaker parts/common/components.json@000c8ef1 (moby-containerd "
                 "2.3.3 for Ubuntu 24.04)"),
        unverified="which 2.x minor the node-image releases before AgentBaker@000c8ef1 "
                   "shipped (that commit and the field report 2.3; the history of "
                   "components.json could not be read here); 2.0-2.2 are accepted unread",
    ),
)

EKS_NVIDIA = _eks(nvidia=True)
EKS_STANDARD = _eks(nvidia=False)
GKE_COS = _gke("COS")
GKE_UBUNTU = _gke("Ubuntu")

__all__ = ["AKS", "BOTTLEROCKET", "EKS_NVIDIA", "EKS_STANDARD", "GKE_COS", "GKE_DOC",
           "GKE_UBUNTU", "ImageRelease"]
