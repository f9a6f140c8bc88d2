"""`gpuplane:draDriver`: NVIDIA's DRA driver for GPUs as a Helm release beside the GPU
Operator, which keeps the driver and the toolkit while the DRA driver hands out the GPUs
through ResourceClaims.

The chart changed its name when the project moved to kubernetes-sigs: `nvidia-dra-driver-gpu`
for the v25.x releases, `dra-driver-nvidia-gpu` from v0.4.0 (Chart.yaml@v25.12.0 and
@v0.4.0; docs/upgrade.md@v0.4.0), so the chart a `chartVersion` names follows from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, ValidationInfo, field_validator, model_validator

from gpuplane.config.errors import Problem, stack_key
from gpuplane.config.releases import ChartRelease
from gpuplane.config.sections import VersionStr
from gpuplane.core.chartsource import ChartSource, oci_tag_problem, parse_chart_source
from gpuplane.rules.dra_facts import (
    DRA_CHART,
    DRA_KNOWN,
    dra_chart_of,
    dra_order,
)

if TYPE_CHECKING:
    from gpuplane.config.stack import StackConfig

# The StackConfig fields `dra_pool_problems` reads (gpuplane.config.stack.Check).
DRA_POOL_NEEDS = frozenset({"dra_driver", "nodes", "sharing", "device_plugin",
                            "time_slicing"})

# NGC serves both names (docs/install.md@v0.4.0; demo/clusters/openshift/README.md@v25.12.0).
DRA_CHART_REPO = "https://helm.ngc.nvidia.com/nvidia"


class DraDriverConfig(ChartRelease):
    """NVIDIA's DRA driver: the chart, its version and the choices gpuplane types."""

    CHART: ClassVar[str] = DRA_CHART

    chart_version: VersionStr
    """The pinned chart version: `v25.8.1`, `v25.12.0` (chart `nvidia-dra-driver-gpu`),
    `v0.4.0`, `v0.4.1` (chart `dra-driver-nvidia-gpu`)."""
    namespace: str = "nvidia-dra-driver-gpu"
    """The driver's namespace (the chart refuses `default`)."""
    chart: str | None = None
    """Where the chart comes from; unset: NVIDIA's `helm.ngc.nvidia.com`. A local chart (a
    directory with Chart.yaml or a `.tgz`; relative to the project root), an `https://`
    mirror chart repository, or `oci://<registry>/<path>/<chart>`; the chart is
    `nvidia-dra-driver-gpu` for v25.x and `dra-driver-nvidia-gpu` from v0.4.0, at
    `chartVersion`."""
    image_mirror: str | None = None
    """A registry (`host[:port][/path]`) the driver's image is pulled from instead, keeping
    its path (`registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu` ->
    `<mirror>/dra-driver-nvidia/dra-driver-nvidia-gpu`; v25.x: `nvcr.io/nvidia/
    k8s-dra-driver-gpu` -> `<mirror>/nvidia/k8s-dra-driver-gpu`); `values` still win."""
    values: dict[str, Any] = Field(default_factory=dict)
    """Raw Helm values for the driver's chart, merged last (FM30-FM36 still judge them)."""
    gpus: bool = True
    """`resources.gpus.enabled`: hand out whole GPUs and MIG devices by ResourceClaim. The
    GPU Operator's device plugin is then turned off where the driver runs (both would
    advertise the same GPUs): on every GPU node, or with `pools` on those pools' nodes."""
    pools: list[str] | None = None
    """The node pools (`nodes[].pool`) whose nodes the driver serves; unset: every GPU
    node (the operator's device plugin is then off cluster-wide). Set: the operator keeps
    its device plugin for the other pools (with their `gpuplane:sharing` profiles), and
    these pools' nodes are labelled `nvidia.com/gpu.deploy.device-plugin: "false"` and
    `gpuplane.dev/dra-driver: "true"`, which the driver's kubelet plugin selects."""
    compute_domains: bool = False
    """`resources.computeDomains.enabled`: Multi-Node NVLink ComputeDomains (IMEX); needs
    MNNVL hardware and driver >= 570.158.01."""
    feature_gates: dict[str, bool] = Field(default_factory=dict)
    """The driver's own feature gates (`featureGates`), e.g. `{MPSSupport: true}`
    (pkg/featuregates/featuregates.go at the release's tag)."""
    driver_root: str | None = None
    """`nvidiaDriverRoot`: where the NVIDIA driver's files are on the node. Unset:
    `/run/nvidia/driver` when the operator installs the driver (`gpuOperator.driver:
    managed`), the platform's driver directory (GKE COS), else `/` (a host driver)."""

    @field_validator("chart_version")
    @classmethod
    def _known(cls, value: str) -> str:
        """An exact version must be one whose DeviceClasses and attributes gpuplane knows;
        a range or tag is FM18's."""
        order = dra_order(value)
        if order is not None and order not in [dra_order(t) for t in DRA_KNOWN]:
            raise ValueError(f"{value!r} is not a DRA driver release gpuplane knows; use one "
                             f"of {', '.join(DRA_KNOWN)}")
        return value

    @field_validator("chart")
    @classmethod
    def _chart(cls, value: str | None, info: ValidationInfo) -> str | None:
        """As `ChartRelease._chart`, for the chart name the version is published under."""
        if value is None:
            return None
        version = info.data.get("chart_version")
        name = dra_chart_of(version) if isinstance(version, str) else DRA_CHART
        source = parse_chart_source(value, name)
        problem = oci_tag_problem(source, version) if isinstance(version, str) else None
        if problem:
            raise ValueError(problem)
        return value.strip()

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if value == "default":
            raise ValueError("the chart refuses the default namespace "
                             "(templates/validation.yaml@v0.4.1); use nvidia-dra-driver-gpu")
        return value

    @field_validator("driver_root")
    @classmethod
    def _root(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"{value!r} must be an absolute path on the node")
        return value

    @field_validator("pools")
    @classmethod
    def _pools(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("names no pool: list the pools (nodes[].pool) the DRA driver "
                             "serves, or remove pools to serve every GPU node")
        if value is not None and len(set(value)) != len(value):
            raise ValueError(f"{value!r} names a pool twice; list each pool once")
        return value

    @model_validator(mode="after")
    def _something(self) -> DraDriverConfig:
        if not self.gpus and not self.compute_domains:
            raise ValueError("gpus and computeDomains are both false: the driver would "
                             "hand out nothing; set gpus: true or computeDomains: true "
                             "(or remove gpuplane:draDriver)")
        return self

    @property
    def chart_name(self) -> str:
        return dra_chart_of(self.chart_version)

    @property
    def helm_version(self) -> str:
        """The version as the chart's Chart.yaml states it, without the tag's `v`
        (`0.4.1`, `25.12.0`@each tag), which is what Helm records for the release."""
        return self.chart_version.strip().removeprefix("v")

    @property
    def chart_source(self) -> ChartSource:
        from gpuplane.core.chartsource import UPSTREAM

        return parse_chart_source(self.chart, self.chart_name) if self.chart else UPSTREAM


def dra_pool_problems(cfg: StackConfig) -> Iterator[Problem]:
    """Device-plugin sharing where the driver serves every GPU node, and what
    `draDriver.pools` cannot name: a pool no node has, and a pool whose
    `gpuplane:sharing` entry shares GPUs through the device plugin (time-slicing, MPS, a
    MIG layout), which does not run on the driver's nodes. The cluster default
    (`sharing.default`) is the device plugin's nodes' own: it never applies to a DRA pool."""
    dra = cfg.dra_driver
    if dra is None:
        return
    if dra.pools is None:
        if dra.gpus:
            yield from _sharing_without_a_device_plugin(cfg)
        return
    known = sorted({n.pool for n in cfg.nodes if n.gpus > 0})
    for i, pool in enumerate(dra.pools):
        if pool not in known:
            yield Problem(stack_key(f"draDriver.pools[{i}]"),
                          f"no GPU node has pool {pool!r} (nodes[].pool: "
                          f"{', '.join(known) or 'none'}); fix the pool name or remove it")
    entries = cfg.sharing.pools if cfg.sharing is not None else {}
    for pool in dra.pools:
        p = entries.get(pool)
        if p is None or (p.mode == "whole" and p.mig is None):
            continue
        how = "a MIG layout" if p.mig is not None else f"{p.mode} ({p.replicas} replicas)"
        yield Problem(stack_key(f"sharing.pools.{pool}"),
                      f"pool {pool!r} is served by the DRA driver (draDriver.pools), whose "
                      f"nodes run no device plugin, but its sharing is {how}, which only the "
                      "device plugin applies; remove the pool from gpuplane:draDriver.pools "
                      "to keep the device plugin's sharing there, or remove "
                      f"gpuplane:sharing.pools.{pool} and share by claim instead (a "
                      "GpuConfig sharing strategy TimeSlicing/MPS, or MIG devices of "
                      "DeviceClass mig.nvidia.com)")
    if dra.gpus and cfg.device_plugin != "gpu-operator":
        yield Problem(stack_key("draDriver.pools"),
                      f"keeps a device plugin beside the DRA driver on the other pools, "
                      f"which gpuplane does only for the GPU Operator's, but devicePlugin is "
                      f"{cfg.device_plugin}; set devicePlugin: gpu-operator, or remove "
                      "draDriver.pools (the driver then serves every GPU node)")


def _sharing_without_a_device_plugin(cfg: StackConfig) -> Iterator[Problem]:
    """The driver serves every GPU node (no `draDriver.pools`), so gpuplane turns the
    operator's device plugin off: device-plugin sharing (time-slicing, MPS, a MIG layout)
    would be rendered into a ConfigMap nothing reads, and pods would get whole GPUs by
    claim while the stack says they share."""
    fix = ("share by claim instead (a GpuConfig sharing strategy TimeSlicing/MPS in the "
           "claim, or MIG devices of DeviceClass mig.nvidia.com), or set "
           "gpuplane:draDriver.pools to the pools that take claims so the other pools keep "
           "the device plugin and this sharing")
    if cfg.time_slicing.replicas >= 2:
        yield Problem(stack_key("timeSlicing.replicas"),
                      f"time-slicing {cfg.time_slicing.replicas} ways through the device "
                      "plugin, but the DRA driver serves every GPU node (no "
                      "draDriver.pools) and gpuplane turns the device plugin off; set "
                      f"replicas: 0, and {fix}")
    if cfg.sharing is None:
        return
    profiles = [("sharing.default", cfg.sharing.default),
                *((f"sharing.pools.{n}", p) for n, p in sorted(cfg.sharing.pools.items()))]
    for key, p in profiles:
        if p.mode == "whole" and p.mig is None:
            continue
        how = "a MIG layout" if p.mig is not None else f"{p.mode} ({p.replicas} replicas)"
        yield Problem(stack_key(key),
                      f"shares GPUs by {how}, which only the device plugin applies, but the "
                      "DRA driver serves every GPU node (no draDriver.pools) and gpuplane "
                      f"turns the device plugin off; remove gpuplane:{key} and {fix}")


__all__ = ["DRA_CHART_REPO", "DRA_POOL_NEEDS", "DraDriverConfig", "dra_pool_problems"]
