"""FM18 (error): a GPU Operator release that upstream names as broken on this distribution.

A pinned chart protects a stack from releases it has not seen, not from a release that is
known to fail where it runs. gpuplane carries the few releases NVIDIA itself lists as
broken for one distribution or platform, each with the upstream record behind it, and
judges them like an unpinned chart: an error, with the release to move to. An entry holds
only while the operator deploys the toolkit that release pins (an image override away from
it is the fix upstream recommends), and never where the host runs its own toolkit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules._shared import at, finding, flag
from gpuplane.rules.toolkit_version import toolkit_version


@dataclass(frozen=True)
class KnownBad:
    """One GPU Operator release known to fail on some distributions."""

    chart: str                        # the chart version, as `helm --version` takes it
    toolkit: tuple[int, int, int]     # the toolkit the chart pins, which carries the defect
    distros: frozenset[str]           # gpuplane's distribution names it fails on
    harm: str                         # what happens, in the user's terms
    fix: str                          # the upstream-recommended way out
    source: str                       # the upstream record (file@tag, or issue)


KNOWN_BAD: tuple[KnownBad, ...] = (
    KnownBad(
        chart="v24.9.0", toolkit=(1, 17, 0), distros=frozenset({"rke2", "k3s"}),
        harm="its toolkit 1.17.0 reads containerd's config only through `containerd config "
             "dump`, and these distributions keep their containerd off the PATH, so the "
             "toolkit DaemonSet fails to start on every GPU node",
        fix="Use chart v24.9.1 or later (`gpuplane:gpuOperator.chartVersion`; its toolkit "
            "falls back to the config file), or keep v24.9.0 with "
            "`gpuplane:gpuOperator.toolkitImage.tag` v1.17.1 or later.",
        source="NVIDIA/cloud-native-docs gpu-operator/release-notes.rst (v24.9.0 Known "
               "Limitations, pull request #127); NVIDIA/gpu-operator issue #1109; "
               "NVIDIA/nvidia-container-toolkit tools/container/runtime/containerd/"
               "containerd.go@v1.17.0 (`getRuntimeConfig`)"),
)


def check_known_bad_release(values: Mapping[str, Any], intent: ClusterIntent, *,
                            chart_version: str | None, where: str) -> list[Finding]:
    """FM18 errors for a GPU Operator chart in KNOWN_BAD on the stack's distribution."""
    if not chart_version or not flag(values, "toolkit.enabled", True):
        return []
    deployed = toolkit_version(values, chart_version)
    out: list[Finding] = []
    for entry in KNOWN_BAD:
        if chart_version.strip().lstrip("v") != entry.chart.lstrip("v") \
                or intent.distro not in entry.distros \
                or deployed is None or deployed[0] != entry.toolkit:
            continue
        out.append(finding(
            "FM18",
            f"GPU Operator {entry.chart} is a known-bad release on {intent.distro}: "
            f"{entry.harm} (upstream: {entry.source}).",
            at(where, "chart version", "gpuplane:gpuOperator.chartVersion"),
            entry.fix, severity=Severity.ERROR))
    return out


__all__ = ["KNOWN_BAD", "KnownBad", "check_known_bad_release"]
