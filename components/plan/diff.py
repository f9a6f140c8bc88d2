"""The preview diff before a node rollout: this plan against a base plan (e.g. main's).

Unified diffs of every node file and every Helm release's values, resources added and
removed, and the nodes whose containerd restarts, in rollout order.
"""

from __future__ import annotations

import difflib
from typing import Any

import yaml


def _unified(old: str, new: str, old_name: str, new_name: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True),
                                        new.splitlines(keepends=True), old_name, new_name))


def _yaml(value: Any) -> str:
    return yaml.safe_dump(value, sort_keys=True, default_flow_style=False) if value else ""


def plan_diff(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """What changes from `base` to `new`; both are `build_report` dicts."""
    base_nodes = {n["name"]: n for n in base.get("nodes", [])}
    files: dict[str, dict[str, str]] = {}
    disrupted: list[dict[str, Any]] = []
    for node in new.get("nodes", []):
        old = base_nodes.get(node["name"], {})
        old_files, new_files = old.get("files", {}), node.get("files", {})
        for path in sorted({*old_files, *new_files}):
            text = _unified(old_files.get(path, ""), new_files.get(path, ""),
                            f"a{path}", f"b{path}")
            if text:
                files.setdefault(node["name"], {})[path] = text
        changed = node.get("effectiveSha") != old.get("effectiveSha")
        if node.get("batch") is not None and (changed if old else node.get("restart")):
            disrupted.append({"node": node["name"], "batch": node["batch"]})
    disrupted.sort(key=lambda d: d["batch"])
    base_helm, new_helm = base.get("helm", {}), new.get("helm", {})
    values = {}
    for release in sorted({*base_helm, *new_helm}):
        old_r, new_r = base_helm.get(release, {}), new_helm.get(release, {})
        text = _unified(_yaml({k: v for k, v in old_r.items()}),
                        _yaml({k: v for k, v in new_r.items()}),
                        f"a/{release}", f"b/{release}")
        if text:
            values[release] = text
    key = lambda r: f"{r['type']}::{r['name']}"  # noqa: E731
    old_res = {key(r) for r in base.get("resources", [])}
    new_res = {key(r) for r in new.get("resources", [])}
    return {
        "baseStack": base.get("stack"),
        "files": files,
        "values": values,
        "resources": {"added": sorted(new_res - old_res), "removed": sorted(old_res - new_res)},
        "disrupted": disrupted,
    }


__all__ = ["plan_diff"]
