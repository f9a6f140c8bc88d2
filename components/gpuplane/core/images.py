"""`imageMirror`: the Helm values that move every image a chart deploys to a mirror
registry, keeping each image's repository path and tag. Pure functions over data tables.

The GPU Operator names an image `<repository>/<image>:<version>`, its `repository` holding
the registry (`nvcr.io/nvidia/k8s`); its node-feature-discovery subchart and HAMi's
DRA driver do the same with `image.repository`. HAMi's own images keep the registry apart
(`image.registry`). The tables below say which values hold a registry and what each chart
sets there by default; tests/real/test_image_mirror.py holds them against every chart version
in the upstream charts and renders the charts with Helm's engine.
"""

from __future__ import annotations

import re
from typing import Any

_Version = tuple[int, ...]

# GPU Operator values maps whose `repository` holds `<registry>/<path>`: the chart default,
# by the first chart version that sets it (a later entry replaces an earlier one; an
# entry of None: the chart has no such image from that version on).
_NVCR, _CLOUD, _K8S = "nvcr.io/nvidia", "nvcr.io/nvidia/cloud-native", "nvcr.io/nvidia/k8s"
_OPERATOR: dict[str, tuple[tuple[_Version, str | None], ...]] = {
    "operator": (((0,), _NVCR),),
    "operator.initContainer": (((0,), _NVCR), ((26, 3, 0), None)),
    "validator": (((0,), _CLOUD), ((25, 10, 0), _NVCR)),
    "nodeStatusExporter": (((0,), _CLOUD), ((25, 10, 0), _NVCR)),
    "driver": (((0,), _NVCR),),
    "driver.manager": (((0,), _CLOUD),),
    "toolkit": (((0,), _K8S),),
    "devicePlugin": (((0,), _NVCR),),
    "dcgm": (((0,), _CLOUD),),
    "dcgmExporter": (((0,), _K8S),),
    "gfd": (((0,), _NVCR),),
    "migManager": (((0,), _CLOUD),),
    "gds": (((0,), _CLOUD),),
    "gdrcopy": (((0,), _CLOUD),),
    "vfioManager": (((0,), _NVCR), ((26, 3, 0), _CLOUD)),
    "vfioManager.driverManager": (((0,), _CLOUD),),
    "vgpuDeviceManager": (((0,), _CLOUD),),
    "vgpuManager.driverManager": (((0,), _CLOUD),),
    "sandboxDevicePlugin": (((0,), _NVCR),),
    "kataManager": (((0,), _CLOUD),),
    "kataSandboxDevicePlugin": (((0,), None), ((26, 3, 0), _CLOUD)),
    "ccManager": (((0,), _CLOUD),),
    "draDriver": (((0,), None), ((26, 7, 0), _NVCR)),
    # The node-feature-discovery subchart: `image.repository` is the whole image name.
    "node-feature-discovery.image": (((0,), "registry.k8s.io/nfd/node-feature-discovery"),),
}
# `vgpuManager.repository` is empty in every chart: the vGPU manager is the user's own
# image, so there is nothing to move (set it in `values`).

# HAMi values maps whose `registry` holds a registry, by the first chart version.
_HAMI_REGISTRIES: dict[str, tuple[tuple[_Version, bool], ...]] = {
    "scheduler.kubeScheduler.image": (((0,), True),),
    "scheduler.extender.image": (((0,), True),),
    "scheduler.patch.image": (((0,), True),),
    "scheduler.patch.imageNew": (((0,), True),),
    "devicePlugin.image": (((0,), True),),
    "devicePlugin.monitor.image": (((0,), True),),
    "mockDevicePlugin.image": (((0,), True),),
    # The hami-dra subchart (`dra.enabled`) 0.2.0 of chart 2.9: registries of its own.
    "hami-dra.webhook.image": (((0,), False), ((2, 9, 0), True), ((2, 10, 0), False)),
    "hami-dra.monitor.image": (((0,), False), ((2, 9, 0), True), ((2, 10, 0), False)),
    "hami-dra.drivers.nvidia.image": (((0,), False), ((2, 9, 0), True), ((2, 10, 0), False)),
    "hami-dra.drivers.fake.image": (((0,), False), ((2, 9, 0), True), ((2, 10, 0), False)),
}
# HAMi maps whose `repository` holds `[<registry>/]<path>`: chart 2.8 sets hami-dra
# 0.1.0's driver image as a Docker Hub repository.
_HAMI_REPOSITORIES: dict[str, tuple[tuple[_Version, str | None], ...]] = {
    "hami-dra.drivers.nvidia.image": (((0,), "projecthami/k8s-dra-driver"), ((2, 9, 0), None)),
}

_NEWEST: _Version = (9999,)


def version_of(chart_version: str) -> _Version:
    """`v25.10.1` -> (25, 10, 1); a range or tag: the newest (the newest chart's images)."""
    match = re.match(r"^\s*v?(\d+)\.(\d+)\.(\d+)\s*$", chart_version)
    return tuple(int(p) for p in match.groups()) if match else _NEWEST


def _at(history: tuple[tuple[_Version, Any], ...], version: _Version) -> Any:
    found = None
    for since, value in history:
        if version >= since:
            found = value
    return found


def split_registry(reference: str) -> tuple[str, str]:
    """`(registry, path)` of an image or repository reference. The first component is a
    registry when it has a '.' or ':' or is `localhost` (Docker's rule); else the
    reference is Docker Hub's and the path is all of it."""
    first, _, rest = reference.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "docker.io", reference


def mirrored(reference: str, mirror: str) -> str:
    """`reference` at `mirror`, its path kept: nvcr.io/nvidia/k8s -> <mirror>/nvidia/k8s."""
    return f"{mirror.rstrip('/')}/{split_registry(reference)[1]}"


def _set(out: dict[str, Any], path: str, value: Any) -> None:
    keys = path.split(".")
    for key in keys[:-1]:
        out = out.setdefault(key, {})
    out[keys[-1]] = value


def operator_image_repositories(chart_version: str) -> dict[str, str]:
    """{values path of a `repository`: the chart's default} for this GPU Operator chart."""
    version = version_of(chart_version)
    out = {}
    for path, history in _OPERATOR.items():
        default = _at(history, version)
        if default:
            out[f"{path}.repository"] = default
    return out


def hami_image_references(chart_version: str) -> dict[str, str | None]:
    """{values path: the chart's default repository, or None for a `registry`} for HAMi."""
    version = version_of(chart_version)
    out: dict[str, str | None] = {f"{path}.registry": None
                                  for path, history in _HAMI_REGISTRIES.items()
                                  if _at(history, version)}
    for path, history in _HAMI_REPOSITORIES.items():
        default = _at(history, version)
        if default:
            out[f"{path}.repository"] = default
    return out


def operator_mirror_values(chart_version: str, mirror: str | None) -> dict[str, Any]:
    """The values that pull every GPU Operator image from `mirror` (none without one)."""
    out: dict[str, Any] = {}
    if mirror:
        for path, default in operator_image_repositories(chart_version).items():
            _set(out, path, mirrored(default, mirror))
    return out


def hami_mirror_values(chart_version: str, mirror: str | None) -> dict[str, Any]:
    """The values that pull every HAMi image from `mirror` (none without one)."""
    out: dict[str, Any] = {}
    if mirror:
        for path, default in hami_image_references(chart_version).items():
            _set(out, path, mirror.rstrip("/") if default is None else mirrored(default, mirror))
    return out


_MIRROR = re.compile(r"^(localhost|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+"
                     r"|\d{1,3}(\.\d{1,3}){3}|\[[0-9a-f:]+\]|[a-z0-9]([a-z0-9-]*[a-z0-9])?)"
                     r"(:\d{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*$")


def check_mirror(value: str) -> str:
    """An `imageMirror` value: `host[:port][/path]`, no scheme and no tag. ValueError
    with the fix otherwise."""
    value = value.strip().rstrip("/")
    example = "registry.example.internal:5000 or harbor.example.internal/nvcr-proxy"
    if not value:
        raise ValueError(f"empty; fix: give the mirror registry, e.g. {example}")
    if "://" in value:
        bare = value.split("://", 1)[1].rstrip("/")
        raise ValueError(f"{value}: give the registry without the scheme (image references "
                         f"have none); fix: {bare}")
    head, _, path = value.partition("/")
    if "@" in value or (path and ":" in path):
        raise ValueError(f"{value}: an image mirror is a registry (and path), with no tag or "
                         f"digest; fix: {head}{'/' + path.split(':')[0] if path else ''}")
    if not _MIRROR.match(value):
        raise ValueError(f"{value!r} is not a registry host[:port][/path] (lowercase, no "
                         f"spaces); fix: e.g. {example}")
    return value


__all__ = ["check_mirror", "hami_image_references", "hami_mirror_values", "mirrored",
           "operator_image_repositories", "operator_mirror_values", "split_registry",
           "version_of"]
