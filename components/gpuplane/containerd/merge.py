"""How each release line merges the loaded files into one plugin configuration.

1.6 / 1.7: each file's `plugins.<key>` table replaces the merged one whole; `version` is
the last file's non-zero version. 2.x: every file is deep-merged (later values win, even
empty ones); v0/v1 files are first renamed to v2 plugin keys and take the running
version; if the result is below 3, the v2 CRI table is migrated into the v3 runtime
plugin, copying only keys the v3 table does not already have.

A v0/v1 file holding one plugin under both names (`plugins.cri` and
`plugins."io.containerd.grpc.v1.cri"`, what the toolkit's version-1 engine writes into a
version-less file) has no single 2.x result: the rename walks a Go map, so which table
survives changes from one start to the next (measured: 2.0.11 and 2.2.7 each gave both
outcomes over eight `config dump` runs of one file). The model keeps the short name's
table and records the collision in `Merged.ambiguities`; the rulebook reports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuplane.containerd.load import LoadResult
from gpuplane.containerd.versions import CRI_V1, CRI_V2, CRI_V3_RUNTIME, ContainerdVersion

_V1_CORE = {
    "cri": CRI_V2,
    "cgroups": "io.containerd.monitor.v1.cgroups",
    "linux": "io.containerd.runtime.v1.linux",
    "scheduler": "io.containerd.gc.v1.scheduler",
    "bolt": "io.containerd.metadata.v1.bolt",
    "task": "io.containerd.runtime.v2.task",
    "opt": "io.containerd.internal.v1.opt",
    "restart": "io.containerd.internal.v1.restart",
    "overlayfs": "io.containerd.snapshotter.v1.overlayfs",
    "native": "io.containerd.snapshotter.v1.native",
    # measured on 2.0/2.2 with `disabled_plugins` of a version-1 file
    "zfs": "io.containerd.snapshotter.v1.zfs",
    "aufs": "io.containerd.snapshotter.v1.aufs",
}
# Keys of the v2 CRI table that 2.x does not move into the v3 runtime plugin.
_NOT_RUNTIME_KEYS = {
    "cni", "containerd", "sandbox_image", "registry", "image_decryption",
    "max_concurrent_downloads", "image_pull_progress_timeout", "image_pull_with_sync_fs",
    "stats_collect_period", "disable_tcp_service", "stream_server_address",
    "stream_server_port", "stream_idle_timeout", "enable_tls_streaming",
    "x509_key_pair_streaming",
}
_NOT_RUNTIME_CONTAINERD_KEYS = {"snapshotter", "disable_snapshot_annotations",
                                "discard_unpacked_layers"}

_CRI_V3_IMAGES = "io.containerd.cri.v1.images"
# Where 2.x moves a version-2 CRI table's keys (measured with `config dump` of a version-2
# file setting each): these to the images plugin (`sandbox_image` as
# `pinned_images.sandbox`), these stay in `io.containerd.grpc.v1.cri`, the rest (`cni`
# included) to the runtime plugin.
_V2_TO_IMAGES = ("registry", "image_decryption", "max_concurrent_downloads",
                 "image_pull_progress_timeout", "image_pull_with_sync_fs",
                 "stats_collect_period")
_V2_TO_IMAGES_CTD = ("snapshotter", "disable_snapshot_annotations", "discard_unpacked_layers")
_V2_GRPC = ("disable_tcp_service", "stream_server_address", "stream_server_port",
            "stream_idle_timeout", "enable_tls_streaming", "x509_key_pair_streaming")


@dataclass
class Merged:
    """The merged plugin tables, the effective config version and the CRI key read."""

    version: int
    plugins: dict[str, Any]
    cri_key: str
    refusals: list[str] = field(default_factory=list)
    ambiguities: list[str] = field(default_factory=list)  # 2.x picks one at random


def merge(loaded: LoadResult) -> Merged:
    if loaded.containerd_version.deep_merges:
        return _merge_v2(loaded)
    return _merge_v1(loaded)


def _merge_v1(loaded: LoadResult) -> Merged:
    version, plugins = 0, {}
    for f in loaded.files:
        if f.version:
            version = f.version
        for key, table in f.plugins.items():
            plugins[key] = copy_data(table)
    merged = Merged(version, plugins, CRI_V2 if version >= 2 else CRI_V1)
    line = loaded.containerd_version
    if version > line.max_config_version and line.minor >= 7:
        merged.refusals.append(f"unsupported config version `{version}` (containerd {line} "
                               "reads version 1 and 2 configs only)")
    elif version >= 2:
        for key in plugins:
            if not _is_plugin_uri(key, strict=line.minor >= 7):
                merged.refusals.append(
                    f'invalid plugin key URI "{key}" expect io.containerd.x.vx: a version-1 '
                    f"table in a version-{version} configuration")
    return merged


def _is_plugin_uri(key: str, strict: bool) -> bool:
    if strict:
        return key.startswith("io.containerd.") and len(key.split(".", 3)) == 4
    return len(key.split(".")) >= 4


def v1_name(key: str) -> str:
    """A version-1 plugin name as 2.x renames it (`cri` -> io.containerd.grpc.v1.cri)."""
    return _v1_name(key)


def _v1_name(key: str) -> str:
    if "." in key:
        return key
    if key in _V1_CORE:
        return _V1_CORE[key]
    if key.endswith("-service"):
        return "io.containerd.service.v1." + key
    return "io.containerd.grpc.v1." + key


def v1_plugins_as_v2(plugins: dict[str, Any]) -> dict[str, Any]:
    """A version-1 config's plugin tables as containerd 1.x runs (and dumps) them: short
    names spelled out; a table already under a full name is not a version-1 plugin name
    and is ignored (what `config dump` of such a file shows on 1.6 and 1.7)."""
    return {_v1_name(key): copy_data(table) for key, table in plugins.items() if "." not in key}


def _merge_v2(loaded: LoadResult) -> Merged:
    version = 3
    plugins: dict[str, Any] = {}
    ambiguities: list[str] = []
    for f in loaded.files:
        tables = f.plugins
        file_version = f.version
        if file_version in (0, 1):
            tables, clashes = _renamed_v1(tables)
            ambiguities += [f"{f.path}: `plugins.{short}` and `plugins.\"{full}\"` both name "
                            f"plugin {full} in a version-{file_version} file"
                            for short, full in clashes]
            file_version = version
        deep_merge(plugins, copy_data(tables))
        version = file_version
    merged = Merged(version, plugins, CRI_V3_RUNTIME, ambiguities=ambiguities)
    if version > 3:
        merged.refusals.append(
            f"expected containerd config version equal to or less than `3`, got `{version}`")
    elif version < 3:
        _migrate_cri_v2_to_v3(plugins)
    return merged


def _renamed_v1(tables: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A v0/v1 file's plugin tables under their v2 names, and the (short, full) name pairs
    that collide (the short name's table is kept; containerd 2.x keeps either)."""
    renamed: dict[str, Any] = {}
    clashes: list[tuple[str, str]] = []
    for key in sorted(tables, key=lambda k: "." not in k):   # full names first
        full = _v1_name(key)
        if full in renamed and key != full:
            clashes.append((key, full))
        renamed[full] = tables[key]
    return renamed, clashes


def copy_data(value: Any) -> Any:
    """Deep copy of parsed TOML (dicts, lists, scalars); copy.deepcopy is ~5x slower."""
    if isinstance(value, dict):
        return {k: copy_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_data(v) for v in value]
    return value


def deep_merge(into: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """Merge `other` into `into`: tables merge key by key, any other value replaces."""
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            deep_merge(into[key], value)
        else:
            into[key] = value
    return into


def _migrate_cri_v2_to_v3(plugins: dict[str, Any]) -> None:
    src = plugins.get(CRI_V2)
    if not isinstance(src, dict):
        return
    dst = plugins.get(CRI_V3_RUNTIME)
    if not isinstance(dst, dict):
        dst = {}
    for key, value in src.items():
        if key not in _NOT_RUNTIME_KEYS and key not in dst:
            dst[key] = value
    src_ctd = src.get("containerd")
    if isinstance(src_ctd, dict):
        dst_ctd = dst.get("containerd")
        if not isinstance(dst_ctd, dict):
            dst_ctd = {}
        for key, value in src_ctd.items():
            if key not in _NOT_RUNTIME_CONTAINERD_KEYS and key not in dst_ctd:
                dst_ctd[key] = value
        dst["containerd"] = dst_ctd
    plugins[CRI_V3_RUNTIME] = dst


def migrate_v2_cri(plugins: dict[str, Any], version: ContainerdVersion) -> None:
    """The rest of 2.x's migration of a version-2 CRI table, as `config dump` prints it
    (`merge` moves only its runtime keys, what the CRI view needs): `cni` to the runtime
    plugin (from 2.1 its `bin_dir` as `bin_dirs`), the image keys to the images plugin;
    only the streaming keys stay under the version-2 name. Keys the v3 tables set win."""
    src = plugins.get(CRI_V2)
    if not isinstance(src, dict):
        return
    runtime = plugins.setdefault(CRI_V3_RUNTIME, {})
    images = plugins.setdefault(_CRI_V3_IMAGES, {})
    cni = src.get("cni")
    if isinstance(cni, dict):
        cni = dict(cni)
        if version.minor >= 1 and cni.get("bin_dir"):
            cni.setdefault("bin_dirs", [cni["bin_dir"]])
            cni["bin_dir"] = ""
        runtime.setdefault("cni", cni)
    for key in _V2_TO_IMAGES:
        if key in src:
            images.setdefault(key, src[key])
    if "sandbox_image" in src:
        images.setdefault("pinned_images", {}).setdefault("sandbox", src["sandbox_image"])
    src_ctd = src.get("containerd")
    for key in _V2_TO_IMAGES_CTD:
        if isinstance(src_ctd, dict) and key in src_ctd:
            images.setdefault(key, src_ctd[key])
    plugins[CRI_V2] = {k: v for k, v in src.items() if k in _V2_GRPC}
