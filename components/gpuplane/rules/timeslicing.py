"""FM10: the device plugin's time-slicing ConfigMap, profile by profile.

The plugin reads one key (a profile) of the ConfigMap as YAML. What it cannot parse stops
the plugin; keys at the wrong level are dropped without a word, so a config can look
right and still leave `nvidia.com/gpu` at the physical count. Facts from the plugin's
config loader: version must be empty or v1, `sharing.timeSlicing.resources` must be a
non-empty list, each resource needs `name` and an integer `replicas` of at least 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from gpuplane.core.findings import Finding
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules._shared import at, finding, items, mapping

GPU = "nvidia.com/gpu"
_KEY = "gpuplane:timeSlicing"
_MISPLACED = ("renameByDefault", "failRequestsGreaterThanOne", "timeSlicing", "sharing",
              "resources", "replicas")


def example(profile: str, replicas: int) -> str:
    """The profile gpuplane writes, as the fix to show (replicas >= 2)."""
    return (f"{profile}: |\n  version: v1\n  sharing:\n    timeSlicing:\n      resources:\n"
            f"      - name: {GPU}\n        replicas: {max(replicas, 2)}")


def check_time_slicing(config_data: dict[str, str], intent: ClusterIntent, *,
                       where: str) -> list[Finding]:
    """FM10 over a time-slicing ConfigMap's `data`; `where` names the ConfigMap."""
    on = intent.time_slicing_replicas > 0
    profile = intent.time_slicing_profile
    replicas = intent.time_slicing_replicas
    if not isinstance(config_data, Mapping):
        return [finding(
            "FM10", f"the ConfigMap data is {type(config_data).__name__}, not a mapping of "
            "profile name to YAML.", at(where, "data", _KEY),
            f"Let gpuplane write it from `{_KEY}`; by hand, data must be\n"
            f"{example(profile, replicas)}")]
    out = []
    if on and profile not in config_data:
        out.append(finding(
            "FM10",
            f"the ConfigMap has no profile {profile!r} (it has "
            f"{', '.join(map(repr, sorted(config_data))) or 'no keys'}): the device plugin "
            "is told to use that profile, so GPUs are not shared and nvidia.com/gpu stays "
            "at the physical count.",
            at(where, f"data.{profile}", f"{_KEY}.profile"),
            f"Set `{_KEY}.profile` to a key of the ConfigMap, or add the key:\n"
            f"{example(profile, replicas)}"))
    for key in sorted(config_data, key=str):
        mine = on and key == profile
        out += check_profile(str(key), config_data[key], where=where,
                             expected_replicas=replicas if mine else None,
                             expected_rename=intent.time_slicing_rename if mine else None)
    return out


def check_profile(key: str, text: Any, *, where: str, expected_replicas: int | None = None,
                  expected_rename: bool | None = None) -> list[Finding]:
    """FM10 for one profile; `expected_replicas` (and `expected_rename`, the stack's
    renameByDefault) when this profile must time-slice GPUs."""
    here = f"data.{key}"
    fix_text = example(key, expected_replicas or 2)
    if not isinstance(text, str):
        return [_bad(f"profile {key!r} is {type(text).__name__}, not a YAML string",
                     where, here, fix_text)]
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return [_bad(f"profile {key!r} is not valid YAML ({reason} at{line or ' ?'}): the "
                     "device plugin fails to load its config", where, f"{here}{line}",
                     fix_text)]
    if doc is None:
        if not expected_replicas:
            return []
        return [_bad(f"profile {key!r} is empty: GPUs are not shared although "
                     f"{_KEY}.replicas is {expected_replicas}", where, here, fix_text)]
    if not isinstance(doc, Mapping):
        return [_bad(f"profile {key!r} holds {type(doc).__name__}, not a config mapping",
                     where, here, fix_text)]
    out = []
    version = doc.get("version")
    if version not in (None, "", "v1"):
        out.append(_bad(f"profile {key!r} has version {version!r}: the device plugin knows "
                        "only v1 and refuses the config", where, f"{here} version", fix_text))
    flags = mapping(doc.get("flags"))
    for name in _MISPLACED:
        if name in flags:
            out.append(_bad(
                f"profile {key!r} sets flags.{name}, which the device plugin silently "
                f"ignores: it belongs under sharing.timeSlicing", where,
                f"{here} flags.{name}", fix_text))
    out += _time_slicing(key, doc, where, expected_replicas, fix_text)
    ts = mapping(mapping(doc.get("sharing")).get("timeSlicing"))
    rename = ts.get("renameByDefault", False)
    if expected_rename is not None and ts and rename != expected_rename:
        out.append(_bad(
            f"profile {key!r} has renameByDefault {rename!r} but "
            f"{_KEY}.renameByDefault is {str(expected_rename).lower()}: shared GPUs are "
            f"advertised as {GPU}{'.shared' if rename is True else ''}, not the name the "
            "stack's pods and checks ask for", where,
            f"data.{key} sharing.timeSlicing.renameByDefault", fix_text))
    return out


def _time_slicing(key: str, doc: Mapping[str, Any], where: str, expected: int | None,
                  fix_text: str) -> list[Finding]:
    here = f"data.{key} sharing.timeSlicing"
    sharing = doc.get("sharing")
    ts = sharing.get("timeSlicing") if isinstance(sharing, Mapping) else None
    if ts is None:
        if expected:
            return [_bad(f"profile {key!r} has no sharing.timeSlicing: GPUs are not shared "
                         f"although {_KEY}.replicas is {expected}", where, here, fix_text)]
        return []
    if not isinstance(ts, Mapping) or not items(ts.get("resources")):
        return [_bad(f"profile {key!r} has sharing.timeSlicing without a resources list: "
                     "the device plugin refuses it (no resources specified)", where,
                     f"{here}.resources", fix_text)]
    out = []
    gpu_replicas = None
    for i, res in enumerate(ts["resources"]):
        path = f"{here}.resources[{i}]"
        if not isinstance(res, Mapping) or not res.get("name"):
            out.append(_bad(f"profile {key!r} resource {i} has no name: the device plugin "
                            "refuses the config", where, f"{path}.name", fix_text))
            continue
        replicas = res.get("replicas")
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            out.append(_bad(f"profile {key!r} gives {res['name']} replicas {replicas!r}, not "
                            "an integer: the device plugin refuses the config", where,
                            f"{path}.replicas", fix_text))
            continue
        if replicas < 2:
            out.append(_bad(f"profile {key!r} gives {res['name']} replicas {replicas}: the "
                            "device plugin refuses fewer than 2 (time-slicing off means no "
                            "sharing section at all)", where, f"{path}.replicas", fix_text))
            continue
        if res["name"] == GPU:
            gpu_replicas = (replicas, path)
    if expected and not out:
        if gpu_replicas is None:
            out.append(_bad(f"profile {key!r} does not time-slice {GPU}: it stays at the "
                            "physical count", where, f"{here}.resources", fix_text))
        elif gpu_replicas[0] != expected:
            out.append(_bad(f"profile {key!r} gives {GPU} {gpu_replicas[0]} replicas but "
                            f"{_KEY}.replicas is {expected}: allocatable GPUs will not be "
                            f"physical x {expected}", where, f"{gpu_replicas[1]}.replicas",
                            fix_text))
    return out


def _bad(problem: str, where: str, path: str, fix_text: str) -> Finding:
    return finding(
        "FM10", f"{problem}.", at(where, path, _KEY),
        f"Let gpuplane generate the ConfigMap from `{_KEY}` (replicas >= 2, profile, "
        "configMap), then restart the device plugin DaemonSet, which does not watch it; by "
        f"hand the profile must read\n{fix_text}")


def expected_allocatable(gpus: int, intent: ClusterIntent) -> int:
    """`nvidia.com/gpu` a node should advertise: physical GPUs x time-slicing replicas."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise ValueError(f"gpus must be a non-negative integer, got {gpus!r}")
    replicas = intent.time_slicing_replicas
    return gpus * replicas if replicas > 0 else gpus
