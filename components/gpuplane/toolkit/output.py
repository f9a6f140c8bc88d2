"""What the NVIDIA toolkit installer writes, given the node's files and the env the GPU
Operator hands it: a pure model, held against the real installer of every toolkit a
supported chart ships (1.15.0 ... 1.20.0, each built from its Go module) by
tests/real/test_toolkit_differential.py on every distro layout gpuplane plans. How the
releases differ is `gpuplane.toolkit.installer`.

Measured behaviour (NVIDIA/nvidia-container-toolkit v1.18.1 `cmd/nvidia-ctk-installer`,
v1.17.8 `tools/container/nvidia-toolkit`, with gpu-operator v25.10.1 / v25.3.4's env):

- 1.18 writes a **drop-in** at `RUNTIME_DROP_IN_CONFIG` holding the *whole* CRI table of
  the config source (`RUNTIME_CONFIG_SOURCE=file=...`, that one file, imports not
  followed) plus the nvidia runtimes, and adds an `imports` entry for the drop-in's
  directory to `CONTAINERD_CONFIG` unless the same string is already there. A missing
  `CONTAINERD_CONFIG` is *created* holding only `version` and `imports`. The top-level file
  is rewritten even when its data does not change (comments and key order are lost).
- 1.15-1.17 edit `CONTAINERD_CONFIG` in place (an empty config if it does not exist): the
  runtimes go into that file's own CRI table. 1.17 first asks `containerd config dump`
  (of containerd's default config path) where the node's containerd can be run: on 1.x
  lines the file then holds the whole merged config (every import folded in) plus the
  runtimes; on 2.x the dump is version 3 (every default and import folded in, a
  version-2 CRI table moved to the version-3 plugins, 2.2's default `conf.d` import
  listed), which 1.17.0-1.17.3 refuse (`toolkit_blocker` says so) and 1.17.4+ write back
  whole, as version 3, with the runtimes added (`_dump_v3`, held against the real dump).
- The runtimes are `<CONTAINERD_RUNTIME_CLASS>`, `nvidia-cdi` and `nvidia-legacy` (the
  mode runtimes keep their names whatever the class is), each a copy of the default
  runtime's whole subtree with `BinaryName` set to `$ROOT/toolkit/nvidia-container-runtime
  [.cdi|.legacy]`.
- Set-as-default: `NVIDIA_RUNTIME_SET_AS_DEFAULT` (the operator sets it false with CDI),
  else `CONTAINERD_SET_AS_DEFAULT`, else true. CDI (`CDI_ENABLED`) writes `enable_cdi`.
- A non-empty config **without `version`** goes to the installer's version-1 engine (both
  versions; `pkg/config/engine/containerd/config_v1.go` at v1.17.8 and v1.18.1): the whole
  file is kept and stamped `version = 1`, the runtimes go under the v1 plugin name
  `plugins.cri` (copied from `plugins.cri`'s default runtime, or a bare runc.v2 entry with
  the engine's empty v1 fields), each with `options.Runtime` beside `BinaryName`, and
  `default_runtime_name` / `enable_cdi` land in `plugins.cri.containerd`. 1.17 writes that
  back in place; 1.18 writes it, whole (root, state, grpc, every plugin), as the drop-in and
  does **not** add an `imports` entry to the top-level file. An empty file is version 2.
"""

from __future__ import annotations

import copy
import posixpath
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import tomlkit

from gpuplane.containerd.errors import ConfigError
from gpuplane.containerd.files import MemoryFiles
from gpuplane.containerd.load import load_config
from gpuplane.containerd.merge import deep_merge, merge, migrate_v2_cri, v1_plugins_as_v2
from gpuplane.containerd.versions import (
    CRI_V1,
    CRI_V2,
    CRI_V3_RUNTIME,
    RUNC_V2,
    ContainerdVersion,
)
from gpuplane.toolkit.installer import DEFAULT_CONFIG, Installer

RUNTIME_BINARY = "nvidia-container-runtime"
MODE_RUNTIMES = {"nvidia-cdi": ".cdi", "nvidia-legacy": ".legacy"}
# What 1.17 gives a runtime when the config it edits has no default runtime to copy.
_BARE_RUNTIME_117 = {"privileged_without_host_devices": False, "runtime_engine": "",
                     "runtime_root": "", "runtime_type": RUNC_V2}


def _truthy(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() in ("1", "t", "true", "yes", "on")


def set_as_default(env: Mapping[str, str]) -> bool:
    """Whether the installer makes the nvidia runtime containerd's default."""
    for name in ("NVIDIA_RUNTIME_SET_AS_DEFAULT", "CONTAINERD_SET_AS_DEFAULT"):
        value = _truthy(env.get(name))
        if value is not None:
            return value
    return True


def config_sources(env: Mapping[str, str]) -> list[str]:
    """The `file=` paths of `RUNTIME_CONFIG_SOURCE`, in order."""
    raw = env.get("RUNTIME_CONFIG_SOURCE", "")
    return [s[5:] for s in raw.split(",") if s.startswith("file=")]


def _cri_key(config_version: int) -> str:
    return CRI_V3_RUNTIME if config_version >= 3 else CRI_V2


def _load(text: str | None) -> dict[str, Any]:
    return tomllib.loads(text) if text else {}


def _runtimes(table: dict[str, Any], env: Mapping[str, str], *, installer: Installer,
              v1: bool = False) -> None:
    """Add the nvidia runtimes (and the default and CDI settings) to a CRI table; `v1`: the
    version-1 engine's shape (`options.Runtime` too, `enable_cdi` under `containerd`)."""
    ctd = table.setdefault("containerd", {})
    runtimes = ctd.setdefault("runtimes", {})
    root = env.get("ROOT", "/usr/local/nvidia").rstrip("/")
    name = env.get("CONTAINERD_RUNTIME_CLASS") or env.get("NVIDIA_RUNTIME_NAME") or "nvidia"
    # CDI annotation prefixes become `<prefix>*` container annotations, ahead of the copied
    # runtime's own (pkg/config/engine/containerd/config.go@v1.17.8 `AddRuntime`).
    prefixes = [p.strip() + "*" for p in
                env.get("NVIDIA_CONTAINER_RUNTIME_MODES_CDI_ANNOTATION_PREFIXES", "").split(",")
                if p.strip()]
    for runtime, suffix in {name: "", **MODE_RUNTIMES}.items():
        # Each runtime is added in turn, its base chosen from the table as it is by then
        # (the main runtime may already be the default, which 1.17+ then skips).
        entry = runtime_base(table, runtime, installer)
        if prefixes:
            entry["container_annotations"] = [
                *prefixes, *entry.get("container_annotations", [])]
        if installer.fills_runtime_type and not entry.get("runtime_type"):
            entry["runtime_type"] = RUNC_V2
        binary = f"{root}/toolkit/{RUNTIME_BINARY}{suffix}"
        entry["options"] = {**entry.get("options", {}), "BinaryName": binary}
        if v1:
            entry["options"]["Runtime"] = binary
        runtimes[runtime] = entry
        if runtime == name and set_as_default(env):
            ctd["default_runtime_name"] = name
        elif installer.unsets_default and ctd.get("default_runtime_name") == runtime:
            # Not to be the default: 1.18+ removes it as the default if it already was
            # (pkg/config/engine/containerd/config.go@v1.18.1 AddRuntimeWithOptions).
            del ctd["default_runtime_name"]
    if installer.writes_enable_cdi and (_truthy(env.get("CDI_ENABLED"))
                                        or _truthy(env.get("RUNTIME_ENABLE_CDI"))):
        (ctd if v1 else table)["enable_cdi"] = True


def low_level_runtimes(table: dict[str, Any], installer: Installer) -> list[str]:
    """The runtimes whose table the installer copies for a new one, first found wins:
    1.15 `runc` only, 1.16 `runc` then the default (`pkg/config/engine/containerd/
    config_v2.go`@v1.15.0 and @v1.16.2 `AddRuntime`); from 1.17 the default unless its
    name starts with `nvidia`, then `runc`, then `crun` (`pkg/config/engine/engine.go`
    @v1.17.8 and @v1.20.0 `GetLowLevelRuntimes`)."""
    default = table.get("containerd", {}).get("default_runtime_name")
    default = default if isinstance(default, str) else ""
    if installer.version < (1, 16, 0):
        return ["runc"]   # config_v2.go@v1.15.0: runc only
    if not installer.skips_nvidia_default:
        return ["runc", *([default] if default else [])]
    keep = default and not default.startswith("nvidia")
    return [*([default] if keep else []), "runc", "crun"]


def runtime_base(table: dict[str, Any], name: str, installer: Installer) -> dict[str, Any]:
    """The table the installer gives runtime `name` before setting its BinaryName. None of
    the low-level runtimes defined: up to 1.17 an existing `name` table is kept, else a bare
    runc.v2 entry; from 1.18 the bare entry replaces whatever `name` held
    (`GetDefaultRuntimeOptions`@v1.18.1), dropping e.g. a vendor's SystemdCgroup."""
    runtimes = table.get("containerd", {}).get("runtimes", {})
    for candidate in low_level_runtimes(table, installer):
        if isinstance(runtimes.get(candidate), dict):
            return copy.deepcopy(runtimes[candidate])
    if not installer.writes_dropin and isinstance(runtimes.get(name), dict):
        return copy.deepcopy(runtimes[name])
    return copy.deepcopy(_BARE_RUNTIME_117)


def _text(data: dict[str, Any]) -> str:
    return tomlkit.dumps(data)


@dataclass(frozen=True)
class Node:
    """What the installer meets on the node besides the files: the containerd release line
    and where the node's containerd binaries are (the dump runs one of them)."""

    version: ContainerdVersion
    binaries: tuple[str, ...]


def toolkit_blocker(files: Mapping[str, str], env: Mapping[str, str], installer: Installer,
                    node: Node) -> str | None:
    """Why the installer fails on this node, or None (then `toolkit_writes` predicts what
    it writes): a version-3 config (the file, or 2.x's `config dump`) before 1.17.4, or
    1.17.0 without a `containerd` to dump."""
    binary = installer.dump_binary(env, node.binaries)
    if binary is None:
        source = _load(files.get(env["CONTAINERD_CONFIG"]))
        if not installer.writes_dropin and not installer.reads_v3 \
                and int(source.get("version", 0)) >= 3:
            return (f"toolkit {installer.name} refuses {env['CONTAINERD_CONFIG']}, a version-3 "
                    "config (\"unsupported config version: 3\"; toolkits before 1.17.4 read "
                    "versions 1 and 2 only): the installer fails")
        if installer.dump_only:
            return (f"toolkit {installer.name} reads the node's config only from `chroot /host "
                    "containerd config dump`, and no `containerd` is on the toolkit "
                    "container's PATH on this node: the installer fails")
        return None
    if node.version.major >= 2 and not installer.reads_v3:
        return (f"toolkit {installer.name} reads the node's config from `containerd config "
                f"dump` ({binary}), which containerd {node.version} prints as version 3; "
                "toolkits before 1.17.4 refuse version 3 (\"unsupported config version: 3\"): "
                "the installer fails")
    return None


def toolkit_writes(files: Mapping[str, str], env: Mapping[str, str],
                   installer: Installer, node: Node) -> dict[str, str]:
    """The files (node path -> text) the installer creates or rewrites on a node holding
    `files`, run with the operator's `env` (node paths). Texts are TOML with the data the
    installer writes; its byte layout is not modelled (compare data, not bytes). Only
    meaningful where `toolkit_blocker` says nothing."""
    target = env["CONTAINERD_CONFIG"]
    dropin = env.get("RUNTIME_DROP_IN_CONFIG") if installer.writes_dropin else None
    if not dropin:
        if installer.dump_binary(env, node.binaries) is not None:
            doc = _dump(files, node.version)
        else:
            doc = _load(files.get(target))
        return {target: _text(_edit_in_place(doc, env, installer))}
    sources = config_sources(env) or [target]
    source = _load(files.get(sources[0]))
    if source and "version" not in source:
        # No `version`: the v1 engine, whose drop-in is the whole edited file; the
        # top-level file is left alone (no `imports` entry is added).
        return {dropin: _text(_edit_v1(source, env, installer))}
    version = int(source.get("version", 2))
    key = _cri_key(version)
    table = copy.deepcopy(source.get("plugins", {}).get(key, {}))
    _runtimes(table, env, installer=installer)
    out = {dropin: _text({"version": version, "plugins": {key: table}})}
    top = _load(files.get(target))
    wanted = posixpath.join(posixpath.dirname(env.get("RUNTIME_DROP_IN_CONFIG_HOST_PATH")
                                              or dropin), "*.toml")
    if not top:
        top = {"version": version}
    imports = list(top.get("imports", [])) if installer.keeps_imports else []
    if wanted not in imports:
        imports.append(wanted)
    top = {"imports": imports, **{k: v for k, v in top.items() if k != "imports"}}
    out[target] = _text(top)
    return out


# The `runc` runtime containerd 1.x has by default, as `config dump` prints it (measured:
# Debian's containerd 1.6.20 and 1.7.24, `config dump` of a config holding only
# `version = 2`). The dump shows it only when the config defines no runtimes at all (a
# `runtimes` table replaces the built-in one on 1.x: an EKS/AKS-style node without a runc
# table dumps without runc), and the installer copies it for the nvidia runtimes.
_RUNC_OPTIONS_1X = {"BinaryName": "", "CriuImagePath": "", "CriuPath": "", "CriuWorkPath": "",
                    "IoGid": 0, "IoUid": 0, "NoNewKeyring": False, "NoPivotRoot": False,
                    "Root": "", "ShimCgroup": "", "SystemdCgroup": False}
_DUMPED_RUNC = {
    6: {"base_runtime_spec": "", "cni_conf_dir": "", "cni_max_conf_num": 0,
        "container_annotations": [], "options": _RUNC_OPTIONS_1X, "pod_annotations": [],
        "privileged_without_host_devices": False, "runtime_engine": "", "runtime_path": "",
        "runtime_root": "", "runtime_type": RUNC_V2},
    7: {"base_runtime_spec": "", "cni_conf_dir": "", "cni_max_conf_num": 0,
        "container_annotations": [], "options": _RUNC_OPTIONS_1X, "pod_annotations": [],
        "privileged_without_host_devices": False,
        "privileged_without_host_devices_all_devices_allowed": False, "runtime_engine": "",
        "runtime_path": "", "runtime_root": "", "runtime_type": RUNC_V2,
        "sandbox_mode": "podsandbox", "snapshotter": ""},
}


def _dump(files: Mapping[str, str], version: ContainerdVersion) -> dict[str, Any]:
    """What `containerd config dump` prints for the node (2.x: `_dump_v3`); on 1.x, as far
    as it is not containerd's own defaults: the file at containerd's default path with everything it
    imports merged in (plugin tables replaced whole per file, top-level settings
    overridden by later files), as version 2. No file there: defaults only."""
    if version.major >= 2:
        return _dump_v3(files, version)
    doc: dict[str, Any] = {"version": 2, "plugins": {}}
    try:
        loaded = load_config(DEFAULT_CONFIG, MemoryFiles(dict(files)), version)
    except ConfigError:
        return _with_default_runc(doc, version)
    for file in loaded.files:
        doc.update({k: copy.deepcopy(v) for k, v in file.data.items()
                    if k not in ("plugins", "version", "imports")})
    top_imports = loaded.files[0].data.get("imports") if loaded.files else None
    if top_imports:
        doc["imports"] = list(top_imports)
    merged = merge(loaded)
    doc["version"] = 2
    # A version-1 config is dumped as version 2: its short plugin names spelled out.
    doc["plugins"] = merged.plugins if merged.version >= 2 else v1_plugins_as_v2(merged.plugins)
    return _with_default_runc(doc, version)


def _with_default_runc(doc: dict[str, Any], version: ContainerdVersion) -> dict[str, Any]:
    ctd = doc["plugins"].setdefault(CRI_V2, {}).setdefault("containerd", {})
    ctd.setdefault("default_runtime_name", "runc")
    runtimes = ctd.setdefault("runtimes", {})
    if not runtimes:   # a configured `runtimes` table replaces the built-in one (1.x)
        runtimes["runc"] = copy.deepcopy(_DUMPED_RUNC[version.minor])
    return doc


# The `runc` runtime containerd 2.x always has, as `config dump` prints it (measured: the
# oracle builds 2.0.11, 2.1.9 and 2.2.7, `config dump` of a config holding only
# `version = 3`). Unlike 1.x, a configured `runtimes` table is merged over it key by key,
# so runc is always there, its `options` filled in around what the config sets.
_RUNC_2X = {"runtime_type": RUNC_V2, "runtime_path": "", "pod_annotations": [],
            "container_annotations": [], "privileged_without_host_devices": False,
            "privileged_without_host_devices_all_devices_allowed": False,
            "base_runtime_spec": "", "cni_conf_dir": "", "cni_max_conf_num": 0,
            "snapshotter": "", "sandboxer": "podsandbox", "io_type": "",
            "options": {"BinaryName": "", "CriuImagePath": "", "CriuWorkPath": "", "IoGid": 0,
                        "IoUid": 0, "NoNewKeyring": False, "Root": "", "ShimCgroup": "",
                        "SystemdCgroup": False}}
CONF_D_IMPORT = "/etc/containerd/conf.d/*.toml"   # 2.2's default `imports`


def _dump_v3(files: Mapping[str, str], version: ContainerdVersion) -> dict[str, Any]:
    """What `containerd config dump` of 2.x prints for the node, as far as it is not
    containerd's own defaults: version 3, every file at and imported by containerd's
    default path deep-merged, a version-2 CRI table moved into the version-3 plugins, the
    built-in runc runtime under whatever the config sets, and `imports` as the top-level
    file lists them, after 2.2's default (`/etc/containerd/conf.d/*.toml`, which 2.2 prints
    whether the file imports it or not; an installer writing the dump back makes it real)."""
    doc: dict[str, Any] = {"version": 3, "plugins": {}}
    imports = [CONF_D_IMPORT] if version.minor >= 2 else []
    try:
        loaded = load_config(DEFAULT_CONFIG, MemoryFiles(dict(files)), version)
    except ConfigError:
        loaded = None
    if loaded is not None:
        for file in loaded.files:
            for key, value in file.data.items():
                if key in ("plugins", "version", "imports"):
                    continue
                if isinstance(value, dict) and isinstance(doc.get(key), dict):
                    deep_merge(doc[key], copy.deepcopy(value))
                else:
                    doc[key] = copy.deepcopy(value)
        top_imports = loaded.files[0].data.get("imports") if loaded.files else None
        imports += [i for i in top_imports or [] if i not in imports]
        merged = merge(loaded)
        doc["plugins"] = merged.plugins
        if merged.version < 3:
            migrate_v2_cri(doc["plugins"], version)
    doc["imports"] = imports
    ctd = doc["plugins"].setdefault(CRI_V3_RUNTIME, {}).setdefault("containerd", {})
    ctd.setdefault("default_runtime_name", "runc")
    runtimes = ctd.setdefault("runtimes", {})
    runc = copy.deepcopy(_RUNC_2X)
    if version.minor >= 1:
        runc["cgroup_writable"] = False
    runtimes["runc"] = deep_merge(runc, runtimes.get("runc") or {})
    return doc


def _edit_v1(doc: dict[str, Any], env: Mapping[str, str],
             installer: Installer) -> dict[str, Any]:
    """The version-1 engine (a non-empty file without `version`): the whole file, stamped
    version 1, with the runtimes under `plugins.cri`."""
    doc = copy.deepcopy(doc)
    doc["version"] = 1
    table = doc.setdefault("plugins", {}).setdefault(CRI_V1, {})
    _runtimes(table, env, installer=installer, v1=True)
    return doc


def _edit_in_place(doc: dict[str, Any], env: Mapping[str, str],
                   installer: Installer) -> dict[str, Any]:
    """Before 1.18: the runtimes go into the edited config's own CRI table (an empty or
    missing file is version 2; a version-less one goes to the v1 engine)."""
    if doc and "version" not in doc:
        return _edit_v1(doc, env, installer)
    doc = copy.deepcopy(doc)
    version = int(doc.setdefault("version", 2))
    key = _cri_key(version)
    table = doc.setdefault("plugins", {}).setdefault(key, {})
    _runtimes(table, env, installer=installer)
    return doc


__all__ = ["MODE_RUNTIMES", "Node", "config_sources", "set_as_default", "toolkit_blocker",
           "toolkit_writes"]
