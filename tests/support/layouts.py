"""Layout helpers shared by the real-containerd tests: write a node layout (node paths
→ text) under a temporary root, rewriting absolute `imports` so the real daemon reads
the same files the model reads at their node paths."""

from __future__ import annotations

from pathlib import Path

import tomlkit

from gpuplane.distros import rancher_render


def write_layout(layout: dict[str, str], root: Path) -> None:
    """Write `layout` under `root`; absolute imports are prefixed with `root`."""
    for node_path, text in layout.items():
        target = root / node_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(rebase_imports(text, root), encoding="utf-8")


def rebase_imports(text: str, root: Path) -> str:
    if rancher_render.extends_base(text):  # an RKE2/K3s Go template, not TOML
        return text
    doc = tomlkit.parse(text)
    imports = doc.get("imports")
    if not imports:
        return text
    doc["imports"] = [f"{root}{p}" if p.startswith("/") else p for p in imports]
    return tomlkit.dumps(doc)


def host_path(root: Path, node_path: str) -> Path:
    return root / node_path.lstrip("/")
