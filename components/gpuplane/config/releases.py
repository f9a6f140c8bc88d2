"""The two Helm releases gpuplane installs, `gpuplane:gpuOperator` and `gpuplane:hami`.

Both are a chart pinned at a version, in a namespace, from a chart source, with an image
mirror, raw values and Helm's wait: `ChartRelease` holds those keys and their checks
once, so a fix to how a chart source or a mirror is validated reaches both releases. Each
section keeps its own defaults (HAMi pins a chart version, the operator must be given
one) and adds the keys only it has.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from gpuplane.config.sections import ImageConfig, VersionStr, _Section
from gpuplane.core.chartsource import UPSTREAM, ChartSource, oci_tag_problem, parse_chart_source
from gpuplane.core.images import check_mirror
from gpuplane.distros.rancher_mode import RuntimeSetup
from gpuplane.toolkit.installer import parse_version
from gpuplane.toolkit.operator import (
    CHART_NRI_FROM,
    OPERATOR_DROPIN_FROM,
    chart_cdi_default,
    chart_tuple,
    known_toolkit_tag,
    toolkit_for_chart,
    writes_dropin,
)
from gpuplane.toolkit.options import NEWEST_TOOLKIT

OPERATOR_CHART = "gpu-operator"
OPERATOR_CHART_REPO = "https://helm.ngc.nvidia.com/nvidia"
HAMI_CHART = "hami"
HAMI_CHART_REPO = "https://project-hami.github.io/HAMi/"


class ChartRelease(_Section):
    """A Helm release: the keys and checks the GPU Operator and HAMi sections share.

    `chart_version` and `namespace` are declared here, before `chart`, because the
    `chart` check reads the validated `chartVersion` (pydantic validates fields in
    declaration order, a redeclared field keeping its place); each section redeclares
    them with its own default and description.
    """

    CHART: ClassVar[str]
    """The chart's name: what a local chart or an OCI reference must be."""

    chart_version: VersionStr
    namespace: str
    chart: str | None = None
    """Where the chart comes from; unset: the chart's own repository (NVIDIA's
    `helm.ngc.nvidia.com` for the GPU Operator, `project-hami.github.io` for HAMi). A
    local chart (a directory with Chart.yaml or a `.tgz`; relative to the project root),
    an `https://` mirror chart repository, or `oci://<registry>/<path>/<chart>`
    (`gpu-operator`, `hami`). A local chart must be that chart at `chartVersion`; an OCI
    tag must agree with it."""
    image_mirror: str | None = None
    """A registry (`host[:port][/path]`) every image the chart deploys is pulled from
    instead, each keeping its path and tag (`nvcr.io/nvidia/k8s/container-toolkit` ->
    `<mirror>/nvidia/k8s/container-toolkit`; HAMi's kube-scheduler too, unless
    `hami.schedulerImageRegistry` is set); `gpuOperator.toolkitImage` and `values` still
    win."""
    skip_await: bool = False
    """`true`: `pulumi up` does not wait for the chart's workloads to become ready (Helm's
    `--wait`; the release's `skipAwait`), for clusters whose nodes join after the stack
    is applied. The post-deploy checks, when enabled, still judge the GPUs."""
    values: dict[str, Any] = Field(default_factory=dict)
    """Raw Helm values merged last (the policies still check them); `hami.values` only
    with `devicePlugin: hami`."""

    @field_validator("chart")
    @classmethod
    def _chart(cls, value: str | None, info: ValidationInfo) -> str | None:
        """`chart`: its form (path, http(s)://, oci://) and an OCI tag that agrees with
        `chartVersion` (validated before it). A local chart is checked against the project
        root when the program runs (`gpuplane.core.chartsource.local_chart_problem`)."""
        if value is None:
            return None
        source = parse_chart_source(value, cls.CHART)   # ValueError with the fix
        version = info.data.get("chart_version")
        problem = oci_tag_problem(source, version) if isinstance(version, str) else None
        if problem:
            raise ValueError(problem)
        return value.strip()

    @field_validator("image_mirror")
    @classmethod
    def _mirror(cls, value: str | None) -> str | None:
        return None if value is None else check_mirror(value)

    @property
    def chart_name(self) -> str:
        """The chart's name at this release's version."""
        return self.CHART

    @property
    def chart_source(self) -> ChartSource:
        """Where Helm installs the chart from: the parsed `chart`, else upstream."""
        return parse_chart_source(self.chart, self.CHART) if self.chart else UPSTREAM


class GpuOperatorConfig(ChartRelease):
    CHART: ClassVar[str] = OPERATOR_CHART

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
    cdi: bool | None = None
    """`cdi.enabled` (containerd 1.7 and later); unset: the chart's own default, off up to
    v25.3.x and on from v25.10.0 (so gpuplane never turns off what the chart turns on)."""
    nri: bool = False
    """`cdi.nriPluginEnabled` (chart v26.3.0 and later, needs CDI): the toolkit's NRI plugin
    injects the GPUs, the toolkit writes no containerd runtime and the operator deletes the
    `nvidia` RuntimeClasses; gpuplane switches NRI on in containerd 1.7's config where it is
    off. Needs containerd 1.7.30+, 2.1 or 2.2 on the nodes."""
    toolkit_image: ImageConfig | None = None
    """Override of the chart's toolkit image; unset: the chart's."""

    @model_validator(mode="before")
    @classmethod
    def _chart_cdi_default(cls, data: Any) -> Any:
        """An unset `cdi` follows the pinned chart's own `cdi.enabled` default."""
        if isinstance(data, dict) and data.get("cdi") is None:
            chart = data.get("chartVersion", data.get("chart_version"))
            if isinstance(chart, str):
                return {**data, "cdi": chart_cdi_default(chart)}
        return data

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

    @model_validator(mode="after")
    def _nri_fits_chart(self) -> GpuOperatorConfig:
        """`nri` needs a chart that has `cdi.nriPluginEnabled` (v26.3.0+) and CDI, which the
        chart itself demands (templates/validations.yaml@v26.3.0 fails the install)."""
        if not self.nri:
            return self
        problems = []
        chart = chart_tuple(self.chart_version)
        if chart is not None and chart < CHART_NRI_FROM:
            first = "v" + ".".join(map(str, CHART_NRI_FROM))
            problems.append(
                f"nri: true needs chartVersion {first} or later (the first chart with "
                f"cdi.nriPluginEnabled); chart {self.chart_version} has no NRI plugin mode. "
                f"Set chartVersion: {first} (or later), or remove nri")
        if self.cdi is False:
            problems.append(
                "nri: true needs CDI (the chart refuses nriPluginEnabled with cdi.enabled "
                "false): remove `cdi: false` (the chart turns CDI on), or remove nri")
        if self.toolkit != "operator":
            problems.append(
                "nri: true needs `toolkit: operator` (the NRI plugin runs in the operator's "
                "toolkit container): set toolkit: operator, or remove nri")
        if problems:
            raise ValueError("; ".join(problems))
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


class HamiConfig(ChartRelease):
    CHART: ClassVar[str] = HAMI_CHART

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

    @property
    def scheduler_registry(self) -> str:
        """`schedulerImageRegistry` as set, else the mirror, else registry.k8s.io."""
        if "scheduler_image_registry" in self.model_fields_set or not self.image_mirror:
            return self.scheduler_image_registry
        return self.image_mirror


def chart_at_least(version: str, minimum: tuple[int, int]) -> bool:
    """Compare a chart version such as v25.10.1 with (major, minor)."""
    match = re.match(r"^v?(\d+)\.(\d+)", version)
    return match is not None and (int(match[1]), int(match[2])) >= minimum
