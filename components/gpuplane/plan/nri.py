"""gpuplane's NRI drop-in: where the GPU Operator runs in NRI plugin mode
(`gpuplane:gpuOperator.nri`) and the node's merged containerd config has NRI off (1.7's
default), a drop-in that switches it on. Nothing else changes: in that mode the toolkit
writes no runtime (gpuplane.toolkit.options.PlanOptions.toolkit_configures_runtime).

tests/real/test_nri_dump.py holds the drop-in against real containerd 1.7 and 2.x
`config dump`."""

from __future__ import annotations

import posixpath

import tomlkit

from gpuplane.containerd.effective import effective_config
from gpuplane.containerd.files import MemoryFiles
from gpuplane.containerd.nri import NRI_PLUGIN, nri_state, nri_table
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.distros.profiles import DistroProfile

NRI_DROPIN = "40-gpuplane-nri.toml"


def nri_dropin_path(profile: DistroProfile) -> str:
    assert profile.dropin_dir
    return posixpath.join(profile.dropin_dir, NRI_DROPIN)


def nri_dropin(layout: dict[str, str], top: str, version: ContainerdVersion) -> str | None:
    """The drop-in that switches NRI on over `layout`, or None where NRI is already on
    (or the line has no NRI, 1.6: FM27 says so; no file can add it)."""
    eff = effective_config(top, MemoryFiles(layout), version, missing_ok=True)
    state = nri_state(eff.plugins, version, eff.disabled_plugins)
    if state.enabled or version < ContainerdVersion(1, 7) \
            or NRI_PLUGIN in eff.disabled_plugins:
        return None
    doc = tomlkit.document()
    doc.add(tomlkit.comment("Written by gpuplane: NRI on for the GPU Operator's NRI plugin. "
                            "Do not edit;"))
    doc.add(tomlkit.comment("change the stack config and run `pulumi up` instead."))
    doc["version"] = version.max_config_version
    doc["plugins"] = {NRI_PLUGIN: nri_table(eff.plugins, version)}
    return tomlkit.dumps(doc)


__all__ = ["NRI_DROPIN", "nri_dropin", "nri_dropin_path"]
