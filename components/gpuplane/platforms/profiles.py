"""Managed platforms (EKS, Bottlerocket, GKE, AKS): what each node image ships, who owns
its containerd config, and what the GPU Operator must be told there. Data, not code paths.

A platform is not another distribution layout: its containerd is the kubeadm layout
(/etc/containerd/config.toml, /run/containerd/containerd.sock), so `cluster.distro` stays
`kubeadm` and `cluster.platform` adds what differs. The platform writes the node's
containerd config itself (at every boot, from its settings, or when it recreates the
node), so gpuplane writes no node files there (FM04-platform-owned); it plans from the
config the platform writes (data/baselines/<platform>) and checks the operator's values
against what the image already has (rules/platform.py).

Every fact names the upstream file it was read from (file@commit); what was not read at a
source is listed in `unverified` and in docs/platforms.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from gpuplane.containerd import ContainerdVersion
from gpuplane.distros.profiles import DistroProfile
from gpuplane.platforms.releases import (
    AKS,
    BOTTLEROCKET,
    EKS_NVIDIA,
    EKS_STANDARD,
    GKE_COS,
    GKE_UBUNTU,
    ImageRelease,
)


class Platform(StrEnum):
    EKS_AL2023_NVIDIA = "eks-al2023-nvidia"
    EKS_AL2023 = "eks-al2023"
    BOTTLEROCKET_NVIDIA = "bottlerocket-nvidia"
    GKE_COS = "gke-cos"
    GKE_UBUNTU = "gke-ubuntu"
    AKS_UBUNTU = "aks-ubuntu"


# What a node image can bring along, as the operator's chart switches name them.
DRIVER, TOOLKIT, DEVICE_PLUGIN = "driver", "toolkit", "device plugin"
# COS: the only writable, stateful, executable place for NVIDIA's files (NVIDIA's GKE
# recipe sets both install dirs to it).
COS_NVIDIA_DIR = "/home/kubernetes/bin/nvidia"


@dataclass(frozen=True)
class PlatformProfile:
    """One platform's node image and containerd config, as read at the sources named."""

    name: Platform
    title: str
    # The image releases still in use, oldest first: the containerd line each ships and
    # the config it writes (gpuplane.platforms.releases). A stack's containerdVersion
    # selects one; a version none ships is a stack-key error naming them.
    releases: tuple[ImageRelease, ...]
    containerd: str                       # the version line fact, with its source
    config: str                           # the file it writes: imports, version, default
    writer: str                           # who rewrites it and when; whether it is writable
    preinstalled: frozenset[str]          # DRIVER / TOOLKIT / DEVICE_PLUGIN
    default_runtime: str                  # the runtime the platform's config makes default
    runtime_binary: str | None            # that runtime's BinaryName, when it is NVIDIA's
    # The GPU Operator's values the platform's (or NVIDIA's) docs recommend, dotted path ->
    # value; gpuplane renders the ones it owns from the stack and checks the rest.
    operator_values: dict[str, object]
    sources: tuple[str, ...]
    unverified: tuple[str, ...]
    # `containerd config dump` on this platform rewrites paths the platform set (the
    # toolkit's default config source): from this Kubernetes minor, or this containerd
    # major; None: not known to.
    dump_rewrites_from_kubernetes: tuple[int, int] | None = None
    dump_rewrites_from_containerd: int | None = None
    dump_harm: str = ""                   # what the dump's copy does to the node there
    install_dir: str | None = None        # hostPaths.driverInstallDir and toolkit.installDir
    hami: str = ""                        # what HAMi needs here beyond the self-managed case
    operator_driver_unsupported: str = ""  # why the operator's driver container cannot run
    node_pool_notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def containerd_majors(self) -> tuple[int, ...]:
        """The containerd majors the listed releases ship (1 and/or 2)."""
        return tuple(sorted({int(line.split(".")[0]) for r in self.releases
                             for line in r.lines}))

    @property
    def containerd_lines(self) -> tuple[str, ...]:
        """Every containerd "major.minor" line a listed release ships, oldest first."""
        return tuple(sorted({line for r in self.releases for line in r.lines},
                            key=lambda s: tuple(int(x) for x in s.split("."))))

    def release_for(self, version: ContainerdVersion) -> ImageRelease | None:
        """The listed release that ships containerd `version`'s line (the newest one, when
        several do), or None."""
        found = [r for r in self.releases if r.ships(version)]
        return found[-1] if found else None

    def releases_text(self) -> str:
        return "; ".join(r.summary() for r in self.releases)

    @property
    def configures_runtime(self) -> bool:
        """The image's own containerd config already runs NVIDIA's runtime."""
        return TOOLKIT in self.preinstalled

    def dump_rewrites(self, kubernetes: str, containerd_major: int) -> bool:
        """Whether the toolkit's `command` config source copies rewritten paths here."""
        minor = tuple(int(x) for x in kubernetes.split(".")[:2])
        if self.dump_rewrites_from_kubernetes is not None \
                and minor >= self.dump_rewrites_from_kubernetes:
            return True
        return self.dump_rewrites_from_containerd is not None \
            and containerd_major >= self.dump_rewrites_from_containerd


_EKS_AMI = "awslabs/amazon-eks-ami"
_NODEADM = f"{_EKS_AMI} nodeadm/internal/containerd"
_EKS_SOURCES = (
    f"{_NODEADM}/config2.template.toml@3477d8f1 (version 3, no imports, default runtime "
    "`{{.RuntimeName}}` with SystemdCgroup, enable_cdi templated)",
    f"{_NODEADM}/config.go@ed5cea81 (writes /etc/containerd/config.toml on every "
    "`nodeadm init`; merges NodeConfig spec.containerd.config into it; EnableCDI from "
    "kubelet v1.32)",
    f"{_NODEADM}/runtime_config.go@ed5cea81 (runc, /usr/sbin/runc unless a mixin matches)",
)
_NVIDIA_DOCS = "NVIDIA/cloud-native-docs gpu-operator"
_GKE_SOURCES = (
    f"{_NVIDIA_DOCS}/google-gke.rst@3acf4fa1 (gpu-driver-version=disabled, node label "
    "gke-no-default-nvidia-gpu-device-plugin=true, hostPaths.driverInstallDir and "
    f"toolkit.installDir {COS_NVIDIA_DIR}, cdi.enabled=true, driver.enabled=false; GKE 1.33+: "
    "toolkit.env RUNTIME_CONFIG_SOURCE=file; MIG: WITH_REBOOT=true; Autopilot unsupported)",
    f"{_NVIDIA_DOCS}/google-gke.rst@30502584 (the same recipe before the 1.33 note)",
)
_AKS_SOURCES = (
    "Azure/AgentBaker aks-node-controller/parser/templates/containerd_v2.toml.gtpl@e3422a58 "
    "(version 2 with version-3 plugin names; GPU: default_runtime_name "
    "nvidia-container-runtime, BinaryName /usr/bin/nvidia-container-runtime, SystemdCgroup, "
    "plus `untrusted`; no imports)",
    f"{_NVIDIA_DOCS}/microsoft-aks.rst@06480cb0 (images ship driver and toolkit; "
    "driver.enabled=false, toolkit.enabled=false, "
    "operator.runtimeClass=nvidia-container-runtime)",
)
_AKS_CONFIG = ("/etc/containerd/config.toml, `version = 2` with the version-3 plugin names "
               "(io.containerd.cri.v1.runtime / .images), no `imports`")
_AKS_WRITER = ("AgentBaker's provisioning script renders it when the node is created or "
               "reimaged; a node-pool upgrade or scale-out gives fresh nodes, so edits "
               "do not last (writable in place, not kept)")

_GKE_DUMP = ("`containerd config dump` (GKE 1.33+, containerd 2.0) prints containerd's "
             "own CNI defaults over GKE's paths, and the toolkit writes that copy back: pod "
             "networking breaks (NVIDIA/nvidia-container-toolkit#1222, "
             "NVIDIA/gpu-operator#1577; NVIDIA's GKE page asks for RUNTIME_CONFIG_SOURCE=file)")
_AKS_DUMP = ("`containerd config dump` of AKS's version-2 root prints the running "
             "containerd's own config version (`version = 4` on containerd 2.3), which the "
             "toolkit copies into its drop-in under that root: containerd refuses the "
             "drop-in and exits, and the nodes go NotReady (NVIDIA/aicr#1688)")

PLATFORMS: dict[Platform, PlatformProfile] = {p.name: p for p in [
    PlatformProfile(
        name=Platform.EKS_AL2023_NVIDIA,
        title="EKS AL2023 NVIDIA AMI",
        releases=EKS_NVIDIA,
        containerd="containerd 1.7 until the 2.1 switch of 2025 (amazon-eks-ami#2470), 2.1, "
                   "then 2.2.x (CHANGELOG.md, release v20260714)",
        config="/etc/containerd/config.toml, `version = 3` (`version = 2` on the 1.7 AMIs), "
               "no `imports`; "
               "default_runtime_name = \"nvidia\" (BinaryName "
               "/usr/bin/nvidia-container-runtime, SystemdCgroup = true, no runc table); "
               "enable_cdi = true from kubelet 1.32",
        writer="nodeadm renders it at every boot; hand edits are overwritten. The supported "
               "change is the NodeConfig spec.containerd.config snippet, which nodeadm "
               "merges into its template",
        preinstalled=frozenset({DRIVER, TOOLKIT}),
        default_runtime="nvidia",
        runtime_binary="/usr/bin/nvidia-container-runtime",
        operator_values={"driver.enabled": False, "toolkit.enabled": False,
                         "operator.runtimeClass": "nvidia"},
        sources=(*_EKS_SOURCES,
                 f"{_NODEADM}/runtime_config_nvidia.go@ed5cea81 (runtime `nvidia`, "
                 "/usr/bin/nvidia-container-runtime, chosen when that file exists)"),
        unverified=(
            "the containerd 2.2.x and toolkit 1.19.x versions and the preinstalled driver "
            "(CHANGELOG.md and install-nvidia-driver.sh at v20260714, from the researched "
            "reference, not re-read here)",
            "AWS's advice to disable the operator's driver and toolkit (EKS user guide "
            "`ml-eks-optimized-ami`, not a repository file)",
        ),
    ),
    PlatformProfile(
        name=Platform.EKS_AL2023,
        title="EKS AL2023 standard AMI",
        releases=EKS_STANDARD,
        containerd="containerd 1.7, 2.1, then 2.2 (the same AMI history and nodeadm templates "
                   "as the NVIDIA AMI)",
        config="/etc/containerd/config.toml, `version = 3` (`version = 2` on the 1.7 AMIs), "
               "no `imports`; "
               "default_runtime_name = \"runc\" (BinaryName /usr/sbin/runc)",
        writer="nodeadm renders it at every boot, without `imports`: the operator's "
               "toolkit adds its import again each time its pod starts",
        preinstalled=frozenset(),
        default_runtime="runc",
        runtime_binary=None,
        operator_values={"driver.enabled": False, "toolkit.enabled": True},
        sources=_EKS_SOURCES,
        unverified=(
            "that the operator's driver container has no AL2023 build (researched "
            "reference, NVIDIA's platform-support page not re-read): the nodes need an "
            "image that brings the driver",
            "the window after a reboot in which nodeadm's fresh config lacks the toolkit's "
            "import (the toolkit pod restores it; not run on a real node)",
        ),
        operator_driver_unsupported="the GPU Operator's driver container has no Amazon "
                                    "Linux 2023 image",
    ),
    PlatformProfile(
        name=Platform.BOTTLEROCKET_NVIDIA,
        title="Bottlerocket aws-k8s-*-nvidia",
        releases=BOTTLEROCKET,
        containerd="the variant's containerd package (1.7 before the k8s 1.33 variants, "
                   "then 2.0, 2.1, 2.2; the version-2 config template serves all)",
        config="/etc/containerd/config.toml rendered from containerd-config-toml_k8s_nvidia"
               "_containerd_sock: `version = 2`, no `imports`, default_runtime_name = "
               "\"nvidia\" (BinaryName nvidia-oci, SystemdCgroup = true, no runc table)",
        writer="Bottlerocket renders it from its settings (API / user data) at boot and on "
               "every settings change; the root is read-only and there is no shell or SSH",
        preinstalled=frozenset({DRIVER, TOOLKIT, DEVICE_PLUGIN}),
        default_runtime="nvidia",
        runtime_binary="nvidia-oci",
        operator_values={"driver.enabled": False, "toolkit.enabled": False,
                         "devicePlugin.enabled": False, "operator.runtimeClass": "nvidia"},
        sources=(
            "bottlerocket-os/bottlerocket packages/containerd/"
            "containerd-config-toml_k8s_nvidia_containerd_sock@7b67f911",
            "bottlerocket-os/bottlerocket-core-kit: the device plugin's config template "
            "reads settings.kubelet-device-plugins.nvidia.* (pass-device-specs, "
            "device-list-strategy, device-id-strategy, device-sharing-strategy, "
            "time-slicing.*)",
        ),
        unverified=(
            "the exact path of the device plugin settings template in bottlerocket-core-kit "
            "(read as a search excerpt, not at a pinned file)",
            "whether HAMi can run beside the preinstalled device plugin (gpuplane refuses "
            "it)",
        ),
        hami="the image's own NVIDIA device plugin registers nvidia.com/gpu on every node, "
             "so HAMi's device plugin would be a second one",
    ),
    PlatformProfile(
        name=Platform.GKE_COS,
        title="GKE Container-Optimized OS",
        releases=GKE_COS,
        containerd="containerd 2.0 from GKE 1.33, 1.7 before",
        config="/etc/containerd/config.toml written by GKE's node set-up (contents not "
               "published; gpuplane's model: version 2, runc default, CNI bin_dir "
               "/home/kubernetes/bin)",
        writer="GKE writes it at node start; / is read-only, /etc is writable but stateless "
               "(tmpfs), /home and /var are writable and stateful; node-pool upgrades "
               "recreate nodes",
        preinstalled=frozenset(),
        default_runtime="runc",
        runtime_binary=None,
        operator_values={"driver.enabled": False, "toolkit.enabled": True,
                         "cdi.enabled": True,
                         "hostPaths.driverInstallDir": COS_NVIDIA_DIR,
                         "toolkit.installDir": COS_NVIDIA_DIR,
                         "toolkit.env RUNTIME_CONFIG_SOURCE": "file (GKE 1.33+)"},
        sources=_GKE_SOURCES,
        unverified=(
            "the contents of GKE's containerd config (not published; modelled)",
            "COS's filesystem layout (researched reference: GKE docs, not a repository "
            "file)",
            "HAMi on COS (its vGPU library paths under the read-only / are the stated "
            "reason to move them; not run on a COS node)",
        ),
        dump_rewrites_from_kubernetes=(1, 33),
        dump_harm=_GKE_DUMP,
        install_dir=COS_NVIDIA_DIR,
        hami="HAMi's device plugin copies its vGPU library to devicePlugin.libPath "
             "(/usr/local/vgpu) and global.gpuHookPath (/usr/local) on the host, under "
             "COS's read-only /",
        node_pool_notes=("--accelerator ...,gpu-driver-version=disabled and Google's "
                         "driver installer DaemonSet (the driver lands in "
                         f"{COS_NVIDIA_DIR})",
                         "--node-labels=gke-no-default-nvidia-gpu-device-plugin=true"),
    ),
    PlatformProfile(
        name=Platform.GKE_UBUNTU,
        title="GKE Ubuntu (containerd)",
        releases=GKE_UBUNTU,
        containerd="containerd 2.0 from GKE 1.33, 1.7 before",
        config="/etc/containerd/config.toml written by GKE's node set-up (contents not "
               "published; gpuplane's model: version 2, runc default)",
        writer="GKE writes it at node start; node-pool upgrades recreate nodes, so node "
               "edits do not last",
        preinstalled=frozenset(),
        default_runtime="runc",
        runtime_binary=None,
        operator_values={"driver.enabled": True, "toolkit.enabled": True,
                         "toolkit.env RUNTIME_CONFIG_SOURCE": "file (GKE 1.33+)"},
        sources=_GKE_SOURCES,
        unverified=("the contents of GKE's containerd config (not published; modelled)",),
        dump_rewrites_from_kubernetes=(1, 33),
        dump_harm=_GKE_DUMP,
        node_pool_notes=("--accelerator ...,gpu-driver-version=disabled (the operator's "
                         "driver manager installs the driver)",
                         "--node-labels=gke-no-default-nvidia-gpu-device-plugin=true"),
    ),
    PlatformProfile(
        name=Platform.AKS_UBUNTU,
        title="AKS Ubuntu GPU node image",
        releases=AKS,
        containerd="containerd 1.7 on the Ubuntu 22.04 images, 2.x on the Ubuntu 24.04 "
                   "images (2.3.x in the field, NVIDIA/aicr#1688)",
        config=_AKS_CONFIG + "; default_runtime_name = \"nvidia-container-runtime\"",
        writer=_AKS_WRITER,
        preinstalled=frozenset({DRIVER, TOOLKIT}),
        default_runtime="nvidia-container-runtime",
        runtime_binary="/usr/bin/nvidia-container-runtime",
        operator_values={"driver.enabled": False, "toolkit.enabled": False,
                         "operator.runtimeClass": "nvidia-container-runtime"},
        sources=_AKS_SOURCES,
        unverified=(
            "containerd 2.3's refusal of a drop-in whose version is newer than the root's "
            "(field report NVIDIA/aicr#1688; no containerd 2.3 here to run)",
        ),
        dump_rewrites_from_containerd=2,
        dump_harm=_AKS_DUMP,
    ),
]}


def platform_profile(name: Platform | str) -> PlatformProfile:
    return PLATFORMS[Platform(name)]


__all__ = ["COS_NVIDIA_DIR", "DEVICE_PLUGIN", "DRIVER", "PLATFORMS", "TOOLKIT", "ImageRelease",
           "Platform", "PlatformProfile", "on_platform", "platform_profile"]


def on_platform(base: DistroProfile, name: Platform | str | None) -> DistroProfile:
    """`base` (the kubeadm layout) with what platform `name` changes: its title, the
    config it writes as the fresh node's, and that it owns that config."""
    if not name:
        return base
    plat = platform_profile(name)
    by_line = tuple((line, r.baseline) for r in plat.releases for line in r.lines)
    return replace(base, title=plat.title, baseline_name=plat.name.value, owned_by=plat.title,
                   baseline_by_line=by_line)
