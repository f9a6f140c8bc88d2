"""How gpuplane edits a node's TOML, comments and layout kept (tomlkit): the patch into
a file's CRI table, gpuplane's own drop-in, the `imports` entry for the drop-in dir, one
spelling of `BinaryName`, version 3. The planner (`gpuplane.plan.node`) decides what to
write; these functions only write it."""

from __future__ import annotations

import copy
import posixpath
import tomllib
from typing import Any

import tomlkit

from gpuplane.containerd.files import MemoryFiles
from gpuplane.containerd.load import load_config
from gpuplane.containerd.merge import deep_merge, merge
from gpuplane.containerd.options import key_for
from gpuplane.containerd.versions import CRI_V2, CRI_V3_RUNTIME, ContainerdVersion
from gpuplane.distros.profiles import DistroProfile

GPUPLANE_DROPIN = "50-gpuplane.toml"


def cri_key(config_version: int, version: ContainerdVersion | None = None,
             plugin_keys: Any = ()) -> str:
    """The CRI runtime table gpuplane writes to. On 2.x a version-2 file may already use
    the version-3 name (AKS's AgentBaker `containerdV2ConfigTemplate`): a version-2 CRI
    table beside it would be migrated only for keys the v3 one lacks, so the write goes
    where the node's runtimes are."""
    if config_version >= 3:
        return CRI_V3_RUNTIME
    if version is not None and version.deep_merges and CRI_V3_RUNTIME in plugin_keys:
        return CRI_V3_RUNTIME
    return CRI_V2


def v3_names_in_v2(text: str, version: ContainerdVersion) -> bool:
    """A version-2 file that names only the version-3 CRI plugins, on containerd 2.x: the
    toolkit would copy its (absent) version-2 CRI table and write a version-2 drop-in
    whose runtimes 2.x never migrates; as version 3 the file means the same to 2.x."""
    if not version.deep_merges:
        return False
    data = tomllib.loads(text)
    plugins = data.get("plugins", {})
    return (data.get("version") == 2 and isinstance(plugins, dict)
            and CRI_V3_RUNTIME in plugins and CRI_V2 not in plugins)


def dropin(layout: dict[str, str], top: str, version: ContainerdVersion,
            patch: dict[str, Any], whole: bool | None = None) -> str:
    """gpuplane's drop-in. On 1.x it carries the whole merged CRI table, because a file's
    CRI table replaces every earlier one; on 2.x only the change, which deep-merges (and
    with `whole=False` wherever something else merges it, as k0s does)."""
    loaded = load_config(top, MemoryFiles(layout), version)
    top_version = loaded.files[0].version or 2
    key = cri_key(top_version, version, {k for f in loaded.files for k in f.plugins})
    copy_whole = not version.deep_merges if whole is None else whole
    if not copy_whole:
        table = copy.deepcopy(patch)
    else:
        merged = merge(loaded)
        table = deep_merge(copy.deepcopy(merged.plugins.get(key, {})), copy.deepcopy(patch))
    doc = tomlkit.document()
    doc.add(tomlkit.comment("Written by gpuplane: the nvidia runtime beside runc. Do not edit;"))
    doc.add(tomlkit.comment("change the stack config and run `pulumi up` instead."))
    doc["version"] = top_version
    doc["plugins"] = {key: table}
    return tomlkit.dumps(doc)


def apply_patch(text: str, patch: dict[str, Any], version: ContainerdVersion) -> str:
    """Merge `patch` into a full config's CRI table, keeping comments and layout."""
    if not patch:
        return text
    doc = tomlkit.parse(text)
    key = cri_key(int(doc.get("version", 2)), version, set(doc.get("plugins", {})))
    plugins = doc.setdefault("plugins", tomlkit.table(is_super_table=True))
    table = plugins.setdefault(key, tomlkit.table())
    merge_into_toml(table, patch)
    return tomlkit.dumps(doc)


def one_binary_spelling(text: str, version: ContainerdVersion) -> str:
    """`text` with every runtime's `BinaryName` spelled once, as `BinaryName`, holding the
    value this containerd line reads now. The operator's toolkit copies runc's options
    into its nvidia runtime and sets `BinaryName` there; a copied `binaryName` (Kubespray
    <= 2.27) would win on containerd 2.x and run runc for GPU pods (FM01). Renaming keeps
    what every line runs for runc."""
    doc = tomlkit.parse(text)
    changed = False
    for cri in doc.get("plugins", {}).values():
        runtimes = cri.get("containerd", {}).get("runtimes", {}) if isinstance(cri, dict) else {}
        for runtime in runtimes.values():
            options = runtime.get("options") if isinstance(runtime, dict) else None
            if not isinstance(options, dict):
                continue
            spellings = [k for k in options if k.lower() == "binaryname"]
            if spellings in ([], ["BinaryName"]):
                continue
            value = options[key_for(dict(options), "BinaryName", version) or spellings[-1]]
            for key in spellings:
                del options[key]
            options["BinaryName"] = value
            changed = True
    return tomlkit.dumps(doc) if changed else text


def as_version_3(text: str) -> str:
    """`text` with `version = 3`, comments and layout kept."""
    doc = tomlkit.parse(text)
    doc["version"] = 3
    return tomlkit.dumps(doc)


def merge_into_toml(table: Any, patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, dict):
            if key not in table or not isinstance(table[key], dict):
                table[key] = tomlkit.table()
            merge_into_toml(table[key], value)
        else:
            table[key] = value


def add_import(text: str, wanted: str) -> str:
    """`text` with `wanted` in its `imports` (kept as the last entry when added)."""
    doc = tomlkit.parse(text)
    imports = doc.get("imports")
    if imports is None:
        doc["imports"] = [wanted]  # tomlkit keeps root keys above the first table
    elif wanted not in imports:
        imports.append(wanted)
    return tomlkit.dumps(doc)


def ensure_import(text: str, profile: DistroProfile, version: ContainerdVersion,
                   layout: dict[str, str]) -> str:
    """Add the drop-in glob to the top-level `imports` unless an import already covers it."""
    wanted = profile.imports_glob
    assert wanted
    probe = posixpath.join(profile.dropin_dir or "", GPUPLANE_DROPIN)
    loaded = load_config(profile.config_path, MemoryFiles({**layout, probe: ""}), version)
    if any(f.path == probe for f in loaded.files):
        return text
    return add_import(text, wanted)


__all__ = ["GPUPLANE_DROPIN", "add_import", "apply_patch", "as_version_3", "cri_key", "dropin",
           "ensure_import", "one_binary_spelling", "v3_names_in_v2"]
