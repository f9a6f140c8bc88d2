"""FM03 (warning): the GPU Operator's toolkit reads a containerd config without `version`.

A non-empty config without a `version` key is version 1 to containerd and to the toolkit
installer (NVIDIA/nvidia-container-toolkit v1.17.8 and v1.18.1,
`pkg/config/engine/containerd/config_v1.go`; measured with the real installers, see
gpuplane.toolkit.output). The installer then stamps its output `version = 1`, writes the
runtimes under the version-1 plugin name `plugins.cri` and, from 1.18, writes the *whole*
file (root, state, every plugin) as its drop-in without adding an `imports` entry. On
containerd 2.x a version-1 CRI table is ignored; on 1.x, a file that mixes version-1 and
version-2 plugin names loses one of them. The rules on the merged result report the
breakage itself; this finding says where it comes from and what to change on the node.
"""

from __future__ import annotations

import tomllib

from gpuplane.core.findings import Finding, Severity
from gpuplane.rules._shared import finding


def check_toolkit_source_version(path: str, text: str | None) -> list[Finding]:
    """A warning when the toolkit's config source `path` (holding `text`) has no `version`."""
    if not text:
        return []
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []   # an unreadable config is reported by the containerd rules
    if not data or "version" in data:
        return []
    return [finding(
        "FM03", f"{path} has no `version` key, so the GPU Operator's toolkit treats it as a "
        "version-1 config: it writes its runtimes under `plugins.cri` in a `version = 1` "
        "file (from toolkit 1.18 a drop-in copying the whole file, with no `imports` entry "
        "added), which containerd 2.x ignores and which on 1.x replaces the version-2 CRI "
        "table.", path,
        f"Add `version = 2` at the top of {path} on the node (`containerd config migrate` "
        "prints the file in the current version), capture it again into "
        "`gpuplane:nodes[].baselineFiles`, and re-run the plan.",
        Severity.WARNING)]


def check_toolkit_run(blocker: str | None, where: str) -> list[Finding]:
    """An error when the operator's toolkit fails on this node
    (`gpuplane.toolkit.output.toolkit_blocker` says why)."""
    if blocker is None:
        return []
    return [finding(
        "FM03", blocker + ".", where,
        "Use GPU Operator chart v25.10.0 or later (`gpuplane:gpuOperator.chartVersion`; its "
        "toolkit 1.18+ reads the config file gpuplane names in RUNTIME_CONFIG_SOURCE) or "
        "`gpuplane:gpuOperator.toolkitImage.tag` v1.18.0 or later.",
        Severity.ERROR)]


__all__ = ["check_toolkit_run", "check_toolkit_source_version"]
