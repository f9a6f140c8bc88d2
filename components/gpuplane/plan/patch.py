"""The CRI settings a plan adds to a node's containerd config, as a containerd-neutral
`containerd` table: `SystemdCgroup` on every runc runtime, the host toolkit's `nvidia`
runtime (and the default), CDI, and containerd's built-in runc spelt out where a drop-in's
runtimes table would otherwise replace it. The planner (gpuplane.plan.node) writes it in
the node's own spelling (gpuplane.plan.edits)."""

from __future__ import annotations

from typing import Any

from gpuplane.containerd.effective import EffectiveConfig, effective_config, raw_options
from gpuplane.containerd.files import MemoryFiles
from gpuplane.containerd.load import load_config
from gpuplane.containerd.merge import merge
from gpuplane.containerd.options import set_option
from gpuplane.containerd.versions import RUNC_V2, ContainerdVersion
from gpuplane.distros.profiles import DistroProfile
from gpuplane.plan.edits import cri_key
from gpuplane.plan.layout import rendered_layout
from gpuplane.toolkit.options import PlanOptions, ToolkitMode

HOST_TOOLKIT_BIN = "/usr/bin/nvidia-container-runtime"


def cri_patch(profile: DistroProfile, version: ContainerdVersion, options: PlanOptions,
           baseline: dict[str, str]) -> dict[str, Any]:
    """The CRI settings gpuplane itself must add (containerd-neutral `containerd` table)."""
    current = effective_config(profile.config_path,
                               MemoryFiles(rendered_layout(baseline, profile, version)), version)
    runtimes: dict[str, Any] = {}
    ctd: dict[str, Any] = {}
    systemd = options.systemd_cgroup
    if systemd is not None:
        for name, runtime in current.runtimes.items():
            if runtime.runtime_type in (RUNC_V2, None):
                runtimes[name] = {"options": set_option(
                    {k: v for k, v in raw_options(current, name).items()
                     if k.lower() == "systemdcgroup"}, "SystemdCgroup", systemd)}
                if not _configured(current, name):
                    # containerd 2.x's built-in runc, which no file defines: a table with
                    # options only would be what the toolkit copies, without a type.
                    runtimes[name]["runtime_type"] = RUNC_V2
    if options.toolkit is ToolkitMode.HOST:
        base_name = (current.default_runtime if current.default_runtime in current.runtimes
                     else "runc")
        base = current.runtimes.get(base_name)
        # Spellings normalising dropped (`systemdCgroup = false`) still shadow ours on 2.x.
        shadows = {k: v for k, v in raw_options(current, base_name).items()
                   if k.lower() in ("systemdcgroup", "binaryname")}
        opts = {**shadows, **base.options} if base else {}
        if systemd is not None:
            opts = set_option(opts, "SystemdCgroup", systemd)
        opts = set_option(opts, "BinaryName", HOST_TOOLKIT_BIN)
        runtimes[options.runtime_name] = {"runtime_type": RUNC_V2, "options": opts}
        if options.nvidia_default:
            ctd["default_runtime_name"] = options.runtime_name
    if options.toolkit is not ToolkitMode.NONE and not version.deep_merges:
        own = current.default_runtime if current.default_runtime in current.runtimes else "runc"
        if own in current.runtimes and own not in runtimes and not _configured(current, own):
            # containerd 1.x's built-in runc, which no file defines (a node without a
            # top-level file): the runtimes table of gpuplane's drop-in, or of the one the
            # toolkit copies from the top-level file, would replace the built-in one.
            runtimes[own] = {"runtime_type": RUNC_V2}
    patch: dict[str, Any] = {}
    if runtimes:
        ctd["runtimes"] = runtimes
    if ctd:
        patch["containerd"] = ctd
    if options.cdi and options.toolkit is ToolkitMode.HOST and version.supports_cdi:
        patch["enable_cdi"] = True
    return patch


def _configured(eff: EffectiveConfig, name: str) -> bool:
    """Whether some file defines runtime `name` (not only containerd's built-in runc)."""
    table = eff.plugins.get(eff.cri_key)
    for key in ("containerd", "runtimes"):
        table = table.get(key) if isinstance(table, dict) else None
    return isinstance(table, dict) and name in table




def unmet(patch: dict[str, Any], layout: dict[str, str], top: str,
           version: ContainerdVersion) -> dict[str, Any]:
    """`patch` without what the merged CRI table of `layout` already holds."""
    loaded = load_config(top, MemoryFiles(layout), version)
    key = cri_key(loaded.files[0].version or 2, version,
                   {k for f in loaded.files for k in f.plugins})
    return _difference(patch, merge(loaded).plugins.get(key, {}))


def _difference(wanted: dict[str, Any], have: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in wanted.items():
        present = have.get(k) if isinstance(have, dict) else None
        if isinstance(v, dict):
            rest = _difference(v, present)
            if rest:
                out[k] = rest
        elif present != v or (isinstance(have, dict) and k not in have):
            out[k] = v
    return out


__all__ = ["HOST_TOOLKIT_BIN", "cri_patch", "unmet"]
