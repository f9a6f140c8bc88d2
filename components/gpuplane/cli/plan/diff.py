"""The preview diff before a node rollout: this plan against a base plan (e.g. main's).

A reviewer approves a change that restarts containerd on a fleet from this diff alone, so
nothing that changes in the Pulumi program may be left out: every resource's inputs and
dependencies (added, removed, changed, with a YAML diff of what changed), the stack
settings, the node files and Helm values (unified diffs), the host units the node agent
masks or puts back, the rollout (batches, order,
which nodes restart and why) and the findings (new, fixed). A plan that the rulebook or a
mandatory policy rejects changes nothing: what it would have written is shown as the
attempted change and the resources it holds back as withheld, never as removals.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

MAX_PATHS = 12   # changed input paths listed per resource; the YAML diff has them all


class _Dumper(yaml.SafeDumper):
    """YAML with multi-line strings as literal blocks, so an embedded file or manifest
    diffs line by line instead of as one escaped line."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    if "\n" in text:
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", text)


_Dumper.add_representer(str, _str)


def readable(value: Any) -> Any:
    """`value` with JSON embedded in strings (the intent in ConfigMaps and checks) spread
    out as indented text, so a one-field change is a one-line diff."""
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [readable(v) for v in value]
    if isinstance(value, str) and value[:1] in "{[" and "\n" not in value:
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        if isinstance(parsed, dict | list):
            return json.dumps(parsed, indent=2, sort_keys=True) + "\n"
    return value


def to_yaml(value: Any) -> str:
    """Stable YAML (sorted keys, literal blocks) of a plan value; empty for nothing."""
    if value in (None, {}, []):
        return ""
    return yaml.dump(readable(value), Dumper=_Dumper, sort_keys=True,
                     default_flow_style=False, allow_unicode=True, width=100)


def unified(old: str, new: str, old_name: str, new_name: str) -> str:
    """A unified diff, with a newline after a last line that lacks one."""
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 old_name, new_name)
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def changed_paths(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the leaves that differ between two JSON values."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted({*old, *new}, key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in old or key not in new:
                out.append(path)
            else:
                out += changed_paths(old[key], new[key], path)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            out += changed_paths(a, b, f"{prefix}[{i}]")
        return out
    return [] if old == new else [prefix or "."]


def resource_key(resource: dict[str, Any]) -> str:
    return f"{resource['type']}::{resource['name']}"


def _compared(resource: dict[str, Any]) -> dict[str, Any]:
    """What a resource's change consists of: its inputs and what it waits for."""
    return {"inputs": resource.get("inputs", {}), "dependsOn": resource.get("dependsOn", []),
            "parent": resource.get("parent")}


def resources_diff(base: dict[str, Any], new: dict[str, Any],
                   rejected: bool) -> dict[str, Any]:
    """Added, removed (or withheld by a rejection) and changed resources."""
    old_res = {resource_key(r): r for r in base.get("resources", [])}
    new_res = {resource_key(r): r for r in new.get("resources", [])}
    removed = sorted(old_res.keys() - new_res.keys())
    withheld: list[str] = []
    if rejected:
        # A rejected plan changes nothing (gpuplane.stack.cluster refuses before its first
        # child): what it no longer lists stays on the cluster as it is.
        withheld, removed = removed, []
    changed = []
    for key in sorted(old_res.keys() & new_res.keys()):
        before, after = _compared(old_res[key]), _compared(new_res[key])
        if before == after:
            continue
        paths = changed_paths(before, after)
        changed.append({
            "resource": key,
            "paths": paths[:MAX_PATHS] + ([f"... {len(paths) - MAX_PATHS} more"]
                                          if len(paths) > MAX_PATHS else []),
            "diff": unified(to_yaml(before), to_yaml(after), f"a/{key}", f"b/{key}"),
        })
    return {"added": sorted(new_res.keys() - old_res.keys()), "removed": removed,
            "withheld": withheld, "changed": changed}


def _node_files(node: dict[str, Any]) -> dict[str, str]:
    """What the node gets, or would get were the plan not rejected."""
    return node.get("files") or node.get("withheldFiles") or {}


def _node_units(node: dict[str, Any]) -> set[str]:
    """The host units the node agent masks on the node, or would were the plan not
    rejected."""
    return {u["unit"] for u in node.get("hostUnits") or node.get("withheldHostUnits") or []}


def _restart_reason(node: dict[str, Any], old: dict[str, Any], files: list[str]) -> str:
    if not old:
        return "new GPU node: gpuplane writes its containerd config"
    if old.get("batch") is None:
        return "gpuplane starts writing this node's containerd config"
    where = f" ({', '.join(files)})" if files else ""
    return f"containerd's effective config changes{where}"


def _workload_restarts(changed: list[dict[str, Any]],
                       new: dict[str, Any]) -> list[dict[str, Any]]:
    """Changed restart resources (e.g. the device plugin's on a new sharing config): their
    update restarts pods on every GPU node."""
    by_key = {resource_key(r): r for r in new.get("resources", [])}
    out = []
    for change in changed:
        r = by_key[change["resource"]]
        if r["name"].endswith("-restart"):
            inputs = r.get("inputs", {})
            out.append({"resource": change["resource"], "namespace": inputs.get("namespace"),
                        "selector": inputs.get("selector"),
                        "reason": "changed " + ", ".join(change["paths"])})
    return out


def toolkit_env(plan: dict[str, Any]) -> dict[str, str]:
    """The operator toolkit's env per Helm release, as `NAME=value` lines: where the
    toolkit writes containerd's config (the fix of field incident 1)."""
    out = {}
    for release, rel in plan.get("helm", {}).items():
        env = ((rel.get("values") or {}).get("toolkit") or {}).get("env")
        if isinstance(env, list) and env:
            out[release] = "".join(f"{e.get('name')}={e.get('value')}\n" for e in env
                                   if isinstance(e, dict))
    return out


def _finding_key(f: dict[str, Any]) -> tuple[str, str]:
    return f["id"], f.get("where", "")


def findings_diff(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Findings this change brings (new) and those it removes (fixed)."""
    old = {_finding_key(f): f for f in base.get("findings", [])}
    now = {_finding_key(f): f for f in new.get("findings", [])}
    return {"new": [f for k, f in now.items() if k not in old],
            "fixed": [f for k, f in old.items() if k not in now]}


def config_diff(base: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """The stack settings that differ, as `gpuplane:<path>` with both values (plans made
    before `config` was in the JSON have none: then nothing is listed)."""
    old, now = base.get("config"), new.get("config")
    if old is None or now is None:
        return []
    out = []
    for path in changed_paths(old, now):
        out.append({"key": f"gpuplane:{path}", "base": _at(old, path), "new": _at(now, path)})
    return out


def _at(value: Any, path: str) -> Any:
    """The value at a `changed_paths` path, None where it is absent."""
    for part in path.replace("[", ".[").split("."):
        if part.startswith("["):
            index = int(part[1:-1])
            value = value[index] if isinstance(value, list) and index < len(value) else None
        elif part and part != ".":
            value = value.get(part) if isinstance(value, dict) else None
    return value


class _Named(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


class _Resource(_Named):
    type: str


class _Finding(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str


class _BasePlan(BaseModel):
    """What a diff reads of a base plan (`gpuplane plan --format json`); the rest is
    optional, so plans from older gpuplane versions still compare."""

    model_config = ConfigDict(extra="allow")
    stack: str
    resources: list[_Resource]
    nodes: list[_Named]
    findings: list[_Finding]


def check_base(base: Any) -> None:
    """Raise ValueError naming the first field where `base` is not a JSON plan: another
    JSON file given as `--base` would otherwise diff as "everything is new"."""
    try:
        _BasePlan.model_validate(base)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the top level"
        raise ValueError(f"not a gpuplane plan at {where}: {first['msg']}; give the JSON "
                         "that `gpuplane plan --format json` wrote") from None


def _fleets(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each GpuCluster's nodes and batches by the prefix its nodes are named with in a
    diff: `<cluster>/` where a program builds several (the report's `clusters`), none
    where it builds one."""
    clusters = plan.get("clusters") or []
    if len(clusters) < 2:
        return {"": {"nodes": plan.get("nodes", []),
                     "batches": plan.get("batches") or plan.get("withheldBatches") or []}}
    return {f"{c['name']}/": {"nodes": c.get("nodes", []), "batches": c.get("batches") or []}
            for c in clusters}


def plan_diff(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """What changes from `base` to `new`; both are `build_report` dicts."""
    rejected = new.get("verdict") == "rejected"
    base_fleets, new_fleets = _fleets(base), _fleets(new)
    files: dict[str, dict[str, str]] = {}
    # Host units per node: `mask` (this plan masks it), `unmask` (put back as it was).
    units: dict[str, list[dict[str, str]]] = {}
    disrupted: list[dict[str, Any]] = []
    for order, (prefix, fleet) in enumerate(new_fleets.items()):
        base_nodes = {n["name"]: n for n in base_fleets.get(prefix, {}).get("nodes", [])}
        for node in fleet["nodes"]:
            name = prefix + node["name"]
            old = base_nodes.get(node["name"], {})
            old_files, new_files = _node_files(old), _node_files(node)
            for path in sorted({*old_files, *new_files}):
                text = unified(old_files.get(path, ""), new_files.get(path, ""),
                               f"a{path}", f"b{path}")
                if text:
                    files.setdefault(name, {})[path] = text
            old_units, new_units = _node_units(old), _node_units(node)
            for unit in sorted(old_units ^ new_units):
                units.setdefault(name, []).append(
                    {"unit": unit, "change": "mask" if unit in new_units else "unmask"})
            changed = node.get("effectiveSha") != old.get("effectiveSha")
            if node.get("batch") is not None and (changed if old else node.get("restart")):
                disrupted.append({"node": name, "batch": node["batch"], "order": order,
                                  "reason": _restart_reason(node, old,
                                                            sorted(files.get(name, {})))})
    disrupted.sort(key=lambda d: (d.pop("order"), d["batch"]))
    base_helm, new_helm = base.get("helm", {}), new.get("helm", {})
    values = {}
    for release in sorted({*base_helm, *new_helm}):
        text = unified(to_yaml(base_helm.get(release, {})), to_yaml(new_helm.get(release, {})),
                       f"a/{release}", f"b/{release}")
        if text:
            values[release] = text
    old_env, new_env = toolkit_env(base), toolkit_env(new)
    env = {}
    for release in sorted({*old_env, *new_env}):
        text = unified(old_env.get(release, ""), new_env.get(release, ""),
                       f"a/{release} toolkit.env", f"b/{release} toolkit.env")
        if text:
            env[release] = text
    resources = resources_diff(base, new, rejected)
    old_batches = _batches(base_fleets)
    new_batches = _batches(new_fleets)
    rollout = {"changed": old_batches != new_batches, "base": old_batches, "new": new_batches,
               "workloadRestarts": _workload_restarts(resources["changed"], new)}
    out = {
        "baseStack": base.get("stack"),
        "verdict": new.get("verdict", "ok"),
        "rejected": rejected,
        "config": config_diff(base, new),
        "files": files,
        "hostUnits": units,
        "values": values,
        "toolkitEnv": env,
        "resources": resources,
        "rollout": rollout,
        "disrupted": [] if rejected else disrupted,
        "findings": findings_diff(base, new),
    }
    out["empty"] = is_empty(out)
    return out


def _batches(fleets: dict[str, dict[str, Any]]) -> list[list[str]]:
    """The rollout's batches, cluster after cluster (nodes named `<cluster>/node` where
    there are several). The list is only the order within each cluster: no cluster's
    rollout waits for another's."""
    return [[prefix + node for node in batch]
            for prefix, fleet in fleets.items() for batch in fleet["batches"]]


def is_empty(diff: dict[str, Any]) -> bool:
    """Whether the diff shows no change at all."""
    res = diff["resources"]
    return not (diff["config"] or diff["files"] or diff.get("hostUnits") or diff["values"]
                or res["added"]
                or res["removed"] or res["withheld"] or res["changed"]
                or diff["rollout"]["changed"] or diff["disrupted"]
                or diff["findings"]["new"] or diff["findings"]["fixed"])


__all__ = ["changed_paths", "check_base", "is_empty", "plan_diff", "to_yaml", "toolkit_env",
           "unified"]
