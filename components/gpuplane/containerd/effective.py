"""The effective CRI view: what the kubelet's containerd will actually run.

Decoding onto containerd's defaults differs by line. 1.x: a `runtimes` table replaces
the built-in one (runc) whole; 2.x decodes into the built-in map, so runc survives and a
partial `runc` entry keeps its runtime_type. Options are normalised by dropping empty
values ("", false, 0, [], {}), which containerd treats as unset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuplane.containerd.files import FileSource
from gpuplane.containerd.load import LoadedFile, LoadResult, load_config
from gpuplane.containerd.merge import deep_merge, merge
from gpuplane.containerd.settings import cri_settings, disabled_plugins
from gpuplane.containerd.versions import (
    CRI_V1,
    CRI_V2,
    CRI_V3_RUNTIME,
    RUNC_V2,
    ContainerdVersion,
)


@dataclass(frozen=True)
class RuntimeView:
    runtime_type: str | None
    options: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"runtime_type": self.runtime_type, "options": dict(self.options)}


@dataclass
class FileCRI:
    """One file's own CRI settings, read by the file's own `version` (what it intends)."""

    key: str
    has_table: bool
    runtimes: dict[str, dict[str, Any]]
    default_runtime: str | None
    cdi: bool | None


@dataclass
class EffectiveConfig:
    containerd_version: ContainerdVersion
    config_version: int
    files: list[LoadedFile]
    default_runtime: str
    cdi: bool | None
    runtimes: dict[str, RuntimeView]
    cri_key: str
    plugins: dict[str, Any]
    refusals: list[str] = field(default_factory=list)
    load: LoadResult | None = None
    ambiguities: list[str] = field(default_factory=list)  # containerd picks one at random
    # Beside the runtimes (gpuplane.containerd.settings): the CRI settings the files put
    # in effect, the plugins disabled, whether the CRI service is disabled, and whether
    # there is no top-level file at all (containerd's built-in defaults).
    settings: dict[str, Any] = field(default_factory=dict)
    disabled_plugins: list[str] = field(default_factory=list)
    cri_disabled: bool = False
    no_file: bool = False

    @property
    def starts(self) -> bool:
        """False when containerd or its CRI plugin would refuse this configuration."""
        return not self.refusals

    def to_dict(self) -> dict[str, Any]:
        return {
            "default_runtime": self.default_runtime,
            "cdi": self.cdi,
            "runtimes": {n: r.to_dict() for n, r in sorted(self.runtimes.items())},
        }


def raw_options(eff: EffectiveConfig, name: str) -> dict[str, Any]:
    """Runtime `name`'s options as merged, before normalising (`false` and "" kept: they
    still shadow another spelling of the same field, see gpuplane.containerd.options)."""
    table = eff.plugins.get(eff.cri_key)
    for key in ("containerd", "runtimes", name, "options"):
        table = table.get(key) if isinstance(table, dict) else None
    return dict(table) if isinstance(table, dict) else {}


def normalise_options(options: Any) -> dict[str, Any]:
    if not isinstance(options, dict):
        return {}
    return {k: v for k, v in options.items() if v not in ("", False, 0, [], {}) or v is True}


def file_cri(f: LoadedFile) -> FileCRI:
    key = {0: CRI_V1, 1: CRI_V1, 2: CRI_V2}.get(f.version, CRI_V3_RUNTIME)
    table = f.plugins.get(key)
    if not isinstance(table, dict):
        return FileCRI(key, False, {}, None, None)
    ctd = table.get("containerd")
    ctd = ctd if isinstance(ctd, dict) else {}
    runtimes = ctd.get("runtimes")
    runtimes = runtimes if isinstance(runtimes, dict) else {}
    default = ctd.get("default_runtime_name")
    cdi = table.get("enable_cdi")
    return FileCRI(
        key,
        True,
        {n: r for n, r in runtimes.items() if isinstance(r, dict)},
        default if isinstance(default, str) else None,
        cdi if isinstance(cdi, bool) else None,
    )


def effective_config(
    top: str, files: FileSource, version: ContainerdVersion, *, missing_ok: bool = False
) -> EffectiveConfig:
    """Load, merge and decode a node's containerd config as `version` would (with
    `missing_ok`, a missing top-level file is containerd's built-in defaults)."""
    return decode(load_config(top, files, version, missing_ok=missing_ok))


def decode(loaded: LoadResult) -> EffectiveConfig:
    line = loaded.containerd_version
    merged = merge(loaded)
    refusals = [*loaded.refusals, *merged.refusals]
    disabled, disabled_refusals, cri_disabled = disabled_plugins(
        loaded.files, line, merged.version)
    refusals += disabled_refusals
    table = merged.plugins.get(merged.cri_key)
    table = table if isinstance(table, dict) else {}
    ctd = table.get("containerd", {})
    if not isinstance(ctd, dict):
        refusals.append(f"CRI `containerd` must be a table, not {type(ctd).__name__}")
        ctd = {}
    builtin: dict[str, Any] = {"runc": {"runtime_type": RUNC_V2}}
    configured = ctd.get("runtimes")
    if configured is not None and not isinstance(configured, dict):
        refusals.append("CRI `containerd.runtimes` must be a table")
        configured = None
    if line.deep_merges:
        raw = deep_merge(builtin, configured or {})
    else:
        raw = configured if configured is not None else builtin
    runtimes: dict[str, RuntimeView] = {}
    for name, entry in raw.items():
        if not isinstance(entry, dict):
            refusals.append(f"runtime {name!r} must be a table")
            continue
        runtime_type = entry.get("runtime_type")
        if runtime_type is not None and not isinstance(runtime_type, str):
            refusals.append(f"runtime {name!r}: runtime_type must be a string")
            runtime_type = None
        runtimes[name] = RuntimeView(runtime_type or None, normalise_options(entry.get("options")))
    default = ctd.get("default_runtime_name", "runc")
    if not isinstance(default, str):
        refusals.append(f"default_runtime_name must be a string, not {default!r}")
        default = "runc"
    cdi: bool | None = line.cdi_default
    if line.supports_cdi and "enable_cdi" in table:
        if isinstance(table["enable_cdi"], bool):
            cdi = table["enable_cdi"]
        else:
            refusals.append("enable_cdi must be true or false")
    if default not in runtimes:
        # containerd's own wording (1.6 and 1.7 alike, unpaired backtick included).
        refusals.append(
            "no corresponding runtime configured in `containerd.runtimes` for `containerd` "
            f"`default_runtime_name = \"{default}\"`: the CRI plugin fails to load and the "
            "node goes NotReady")
    return EffectiveConfig(
        containerd_version=line,
        config_version=merged.version,
        files=loaded.files,
        default_runtime=default,
        cdi=cdi,
        runtimes=runtimes,
        cri_key=merged.cri_key,
        plugins=merged.plugins,
        refusals=refusals,
        load=loaded,
        ambiguities=merged.ambiguities,
        settings=cri_settings(merged.plugins, merged.cri_key, merged.version, line),
        disabled_plugins=disabled,
        cri_disabled=cri_disabled,
        no_file=loaded.missing_top,
    )
