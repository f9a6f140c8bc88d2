"""The whole effective config from a real `containerd config dump` (#39 item 1): beside
the runtimes, whether the CRI service runs, the disabled plugins and the CRI settings
(sandbox image, registry, CNI), normalised like gpuplane.containerd.settings."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

from support import oracle

CRI_GRPC = "io.containerd.grpc.v1.cri"


def cri_served(line: str, config: dict[str, Any]) -> bool:
    """1.x dumps no table for a plugin it does not load (the CRI service disabled); 2.x
    dumps the table a file gives even a disabled plugin (measured), so there the dumped
    `disabled_plugins` (short names already spelled out) says it."""
    if line.startswith("2."):
        return CRI_GRPC not in (config.get("disabled_plugins") or [])
    return isinstance(config.get("plugins", {}).get(CRI_GRPC), dict)


def _get(table: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        table = table.get(part) if isinstance(table, dict) else None
    return table


def settings_from_dump(line: str, config: dict[str, Any]) -> dict[str, Any]:
    plugins = config.get("plugins", {})
    if line.startswith("2."):
        images = plugins.get("io.containerd.cri.v1.images", {})
        cni = (plugins.get("io.containerd.cri.v1.runtime") or {}).get("cni") or {}
        sandbox = _get(images, "pinned_images.sandbox")
        registry = images.get("registry") or {}
    else:
        cri = plugins.get(CRI_GRPC, {})
        cni, sandbox, registry = cri.get("cni") or {}, cri.get("sandbox_image"), \
            cri.get("registry") or {}
    bin_dirs = list(cni.get("bin_dirs") or [])
    if cni.get("bin_dir"):
        # 2.1+ keeps a version-3 file's deprecated `bin_dir` beside `bin_dirs`, which then
        # holds the build's own defaults (Debian's 2.1 adds /usr/lib/cni): what the files
        # set is the `bin_dir`, as gpuplane.containerd.settings records it.
        own = _raw_bin_dirs(line) if line.startswith("2.") else []
        bin_dirs = [cni["bin_dir"]] + ([] if bin_dirs == own else bin_dirs)
    return {"sandbox_image": sandbox or None,
            "registry.config_path": registry.get("config_path") or None,
            "registry.mirrors": registry.get("mirrors") or None,
            "cni.conf_dir": cni.get("conf_dir") or None,
            "cni.bin_dirs": bin_dirs or None}


@functools.cache
def _raw_bin_dirs(line: str) -> list[str]:
    """The line's own `cni.bin_dirs` as dumped for an empty config (none before 2.1)."""
    with tempfile.TemporaryDirectory(prefix="gp-def-") as tmp:
        top = Path(tmp) / "config.toml"
        top.write_text("version = 2\n")
        real = oracle.dump(line, top)
        assert real.ok and real.config is not None, real.error
        runtime = (real.config.get("plugins") or {}).get("io.containerd.cri.v1.runtime") or {}
        return list((runtime.get("cni") or {}).get("bin_dirs") or [])


@functools.cache
def defaults(line: str) -> dict[str, Any]:
    """The line's own values: `config dump` of an empty version-2 file."""
    with tempfile.TemporaryDirectory(prefix="gp-def-") as tmp:
        top = Path(tmp) / "config.toml"
        top.write_text("version = 2\n")
        real = oracle.dump(line, top)
        assert real.ok and real.config is not None, real.error
        return settings_from_dump(line, real.config)


def beyond_defaults(line: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Settings whose value is not the line's own default (a file may restate one)."""
    base = defaults(line)
    return {k: v for k, v in settings.items() if v is not None and v != base.get(k)}
