"""Which toolkit each GPU Operator chart ships, and what its operator makes of `toolkit.env`
before the toolkit installer sees it.

Every chart gpuplane supports is listed with the toolkit image tag its `values.yaml` pins
(`toolkit.version`, NVIDIA/gpu-operator `deployments/gpu-operator/values.yaml` at each
tag): the plan predicts what that toolkit writes on every node, so a chart outside the
list is refused rather than guessed. tests/pure/test_charts.py holds the list against the
charts themselves.

The env (`chart_operator_env`) is read from the operator at each tag:
`controllers/object_controls.go` (`TransformToolkit`, `transformForRuntime`,
`getRuntimeConfigFile(s)`, `getRuntimeSocketFile`) and the toolkit DaemonSet asset
`assets/state-container-toolkit/0500_daemonset.yaml`. What changes between charts:

- base env (asset): `ROOT`, `NVIDIA_VISIBLE_DEVICES=void`, the CDI default kind at every
  tag; `RUNTIME_ARGS=""` up to v24.9.x (gone in 0500_daemonset.yaml@v25.3.0);
  `TOOLKIT_PID_FILE` from v24.6.2 (absent @v24.3.0).
- order: up to v25.3.2 `toolkit.env` is applied *before* the CDI settings, which then
  override it (object_controls.go@v25.3.2); from v25.3.3 it is applied after them, so a
  user's `NVIDIA_RUNTIME_SET_AS_DEFAULT` wins (object_controls.go@v25.3.3).
- CDI settings: up to v25.3.x `CDI_ENABLED`, `NVIDIA_CONTAINER_RUNTIME_MODES_CDI_
  ANNOTATION_PREFIXES`, `CRIO_CONFIG_MODE=config`, and `NVIDIA_CONTAINER_RUNTIME_MODE=cdi`
  only with `cdi.default`; from v25.10.0 (`transformToolkitCtrForCDI`) `CDI_ENABLED`,
  `NVIDIA_RUNTIME_SET_AS_DEFAULT=false`, `NVIDIA_CONTAINER_RUNTIME_MODE=cdi`,
  `CRIO_CONFIG_MODE=config`.
- forced after `toolkit.env`, every tag: `RUNTIME=containerd`, `CONTAINERD_RUNTIME_CLASS`
  = `operator.runtimeClass` (or `nvidia`), `CONTAINERD_CONFIG` and `CONTAINERD_SOCKET`
  re-pointed at the mounted host files (user's value or the default; empty = unset).
  From v24.9.0 also `RUNTIME_CONFIG` and `RUNTIME_SOCKET` (a user's value of either is
  overwritten). From v25.10.0 the host config falls back to `RUNTIME_CONFIG` when
  `CONTAINERD_CONFIG` is unset, `RUNTIME_DROP_IN_CONFIG` is *always* set (the user's
  value, or `/etc/containerd/conf.d/99-nvidia.toml` when unset or empty, a host-wide
  directory: why gpuplane always sets it) with `RUNTIME_DROP_IN_CONFIG_HOST_PATH`, and
  every `file=` in `RUNTIME_CONFIG_SOURCE` is re-pointed at the host (`/host` + path).
  Before v25.10 the operator passes `RUNTIME_DROP_IN_CONFIG` and `RUNTIME_CONFIG_SOURCE`
  through untouched and mounts neither; the toolkits those charts ship (<= 1.17.8) read
  neither (`cmd/nvidia-ctk-installer` reads them from toolkit v1.18.0).

The env is given in node paths: the operator's container paths (`/runtime/config-dir/`,
`/runtime/config-dir.d/`, `/runtime/sock-dir/`, `/host`) are mounts of exactly these host
paths. Entries set through `valueFrom` (`NRI_NAMESPACE` from v26.3.0) are left out; In CDI's
NRI plugin mode (`cdi.nriPluginEnabled`, v26.3.0+, off by default) the toolkit writes no
runtime at all (`CHART_NRI_FROM`; gpuplane.plan.node plans that node state).
"""

from __future__ import annotations

import contextlib
import re

from gpuplane.toolkit.installer import Installer
from gpuplane.toolkit.options import PlanOptions

OPERATOR_ROOT = "/usr/local/nvidia"
DEFAULT_CONFIG = "/etc/containerd/config.toml"
DEFAULT_SOCKET = "/run/containerd/containerd.sock"
DEFAULT_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
DEFAULT_RUNTIME_CLASS = "nvidia"

# GPU Operator chart -> `toolkit.version` in its values.yaml at that tag (the image tag
# the operator deploys; `-ubuntu20.04` flavour up to v25.3.x, none from v25.10.0).
CHART_TOOLKITS: dict[str, str] = {
    "v24.3.0": "v1.15.0-ubuntu20.04",
    "v24.6.2": "v1.16.2-ubuntu20.04",
    "v24.9.0": "v1.17.0-ubuntu20.04",
    "v24.9.1": "v1.17.3-ubuntu20.04",
    "v24.9.2": "v1.17.4-ubuntu20.04",
    "v25.3.0": "v1.17.5-ubuntu20.04",
    "v25.3.1": "v1.17.8-ubuntu20.04",
    "v25.3.2": "v1.17.8-ubuntu20.04",
    "v25.3.3": "v1.17.8-ubuntu20.04",
    "v25.3.4": "v1.17.8-ubuntu20.04",
    "v25.10.0": "v1.18.0",
    "v25.10.1": "v1.18.1",
    "v26.3.0": "v1.19.0",
    "v26.3.1": "v1.19.0",
    "v26.3.2": "v1.19.1",
    "v26.3.3": "v1.19.1",
    "v26.7.0": "v1.20.0",
}
# Charts gpuplane does not deploy (config refuses them) but may find running, e.g. under
# `gpuplane doctor`: their pins let the rules judge the toolkit's flavour and version.
# values.yaml `toolkit.version` @v23.9.0 (762213f), @v23.9.1 (8072420), @v23.9.2
# (5a94df5), @v24.6.0 (4d9a188), @v24.6.1 (dacb1f4).
DIAGNOSE_ONLY_TOOLKITS: dict[str, str] = {
    "v23.9.0": "v1.14.3-ubuntu20.04",
    "v23.9.1": "v1.14.3-ubuntu20.04",
    "v23.9.2": "v1.14.6-ubuntu20.04",
    "v24.6.0": "v1.16.1-ubuntu20.04",
    "v24.6.1": "v1.16.1-ubuntu20.04",
}
_CHART = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")

# Where the operator's handling of the toolkit container changes (see the docstring).
PID_FILE_FROM = (24, 6, 2)
RUNTIME_ARGS_BEFORE = (25, 3, 0)
RUNTIME_CONFIG_ENV_FROM = (24, 9, 0)      # RUNTIME_CONFIG / RUNTIME_SOCKET also set
ENV_AFTER_CDI_FROM = (25, 3, 3)           # toolkit.env applied after the CDI settings
OPERATOR_DROPIN_FROM = (25, 10, 0)        # drop-in, config source, CDI set-as-default
# `cdi.enabled` in NVIDIA/gpu-operator deployments/gpu-operator/values.yaml: false up to
# v25.3.x, true from v25.10.0 (tests/pure/test_charts.py holds it against every chart).
CHART_CDI_DEFAULT_FROM = (25, 10, 0)
# `cdi.nriPluginEnabled`, first in deployments/gpu-operator/values.yaml@v26.3.0 (absent
# @v25.10.1): the toolkit then configures no runtime (nvidia-container-toolkit
# cmd/nvidia-ctk-installer/container/runtime/runtime.go@v1.19.0 `NewConfigurer`) and the
# operator deletes its RuntimeClasses (controllers/object_controls.go@v26.3.0
# `RuntimeClasses`, state `pre-requisites` off under NRI in state_manager.go@v26.3.0).
CHART_NRI_FROM = (26, 3, 0)


def chart_tuple(chart_version: str | None) -> tuple[int, int, int] | None:
    """(major, minor, patch) of an exact chart version such as v25.10.1, else None."""
    match = _CHART.match((chart_version or "").strip())
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def chart_cdi_default(chart_version: str | None) -> bool:
    """The chart's own `cdi.enabled` when the stack leaves it unset: on from v25.10.0; a
    range or tag (FM18's) is taken as a current chart, which turns it on."""
    at = chart_tuple(chart_version)
    return at is None or at >= CHART_CDI_DEFAULT_FROM


def _tag(key: tuple[int, int, int]) -> str:
    return "v" + ".".join(map(str, key))


_KNOWN = sorted(chart_tuple(tag) or (0, 0, 0) for tag in CHART_TOOLKITS)
OLDEST_CHART = _tag(_KNOWN[0])
NEWEST_CHART = _tag(_KNOWN[-1])
_STACK_KEY = "gpuplane:gpuOperator.chartVersion"


def default_toolkit_tag(chart_version: str) -> str:
    """The toolkit image tag chart `chart_version` deploys (its values.yaml
    `toolkit.version`); ValueError, naming the supported charts and the stack key, for a
    chart gpuplane does not know (its toolkit's output would be a guess)."""
    key = chart_tuple(chart_version)
    if key is not None and _tag(key) in CHART_TOOLKITS:
        return CHART_TOOLKITS[_tag(key)]
    shown = chart_version.strip()
    if key is not None and key < _KNOWN[0]:
        raise ValueError(
            f"GPU Operator chart {shown} is older than {OLDEST_CHART}, the oldest chart "
            f"gpuplane supports; set {_STACK_KEY} to {OLDEST_CHART} or later (newest "
            f"supported: {NEWEST_CHART})")
    if key is not None and key > _KNOWN[-1]:
        raise ValueError(
            f"GPU Operator chart {shown} is newer than {NEWEST_CHART}, the newest chart "
            f"gpuplane has measured the toolkit of; set {_STACK_KEY} to {NEWEST_CHART} or "
            "an older supported chart")
    raise ValueError(
        f"GPU Operator chart {shown!r} is not a release gpuplane has measured the toolkit "
        f"of; set {_STACK_KEY} to one of {', '.join(CHART_TOOLKITS)}")


def known_toolkit_tag(chart_version: str | None) -> str | None:
    """The toolkit image tag chart `chart_version` pins, for a supported chart or one only
    diagnosed (DIAGNOSE_ONLY_TOOLKITS); None when gpuplane does not know it."""
    key = chart_tuple(chart_version)
    if key is None:
        return None
    return CHART_TOOLKITS.get(_tag(key)) or DIAGNOSE_ONLY_TOOLKITS.get(_tag(key))


def toolkit_for_chart(chart_version: str) -> str:
    """The toolkit version ("1.17.8") chart `chart_version` deploys; ValueError for a chart
    gpuplane does not know (see `default_toolkit_tag`)."""
    return Installer.of(default_toolkit_tag(chart_version)).name


_LINE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")

FIRST_DROPIN_CHART = min((c for c, t in CHART_TOOLKITS.items()
                          if Installer.of(t).writes_dropin),
                         key=lambda c: chart_tuple(c) or (0, 0, 0))


def chart_writes_dropin(chart_version: str | None) -> bool:
    """Whether the toolkit chart `chart_version` pins writes a drop-in (toolkit >= 1.18:
    v25.10.0 and later). A chart line or range ("v25.3.x") is read by its first version;
    no version, or none readable, is taken as a current chart."""
    match = _LINE.match((chart_version or "").strip())
    if not match:
        return True
    key = (int(match[1]), int(match[2]), int(match[3] or 0))
    return key >= (chart_tuple(FIRST_DROPIN_CHART) or (0, 0, 0))


def writes_dropin(chart_version: str | None, toolkit_tag: object = None) -> bool:
    """Whether the operator's toolkit writes a drop-in: by the image tag that overrides the
    chart's pin (`toolkit.version`), when it names a version, else by the chart's pin."""
    if toolkit_tag not in (None, ""):
        with contextlib.suppress(ValueError):
            return Installer.of(str(toolkit_tag)).writes_dropin
    return chart_writes_dropin(chart_version)


def chart_operator_env(chart: tuple[int, int, int] | None, toolkit_env: list[dict[str, str]],
                       *, cdi: bool, runtime_class: str,
                       cdi_default: bool = False) -> dict[str, str]:
    """The env chart `chart`'s operator gives the toolkit container on a containerd node,
    in node paths (None: the newest chart's behaviour). `toolkit_env` is the chart's
    `toolkit.env`, `runtime_class` its `operator.runtimeClass`, `cdi` and `cdi_default`
    its `cdi.enabled` and `cdi.default` (the latter read up to v25.3 only)."""
    at = chart if chart is not None else _KNOWN[-1]
    env = {"ROOT": OPERATOR_ROOT}
    if at < RUNTIME_ARGS_BEFORE:
        env["RUNTIME_ARGS"] = ""
    env |= {"NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND": "management.nvidia.com/gpu",
            "NVIDIA_VISIBLE_DEVICES": "void"}
    if at >= PID_FILE_FROM:
        env["TOOLKIT_PID_FILE"] = "/run/nvidia/toolkit/toolkit.pid"
    user = {e["name"]: e["value"] for e in toolkit_env}
    cdi_env: dict[str, str] = {}
    if cdi and at >= OPERATOR_DROPIN_FROM:
        cdi_env = {"CDI_ENABLED": "true", "NVIDIA_RUNTIME_SET_AS_DEFAULT": "false",
                   "NVIDIA_CONTAINER_RUNTIME_MODE": "cdi", "CRIO_CONFIG_MODE": "config"}
    elif cdi:
        cdi_env = {"CDI_ENABLED": "true",
                   "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_ANNOTATION_PREFIXES": "nvidia.cdi.k8s.io/",
                   "CRIO_CONFIG_MODE": "config"}
        if cdi_default:
            cdi_env["NVIDIA_CONTAINER_RUNTIME_MODE"] = "cdi"
    env |= (cdi_env | user) if at >= ENV_AFTER_CDI_FROM else (user | cdi_env)
    env["RUNTIME"] = "containerd"
    env["CONTAINERD_RUNTIME_CLASS"] = runtime_class or DEFAULT_RUNTIME_CLASS
    config = env.get("CONTAINERD_CONFIG") or (
        env.get("RUNTIME_CONFIG") if at >= OPERATOR_DROPIN_FROM else None) or DEFAULT_CONFIG
    if at >= RUNTIME_CONFIG_ENV_FROM:
        env["RUNTIME_CONFIG"] = config
    env["CONTAINERD_CONFIG"] = config
    if at >= OPERATOR_DROPIN_FROM:
        dropin = env.get("RUNTIME_DROP_IN_CONFIG") or DEFAULT_DROPIN
        env["RUNTIME_DROP_IN_CONFIG"] = dropin
        env["RUNTIME_DROP_IN_CONFIG_HOST_PATH"] = dropin
        # `file=<p>` becomes `file=/host<p>`: the same node path.
    socket = env.get("CONTAINERD_SOCKET") or DEFAULT_SOCKET
    if at >= RUNTIME_CONFIG_ENV_FROM:
        env["RUNTIME_SOCKET"] = socket
    env["CONTAINERD_SOCKET"] = socket
    return env


def installer_env(toolkit_env: list[dict[str, str]], options: PlanOptions,
                  chart: str | None = None) -> dict[str, str]:
    """The env the toolkit installer runs with, in node paths: the operator's env for
    `chart` (default `options.operator_chart`; unknown: the newest chart's behaviour),
    less the drop-in settings when the toolkit predates drop-ins (`options.toolkit_dropin`
    false: toolkit < 1.18 reads neither and edits `CONTAINERD_CONFIG` in place)."""
    env = chart_operator_env(chart_tuple(chart or options.operator_chart), toolkit_env,
                             cdi=options.cdi, runtime_class=options.runtime_name)
    if not options.toolkit_dropin:
        env.pop("RUNTIME_DROP_IN_CONFIG", None)
        env.pop("RUNTIME_DROP_IN_CONFIG_HOST_PATH", None)
    return env


__all__ = ["CHART_TOOLKITS", "DEFAULT_DROPIN", "DIAGNOSE_ONLY_TOOLKITS", "FIRST_DROPIN_CHART",
           "NEWEST_CHART", "OLDEST_CHART", "OPERATOR_ROOT",
           "chart_operator_env", "chart_tuple", "chart_writes_dropin", "default_toolkit_tag",
           "installer_env", "known_toolkit_tag", "toolkit_for_chart", "writes_dropin"]
