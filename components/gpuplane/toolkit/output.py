"""What the NVIDIA toolkit installer writes, given the node's files and the env the GPU
Operator hands it: a pure model, held against the real installers (1.17.8, 1.18.1) by
tests/test_toolkit_differential.py on every distro layout gpuplane plans.

Measured behaviour (NVIDIA/nvidia-container-toolkit v1.18.1 `cmd/nvidia-ctk-installer`,
v1.17.8 `tools/container/nvidia-toolkit`, with gpu-operator v25.10.1 / v25.3.4's env):

- 1.18 writes a **drop-in** at `RUNTIME_DROP_IN_CONFIG` holding the *whole* CRI table of
  the config source (`RUNTIME_CONFIG_SOURCE=file=...`, that one file, imports not
  followed) plus the nvidia runtimes, and adds an `imports` entry for the drop-in's
  directory to `CONTAINERD_CONFIG` unless the same string is already there. A missing
  `CONTAINERD_CONFIG` is *created* holding only `version` and `imports`. The top-level file
  is rewritten even when its data does not change (comments and key order are lost).
- 1.17 edits `CONTAINERD_CONFIG` in place (an empty config if it does not exist): the
  runtimes go into that file's own CRI table.
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
from typing import Any

import tomlkit

from gpuplane.containerd.versions import CRI_V1, CRI_V2, CRI_V3_RUNTIME, RUNC_V2

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


def _runtimes(table: dict[str, Any], env: Mapping[str, str], base: dict[str, Any], *,
              v1: bool = False) -> None:
    """Add the nvidia runtimes (and the default and CDI settings) to a CRI table; `v1`: the
    version-1 engine's shape (`options.Runtime` too, `enable_cdi` under `containerd`)."""
    ctd = table.setdefault("containerd", {})
    runtimes = ctd.setdefault("runtimes", {})
    root = env.get("ROOT", "/usr/local/nvidia").rstrip("/")
    name = env.get("CONTAINERD_RUNTIME_CLASS") or env.get("NVIDIA_RUNTIME_NAME") or "nvidia"
    for runtime, suffix in {name: "", **MODE_RUNTIMES}.items():
        entry = copy.deepcopy(base)
        binary = f"{root}/toolkit/{RUNTIME_BINARY}{suffix}"
        entry["options"] = {**entry.get("options", {}), "BinaryName": binary}
        if v1:
            entry["options"]["Runtime"] = binary
        runtimes[runtime] = entry
    if set_as_default(env):
        ctd["default_runtime_name"] = name
    if _truthy(env.get("CDI_ENABLED")) or _truthy(env.get("RUNTIME_ENABLE_CDI")):
        (ctd if v1 else table)["enable_cdi"] = True


def _default_runtime(table: dict[str, Any]) -> dict[str, Any] | None:
    ctd = table.get("containerd", {})
    runtime = ctd.get("runtimes", {}).get(ctd.get("default_runtime_name") or "runc")
    return copy.deepcopy(runtime) if isinstance(runtime, dict) else None


def _dump(data: dict[str, Any]) -> str:
    return tomlkit.dumps(data)


def toolkit_writes(files: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """The files (node path -> text) the installer creates or rewrites on a node holding
    `files`, run with the operator's `env` (node paths). Texts are TOML with the data the
    installer writes; its byte layout is not modelled (compare data, not bytes)."""
    target = env["CONTAINERD_CONFIG"]
    dropin = env.get("RUNTIME_DROP_IN_CONFIG")
    if not dropin:
        return {target: _dump(_edit_in_place(_load(files.get(target)), env))}
    sources = config_sources(env) or [target]
    source = _load(files.get(sources[0]))
    if source and "version" not in source:
        # No `version`: the v1 engine, whose drop-in is the whole edited file; the
        # top-level file is left alone (no `imports` entry is added).
        return {dropin: _dump(_edit_v1(source, env))}
    version = int(source.get("version", 2))
    key = _cri_key(version)
    table = copy.deepcopy(source.get("plugins", {}).get(key, {}))
    base = _default_runtime(table) or {"runtime_type": RUNC_V2}
    _runtimes(table, env, base)
    out = {dropin: _dump({"version": version, "plugins": {key: table}})}
    top = _load(files.get(target))
    wanted = posixpath.join(posixpath.dirname(env.get("RUNTIME_DROP_IN_CONFIG_HOST_PATH")
                                              or dropin), "*.toml")
    if not top:
        top = {"version": version}
    imports = list(top.get("imports", []))
    if wanted not in imports:
        imports.append(wanted)
    top = {"imports": imports, **{k: v for k, v in top.items() if k != "imports"}}
    out[target] = _dump(top)
    return out


def _edit_v1(doc: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The version-1 engine (a non-empty file without `version`): the whole file, stamped
    version 1, with the runtimes under `plugins.cri`."""
    doc = copy.deepcopy(doc)
    doc["version"] = 1
    table = doc.setdefault("plugins", {}).setdefault(CRI_V1, {})
    base = _default_runtime(table) or copy.deepcopy(_BARE_RUNTIME_117)
    _runtimes(table, env, base, v1=True)
    return doc


def _edit_in_place(doc: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """1.17's way: the runtimes go into the edited file's own CRI table (an empty or
    missing file is version 2; a version-less one goes to the v1 engine)."""
    if doc and "version" not in doc:
        return _edit_v1(doc, env)
    doc = copy.deepcopy(doc)
    version = int(doc.setdefault("version", 2))
    key = _cri_key(version)
    table = doc.setdefault("plugins", {}).setdefault(key, {})
    base = _default_runtime(table) or copy.deepcopy(_BARE_RUNTIME_117)
    _runtimes(table, env, base)
    return doc


__all__ = ["MODE_RUNTIMES", "config_sources", "set_as_default", "toolkit_writes"]
