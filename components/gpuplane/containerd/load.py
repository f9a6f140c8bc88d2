"""Which files containerd reads, in which order: the top-level config, then its imports
breadth-first (each file once), resolved the way each release line resolves them."""

from __future__ import annotations

import posixpath
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from gpuplane.containerd import toml_io
from gpuplane.containerd.errors import ConfigError
from gpuplane.containerd.files import FileSource, glob_read
from gpuplane.containerd.versions import ContainerdVersion


@dataclass(frozen=True)
class LoadedFile:
    """One config file as containerd reads it, with its own `version` (0 when absent)."""

    path: str
    text: str
    data: dict[str, Any]
    version: int
    imports: tuple[str, ...]
    imported_by: str | None = None

    @property
    def plugins(self) -> dict[str, Any]:
        plugins = self.data.get("plugins", {})
        return plugins if isinstance(plugins, dict) else {}

    @property
    def disabled_plugins(self) -> list[str]:
        names = self.data.get("disabled_plugins", [])
        return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


@dataclass
class LoadResult:
    """The merge order plus what stops containerd before it merges anything."""

    containerd_version: ContainerdVersion
    files: list[LoadedFile]
    refusals: list[str] = field(default_factory=list)
    empty_globs: list[tuple[str, str]] = field(default_factory=list)
    cwd_globs: list[tuple[str, str]] = field(default_factory=list)
    # No top-level file: containerd runs on its built-in defaults and reads no drop-in
    # (measured on 2.0-2.2, whose `config dump` runs on the defaults: 2.2's lists
    # `imports = ['/etc/containerd/conf.d/*.toml']` from its defaults but reads none of
    # them. 1.x's `config dump` refuses a missing file; its daemon is taken to run on
    # its defaults, not measured here).
    missing_top: bool = False


def load_config(top: str, files: FileSource, version: ContainerdVersion,
                *, missing_ok: bool = False) -> LoadResult:
    """Load `top` and everything it imports. Raises ConfigError for unreadable input;
    a missing `top` is containerd's built-in defaults when `missing_ok`."""
    text = files.read(top)
    if text is None:
        if not missing_ok:
            raise ConfigError(top, "file not found")
        return LoadResult(version, [LoadedFile(top, "", {}, 0, ())], missing_top=True)
    result = LoadResult(version, [])
    pending: deque[tuple[str, str, str | None]] = deque([(top, text, None)])
    seen: set[str] = set()
    while pending:
        path, text, parent = pending.popleft()
        if path in seen:
            continue
        seen.add(path)
        loaded = _parse_file(path, text, parent)
        result.files.append(loaded)
        for target in _resolve_imports(loaded, version, result):
            if target in seen:
                continue
            content = files.read(target) if "*" not in target else None
            if "*" in target:
                matches = glob_read(files, target)
                if not matches:
                    result.empty_globs.append((path, target))
                pending.extend((m, text, path) for m, text in matches)
            elif content is None:
                result.refusals.append(
                    f"{path} imports {target}, which does not exist: containerd refuses to start"
                )
            else:
                pending.append((target, content, path))
    return result


def _parse_file(path: str, text: str, parent: str | None) -> LoadedFile:
    data = toml_io.parse(text, path)
    version = data.get("version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise ConfigError(path, f"`version` must be an integer, not {version!r}",
                          toml_io.line_of(text, ("version",)))
    imports = data.get("imports", [])
    if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
        raise ConfigError(path, "`imports` must be a list of path strings",
                          toml_io.line_of(text, ("imports",)))
    disabled = data.get("disabled_plugins", [])
    if not isinstance(disabled, list) or not all(isinstance(d, str) for d in disabled):
        raise ConfigError(path, "`disabled_plugins` must be a list of plugin names",
                          toml_io.line_of(text, ("disabled_plugins",)))
    plugins = data.get("plugins", {})
    if not isinstance(plugins, dict):
        raise ConfigError(path, "`plugins` must be a table", toml_io.line_of(text, ("plugins",)))
    return LoadedFile(path, text, data, version, tuple(imports), parent)


def _resolve_imports(
    loaded: LoadedFile, version: ContainerdVersion, result: LoadResult
) -> list[str]:
    """Absolute paths (or absolute globs) in the order containerd visits them.

    1.7 and 2.x: clean, join a relative path to the importing file's directory, expand
    when it contains `*`. 1.6 expands a relative glob against the daemon's working
    directory (systemd's is `/`); a literal relative path is joined to the parent's.
    """
    out: list[str] = []
    parent_dir = posixpath.dirname(loaded.path)
    for raw in loaded.imports:
        path = posixpath.normpath(raw) if raw else raw
        if "*" in raw and not version.globs_relative_to_parent:
            if not posixpath.isabs(raw):
                result.cwd_globs.append((loaded.path, raw))
                path = posixpath.join("/", raw)
            out.append(path)
            continue
        if not posixpath.isabs(path):
            path = posixpath.normpath(posixpath.join(parent_dir, path))
        out.append(path)
    return out
