"""The CRI settings beside the runtimes that a node's files put in effect, and the
plugins they disable: what `containerd config dump` shows for them, per release line.

Settings (normalised names): `sandbox_image`, `registry.config_path`, `registry.mirrors`
(host -> table), `cni.conf_dir`, `cni.bin_dirs` (a list). Only settings a read file sets
are returned; containerd's own default stands for the rest.

Where they live (measured with `config dump` on 1.6.20, 1.7.24, 2.0.11, 2.1.9, 2.2.7; see
tests/real/test_differential.py):
- 1.x: the CRI table (`plugins."io.containerd.grpc.v1.cri"`, `plugins.cri` in a version-1
  config): `sandbox_image`, `registry.*`, `cni.bin_dir`, `cni.conf_dir`.
- 2.x, merged config version 3: `plugins."io.containerd.cri.v1.images"`
  (`pinned_images.sandbox`, `registry.*`) and `plugins."io.containerd.cri.v1.runtime".cni`.
  Every version-2 CRI table is ignored (what a version-3 drop-in over a version-2 root
  does to the root's mirrors, sandbox image and CNI dirs today).
- 2.x, merged config version 2: the version-2 CRI table's values move there
  (`cni.bin_dir` becomes `bin_dirs = [bin_dir]` from 2.1).

`disabled_plugins` (measured with the real binaries, tests/real/test_differential.py; upstream
`services/server/server.go` `LoadPlugins` picks `V1DisabledFilter` for a version-1 config,
`V2DisabledFilter` otherwise, read in a search excerpt without a pinned tag):
the lists of all files are concatenated in read order (2.x keeps
each name once, measured). 1.x checks
the names against the merged version: a version-2 config needs plugin URIs (1.7: an
`io.containerd.` prefix and four dotted parts; 1.6: four dotted parts), and a version-1
config disables by short id (`cri`). 2.x renames a version-0/1 file's short names to
URIs (`cri` -> `io.containerd.grpc.v1.cri`) and refuses a name without a dot in a
version-2/3 file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuplane.containerd.merge import v1_name
from gpuplane.containerd.versions import CRI_V1, CRI_V2, CRI_V3_RUNTIME, ContainerdVersion

if TYPE_CHECKING:
    from gpuplane.containerd.load import LoadedFile

CRI_V3_IMAGES = "io.containerd.cri.v1.images"
CRI_GRPC = CRI_V2   # the CRI gRPC service's own plugin id, on every line
SETTINGS = ("sandbox_image", "registry.config_path", "registry.mirrors", "cni.conf_dir",
            "cni.bin_dirs")
# Where each file spells each setting: (plugin key, dotted path) by the file's version.
_V2_PATHS = {"sandbox_image": "sandbox_image", "registry.config_path": "registry.config_path",
             "registry.mirrors": "registry.mirrors", "cni.conf_dir": "cni.conf_dir",
             "cni.bin_dirs": "cni.bin_dir"}
_V3_PATHS = {"sandbox_image": (CRI_V3_IMAGES, "pinned_images.sandbox"),
             "registry.config_path": (CRI_V3_IMAGES, "registry.config_path"),
             "registry.mirrors": (CRI_V3_IMAGES, "registry.mirrors"),
             "cni.conf_dir": (CRI_V3_RUNTIME, "cni.conf_dir"),
             "cni.bin_dirs": (CRI_V3_RUNTIME, "cni.bin_dirs")}


def get_path(table: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(table, dict):
            return None
        table = table.get(part)
    return table


def _set(value: Any) -> bool:
    return value not in (None, "", [], {})


def _normal(name: str, value: Any, line: ContainerdVersion, spelled: str) -> Any:
    if name == "cni.bin_dirs" and spelled.endswith("bin_dir"):
        return [value] if _set(value) else None
    return value if _set(value) else None


def file_settings(f: LoadedFile, line: ContainerdVersion) -> dict[str, tuple[Any, str, str]]:
    """What one file sets, read by its own version: {setting: (value, plugin key, path)}."""
    out: dict[str, tuple[Any, str, str]] = {}
    if f.version >= 3 and line.deep_merges:
        for name, (key, path) in _V3_PATHS.items():
            value = get_path(f.plugins.get(key), path)
            if name == "cni.bin_dirs" and not _set(value):
                value, path = get_path(f.plugins.get(key), "cni.bin_dir"), "cni.bin_dir"
            value = _normal(name, value, line, path)
            if value is not None:
                out[name] = (value, key, path)
        return out
    key = CRI_V2 if f.version >= 2 else CRI_V1
    for name, path in _V2_PATHS.items():
        value = _normal(name, get_path(f.plugins.get(key), path), line, path)
        if value is not None:
            out[name] = (value, key, path)
    return out


def cri_settings(plugins: dict[str, Any], cri_key: str, config_version: int,
                 line: ContainerdVersion) -> dict[str, Any]:
    """The settings in effect from merged plugin tables (gpuplane.containerd.merge)."""
    out: dict[str, Any] = {}
    if not line.deep_merges:
        for name, path in _V2_PATHS.items():
            value = _normal(name, get_path(plugins.get(cri_key), path), line, path)
            if value is not None:
                out[name] = value
        return out
    for name, (key, path) in _V3_PATHS.items():
        value = get_path(plugins.get(key), path)
        spelled = path
        if name == "cni.bin_dirs" and not _set(value):
            value, spelled = get_path(plugins.get(key), "cni.bin_dir"), "cni.bin_dir"
        value = _normal(name, value, line, spelled)
        if value is not None:
            out[name] = value
    if config_version < 3:
        for name, path in _V2_PATHS.items():
            value = _normal(name, get_path(plugins.get(CRI_V2), path), line, path)
            if value is not None:
                out[name] = value
    return out


def disabled_plugins(files: list[LoadedFile], line: ContainerdVersion,
                     config_version: int) -> tuple[list[str], list[str], bool]:
    """(the names in effect, refusals, whether the CRI service is disabled)."""
    names: list[str] = []
    refusals: list[str] = []
    for f in files:
        for name in f.disabled_plugins:
            if line.deep_merges and f.version in (0, 1) and "." not in name:
                name = v1_name(name)
            elif line.deep_merges and f.version >= 2 and "." not in name:
                refusals.append(f'invalid disabled plugin URI "{name}" expect '
                                "io.containerd.x.vx")
            names.append(name)
    if not line.deep_merges and config_version >= 2:
        strict = line.minor >= 7
        for name in names:
            ok = (name.startswith("io.containerd.") and len(name.split(".", 3)) == 4) \
                if strict else len(name.split(".")) >= 4
            if not ok:
                refusals.append(f'invalid disabled plugin URI "{name}" expect '
                                "io.containerd.x.vx")
    if line.deep_merges:
        names = list(dict.fromkeys(names))
    cri_name = "cri" if not line.deep_merges and config_version < 2 else CRI_GRPC
    return names, refusals, cri_name in names
