"""Reading the GPU Operator's Helm values: chart defaults and the view every operator rule
shares.

Chart defaults matter as much as what is set: `driver.enabled`, `devicePlugin.enabled`
and `toolkit.enabled` default to true; `cdi.enabled` to false up to v25.3 and to true from
v25.10 (an unknown chart is taken as a current one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules._shared import at, flag, lookup, present
from gpuplane.toolkit.operator import CHART_CDI_DEFAULT_FROM

# Chart defaults the rules assume where a value is not set, the same in values.yaml of
# every supported chart (NVIDIA/gpu-operator deployments/gpu-operator/values.yaml,
# v24.3.0-v26.7.0); tests/pure/test_charts.py holds them against each chart.
OPERATOR_DEFAULTS: dict[str, Any] = {
    "driver.enabled": True,
    "toolkit.enabled": True,
    "devicePlugin.enabled": True,
    "devicePlugin.config.create": False,
    "operator.runtimeClass": "nvidia",
    "mig.strategy": "single",
}


def containerd_version(intent: ClusterIntent) -> ContainerdVersion:
    try:
        return ContainerdVersion.parse(intent.containerd_version)
    except ValueError as exc:
        raise ValueError(f"gpuplane:cluster.containerdVersion: {exc}") from None


def cdi_enabled(values: Any, chart: tuple[int, int, int] | None) -> tuple[bool, str]:
    """Whether the operator runs in CDI mode, and why (set, or which chart default)."""
    if present(values, "cdi.enabled"):
        on = flag(values, "cdi.enabled", False)
        return on, f"cdi.enabled is {str(on).lower()}"
    if chart is None:
        return True, "cdi.enabled is not set and an unknown chart version is taken as a " \
                     "current one, which defaults it to true"
    on = chart >= CHART_CDI_DEFAULT_FROM
    return on, f"cdi.enabled is not set and chart v{'.'.join(map(str, chart))} defaults it " \
               f"to {str(on).lower()}"


def mig_strategy(values: Any) -> str:
    """The operator's `mig.strategy` (the chart's default where unset): the device plugin
    and GFD run with it, so a sharing config's `flags.migStrategy` must say the same."""
    return str(lookup(values, "mig.strategy", OPERATOR_DEFAULTS["mig.strategy"]))


@dataclass(frozen=True)
class OperatorValues:
    """One release's values with the stack's intent and chart version; `where` names the
    release."""

    values: Mapping[str, Any]
    intent: ClusterIntent
    chart: tuple[int, int, int] | None
    where: str

    def at(self, path: str, key: str | None) -> str:
        return at(self.where, f"values.{path}", key)

    @property
    def hami(self) -> bool:
        return self.intent.device_plugin == "hami"

    @property
    def toolkit_on(self) -> bool:
        return flag(self.values, "toolkit.enabled", OPERATOR_DEFAULTS["toolkit.enabled"])

    @property
    def cdi(self) -> tuple[bool, str]:
        return cdi_enabled(self.values, self.chart)


__all__ = [
    "CHART_CDI_DEFAULT_FROM",
    "OPERATOR_DEFAULTS",
    "OperatorValues",
    "cdi_enabled",
    "containerd_version",
    "mig_strategy",
]
