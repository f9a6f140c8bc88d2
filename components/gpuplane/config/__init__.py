"""The stack config: every `gpuplane:*` key, its default and its allowed values, in one place.

Read from `pulumi.Config` inside a program, or from a stack file by the offline plan; both
go through `parse_stack_config`, so an invalid value gets the same error either way: the
stack key, what was wrong, and the allowed values.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from gpuplane.chartsource import UPSTREAM, ChartSource, oci_tag_problem, parse_chart_source
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.distros import (
    Distro,
    DistroProfile,
    bundled_containerd_major,
    k0s_unsupported,
    profile,
)
from gpuplane.docker_daemon import DockerSettings
from gpuplane.images import check_mirror
from gpuplane.intent import CgroupDriver, ClusterIntent, NodeIntent
from gpuplane.platforms import (
    DEVICE_PLUGIN,
    Platform,
    PlatformProfile,
    on_platform,
    platform_profile,
)
from gpuplane.rancher_mode import Choice, RuntimeSetup, choose
from gpuplane.toolkit.installer import parse_version
from gpuplane.toolkit.operator import (
    OPERATOR_DROPIN_FROM,
    chart_tuple,
    known_toolkit_tag,
    toolkit_for_chart,
    writes_dropin,
)
from gpuplane.toolkit.options import NEWEST_TOOLKIT, PlanOptions, ToolkitMode

NAMESPACE = "gpuplane"
OPERATOR_CHART_REPO = "https://helm.ngc.nvidia.com/nvidia"
HAMI_CHART_REPO = "https://project-hami.github.io/HAMi/"
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


def _baseline_files(value: dict[str, str]) -> dict[str, str]:
    """`baselineFiles`: node path -> a local copy of that file taken from the node."""
    for node_path, local in value.items():
        if not node_path.startswith("/") or any(c in node_path for c in "\t\n"):
            raise ValueError(f"{node_path!r} must be the file's absolute path on the node")
        if not local.strip():
            raise ValueError(f"{node_path}: give the local copy's path (relative to the "
                             "project root, the directory with Pulumi.yaml)")
    return value


BaselineFiles = Annotated[dict[str, str], AfterValidator(_baseline_files)]


def _quoted_version(value: Any) -> Any:
    """Versions must be YAML strings. Unquoted, `1.7` is the number 1.7 and `1.10` the
    number 1.1 — a different release — so a number is refused with the fix rather than
    turned back into text that may not be what the user wrote."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    raise ValueError(f"{value!r} is a YAML number, not a version (unquoted 1.10 reads as "
                     f"1.1); quote it: \"{value}\"")


# A version or tag as the user wrote it: a number is refused with the quoting fix.
VersionStr = Annotated[str, BeforeValidator(_quoted_version)]

OPERATOR_CHART = "gpu-operator"
HAMI_CHART = "hami"


def _chart_source(value: str | None, info: ValidationInfo, chart: str) -> str | None:
    """`chart`: its form (path, http(s)://, oci://) and an OCI tag that agrees with
    `chartVersion` (validated before it). A local chart is checked against the project
    root when the program runs (`gpuplane.chartsource.local_chart_problem`)."""
    if value is None:
        return None
    source = parse_chart_source(value, chart)   # ValueError with the fix
    version = info.data.get("chart_version")
    problem = oci_tag_problem(source, version) if isinstance(version, str) else None
    if problem:
        raise ValueError(problem)
    return value.strip()


def _image_mirror(value: str | None) -> str | None:
    return None if value is None else check_mirror(value)


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
    are relative to the project root."""
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

    @model_validator(mode="after")
    def _base_dir_distro(self) -> ClusterConfig:
        if self.containerd_base_dir and self.distro is not Distro.K8S_SNAP:
            raise ValueError("containerdBaseDir applies to distro k8s-snap only")
        if self.platform is not None:
            problem = _platform_problem(self)
            if problem:
                raise ValueError(problem)
        if self.distro is Distro.K0S:
            problem = k0s_unsupported(self.kubernetes_version, self.containerd_version)
            if problem:
                raise ValueError(problem)
        bundled = bundled_containerd_major(self.distro, self.kubernetes_version)
        line = ContainerdVersion.parse(self.containerd_version)
        if bundled is not None and bundled != line.major:
            ships = "2.0" if bundled == 2 else "1.7"
            raise ValueError(
                f"containerdVersion {self.containerd_version} contradicts kubernetesVersion "
                f"{self.kubernetes_version}: {self.distro.value} {self.kubernetes_version} "
                f"ships containerd {ships}; set containerdVersion: \"{ships}\" (check with "
                "`containerd --version` on a node)")
        return self


def _platform_problem(cluster: ClusterConfig) -> str | None:
    """Why `cluster.platform` contradicts the other cluster keys, or None."""
    assert cluster.platform is not None
    plat = platform_profile(cluster.platform)
    if cluster.distro is not Distro.KUBEADM:
        return (f"distro: {cluster.distro.value} contradicts platform {plat.name.value}: "
                f"{plat.title} nodes use the kubeadm containerd layout; remove "
                "cluster.distro (or set it to kubeadm)")
    line = ContainerdVersion.parse(cluster.containerd_version)
    if line.major not in plat.containerd_majors:
        ships = " or ".join(f"{m}.x" for m in plat.containerd_majors)
        return (f"containerdVersion: {cluster.containerd_version} is not what {plat.title} "
                f"runs ({plat.containerd}); set containerdVersion to the nodes' {ships} "
                "line (`kubectl get nodes -o wide` shows it)")
    if plat.dump_rewrites_from_kubernetes is not None:
        minor = tuple(int(x) for x in cluster.kubernetes_version.split(".")[:2])
        want = 2 if minor >= plat.dump_rewrites_from_kubernetes else 1
        if want != line.major:
            ships = "2.0" if want == 2 else "1.7"
            return (f"containerdVersion: {cluster.containerd_version} contradicts "
                    f"kubernetesVersion {cluster.kubernetes_version}: {plat.title} "
                    f"{cluster.kubernetes_version} runs containerd {ships} ({plat.containerd}); "
                    f"set containerdVersion: \"{ships}\"")
    return None


class NodePodConfig(_Section):
    namespace: str | None = None
    """Namespace of the node agent's pods with `cluster.nodeAccess: pod`; unset: the GPU
    Operator's namespace, which gpuplane creates with Pod Security `enforce: privileged`.
    Another namespace must admit privileged, hostPID pods."""
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
    """`auto`/`false`: the operator creates the RuntimeClass; `true`: gpuplane does."""
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


class GpuOperatorConfig(_Section):
    chart_version: VersionStr
    """The pinned chart version, e.g. `v25.10.1`; an exact version must be one whose toolkit
    gpuplane has measured (v25.10 and later: the toolkit writes a drop-in)."""
    namespace: str = "gpu-operator"
    """Created with Pod Security `privileged`."""
    driver: Literal["preinstalled", "managed"] = "preinstalled"
    """`preinstalled` (`driver.enabled=false`) or `managed` (the operator installs it)."""
    toolkit: Literal["operator", "host"] = "operator"
    """`operator`: the toolkit container, with `toolkit.env` from the planner; `host`:
    gpuplane writes the nvidia runtime itself (needs `cluster.nodeAccess: ssh` or `pod`)."""
    runtime_setup: RuntimeSetup = "auto"
    """RKE2/K3s with `toolkit: operator` only: how the nvidia runtime gets into the config
    their containerd reads. `detected`: as RKE2's docs recommend, toolkit.env sets only the
    containerd socket and the distribution's own runtime detection adds `nvidia` and
    `nvidia-cdi` once the toolkit has installed its binaries; gpuplane writes no node file
    (`cluster.nodeAccess: none` is enough). `template`: gpuplane writes the whole template
    over SSH and points the toolkit at it, for what detection cannot give (nvidia as the
    default runtime, another runtime name, `runtime.systemdCgroup`, releases before the
    October 2024 ones). `auto`: `detected` where it gives what the stack asks, else
    `template`; `gpuplane plan` says which and why."""
    cdi: bool = False
    """`cdi.enabled` (containerd 1.7 and later)."""
    toolkit_image: ImageConfig | None = None
    """Override of the chart's toolkit image; unset: the chart's."""
    chart: str | None = None
    """Where the chart comes from; unset: NVIDIA's repository (`helm.ngc.nvidia.com`). A
    local chart (a directory with Chart.yaml or a `.tgz`; relative to the project root),
    an `https://` mirror chart repository, or `oci://<registry>/<path>/gpu-operator`. A
    local chart must be `gpu-operator` at `chartVersion`; an OCI tag must agree with it."""
    image_mirror: str | None = None
    """A registry (`host[:port][/path]`) every image the chart deploys is pulled from
    instead, each keeping its path and tag (`nvcr.io/nvidia/k8s/container-toolkit` ->
    `<mirror>/nvidia/k8s/container-toolkit`); `toolkitImage` and `values` still win."""
    skip_await: bool = False
    """`true`: `pulumi up` does not wait for the chart's workloads to become ready (Helm's
    `--wait`; the release's `skipAwait`), for clusters whose nodes join after the stack
    is applied. The post-deploy checks, when enabled, still judge the GPUs."""
    values: dict[str, Any] = Field(default_factory=dict)
    """Raw Helm values merged last (the policies still check them)."""

    @field_validator("chart")
    @classmethod
    def _chart(cls, value: str | None, info: ValidationInfo) -> str | None:
        return _chart_source(value, info, OPERATOR_CHART)

    @field_validator("image_mirror")
    @classmethod
    def _mirror(cls, value: str | None) -> str | None:
        return _image_mirror(value)

    @property
    def chart_source(self) -> ChartSource:
        return parse_chart_source(self.chart, OPERATOR_CHART) if self.chart else UPSTREAM

    @field_validator("chart_version")
    @classmethod
    def _known_toolkit(cls, value: str) -> str:
        """An exact chart version must be one whose toolkit gpuplane has measured: the plan
        predicts what that toolkit writes on every node. Older than the oldest supported
        chart and newer than the newest are refused naming that bound; ranges and tags are
        FM18's."""
        if re.fullmatch(r"v?\d+\.\d+\.\d+", value.strip()):
            toolkit_for_chart(value)   # ValueError naming the supported charts
        return value

    @model_validator(mode="after")
    def _toolkit_fits_chart(self) -> GpuOperatorConfig:
        """A toolkit >= 1.18 writes its runtimes into a drop-in, which only the operator of
        chart v25.10.0 and later mounts from the host (object_controls.go@v25.10.0
        `transformForRuntime`); under an older chart's operator the drop-in is written
        inside the toolkit container and lost, and no nvidia runtime reaches containerd."""
        tag = self.toolkit_image.tag if self.toolkit_image else None
        chart = chart_tuple(self.chart_version)
        if tag and chart is not None and chart < OPERATOR_DROPIN_FROM \
                and writes_dropin(self.chart_version, tag):
            first = "v" + ".".join(map(str, OPERATOR_DROPIN_FROM))
            raise ValueError(
                f"toolkitImage.tag {tag} is a toolkit >= 1.18, which writes a drop-in that "
                f"chart {self.chart_version}'s operator neither mounts nor maps to the host "
                f"(from {first}): the nvidia runtime would stay inside the toolkit "
                f"container. Use chartVersion {first} or later, or a toolkit tag below "
                f"v1.18 (the chart pins {known_toolkit_tag(self.chart_version)})")
        return self

    @property
    def toolkit_release(self) -> str:
        """The toolkit the operator deploys: the image override's tag, else the chart's
        pin, else (a range or tag, which FM18 reports) the newest gpuplane supports."""
        tag = self.toolkit_image.tag if self.toolkit_image else None
        if tag:
            with contextlib.suppress(ValueError):
                return ".".join(str(p) for p in parse_version(tag))
        try:
            return toolkit_for_chart(self.chart_version)
        except ValueError:
            return NEWEST_TOOLKIT


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


class HamiConfig(_Section):
    chart_version: VersionStr = "2.10.0"
    """The pinned HAMi chart version."""
    namespace: str = "kube-system"
    """Where HAMi runs."""
    scheduler_image_tag: VersionStr | None = None
    """HAMi's kube-scheduler tag; unset: `v<cluster.kubernetesVersion>` (FM13 compares)."""
    webhook_failure_policy: Literal["Fail", "Ignore"] = "Fail"
    """The admission webhook's failurePolicy."""
    webhook_exempt_namespaces: list[str] = Field(default_factory=list)
    """Namespaces the webhook leaves alone besides kube-system, `hami.namespace` and
    `gpuOperator.namespace`, which are always exempt (chart value
    `scheduler.admissionWebhook.whitelistNamespaces`)."""
    scheduler_image_registry: str = "registry.k8s.io"
    """Where HAMi's kube-scheduler comes from (chart value
    `scheduler.kubeScheduler.image.registry`; the chart's own default is
    `registry.cn-hangzhou.aliyuncs.com`); unset with `imageMirror`: the mirror. Set here,
    it wins over `imageMirror`."""
    scheduler_image_repository: str = "kube-scheduler"
    """The kube-scheduler repository in that registry."""
    scheduler_replicas: int = Field(2, ge=1, le=10)
    """Scheduler replicas, with leader election."""
    device_split_count: int = Field(10, ge=1, le=100)
    """Tasks sharing one GPU."""
    device_memory_scaling: float = Field(1.0, gt=0)
    """GPU memory oversubscription factor."""
    device_core_scaling: float = Field(1.0, gt=0)
    """GPU core oversubscription factor."""
    chart: str | None = None
    """Where the chart comes from; unset: HAMi's repository (`project-hami.github.io`). A
    local chart (a directory with Chart.yaml or a `.tgz`; relative to the project root),
    an `https://` mirror chart repository, or `oci://<registry>/<path>/hami`. A local
    chart must be `hami` at `chartVersion`; an OCI tag must agree with it."""
    image_mirror: str | None = None
    """A registry (`host[:port][/path]`) every image the chart deploys is pulled from
    instead, each keeping its path and tag (the kube-scheduler too, unless
    `schedulerImageRegistry` is set); `values` still win."""
    skip_await: bool = False
    """`true`: `pulumi up` does not wait for the chart's workloads to become ready (Helm's
    `--wait`; the release's `skipAwait`), for clusters whose nodes join after the stack
    is applied. The post-deploy checks, when enabled, still judge the GPUs."""
    values: dict[str, Any] = Field(default_factory=dict)
    """Raw Helm values merged last; only with `devicePlugin: hami`."""

    @field_validator("chart")
    @classmethod
    def _chart(cls, value: str | None, info: ValidationInfo) -> str | None:
        return _chart_source(value, info, HAMI_CHART)

    @field_validator("image_mirror")
    @classmethod
    def _mirror(cls, value: str | None) -> str | None:
        return _image_mirror(value)

    @property
    def chart_source(self) -> ChartSource:
        return parse_chart_source(self.chart, HAMI_CHART) if self.chart else UPSTREAM

    @property
    def scheduler_registry(self) -> str:
        """`schedulerImageRegistry` as set, else the mirror, else registry.k8s.io."""
        if "scheduler_image_registry" in self.model_fields_set or not self.image_mirror:
            return self.scheduler_image_registry
        return self.image_mirror


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


_NODE_POOL_KEYS = {
    Platform.AKS_UBUNTU: ("resource_group", "vm_size"),
    Platform.GKE_COS: ("accelerator_type",),
    Platform.GKE_UBUNTU: ("accelerator_type",),
}


def _node_pool_problem(cfg: StackConfig) -> str | None:
    """Why `nodePool` does not fit `cluster.platform`, or None."""
    pool, plat = cfg.node_pool, cfg.cluster.platform
    if pool is None:
        return None
    if plat not in _NODE_POOL_KEYS:
        return (f"nodePool: describes an AKS or GKE node pool, but cluster.platform is "
                f"{plat.value if plat else 'unset'}; remove nodePool (EKS and Bottlerocket "
                "get their node input from the other keys)")
    missing = [to_camel(k) for k in _NODE_POOL_KEYS[plat] if getattr(pool, k) is None]
    if missing:
        return (f"nodePool.{missing[0]}: required on {plat.value}; add "
                f"{', '.join(missing)} under gpuplane:nodePool")
    return None


class StackConfig(_Section):
    """All of a stack's `gpuplane:*` keys.

    Unknown keys are errors (`gpuplane:bogus: unknown key; known keys: ...`), and so are
    combinations that cannot work: the host toolkit without node access, time-slicing
    with HAMi, `containerdBaseDir` off k8s-snap, `timeSlicing.replicas: 1`, `hami.values`
    while `devicePlugin` is not `hami`, a `containerdVersion` other than the line RKE2 or
    K3s bundle with that `kubernetesVersion`, a `chart` that is not a chart source Helm
    installs from or a local chart that is not that chart at its `chartVersion`, an OCI
    `chart` tagged with another version. Versions and tags must be YAML strings: an
    unquoted `containerdVersion: 1.7` is refused with the quoting fix. Each error names its
    key, with the allowed values, and `gpuplane plan` adds the stack file's `file:line`.
    """

    cluster: ClusterConfig
    """The cluster every GPU node belongs to."""
    ssh: SshConfig = SshConfig()
    """Defaults for reaching every node over SSH."""
    ssh_private_key: Annotated[str | None, Field(repr=False)] = None
    """The SSH private key, a Pulumi secret (`pulumi config set --secret
    gpuplane:sshPrivateKey < ~/.ssh/id_ed25519`); required with `cluster.nodeAccess: ssh`."""
    node_pod: NodePodConfig = NodePodConfig()
    """The node agent's pods, with `cluster.nodeAccess: pod`."""
    nodes: list[NodeConfig] = Field(default_factory=list)
    """The GPU nodes, one entry each."""
    device_plugin: Literal["gpu-operator", "hami", "platform"] = "gpu-operator"
    """Who advertises GPUs: the operator's device plugin, HAMi (the operator then runs
    without its device plugin), or `platform`: the device plugin the node image ships
    (Bottlerocket's NVIDIA variants; the operator runs without its own)."""
    runtime: RuntimeConfig = RuntimeConfig()
    """The nvidia runtime in containerd and its RuntimeClass."""
    gpu_operator: GpuOperatorConfig
    """The NVIDIA GPU Operator's Helm release."""
    time_slicing: TimeSlicingConfig = TimeSlicingConfig()
    """The operator's time-slicing (GPU sharing without HAMi)."""
    hami: HamiConfig = HamiConfig()
    """HAMi's Helm release, with `devicePlugin: hami`."""
    rollout: RolloutConfig = RolloutConfig()
    """The order in which nodes get their containerd change."""
    checks: ChecksConfig = ChecksConfig()
    """The post-deploy GPU checks."""
    docker: DockerConfig = DockerConfig()
    """Docker's nvidia runtime on GPU hosts that also run Docker (off by default)."""
    node_pool: NodePoolConfig | None = None
    """AKS and GKE only: the GPU node pool, so the plan and the stack output
    `platformInput` give the command and fields that create it (docs/platform-inputs.md);
    unset there: the plan says to set it."""

    @model_validator(mode="after")
    def _consistent(self) -> StackConfig:
        dupes = sorted(n for n, k in Counter(n.name for n in self.nodes).items() if k > 1)
        if dupes:
            raise ValueError(f"nodes: duplicate node names {dupes}")
        if self.cluster.node_access == "ssh":
            if not self.nodes:
                raise ValueError("nodes: cluster.nodeAccess is ssh but no nodes are listed; "
                                 "list the GPU nodes or set cluster.nodeAccess: none")
            missing = [n.name for n in self.nodes if not n.host]
            if missing:
                raise ValueError(f"nodes: host missing for {missing} (nodeAccess is ssh)")
            if not self.ssh_private_key:
                raise ValueError("sshPrivateKey: required when cluster.nodeAccess is ssh; set "
                                 "it with `pulumi config set --secret gpuplane:sshPrivateKey "
                                 "< ~/.ssh/id_ed25519`")
        elif self.cluster.node_access == "pod":
            if not self.nodes:
                raise ValueError("nodes: cluster.nodeAccess is pod but no nodes are listed; "
                                 "list the GPU nodes (their Kubernetes names) or set "
                                 "cluster.nodeAccess: none")
            from gpuplane.nodepod import psa_problem

            problem = psa_problem(self.node_pod.namespace_labels, self.node_pod_namespace)
            if problem:
                raise ValueError(f"nodePod.namespaceLabels: {problem}")
        elif self.gpu_operator.toolkit == "host" and not (
                self.platform and self.platform.configures_runtime):
            raise ValueError("gpuOperator.toolkit: host needs node access to write containerd "
                             "config; set cluster.nodeAccess: ssh (or pod) or "
                             "gpuOperator.toolkit: operator")
        # With the image's plugin, timeSlicing becomes that plugin's own settings (the
        # stack output platformInput, docs/platform-inputs.md), not an operator ConfigMap.
        if self.device_plugin == "platform" and (
                self.platform is None or DEVICE_PLUGIN not in self.platform.preinstalled):
            where = self.platform.title if self.platform else "self-managed nodes"
            raise ValueError(f"devicePlugin: platform means the node image's own device "
                             f"plugin, which {where} do not ship; set devicePlugin: "
                             "gpu-operator or hami")
        problem = _node_pool_problem(self)
        if problem:
            raise ValueError(problem)
        choice = self.runtime_setup   # ValueError for a `detected` detection cannot serve
        if self.gpu_operator.runtime_setup != "auto" and choice is None:
            raise ValueError(
                f"gpuOperator.runtimeSetup: {self.gpu_operator.runtime_setup} applies to "
                "distro rke2 or k3s with gpuOperator.toolkit: operator only; remove it")
        if self.docker.set_as_default and not self.docker.nvidia_runtime:
            raise ValueError("docker.setAsDefault: makes Docker's nvidia runtime its default, "
                             "but docker.nvidiaRuntime is false; set docker.nvidiaRuntime: "
                             "true or remove setAsDefault")
        if self.docker.nvidia_runtime and not self.node_access:
            raise ValueError("docker.nvidiaRuntime: writing /etc/docker/daemon.json needs node "
                             "access, but cluster.nodeAccess is none; set "
                             "cluster.nodeAccess: ssh (or pod) or docker.nvidiaRuntime: false")
        if self.device_plugin != "hami" and self.hami.values:
            raise ValueError("hami.values: HAMi is not installed (devicePlugin is "
                             f"{self.device_plugin}), so these raw values would be ignored; "
                             "set devicePlugin: hami or remove hami.values")
        if self.device_plugin == "hami" and self.time_slicing.replicas > 1:
            raise ValueError("timeSlicing: the operator's time-slicing needs its device plugin, "
                             "which HAMi replaces; use hami.deviceSplitCount instead")
        return self

    # Derived views: the one place that turns keys into what the library needs.

    @property
    def platform(self) -> PlatformProfile | None:
        """The managed platform's profile (`cluster.platform`), or None."""
        return platform_profile(self.cluster.platform) if self.cluster.platform else None

    @property
    def profile(self) -> DistroProfile:
        # A platform: the kubeadm layout, with the config it writes as the fresh node.
        return on_platform(profile(self.cluster.distro, self.cluster.containerd_base_dir),
                           self.cluster.platform)

    @property
    def containerd(self) -> ContainerdVersion:
        return ContainerdVersion.parse(self.cluster.containerd_version)

    @property
    def node_access(self) -> bool:
        """Whether gpuplane writes node files (`ssh` or `pod`: the same agent)."""
        return self.cluster.node_access in ("ssh", "pod")

    @property
    def node_pod_namespace(self) -> str:
        """Where the node agent's pods run: `nodePod.namespace`, else the operator's."""
        return self.node_pod.namespace or self.gpu_operator.namespace

    @property
    def docker_settings(self) -> DockerSettings | None:
        """What the planner writes into Docker's daemon.json; None: Docker is left alone."""
        if not self.docker.nvidia_runtime:
            return None
        return DockerSettings(set_as_default=self.docker.set_as_default)

    @property
    def kubelet_cgroup_driver(self) -> CgroupDriver:
        """As set, else what the distribution pairs its kubelet with: the cgroup driver its
        own containerd config gives runc on a fresh node."""
        if self.cluster.kubelet_cgroup_driver:
            return self.cluster.kubelet_cgroup_driver
        from gpuplane.containerd import MemoryFiles, effective_config
        from gpuplane.containerd.options import decoded
        from gpuplane.planner import rendered_layout

        prof, version = self.profile, self.containerd
        eff = effective_config(prof.config_path, MemoryFiles(
            rendered_layout(prof.baseline(version), prof, version)), version)
        # runc, or the default where the distribution's config has no runc table (the
        # platforms whose images make NVIDIA's runtime the default: gpuplane.platforms).
        runc = eff.runtimes.get("runc") if eff.default_runtime not in eff.runtimes \
            else eff.runtimes[eff.default_runtime]
        systemd = runc and decoded(runc.options, "SystemdCgroup", version) is True
        return "systemd" if systemd else "cgroupfs"

    def baseline_files_of(self, index: int) -> dict[str, tuple[str, str]]:
        """Node `index`'s captured files: node path -> (the stack key that names it, the
        local copy's path). A node's own entries override the cluster's."""
        out = {path: (f"{NAMESPACE}:cluster.baselineFiles", local)
               for path, local in self.cluster.baseline_files.items()}
        out.update({path: (f"{NAMESPACE}:nodes[{index}].baselineFiles", local)
                    for path, local in self.nodes[index].baseline_files.items()})
        return out

    @property
    def hami_scheduler_tag(self) -> str:
        return self.hami.scheduler_image_tag or f"v{self.cluster.kubernetes_version}"

    @property
    def runtime_setup(self) -> Choice | None:
        """RKE2/K3s with the operator's toolkit: the path `gpuOperator.runtimeSetup` gives
        (gpuplane.rancher_mode); None elsewhere. ValueError for an explicit `detected` the
        distribution's detection cannot serve."""
        return choose(self.profile, self._plan_options(), self.cluster.kubernetes_version,
                      self.gpu_operator.runtime_setup)

    def plan_options(self) -> PlanOptions:
        options = self._plan_options()
        choice = self.runtime_setup
        if choice is None:
            return options
        return replace(options, runtime_setup=choice.path, runtime_setup_why=choice.why)

    def _plan_options(self) -> PlanOptions:
        return PlanOptions(
            toolkit=ToolkitMode(self.gpu_operator.toolkit),
            nvidia_default=self.runtime.nvidia_default,
            cdi=self.gpu_operator.cdi,
            systemd_cgroup=self.runtime.systemd_cgroup,
            toolkit_version=self.gpu_operator.toolkit_release,
            runtime_name=self.runtime.name,
            operator_chart=self.gpu_operator.chart_version,
            kubelet_cgroup_driver=self.kubelet_cgroup_driver,
            writes_files=self.node_access,
        )

    def intent(self) -> ClusterIntent:
        return ClusterIntent(
            distro=self.cluster.distro.value,
            platform=self.cluster.platform.value if self.cluster.platform else None,
            containerd_version=self.cluster.containerd_version,
            kubernetes_version=self.cluster.kubernetes_version,
            containerd_base_dir=self.cluster.containerd_base_dir,
            kubelet_cgroup_driver=self.kubelet_cgroup_driver,
            device_plugin=self.device_plugin,
            toolkit=self.gpu_operator.toolkit,
            driver_preinstalled=self.gpu_operator.driver == "preinstalled",
            cdi=self.gpu_operator.cdi,
            nvidia_default=self.runtime.nvidia_default,
            runtime_class=self.runtime.name,
            runtime_setup=self.plan_options().runtime_setup,
            operator_namespace=self.gpu_operator.namespace,
            hami_namespace=self.hami.namespace,
            time_slicing_replicas=self.time_slicing.replicas,
            time_slicing_configmap=self.time_slicing.config_map,
            time_slicing_profile=self.time_slicing.profile,
            time_slicing_rename=self.time_slicing.rename_by_default,
            hami_split_count=self.hami.device_split_count,
            max_unavailable=self.rollout.max_unavailable,
            canary=self.rollout.canary,
            allow_all_at_once=self.rollout.allow_all_at_once,
            nodes=tuple(NodeIntent(n.name, n.gpus, n.os, n.pool) for n in self.nodes),
        )


# The stack keys, `gpuplane:<key>`, in the order the config reference documents them.
KEYS: tuple[str, ...] = tuple(
    field.alias or name for name, field in StackConfig.model_fields.items())
SECRET_KEYS = ("sshPrivateKey",)


class StackConfigError(Exception):
    """Invalid stack config; each problem names its `gpuplane:` key."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("\n".join(f"{key}: {msg}" for key, msg in problems))


def chart_at_least(version: str, minimum: tuple[int, int]) -> bool:
    """Compare a chart version such as v25.10.1 with (major, minor)."""
    match = re.match(r"^v?(\d+)\.(\d+)", version)
    return match is not None and (int(match[1]), int(match[2])) >= minimum


def parse_stack_config(values: Mapping[str, Any]) -> StackConfig:
    """Validate `{key: value}` (keys without the `gpuplane:` prefix) into a StackConfig."""
    unknown = sorted(set(values) - set(KEYS))
    problems = [(f"{NAMESPACE}:{k}", f"unknown key; known keys: {', '.join(KEYS)}")
                for k in unknown]
    try:
        config = StackConfig.model_validate({k: v for k, v in values.items() if k in KEYS})
    except ValidationError as exc:
        problems += [_problem(err) for err in exc.errors()]
        raise StackConfigError(problems) from None
    if problems:
        raise StackConfigError(problems)
    return config


def _problem(err: Any) -> tuple[str, str]:
    loc = [str(p) for p in err["loc"]]
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown key"
    message = _with_fix(err["type"], message, err.get("input"))
    # A model-level check names its key first ("nodes: ..."): lift it into the key.
    if not loc and ":" in message:
        head, _, rest = message.partition(": ")
        loc, message = head.split("."), rest
    key = f"{NAMESPACE}:{loc[0]}" if loc else NAMESPACE
    path = "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in loc[1:])
    return key + path, message


# pydantic's wording for the commonest type errors, in the stack file's terms, with the fix.
_TYPE_FIXES = {
    "missing": "required; fix: add it (docs/reference/config.md)",
    "model_type": "must be a mapping (keys indented under it), not {shown}",
    "dict_type": "must be a mapping (keys indented under it), not {shown}",
    "list_type": "must be a list (`- item` lines or [a, b]), not {shown}",
    "int_parsing": "must be a whole number, not {shown}",
    "int_type": "must be a whole number, not {shown}",
    "int_from_float": "must be a whole number, not {shown}",
    "bool_parsing": "must be true or false, not {shown}",
    "bool_type": "must be true or false, not {shown}",
    "string_type": "must be text, not {shown}; quote it",
}


def _with_fix(kind: str, message: str, value: Any) -> str:
    """pydantic's message, or the stack-file wording with the fix where one is known."""
    template = _TYPE_FIXES.get(kind)
    if template is None:
        return message
    shown = f"the {type(value).__name__} {value!r}" if value is not None else "empty"
    return template.format(shown=shown)


def config_from_pulumi() -> StackConfig:
    """The stack config of the running Pulumi program; the SSH key stays a Pulumi secret
    (see `ssh_private_key_output`), the model only learns whether one is set."""
    import pulumi

    cfg = pulumi.Config(NAMESPACE)
    values: dict[str, Any] = {}
    for key in KEYS:
        if key in SECRET_KEYS:
            if cfg.get(key) is not None:
                values[key] = "<secret>"
            continue
        raw = cfg.get(key)
        if raw is None:
            continue
        values[key] = cfg.get_object(key) if raw[:1] in "[{" else raw
    from pulumi.runtime import config as runtime_config

    for full in {*runtime_config.CONFIG.get(), *runtime_config.get_config_env()}:
        ns, _, key = full.partition(":")
        if ns == NAMESPACE and key not in KEYS:
            values[key] = None
    return parse_stack_config(values)


__all__ = [
    "HAMI_CHART",
    "HAMI_CHART_REPO",
    "KEYS",
    "OPERATOR_CHART",
    "OPERATOR_CHART_REPO",
    "StackConfig",
    "StackConfigError",
    "chart_at_least",
    "config_from_pulumi",
    "parse_stack_config",
]
