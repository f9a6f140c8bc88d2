"""k0s's render step: the containerd config k0s writes at every start (1.27-1.35).

Read at k0sproject/k0s `pkg/component/worker/containerd/component.go` and
`configurer.go`@v1.35.1+k0s.0 (the same since v1.27): while `/etc/k0s/containerd.toml`
starts with `# k0s_managed=true` (or is absent), k0s rewrites it as that marker, a
comment, `version = 2` and `imports` = every `/etc/k0s/containerd.d/*.toml` *without* a
`plugins."io.containerd.grpc.v1.cri"` table, then `/run/k0s/containerd-cri.toml`. That
file is containerd's default CRI config (with k0s's pause image) merge-patched, in glob
order, with every drop-in that *has* a CRI table (mesosphere/toml-merge: tables merge key
by key, other values replace). So on containerd 1.x, where imported CRI tables replace each
other whole, k0s's own merge is what combines drop-ins. The default CRI config is modelled
by the settings gpuplane reads (default runtime runc, runc.v2, the pause image): the
rest is containerd's own default either way.
"""

from __future__ import annotations

import posixpath
import tomllib
from typing import Any

import tomlkit

from gpuplane.containerd.merge import deep_merge
from gpuplane.containerd.versions import CRI_V2, RUNC_V2

MARKER = "# k0s_managed=true"
CRI_FILE = "/run/k0s/containerd-cri.toml"
DROPIN_DIR = "/etc/k0s/containerd.d"
PAUSE_IMAGE = "quay.io/k0sproject/pause:3.10.1"   # pkg/constant/constant.go@v1.35.1+k0s.0
_HEADER = (f"{MARKER}\n# k0s generates this file at every start (gpuplane's model of it); "
           "drop-ins go to /etc/k0s/containerd.d/.\n")


def is_managed(text: str | None) -> bool:
    """Whether k0s regenerates the file (absent, or its first line is the marker)."""
    return text is None or text.split("\n", 1)[0] == MARKER


def _parse(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def render(layout: dict[str, str], config_path: str) -> dict[str, str]:
    """`layout` with the two files k0s generates from its drop-ins, as k0s writes them;
    unchanged when the top-level file is not k0s-managed."""
    if not is_managed(layout.get(config_path)):
        return layout
    old = _parse(layout.get(CRI_FILE, ""))
    pause = old.get("plugins", {}).get(CRI_V2, {}).get("sandbox_image", PAUSE_IMAGE)
    doc: dict[str, Any] = {"version": 2, "plugins": {CRI_V2: {
        "sandbox_image": pause,
        "containerd": {"default_runtime_name": "runc",
                       "runtimes": {"runc": {"runtime_type": RUNC_V2}}}}}}
    imports: list[str] = []
    for path in sorted(p for p in layout
                       if posixpath.dirname(p) == DROPIN_DIR and p.endswith(".toml")):
        data = _parse(layout[path])
        if isinstance(data.get("plugins"), dict) and CRI_V2 in data["plugins"]:
            deep_merge(doc, data)
        else:
            imports.append(path)
    top = _HEADER + tomlkit.dumps({"version": 2, "imports": [*imports, CRI_FILE]})
    return {**layout, config_path: top, CRI_FILE: tomlkit.dumps(doc)}


__all__ = ["CRI_FILE", "DROPIN_DIR", "MARKER", "is_managed", "render"]
