"""The GPU Operator's Helm values against the stack's intent.

FM08 driver, FM12 device plugin beside HAMi, FM10 device-plugin config, FM13 CDI with
HAMi, FM16 CDI on containerd 1.6, FM11 runtime class, FM18 pinning, FM27/FM28 NRI and
CDI modes (gpuplane.rules.nri); the toolkit's own
rules (FM01/FM05, FM15, FM17/FM04, FM09/FM11/FM13) live in gpuplane.rules.toolkit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules._shared import finding, flag, lookup, mapping, present
from gpuplane.rules._shared import version_tuple as vt
from gpuplane.rules.known_bad import check_known_bad_release
from gpuplane.rules.nri import check_nri_values
from gpuplane.rules.opvalues import (
    OPERATOR_DEFAULTS,
    OperatorValues,
    cdi_enabled,
    containerd_version,
)
from gpuplane.rules.pinning import check_chart_version, check_image_tags
from gpuplane.rules.platform import check_platform_values
from gpuplane.rules.timeslicing import check_profile
from gpuplane.rules.timeslicing import example as ts_example
from gpuplane.rules.toolkit import check_toolkit
from gpuplane.rules.toolkit_dump import check_toolkit_dump
from gpuplane.rules.toolkit_version import check_toolkit_containerd

_APP_VERSION_SECTIONS = ("values.operator.", "values.validator.", "values.nodeStatusExporter.")
# Chart sections whose `version` is an image tag (gpu-operator v23.9-v26.7 values).
IMAGE_SECTIONS = frozenset(f"values.{s}" for s in (
    "operator", "validator", "driver", "driver.manager", "toolkit", "devicePlugin", "dcgm",
    "dcgmExporter", "gfd", "migManager", "nodeStatusExporter", "gds", "gdrcopy",
    "vgpuManager", "vgpuManager.driverManager", "vgpuDeviceManager", "vfioManager",
    "vfioManager.driverManager", "sandboxDevicePlugin", "kataSandboxDevicePlugin",
    "kataManager", "ccManager", "draDriver"))


def check_operator_values(values: dict[str, Any], intent: ClusterIntent, *,
                          chart_version: str | None, where: str,
                          from_chart: bool = True) -> list[Finding]:
    """Every rule over the GPU Operator release's values; `where` names the release.
    `from_chart`: False for a `ClusterPolicy` declared on its own, which has no chart
    version to pin."""
    values = values if isinstance(values, Mapping) else {}
    ctx = OperatorValues(values, intent, vt(chart_version), where)
    out: list[Finding] = []
    for check in (_driver, _device_plugin, _plugin_config, _cdi, _runtime_class,
                  check_toolkit, check_platform_values, check_nri_values):
        out += check(ctx)
    out += check_toolkit_containerd(values, intent, chart_version=chart_version, where=where)
    out += check_toolkit_dump(values, intent, chart_version=chart_version, where=where)
    # FM18 blocks for the chart and the toolkit/driver images: they decide what every
    # node's containerd config and driver become (the policy config can lower it).
    if from_chart:
        out += check_chart_version(chart_version, chart="gpu-operator", where=where,
                                   stack_key="gpuplane:gpuOperator.chartVersion",
                                   example="v25.10.1", severity=Severity.ERROR)
        out += check_known_bad_release(values, intent, chart_version=chart_version,
                                       where=where)
    out += check_image_tags(values, where=where, stack_key=_image_key, skip=_app_version,
                            sections=IMAGE_SECTIONS, blocking=_node_image)
    return out


def _node_image(path: str) -> bool:
    """The toolkit's and the driver's own images (not the driver manager's)."""
    return path.startswith("values.toolkit.") or (
        path.startswith("values.driver.") and not path.startswith("values.driver.manager."))


def _image_key(path: str) -> str:
    if path.startswith("values.toolkit."):
        return "gpuplane:gpuOperator.toolkitImage"
    return f"gpuplane:gpuOperator.{path}"


def _app_version(path: str, tag: Any) -> bool:
    return tag == "" and path.startswith(_APP_VERSION_SECTIONS)


# ---------------------------------------------------------------- FM08 driver

def _driver(ctx: OperatorValues) -> list[Finding]:
    on = flag(ctx.values, "driver.enabled", OPERATOR_DEFAULTS["driver.enabled"])
    shown = ("true" if on else "false") if present(ctx.values, "driver.enabled") \
        else "not set (chart default: true)"
    where = ctx.at("driver.enabled", "gpuplane:gpuOperator.driver")
    if on and ctx.intent.driver_preinstalled:
        return [finding(
            "FM08",
            f"driver.enabled is {shown} while gpuplane:gpuOperator.driver is preinstalled: "
            "the operator's driver container fights the driver already on the nodes and its "
            "validator loops, so GPUs never become allocatable.",
            where,
            "Keep `gpuplane:gpuOperator.driver: preinstalled` and remove driver.enabled from "
            "`gpuplane:gpuOperator.values` (gpuplane renders driver.enabled=false), or set "
            "`gpuplane:gpuOperator.driver: managed` if the nodes have no driver; raw Helm: "
            "--set driver.enabled=false.")]
    if not on and not ctx.intent.driver_preinstalled:
        return [finding(
            "FM08",
            "driver.enabled is false while gpuplane:gpuOperator.driver is managed: nothing "
            "installs the NVIDIA driver, so the validator and every GPU pod wait forever.",
            where,
            "Set `gpuplane:gpuOperator.driver: preinstalled` if the node image ships the "
            "driver, or drop driver.enabled from `gpuplane:gpuOperator.values`; raw Helm: "
            "--set driver.enabled=true.")]
    return []


# ---------------------------------------------------------------- FM12 / FM10 plugin

def _device_plugin(ctx: OperatorValues) -> list[Finding]:
    if not ctx.hami or not flag(ctx.values, "devicePlugin.enabled",
                                        OPERATOR_DEFAULTS["devicePlugin.enabled"]):
        return []
    shown = "true" if present(ctx.values, "devicePlugin.enabled") \
        else "not set (chart default: true)"
    return [finding(
        "FM12",
        f"devicePlugin.enabled is {shown} while gpuplane:devicePlugin is hami: two device "
        "plugins register nvidia.com/gpu on every GPU node and overwrite each other's count.",
        ctx.at("devicePlugin.enabled", "gpuplane:devicePlugin"),
        "Keep `gpuplane:devicePlugin: hami` and remove devicePlugin.enabled from "
        "`gpuplane:gpuOperator.values` (gpuplane renders it false); raw Helm: --set "
        "devicePlugin.enabled=false.")]


def _plugin_config(ctx: OperatorValues) -> list[Finding]:
    if ctx.hami or not flag(ctx.values, "devicePlugin.enabled",
                                        OPERATOR_DEFAULTS["devicePlugin.enabled"]):
        return []
    intent = ctx.intent
    cfg = mapping(lookup(ctx.values, "devicePlugin.config"))
    name, default = str(cfg.get("name") or ""), str(cfg.get("default") or "")
    create = flag(ctx.values, "devicePlugin.config.create",
                  OPERATOR_DEFAULTS["devicePlugin.config.create"])
    data = mapping(cfg.get("data"))
    cm, profile_key, replicas = (intent.time_slicing_configmap, intent.time_slicing_profile,
                                 intent.time_slicing_replicas)
    raw = (f"raw Helm: devicePlugin.config.name={cm}, devicePlugin.config.default="
           f"{profile_key}, devicePlugin.config.create=false")
    out = []
    if replicas > 0 or intent.sharing:   # gpuplane's sharing ConfigMap, whatever the mode
        if name != cm:
            out.append(finding(
                "FM10",
                f"devicePlugin.config.name is {name or 'empty'!r} but the stack's time-slicing "
                f"ConfigMap is {cm!r}: the device plugin never reads it and nvidia.com/gpu "
                f"stays at the physical count instead of x{replicas}.",
                ctx.at("devicePlugin.config.name", "gpuplane:timeSlicing.configMap"),
                "Remove devicePlugin.config from `gpuplane:gpuOperator.values` (gpuplane "
                f"points it at `gpuplane:timeSlicing.configMap`); {raw}."))
        if default != profile_key:
            out.append(finding(
                "FM10",
                f"devicePlugin.config.default is {default or 'empty'!r} but the stack's "
                f"time-slicing profile is {profile_key!r}: nodes without a "
                "nvidia.com/device-plugin.config label do not get the time-slicing config.",
                ctx.at("devicePlugin.config.default", "gpuplane:timeSlicing.profile"),
                "Remove devicePlugin.config from `gpuplane:gpuOperator.values` (gpuplane "
                f"uses `gpuplane:timeSlicing.profile`); {raw}."))
        if create and data:
            out.append(finding(
                "FM10",
                f"devicePlugin.config.create is true with data, so the chart creates "
                f"ConfigMap {name!r} while gpuplane creates {cm!r} from gpuplane:timeSlicing: "
                "two owners of the sharing config (the install fails on a name clash, or the "
                "plugin reads the chart's copy, which no stack check covers).",
                ctx.at("devicePlugin.config.create", "gpuplane:timeSlicing"),
                "Describe time-slicing only in `gpuplane:timeSlicing` and drop "
                f"devicePlugin.config.create/data from `gpuplane:gpuOperator.values`; {raw}."))
    elif name:
        out.append(finding(
            "FM10",
            f"devicePlugin.config.name is {name!r} but gpuplane:timeSlicing is off: the "
            "device plugin shares GPUs by a config the stack does not know, so the post-deploy "
            "allocatable check expects the physical count.",
            ctx.at("devicePlugin.config.name", "gpuplane:timeSlicing"),
            "Declare the sharing in `gpuplane:timeSlicing` (replicas, configMap, profile), or "
            "remove devicePlugin.config from `gpuplane:gpuOperator.values`; raw Helm: "
            "devicePlugin.config.name=\"\".", severity=Severity.WARNING))
    if create and data:
        here = f"{ctx.where} values.devicePlugin.config"
        for key in sorted(data, key=str):
            out += check_profile(str(key), data[key], where=here)
        if default and default not in data:
            out.append(finding(
                "FM10",
                f"devicePlugin.config.default is {default!r} but the chart-created ConfigMap "
                f"has only {', '.join(map(repr, sorted(data, key=str)))}.",
                ctx.at("devicePlugin.config.default", "gpuplane:timeSlicing.profile"),
                f"Use `gpuplane:timeSlicing` instead; by hand add the key:\n"
                f"{ts_example(default, max(replicas, 2))}"))
    elif create and name and name != cm:
        out.append(finding(
            "FM10",
            f"devicePlugin.config.create is true without data: the chart creates nothing, so "
            f"ConfigMap {name!r} must already exist or the plugin has no config.",
            ctx.at("devicePlugin.config.create", "gpuplane:timeSlicing"),
            "Describe time-slicing in `gpuplane:timeSlicing` and drop devicePlugin.config "
            "from `gpuplane:gpuOperator.values`; raw Helm: devicePlugin.config.create=false "
            "and create the ConfigMap yourself.", severity=Severity.WARNING))
    return out


# ---------------------------------------------------------------- FM13 / FM16 CDI

def _cdi(ctx: OperatorValues) -> list[Finding]:
    on, why = ctx.cdi
    if not on:
        return []
    out = []
    where = ctx.at("cdi.enabled", "gpuplane:gpuOperator.cdi")
    if ctx.hami:
        out.append(finding(
            "FM13",
            f"{why} while gpuplane:devicePlugin is hami: the toolkit switches containerd to "
            "CDI, HAMi's device plugin does not hand out CDI devices, and its pods fail with "
            "`unresolvable CDI devices`.",
            where,
            "Set `gpuplane:gpuOperator.cdi: false` (gpuplane renders cdi.enabled=false); raw "
            "Helm: --set cdi.enabled=false."))
    version = containerd_version(ctx.intent)
    if not version.supports_cdi:
        out.append(finding(
            "FM16",
            f"{why}, but the nodes run containerd {version}, which has no CDI support: GPUs "
            "announced through CDI are never allocated to pods.",
            where,
            "Set `gpuplane:gpuOperator.cdi: false` (raw Helm: --set cdi.enabled=false), or "
            "upgrade containerd to 1.7+ and set `gpuplane:cluster.containerdVersion`."))
    return out


# ---------------------------------------------------------------- FM11 / FM09 runtime

def _runtime_class(ctx: OperatorValues) -> list[Finding]:
    name = str(lookup(ctx.values, "operator.runtimeClass",
                      OPERATOR_DEFAULTS["operator.runtimeClass"]))
    if name == ctx.intent.runtime_class:
        return []
    return [finding(
        "FM11",
        f"operator.runtimeClass is {name!r} but gpuplane:runtime.name is "
        f"{ctx.intent.runtime_class!r}: the operator names the containerd runtime and its "
        f"RuntimeClass {name!r}, so pods asking for runtimeClassName "
        f"{ctx.intent.runtime_class!r} get no GPU (or no such handler).",
        ctx.at("operator.runtimeClass", "gpuplane:runtime.name"),
        "Remove operator.runtimeClass from `gpuplane:gpuOperator.values` (gpuplane renders "
        f"`gpuplane:runtime.name`); raw Helm: --set operator.runtimeClass="
        f"{ctx.intent.runtime_class}.")]



__all__ = ["cdi_enabled", "check_operator_values", "containerd_version"]
