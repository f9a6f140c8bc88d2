"""The node files a plan starts from: gpuplane's model of the distribution's defaults, or
copies captured from the nodes themselves (`baselineFiles`).

The model is what a fresh node of that distribution has. A real node may carry more
(registry mirrors, another root, a tuned snapshotter); planning from its own files keeps
those, and the node agent refuses a node whose files are not the ones the plan was made
from, so a plan never replaces settings it has not seen.
"""

from __future__ import annotations

import posixpath
from collections.abc import Set as AbstractSet
from pathlib import Path

from gpuplane.config import StackConfig, StackConfigError
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.distros.docker_daemon import DAEMON_JSON, DaemonJsonError, parse_daemon_json
from gpuplane.distros.profiles import DistroProfile, EditMode


def plannable_paths(profile: DistroProfile) -> list[str]:
    """The node files a plan reads for this distribution (a drop-in dir ends with /)."""
    paths = [profile.config_path, profile.template_path, profile.template_v3_path]
    paths += [d + "/" for d in profile.read_dropin_dirs]
    return [p for p in paths if p]


def _plannable(path: str, allowed: list[str]) -> bool:
    return any(path == a or (a.endswith("/") and posixpath.dirname(path) + "/" == a)
               for a in allowed)


def _not_loadable(text: str, local: str) -> str | None:
    """Why a captured copy is not a config containerd would load (its file:line:col), or
    None. Checked here, where the stack key is known, rather than deep in the planner
    where only the node path is."""
    from gpuplane.containerd.errors import ConfigError
    from gpuplane.containerd.load import _parse_file

    try:
        _parse_file(local, text, None)   # TOML, and `version`/`imports`/`plugins` typed
    except ConfigError as exc:
        return (f"{exc}: the captured copy is not a containerd config containerd would "
                "load; capture the node's file again (`ssh NODE sudo cat PATH > COPY`, no "
                "other output in it)")
    return None


def _not_json_object(text: str, local: str) -> str | None:
    """Why a captured daemon.json is not one dockerd would read (its file:line:col)."""
    try:
        parse_daemon_json(text, local)
    except DaemonJsonError as exc:
        return str(exc)
    return None


def _missing_sources(profile: DistroProfile, version: ContainerdVersion,
                     files: dict[str, str],
                     absent: AbstractSet[str] = frozenset()) -> str | None:
    """Why the captured files are not enough to plan from, or None. The plan is made
    from the node's own files only (never completed with gpuplane's model): the file
    gpuplane edits must be among them, and a file containerd reads to judge the result.
    `absent`: the node paths the stack says the node does not have (null); a drop-in
    distribution's node without a top-level file runs on containerd's defaults and is
    planned from them, but a template distribution or k0s renders that file at every
    start, so a node without it has not started the distribution."""
    if profile.config_path in absent:
        if profile.edits_top_level_file:
            return None
        if profile.edit_mode is not EditMode.TEMPLATE or \
                profile.edit_path(version) not in files:
            made = ("renders it from its template" if profile.edit_mode is EditMode.TEMPLATE
                    else "generates it from its drop-ins")
            return (f"{profile.config_path} is null (absent on the node), but "
                    f"{profile.title} {made} at every start, so a node without it has not "
                    f"started {profile.title}: capture the file on a node where "
                    f"{profile.title} runs (`sudo cat {profile.config_path}`), or plan "
                    "without baselineFiles, from gpuplane's model of the distribution")
    if profile.edit_mode is EditMode.TEMPLATE:
        template = profile.edit_path(version)
        if template in files:
            return None
        if profile.template_always_present:
            return (f"{template} is not captured: {profile.title} renders "
                    f"{profile.config_path} from it at every start and gpuplane edits it, "
                    "so it plans from the node's own template, never from its model of one; "
                    f"capture it too (`sudo cat {template}`)")
    if profile.config_path not in files and profile.config_path not in absent:
        return (f"{profile.config_path} is not captured: it is the file containerd reads "
                "first and the plan starts from it; capture it too "
                f"(`sudo cat {profile.config_path}`), or map it to null where the node "
                "has no such file")
    return None


def node_baselines(cfg: StackConfig, root: Path) -> dict[str, dict[str, str]]:
    """Captured files by node name (nodes without any entry are left out), read relative
    to the project root; a path mapped to null is left out of its node's files (planned as
    absent), so a node may have none. Every unreadable or misplaced file is reported with
    its stack key."""
    allowed = plannable_paths(cfg.profile) + ([DAEMON_JSON] if cfg.docker_settings else [])
    problems: list[tuple[str, str]] = []
    texts: dict[Path, str] = {}
    unreadable: set[Path] = set()
    out: dict[str, dict[str, str]] = {}
    for index, node in enumerate(cfg.nodes):
        files: dict[str, str] = {}
        absent: set[str] = set()
        entries = cfg.baseline_files_of(index)
        for node_path, (key, local) in entries.items():
            if not _plannable(node_path, allowed):
                problems.append((key, f"{node_path} is not a file gpuplane plans from on "
                                 f"{cfg.cluster.distro.value}; use one of {', '.join(allowed)}"))
                continue
            if local is None:   # the node has no such file
                absent.add(node_path)
                continue
            source = root / local
            if source in unreadable:
                continue
            if source not in texts:
                try:
                    texts[source] = source.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    reason = getattr(exc, "strerror", None) or str(exc)
                    problems.append((key, f"cannot read {local} (relative to the project "
                                     f"root {root}): {reason}; capture it from the node with "
                                     f"`ssh {node.host or node.name} sudo cat {node_path} > "
                                     f"{local}`"))
                    unreadable.add(source)
                    continue
                problem = _not_json_object(texts[source], local) if node_path == DAEMON_JSON \
                    else _not_loadable(texts[source], local)
                if problem:
                    problems.append((key, problem))
                    unreadable.add(source)
                    continue
            files[node_path] = texts[source]
        if files or absent:
            missing = _missing_sources(cfg.profile, cfg.containerd, files, absent)
            if missing:
                key = entries[cfg.profile.config_path][0] \
                    if cfg.profile.config_path in absent else next(iter(entries.values()))[0]
                problems.append((key, missing))
                continue
            out[node.name] = files
    if problems:
        raise StackConfigError(list(dict.fromkeys(problems)))  # a cluster-wide one once
    return out


__all__ = ["node_baselines", "plannable_paths"]
