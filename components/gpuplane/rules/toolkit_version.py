"""FM03: a toolkit too old for containerd 2.x.

The NVIDIA container toolkit learned containerd's version-3 config (containerd 2.x) in
1.17.4 (NVIDIA/nvidia-container-toolkit CHANGELOG.md@v1.17.4; gpuplane's reference
gpu-operator.md). An older toolkit run by the operator's DaemonSet writes a version-2 CRI
table that containerd 2.x ignores or migrates away, on every node at once — no canary, no
node agent. The toolkit version comes from an image override (`toolkit.version`, set by
`gpuOperator.toolkitImage`) or else from the chart's pin (gpuplane.toolkit.operator:
v24.3.0-v24.9.1 pin 1.15.0-1.17.3, v24.9.2 the first with 1.17.4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules._shared import at, finding, flag, lookup
from gpuplane.toolkit.installer import parse_version

MIN_FOR_CONTAINERD_2 = (1, 17, 4)


def _parse(text: Any) -> tuple[int, int, int] | None:
    try:
        return parse_version(str(text))
    except ValueError:
        return None


def toolkit_version(values: Mapping[str, Any],
                    chart_version: str | None) -> tuple[tuple[int, int, int], str] | None:
    """(version, the stack key it comes from) of the toolkit the operator deploys, or None
    when it cannot be told (a digest, `latest`: FM18's; an unmeasured chart)."""
    tag = lookup(values, "toolkit.version")
    if tag is not None:
        found = _parse(tag)
        return (found, "gpuplane:gpuOperator.toolkitImage") if found else None
    if not chart_version:
        return None
    from gpuplane.toolkit.operator import known_toolkit_tag

    pinned = known_toolkit_tag(chart_version)
    found = _parse(pinned) if pinned else None
    return (found, "gpuplane:gpuOperator.chartVersion") if found else None


def _first_chart_with(minimum: tuple[int, int, int]) -> str:
    """The oldest supported chart whose pinned toolkit is at least `minimum`."""
    from gpuplane.toolkit.operator import CHART_TOOLKITS, chart_tuple, toolkit_for_chart

    fits = [c for c in CHART_TOOLKITS if (_parse(toolkit_for_chart(c)) or (0, 0, 0)) >= minimum]
    return min(fits, key=lambda c: chart_tuple(c) or (0, 0, 0))


def check_toolkit_containerd(values: Mapping[str, Any], intent: ClusterIntent, *,
                             chart_version: str | None, where: str) -> list[Finding]:
    """FM03 (error): the operator's toolkit is older than 1.17.4 on containerd 2.x."""
    if not flag(values, "toolkit.enabled", True):
        return []
    try:
        containerd = ContainerdVersion.parse(intent.containerd_version)
    except ValueError:
        return []
    found = toolkit_version(values, chart_version)
    if containerd.major < 2 or found is None or found[0] >= MIN_FOR_CONTAINERD_2:
        return []
    version, key = found
    shown = ".".join(map(str, version))
    need = ".".join(map(str, MIN_FOR_CONTAINERD_2))
    return [finding(
        "FM03",
        f"the GPU Operator deploys NVIDIA container toolkit {shown} (from {key}) on "
        f"containerd {intent.containerd_version}: toolkits before {need} do not know "
        "containerd 2.x's version-3 config, so the toolkit DaemonSet writes a CRI table "
        "containerd ignores or drops, on every GPU node at once.",
        at(where, "toolkit.version", key),
        f"Use toolkit {need} or later: a chart that pins one (gpuOperator.chartVersion "
        f"{_first_chart_with(MIN_FOR_CONTAINERD_2)} or later) or "
        f"gpuOperator.toolkitImage.tag ≥ v{need}.",
        severity=Severity.ERROR)]


__all__ = ["MIN_FOR_CONTAINERD_2", "check_toolkit_containerd", "toolkit_version"]
