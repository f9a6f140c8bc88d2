"""Whether a node's containerd serves NRI (the Node Resource Interface), which the GPU
Operator's NRI plugin mode (`cdi.nriPluginEnabled`, chart v26.3.0+) needs on every node.

containerd's defaults, as each line's `config dump` prints them for a config holding only
`version` (tests/real/test_nri_dump.py holds them against the real builds):
- 1.6 has no NRI plugin at all;
- 1.7 has `[plugins."io.containerd.nri.v1.nri"] disable = true`: off unless a file turns it
  on (containerd/containerd pkg/nri/config.go@v1.7.29 `DefaultConfig`);
- 2.x has it on (`disable = false`, containerd/containerd internal/nri/config.go@v2.0.11).
A file may also switch it off through `disabled_plugins`. Pure: reads the merged plugins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuplane.containerd.versions import ContainerdVersion

NRI_PLUGIN = "io.containerd.nri.v1.nri"


@dataclass(frozen=True)
class NriState:
    """NRI on one node: `enabled`, and why (`reason`, in containerd's terms)."""

    enabled: bool
    reason: str


def nri_default(version: ContainerdVersion) -> bool | None:
    """NRI when no file sets it: None on 1.6 (no such plugin), off on 1.7, on from 2.0."""
    if version < ContainerdVersion(1, 7):
        return None
    return version.major >= 2


def nri_state(plugins: Mapping[str, Any], version: ContainerdVersion,
              disabled_plugins: Sequence[str] = ()) -> NriState:
    """NRI as containerd `version` runs with the merged `plugins` table."""
    default = nri_default(version)
    if default is None:
        return NriState(False, f"containerd {version} has no NRI plugin")
    if NRI_PLUGIN in disabled_plugins:
        return NriState(False, f'disabled_plugins names "{NRI_PLUGIN}"')
    table = plugins.get(NRI_PLUGIN)
    disable = table.get("disable") if isinstance(table, Mapping) else None
    if isinstance(disable, bool):
        return NriState(not disable, f'[plugins."{NRI_PLUGIN}"] disable = '
                                     f"{str(disable).lower()}")
    return NriState(default, f"containerd {version}'s default "
                             f"(disable = {str(not default).lower()})")


def nri_table(plugins: Mapping[str, Any], version: ContainerdVersion) -> dict[str, Any]:
    """The NRI plugin table a drop-in must hold to switch NRI on: on 1.x the merged table
    with `disable = false` (a later file's plugin table replaces an earlier one whole, so
    a partial one would drop the node's own NRI settings); on 2.x only `disable = false`
    (imports deep-merge)."""
    if version.deep_merges:
        return {"disable": False}
    table = plugins.get(NRI_PLUGIN)
    return {**(dict(table) if isinstance(table, Mapping) else {}), "disable": False}


__all__ = ["NRI_PLUGIN", "NriState", "nri_default", "nri_state", "nri_table"]
