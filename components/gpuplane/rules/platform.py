"""The managed platforms' traps (`cluster.platform`, gpuplane.platforms.profiles): the operator's
values against what the node image already has, HAMi's prerequisites there, and node
files written where the platform owns them.

Each check is a topic under the failure mode whose symptom it gives (rules/topics.py):
- FM08-platform-driver: the operator's driver where the image preinstalls one, or where
  the operator has no driver container for the image (EKS AL2023);
- FM08-platform-toolkit: the operator's toolkit where the image's own already configures
  containerd (EKS AL2023 NVIDIA, Bottlerocket, AKS): a second installer rewrites it (FM08,
  not FM05: it is known at preview time, and FM05 is no preview policy);
- FM12-platform-device-plugin: a second device plugin where the image ships one
  (Bottlerocket), the operator's or HAMi's;
- FM11-platform-runtime: operator.runtimeClass naming a runtime the platform's config
  does not have (AKS: `nvidia-container-runtime`);
- FM15-cos-install-dirs: driver and toolkit dirs outside /home/kubernetes/bin/nvidia on COS;
- FM13-platform-hami: HAMi's host paths under COS's read-only root;
- FM04-platform-owned: node files written on a platform that rewrites them.
`RUNTIME_CONFIG_SOURCE` where `config dump` rewrites paths is FM17's (rules/toolkit.py),
a drop-in newer than its root FM03's (rules/containerd/merging.py).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.platforms.profiles import (
    DEVICE_PLUGIN,
    DRIVER,
    TOOLKIT,
    PlatformProfile,
    platform_profile,
)
from gpuplane.rules._shared import finding, flag, lookup, present
from gpuplane.rules.opvalues import OPERATOR_DEFAULTS, OperatorValues

_DOCS = "docs/platforms.md"


def platform_of(intent: ClusterIntent) -> PlatformProfile | None:
    return platform_profile(intent.platform) if intent.platform else None


def _shown(values: Mapping[str, Any], path: str) -> str:
    if present(values, path):
        return f"{path} is {str(flag(values, path, True)).lower()}"
    return f"{path} is not set (chart default: {str(OPERATOR_DEFAULTS[path]).lower()})"


def check_platform_values(ctx: OperatorValues) -> list[Finding]:
    """Every platform rule over the GPU Operator's values (none without a platform)."""
    plat = platform_of(ctx.intent)
    if plat is None:
        return []
    return [*_driver(ctx, plat), *_toolkit(ctx, plat), *_device_plugin(ctx, plat),
            *_runtime_class(ctx, plat), *_cos_dirs(ctx, plat)]


def _driver(ctx: OperatorValues, plat: PlatformProfile) -> list[Finding]:
    on = flag(ctx.values, "driver.enabled", OPERATOR_DEFAULTS["driver.enabled"])
    if not on:
        return []
    where = ctx.at("driver.enabled", "gpuplane:gpuOperator.driver")
    if DRIVER in plat.preinstalled and not ctx.intent.driver_preinstalled:
        # With `driver: preinstalled` FM08's own check already names the values.
        return [finding(
            "FM08",
            f"{_shown(ctx.values, 'driver.enabled')} on {plat.title}, whose image "
            "preinstalls the NVIDIA driver: the operator's driver container cannot load its "
            "module beside it and its validator loops, so GPUs never become allocatable.",
            where,
            "Set `gpuplane:gpuOperator.driver: preinstalled` (gpuplane renders "
            f"driver.enabled=false; {_DOCS}); raw Helm: --set driver.enabled=false.")]
    if plat.operator_driver_unsupported:
        return [finding(
            "FM08",
            f"{_shown(ctx.values, 'driver.enabled')} on {plat.title}: "
            f"{plat.operator_driver_unsupported}, so the driver pods never become ready and "
            "no GPU is advertised.",
            where,
            "Run an image that brings the NVIDIA driver (for EKS the AL2023 NVIDIA AMI: "
            "`gpuplane:cluster.platform: eks-al2023-nvidia`) and set "
            "`gpuplane:gpuOperator.driver: preinstalled`.")]
    return []


def _toolkit(ctx: OperatorValues, plat: PlatformProfile) -> list[Finding]:
    if TOOLKIT not in plat.preinstalled or not ctx.toolkit_on:
        return []
    return [finding(
        "FM08",
        f"{_shown(ctx.values, 'toolkit.enabled')} on {plat.title}, whose image preinstalls "
        f"the NVIDIA Container Toolkit and whose own containerd config already runs "
        f"`{plat.default_runtime}` as the default runtime ({plat.config}): the operator's "
        "toolkit installs a second copy and rewrites that config on every GPU node, which "
        f"{plat.writer.split(';')[0].split(',')[0]} replaces again.",
        ctx.at("toolkit.enabled", "gpuplane:gpuOperator.toolkit"),
        "Set `gpuplane:gpuOperator.toolkit: host` (gpuplane renders toolkit.enabled=false and "
        f"plans from the platform's own config; {_DOCS}); raw Helm: --set "
        "toolkit.enabled=false.")]


def _device_plugin(ctx: OperatorValues, plat: PlatformProfile) -> list[Finding]:
    if DEVICE_PLUGIN not in plat.preinstalled:
        return []
    if not flag(ctx.values, "devicePlugin.enabled", OPERATOR_DEFAULTS["devicePlugin.enabled"]):
        return []
    return [finding(
        "FM12",
        f"{_shown(ctx.values, 'devicePlugin.enabled')} on {plat.title}, whose image runs its "
        "own NVIDIA device plugin: two device plugins register nvidia.com/gpu on every GPU "
        "node and overwrite each other's count.",
        ctx.at("devicePlugin.enabled", "gpuplane:devicePlugin"),
        "Set `gpuplane:devicePlugin: platform` (gpuplane renders devicePlugin.enabled=false; "
        "sharing is the platform's setting settings.kubelet-device-plugins.nvidia.*); raw "
        "Helm: --set devicePlugin.enabled=false.")]


def _runtime_class(ctx: OperatorValues, plat: PlatformProfile) -> list[Finding]:
    if not plat.configures_runtime or ctx.toolkit_on:
        return []
    name = str(lookup(ctx.values, "operator.runtimeClass",
                      OPERATOR_DEFAULTS["operator.runtimeClass"]))
    if name == plat.default_runtime:
        return []
    return [finding(
        "FM11",
        f"operator.runtimeClass is {name!r} but {plat.title}'s containerd config names its "
        f"NVIDIA runtime {plat.default_runtime!r} and no toolkit adds another: the "
        f"operator's RuntimeClass {name!r} points at a handler the nodes do not have, so "
        "its own pods and every pod using it fail to start.",
        ctx.at("operator.runtimeClass", "gpuplane:runtime.name"),
        f"Set `gpuplane:runtime.name: {plat.default_runtime}` (gpuplane renders "
        f"operator.runtimeClass from it); raw Helm: --set "
        f"operator.runtimeClass={plat.default_runtime}.")]


def _cos_dirs(ctx: OperatorValues, plat: PlatformProfile) -> list[Finding]:
    wanted = plat.install_dir
    if not wanted:
        return []
    out = []
    checks = [("hostPaths.driverInstallDir", "/run/nvidia/driver",
               not flag(ctx.values, "driver.enabled", True),
               "the driver Google's installer put there")]
    if ctx.toolkit_on:
        checks.append(("toolkit.installDir", "/usr/local/nvidia", True,
                       "the toolkit's binaries, which must survive a reboot and be "
                       "executable"))
    for path, default, applies, what in checks:
        value = str(lookup(ctx.values, path, default))
        if not applies or posixpath.normpath(value) == wanted:
            continue
        out.append(finding(
            "FM15",
            f"{path} is {value!r} on {plat.title}, where / is read-only, /etc stateless and "
            f"{wanted} is the one writable, stateful, executable place for {what}: the "
            "operator's pods cannot find or keep it, and GPU pods never start.",
            ctx.at(path, "gpuplane:cluster.platform"),
            f"Remove {path} from `gpuplane:gpuOperator.values` (gpuplane renders {wanted} "
            f"for `gpuplane:cluster.platform: {plat.name.value}`); raw Helm: "
            f"--set {path}={wanted}."))
    return out


# ---------------------------------------------------------------- HAMi

_COS_WRITABLE = ("/home", "/var")


def check_platform_hami(values: Mapping[str, Any], intent: ClusterIntent, *,
                        where: str) -> list[Finding]:
    """HAMi's prerequisites the platform adds (FM12 / FM13)."""
    plat = platform_of(intent)
    if plat is None or intent.device_plugin != "hami":
        return []
    out = []
    if DEVICE_PLUGIN in plat.preinstalled:
        out.append(finding(
            "FM12",
            f"gpuplane:devicePlugin is hami on {plat.title}: {plat.hami}: two device plugins "
            "register nvidia.com/gpu on every GPU node and overwrite each other's count.",
            f"{where} (gpuplane:devicePlugin)",
            "Keep the platform's device plugin (`gpuplane:devicePlugin: platform`, sharing "
            "through settings.kubelet-device-plugins.nvidia.*), or run HAMi on an image "
            "without one (EKS: `gpuplane:cluster.platform: eks-al2023-nvidia`)."))
    if plat.install_dir:
        out += _driver_root(values, "devicePlugin.nvidiaDriverRoot", "HAMi's", plat, where,
                            "gpuplane:hami.values", rendered=True)
        for path, default in (("devicePlugin.libPath", "/usr/local/vgpu"),
                              ("global.gpuHookPath", "/usr/local")):
            value = posixpath.normpath(str(lookup(values, path, default)))
            if any(value == w or value.startswith(w + "/") for w in _COS_WRITABLE):
                continue
            out.append(finding(
                "FM13",
                f"HAMi's {path} is {value!r} on {plat.title}: {plat.hami}; there the host "
                "path cannot be created, so HAMi's device plugin never starts.",
                f"{where} values.{path} (gpuplane:hami.values)",
                f"Put HAMi's host paths under {plat.install_dir.rsplit('/', 1)[0]}: "
                "`gpuplane:hami.values: {global: {gpuHookPath: /home/kubernetes/bin/hami}, "
                "devicePlugin: {libPath: /home/kubernetes/bin/hami/vgpu}}`."))
    return out


# Charts of NVIDIA's DRA driver (NVIDIA/k8s-dra-driver-gpu deployments/helm/
# nvidia-dra-driver-gpu, renamed dra-driver-nvidia-gpu from v0.4.0).
DRA_CHARTS = ("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu")


def check_dra_driver_root(values: Mapping[str, Any], intent: ClusterIntent, *,
                          where: str) -> list[Finding]:
    """FM15 on a DRA driver release gpuplane did not write: `nvidiaDriverRoot` (default `/`,
    NVIDIA/k8s-dra-driver-gpu deployments/helm/nvidia-dra-driver-gpu/values.yaml@v25.12.0)
    must name where the platform keeps the driver (COS: /home/kubernetes/bin/nvidia;
    docs/install.md@v0.4.0 calls a wrong value "a common error during install")."""
    plat = platform_of(intent)
    if plat is None or not plat.install_dir:
        return []
    return _driver_root(values, "nvidiaDriverRoot", "The DRA driver's", plat, where, None,
                        rendered=False)


def _driver_root(values: Mapping[str, Any], path: str, owner: str, plat: PlatformProfile,
                 where: str, stack_key: str | None, *, rendered: bool) -> list[Finding]:
    """FM15: a driver root (HAMi's devicePlugin.nvidiaDriverRoot, unset: `/`, mounted as
    the plugin's driver root, Project-HAMi/HAMi charts/hami/templates/device-plugin/
    daemonsetnvidia.yaml@v2.10.0; the DRA driver's nvidiaDriverRoot) other than where the
    platform keeps the driver outside `/` (COS: /home/kubernetes/bin/nvidia)."""
    wanted = plat.install_dir or "/"
    value = lookup(values, path)
    shown = posixpath.normpath(value) if isinstance(value, str) and value else None
    if shown == wanted:
        return []
    state = f"is {shown!r}" if shown else "is not set (the driver is read from /)"
    fix = f"--set {path}={wanted}"
    return [finding(
        "FM15",
        f"{owner} {path} {state} on {plat.title}, whose driver lives in {wanted}: the "
        "plugin finds no NVIDIA library, publishes no GPU, and GPU pods stay Pending.",
        f"{where} values.{path}" + (f" ({stack_key})" if stack_key else ""),
        (f"Leave it to gpuplane (it renders {wanted} for `cluster.platform: "
         f"{plat.name.value}`); raw Helm: {fix}.") if rendered else
        f"Set `{path}: {wanted}` in the release's values (Helm: {fix}).")]


# ---------------------------------------------------------------- node files

def check_platform_node_writes(intent: ClusterIntent, written: Iterable[str], *,
                               where: str) -> list[Finding]:
    """FM04: node files gpuplane would write on a platform that owns the node's config."""
    plat = platform_of(intent)
    paths = list(dict.fromkeys(written))
    if plat is None or not paths:
        return []
    return [finding(
        "FM04",
        f"gpuplane would write {', '.join(paths)} on {plat.title} nodes, but {plat.writer}: "
        "the change is lost (or never applied), and nodes the platform creates later never "
        "get it.",
        f"{where} (gpuplane:cluster.nodeAccess)",
        "Set `gpuplane:cluster.nodeAccess: none`: gpuplane then leaves the nodes to the "
        f"platform and plans from the config it writes; change containerd through the "
        f"platform's own input ({_DOCS}).",
        Severity.ERROR)]


__all__ = ["check_platform_hami", "check_platform_node_writes", "check_platform_values",
           "platform_of"]
