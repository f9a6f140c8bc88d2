"""The stack config's sections: one pydantic model per `gpuplane:<key>` mapping, with the
checks that need only that section's own values (a version's form, a DNS name, a bound).

Checks that compare keys, even two keys of one section, are in `stack.py`: there they
run together and each names its key, so a stack with several mistakes hears of all of
them at once. The two Helm releases (GPU Operator, HAMi) share a model in `releases.py`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
)
from pydantic.alias_generators import to_camel

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.intent import CgroupDriver
from gpuplane.distros.profiles import Distro
from gpuplane.platforms.profiles import Platform

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Kubernetes node names are DNS subdomains (EKS: ip-10-0-1-23.ec2.internal).
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# The checks pin pods with the kubernetes.io/hostname label and label them with the node
# name: label values are at most 63 characters, so node names gpuplane manages are too.
NODE_NAME_MAX = 63
_K8S_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")
_OS = re.compile(r"^[a-z]+[0-9][0-9.]*$")


class _Section(BaseModel):
    """camelCase keys as users write them in stack files; unknown keys are errors."""

    # A field's docstring is its description: the generated stack config reference
    # (docs/reference/config.md, scripts/gen_docs.py) reads it from here.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True,
                              extra="forbid", frozen=True, use_attribute_docstrings=True)


def _baseline_values(value: Any) -> Any:
    """`baselineFiles` values: a local copy's path, or null (`~`) for a file the node does
    not have (containerd then runs on its built-in defaults)."""
    if isinstance(value, dict):
        for node_path, local in value.items():
            if local is not None and not isinstance(local, str):
                raise ValueError(
                    f"{node_path}: give the local copy's path (text), or null (`~`) where "
                    f"the node has no such file; not the {type(local).__name__} {local!r}")
    return value


def _baseline_files(value: dict[str, str | None]) -> dict[str, str | None]:
    """`baselineFiles`: node path -> a local copy of that file taken from the node, or
    None where the node has no such file."""
    for node_path, local in value.items():
        if not node_path.startswith("/") or any(c in node_path for c in "\t\n"):
            raise ValueError(f"{node_path!r} must be the file's absolute path on the node")
        if local is not None and not local.strip():
            raise ValueError(f"{node_path}: give the local copy's path (relative to the "
                             "project root, the directory with Pulumi.yaml)")
    return value


BaselineFiles = Annotated[dict[str, str | None], BeforeValidator(_baseline_values),
                          AfterValidator(_baseline_files)]


NUMBER_NOT_VERSION = "is a YAML number, not a version"


def _quoted_version(value: Any) -> Any:
    """Versions must be YAML strings. Unquoted, `1.7` is the number 1.7 and `1.10` the
    number 1.1 — a different release — so a number is refused with the fix rather than
    turned back into text that may not be what the user wrote. The number alone has lost
    the text (1.30 is 1.3), so the message does not guess it; the stack file reader, which
    has the line, quotes the raw text instead (`number_version_message`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    raise ValueError(f"{value!r} {NUMBER_NOT_VERSION}; quote it exactly as you meant it "
                     "(a number drops trailing zeros: unquoted 1.10 reads as 1.1)")


def number_version_message(key: str, raw: str) -> str:
    """The fix for a version written as a plain YAML number, from its raw text in the
    stack file: quote that text (not the number it parsed to), say when the number
    differs from the text, and ask a Kubernetes version for its patch release at once
    (`"1.31"` would be refused next)."""
    message = f"{raw} {NUMBER_NOT_VERSION}; quote it: "
    version = ".".join([*raw.split("."), "0"][:2])
    if key.endswith("kubernetesVersion") and raw.count(".") < 2:
        message += (f"\"{version}.<patch>\" with the nodes' patch release, e.g. "
                    f"\"{version}.0\" (a Kubernetes version is X.Y.Z)")
    elif key.endswith("gpuOperator.chartVersion") and raw.count(".") < 2:
        # An X.Y chart is a range (FM18 refuses it): the exact release, the newest known.
        message += (f"the exact chart release, e.g. \"{_newest_chart(version)}\" (a chart "
                    "version without its patch is a range, which FM18 refuses)")
    else:
        message += f"\"{raw}\""
    number = str(yaml_number(raw))
    if number != raw:
        message += f" (unquoted, {raw} reads as the number {number})"
    return message


def _newest_chart(minor: str) -> str:
    """The newest GPU Operator chart gpuplane knows in the `minor` line (`25.10` ->
    v25.10.1), else `v<minor>.0`."""
    from gpuplane.toolkit.operator import CHART_TOOLKITS, chart_tuple

    line = [tag for tag in CHART_TOOLKITS if tag.startswith(f"v{minor}.")]
    return max(line, key=lambda t: chart_tuple(t) or (0, 0, 0)) if line else f"v{minor}.0"


def yaml_number(raw: str) -> int | float | str:
    """What YAML makes of an unquoted scalar: the number a reader sees in place of text."""
    import yaml

    value: int | float | str = yaml.safe_load(raw)
    return value


# Who advertises the GPUs (`gpuplane:devicePlugin`).
DevicePlugin = Literal["gpu-operator", "hami", "platform"]

# A version or tag as the user wrote it: a number is refused with the quoting fix.
VersionStr = Annotated[str, BeforeValidator(_quoted_version)]


class ClusterConfig(_Section):
    distro: Distro = Distro.KUBEADM
    """The Kubernetes distribution: where its containerd keeps config, socket and binary."""
    kubernetes_version: VersionStr
    """`X.Y.Z`: pins HAMi's kube-scheduler image tag and the manifests' validation."""
    containerd_version: VersionStr
    """`X.Y[.Z]` of the nodes' containerd (1.6, 1.7, 2.x): the merge rules differ per line.
    A quoted string: unquoted `1.10` reads as the number 1.1."""
    containerd_base_dir: str | None = None
    """k8s-snap only: the custom containerd base dir (files live under
    `<dir>/k8s-containerd/...`)."""
    kubelet_cgroup_driver: CgroupDriver | None = None
    """The kubelet's cgroup driver, which runc's SystemdCgroup must match (FM07). Unset:
    what the distribution's own containerd config gives runc."""
    node_access: Literal["ssh", "pod", "none"] = "ssh"
    """How gpuplane changes containerd on the nodes: `ssh` runs the node agent over SSH;
    `pod` runs the same agent from a short-lived privileged pod per node (no SSH; see
    `nodePod`); `none`: gpuplane writes nothing, the operator's toolkit alone."""
    baseline_files: BaselineFiles = Field(default_factory=dict)
    """`{<node path>: <local copy>}`: plan from files captured from the nodes instead of
    gpuplane's model of the distribution (`gpuplane nodes capture` writes it); local paths
    are relative to the project root. `<node path>: null` (or `~`): the node has no such
    file (no top-level config: containerd runs on its defaults, and gpuplane writes one)."""
    platform: Platform | None = None
    """The managed platform whose node image the GPU nodes run (`eks-al2023-nvidia`,
    `eks-al2023`, `bottlerocket-nvidia`, `gke-cos`, `gke-ubuntu`, `aks-ubuntu`); unset:
    self-managed nodes. The platform writes the nodes' containerd config itself, so
    gpuplane plans from that config, writes no node files (`nodeAccess: none`) and checks
    the operator's values against what the image preinstalls (docs/platforms.md).
    `distro` stays kubeadm, the layout these nodes share."""

    @field_validator("kubernetes_version")
    @classmethod
    def _k8s_version(cls, value: str) -> str:
        match = _K8S_VERSION.match(value.strip())
        if not match:
            raise ValueError(f"{value!r} is not a Kubernetes version like 1.31.4")
        return ".".join(match.groups())

    @field_validator("containerd_version")
    @classmethod
    def _containerd_version(cls, value: str) -> str:
        ContainerdVersion.parse(value)  # raises ValueError naming the supported lines
        return value

    @field_validator("containerd_base_dir")
    @classmethod
    def _base_dir(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"{value!r} must be an absolute path")
        return value

    # How distro, platform and the versions must agree is checked with the other
    # combinations (stack.py `cluster_problems`), so all of them are reported together.


class NodePodConfig(_Section):
    namespace: str | None = None
    """Namespace of the node agent's pods with `cluster.nodeAccess: pod`; unset: the GPU
    Operator's namespace (HAMi alone: `gpuplane`), which gpuplane creates with Pod
    Security `enforce: privileged`. Another namespace must admit privileged, hostPID pods."""
    namespace_labels: dict[str, str] = Field(default_factory=dict)
    """The labels `nodePod.namespace` has in the cluster, when it is not gpuplane's: a Pod
    Security `enforce` level other than `privileged` is refused at plan time."""
    image: str = "busybox:1.36"
    """Image of the node agent's pods: needs only `sh` and `nsenter` (busybox's applets;
    the agent runs in the host's namespaces with the host's own tools)."""
    timeout_seconds: int = Field(600, ge=60, le=3600)
    """Bound on one agent pod (apply or restore), from creation to its end."""

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str | None) -> str | None:
        if value is not None and not _DNS_LABEL.match(value):
            raise ValueError(f"{value!r} is not a namespace name (a DNS label)")
        return value


class SshConfig(_Section):
    user: str = "root"
    """The SSH login user on every node (a node's `user` overrides it)."""
    port: int = Field(22, ge=1, le=65535)
    """The SSH port on every node (a node's `port` overrides it)."""
    sudo: bool = False
    """Run the node agent through `sudo -n` (a non-root login with password-less sudo)."""


class NodeConfig(_Section):
    name: str
    """The Kubernetes node name (`kubectl get nodes`), a DNS subdomain of at most 63
    characters: the checks pin their pods by the `kubernetes.io/hostname` label."""
    host: str | None = None
    """Address SSH connects to; required with `cluster.nodeAccess: ssh` (unused with `pod`)."""
    user: str | None = None
    """SSH user for this node; unset: `ssh.user`."""
    port: int | None = Field(None, ge=1, le=65535)
    """SSH port for this node; unset: `ssh.port`."""
    gpus: int = Field(1, ge=0, le=64)
    """Physical GPUs on the node: the allocatable check expects this times the sharing."""
    os: str = "ubuntu22.04"
    """`<id><version>` as the toolkit image flavours name it: FM15 compares glibc."""
    pool: str = "default"
    """A DNS label grouping nodes (reports and rollout order)."""
    baseline_files: BaselineFiles = Field(default_factory=dict)
    """Like `cluster.baselineFiles`, for this node only; its entries win over the cluster's."""

    @field_validator("name")
    @classmethod
    def _node_name(cls, value: str) -> str:
        """The Kubernetes node name (`kubectl get nodes`): a DNS subdomain."""
        if not _DNS_SUBDOMAIN.match(value):
            raise ValueError(f"{value!r} must be the Kubernetes node name, a DNS subdomain "
                             "(lowercase letters, digits, '-' and '.', e.g. "
                             "ip-10-0-1-23.ec2.internal)")
        if len(value) > NODE_NAME_MAX:
            raise ValueError(f"{value!r} is {len(value)} characters; gpuplane pins its check "
                             f"pods with the kubernetes.io/hostname label, whose values are "
                             f"at most {NODE_NAME_MAX}: use a node whose name is that short")
        return value

    @field_validator("pool")
    @classmethod
    def _dns(cls, value: str) -> str:
        if not _DNS_LABEL.match(value) or len(value) > 63:
            raise ValueError(f"{value!r} must be a DNS label (lowercase letters, digits, '-')")
        return value

    @field_validator("os")
    @classmethod
    def _os(cls, value: str) -> str:
        if not _OS.match(value):
            raise ValueError(f"{value!r} must look like ubuntu22.04, rhel9, amzn2")
        return value


class RuntimeConfig(_Section):
    name: str = "nvidia"
    """The RuntimeClass and containerd runtime name."""
    nvidia_default: bool = False
    """Make nvidia containerd's default runtime (pods then need no `runtimeClassName`)."""
    create_runtime_class: Literal["auto", True, False] = "auto"
    """`auto`/`false`: the operator creates the RuntimeClass; `true`: gpuplane does. HAMi
    alone (no `gpuOperator`): `auto` is gpuplane, and `false` needs `nvidiaDefault: true`.
    Under `gpuOperator.nri` no node has the runtime it names: `true` is refused there."""
    systemd_cgroup: bool | None = None
    """SystemdCgroup for every runc-type runtime; unset keeps the distribution's."""

    @field_validator("name")
    @classmethod
    def _dns(cls, value: str) -> str:
        if not _DNS_LABEL.match(value):
            raise ValueError(f"{value!r} must be a DNS label")
        return value


class ImageConfig(_Section):
    repository: str
    """Image repository, e.g. `nvcr.io/nvidia/k8s/container-toolkit`."""
    tag: VersionStr
    """Image tag (quoted); FM03/FM15/FM18 judge it."""


class TimeSlicingConfig(_Section):
    replicas: int = Field(0, ge=0, le=64)
    """Pods per GPU: `0` off, else 2 or more (not with HAMi)."""

    @field_validator("replicas")
    @classmethod
    def _replicas(cls, value: int) -> int:
        if value == 1:
            raise ValueError("1 is not time-slicing (the device plugin refuses it); use 0 for "
                             "off or 2 and more")
        return value

    rename_by_default: bool = False
    """Written under `sharing.timeSlicing` (never `flags`)."""
    fail_requests_greater_than_one: bool = False
    """Written under `sharing.timeSlicing` (never `flags`)."""
    config_map: str = "time-slicing-config"
    """The sharing ConfigMap; the operator's `devicePlugin.config.name` points at it."""
    profile: str = "any"
    """The ConfigMap key; `devicePlugin.config.default` points at it."""


class RolloutConfig(_Section):
    canary: bool = True
    """Change one node first, alone, then the batches."""
    max_unavailable: int = Field(1, ge=1)
    """Nodes whose containerd changes at the same time, per batch."""
    allow_all_at_once: bool = False
    """Accept a rollout whose one batch holds every GPU node (no canary, `maxUnavailable`
    at least the node count): without it that is an FM06 error, with it a warning in the
    plan, so the accepted outage is written in the stack and shown in the review."""


class ChecksConfig(_Section):
    enabled: bool = True
    """Run the post-deploy checks: `pulumi up` fails when GPUs do not really work."""
    image: str = "python:3.12-slim"
    """The image the CUDA probe runs in; it must have `python3`."""
    sample: Literal["probe", "vectoradd"] = "probe"
    """`probe`: gpuplane's CUDA probe; `vectoradd`: NVIDIA's sample image."""
    timeout_seconds: int = Field(600, ge=30, le=7200)
    """Each check Job's `activeDeadlineSeconds`."""
    hami_gpu_mem: int = Field(1024, ge=1)
    """`nvidia.com/gpumem` (MiB) each probe pod asks for under HAMi."""
    hami_gpu_cores: int = Field(30, ge=1, le=100)
    """`nvidia.com/gpucores` (percent) each probe pod asks for under HAMi."""


class DockerConfig(_Section):
    nvidia_runtime: bool = False
    """Also give Docker on each GPU node the nvidia runtime: `runtimes.nvidia` in
    `/etc/docker/daemon.json`, merged into the node's file, and Docker restarted once when
    it changed (needs `cluster.nodeAccess: ssh` or `pod`). For hosts that run Docker beside
    Kubernetes (NIM containers, development)."""
    set_as_default: bool = False
    """Make nvidia Docker's `default-runtime` too (containers then need no
    `--runtime=nvidia`); only with `nvidiaRuntime: true`."""


class NodePoolConfig(_Section):
    """The GPU node pool on AKS or GKE, for the node-pool command gpuplane hands out
    (docs/platform-inputs.md): facts only the platform knows, so the stack names them."""

    cluster: str
    """The AKS or GKE cluster the pool belongs to."""
    name: str
    """The node pool's name."""
    resource_group: str | None = None
    """AKS only, required there: the cluster's resource group."""
    vm_size: str | None = None
    """AKS only, required there: the pool's VM size, e.g. `Standard_NC24ads_A100_v4`."""
    node_count: int = Field(1, ge=0)
    """AKS: the pool's node count."""
    az_cli_version: VersionStr = "2.72.2"
    """AKS: the Azure CLI that runs the command (`az version`); before 2.72.2 the
    driver-less pool takes the older `--skip-gpu-driver-install` flag."""
    accelerator_type: str | None = None
    """GKE only, required there: the accelerator, e.g. `nvidia-l4`."""
    accelerator_count: int = Field(1, ge=1)
    """GKE: GPUs per node."""
    machine_type: str | None = None
    """GKE: the machine type, e.g. `g2-standard-24`; unset: gcloud's default."""
    location: str | None = None
    """GKE: the cluster's region or zone; unset: gcloud's configured one."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Node labels for the pool (GKE: gpuplane adds
    `gke-no-default-nvidia-gpu-device-plugin=true`)."""


