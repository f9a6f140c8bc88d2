"""The GPU Operator's CDI and NRI modes on its Helm values (FM27, FM28); FM26 on workloads
lives with FM11 in gpuplane.rules.workloads.

- NRI plugin mode (`cdi.nriPluginEnabled`, chart v26.3.0+, needs `cdi.enabled`): the
  toolkit configures no runtime and the operator deletes its RuntimeClasses
  (gpuplane.toolkit.operator.CHART_NRI_FROM). It needs containerd 1.7.30+, 2.1 or 2.2
  with NRI on (NVIDIA/cloud-native-docs gpu-operator/cdi.rst@5e3d218, "Enabling the NRI
  Plugin"): FM27. That NRI is on in a node's merged config is judged on the node's files
  (gpuplane.rules.containerd.nri).
- CDI turned off on a chart whose default is on (v25.10.0+): FM28, a warning naming what
  changes.
"""

from __future__ import annotations

import re
from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.rules._shared import finding, flag, present
from gpuplane.rules.opvalues import OperatorValues, cdi_enabled, containerd_version
from gpuplane.toolkit.operator import CHART_CDI_DEFAULT_FROM, CHART_NRI_FROM

# The first containerd release of each line the NRI plugin supports (cdi.rst@5e3d218).
NRI_CONTAINERD = {(1, 7): 30, (2, 1): 0, (2, 2): 0}
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def nri_enabled(values: Any, chart: tuple[int, int, int] | None) -> bool:
    """Whether the operator runs the NRI plugin: `cdi.nriPluginEnabled` with CDI on, on a
    chart that has the mode (templates/clusterpolicy.yaml@v26.3.0 renders it only with
    cdi.enabled); an unknown chart is taken as a current one."""
    return flag(values, "cdi.nriPluginEnabled", False) and cdi_enabled(values, chart)[0] \
        and (chart is None or chart >= CHART_NRI_FROM)


def nri_containerd_problem(version_text: str) -> tuple[Severity, str] | None:
    """Why containerd `version_text` cannot serve the NRI plugin, or None where it can."""
    match = _VERSION.match(version_text.strip())
    if not match:
        return Severity.WARNING, f"containerd {version_text!r} is not a version gpuplane reads"
    line, patch = (int(match[1]), int(match[2])), match[3]
    supported = "containerd 1.7.30 or later in the 1.7 line, 2.1 or 2.2"
    if line == (1, 7) and patch is None:
        return Severity.WARNING, (f"the nodes run containerd 1.7 without a patch release; the "
                                  f"NRI plugin needs {supported}")
    first = NRI_CONTAINERD.get(line)
    if line > (2, 2) or (first is not None and int(patch or 0) >= first):
        return None
    return Severity.ERROR, (f"the nodes run containerd {version_text.strip()}, but the NRI "
                            f"plugin needs {supported}")


def check_nri_values(ctx: OperatorValues) -> list[Finding]:
    """FM27 (NRI mode against the chart and the nodes' containerd) and FM28 (CDI turned
    off on a chart that turns it on)."""
    return [*_nri(ctx), *_cdi_off(ctx)]


def _nri(ctx: OperatorValues) -> list[Finding]:
    if not flag(ctx.values, "cdi.nriPluginEnabled", False):
        return []
    where = ctx.at("cdi.nriPluginEnabled", "gpuplane:gpuOperator.nri")
    if ctx.chart is not None and ctx.chart < CHART_NRI_FROM:
        first = "v" + ".".join(map(str, CHART_NRI_FROM))
        return [finding(
            "FM27",
            f"cdi.nriPluginEnabled is true, but chart v{'.'.join(map(str, ctx.chart))} has no "
            f"NRI plugin mode (first in {first}): the key is ignored and the toolkit writes "
            "the nvidia runtime into containerd as before.",
            where,
            f"Pin chart {first} or later to use the NRI plugin, or drop "
            "cdi.nriPluginEnabled from the values.", severity=Severity.WARNING)]
    if not nri_enabled(ctx.values, ctx.chart):
        return []   # cdi.enabled false: the chart's own validation refuses the install
    problem = nri_containerd_problem(ctx.intent.containerd_version)
    if problem is None:
        return []
    severity, why = problem
    return [finding(
        "FM27",
        f"cdi.nriPluginEnabled is true: {why} (with NRI on in its config). Below that the "
        "toolkit's NRI plugin cannot inject devices, and no nvidia runtime was written to "
        "fall back on: the operator's pods and GPU workloads get no GPU.",
        where,
        "Upgrade containerd on the GPU nodes (1.7.30+, 2.1 or 2.2) and set "
        "`gpuplane:cluster.containerdVersion` to the full version, or remove "
        "`gpuplane:gpuOperator.nri` (raw Helm: --set cdi.nriPluginEnabled=false).",
        severity=severity)]


def _cdi_off(ctx: OperatorValues) -> list[Finding]:
    if ctx.hami or not present(ctx.values, "cdi.enabled") or cdi_enabled(ctx.values,
                                                                          ctx.chart)[0]:
        return []   # with HAMi CDI must be off (FM13): the change is the fix there
    if ctx.chart is not None and ctx.chart < CHART_CDI_DEFAULT_FROM:
        return []
    if not containerd_version(ctx.intent).supports_cdi or ctx.intent.nvidia_default:
        # containerd 1.6 has no CDI (FM16), and nvidia as the default runtime needs CDI off
        # (under CDI the operator sets NVIDIA_RUNTIME_SET_AS_DEFAULT=false): off is asked.
        return []
    chart = f"chart v{'.'.join(map(str, ctx.chart))}" if ctx.chart else "the chart"
    return [finding(
        "FM28",
        f"cdi.enabled is false, but {chart} turns CDI on by default: the toolkit goes back "
        "to the nvidia runtime injecting GPUs (containerd's own CDI is not used), the "
        "operator deletes the nvidia-cdi and nvidia-legacy RuntimeClasses, GPU pods need "
        "runtimeClassName nvidia unless nvidia is the default runtime, and the NRI plugin "
        "mode is unavailable.",
        ctx.at("cdi.enabled", "gpuplane:gpuOperator.cdi"),
        "Remove `gpuplane:gpuOperator.cdi: false` (the chart's default applies; raw Helm: "
        "drop cdi.enabled=false) unless the legacy runtime is wanted on purpose.",
        severity=Severity.WARNING)]


__all__ = ["NRI_CONTAINERD", "check_nri_values", "nri_containerd_problem", "nri_enabled"]
