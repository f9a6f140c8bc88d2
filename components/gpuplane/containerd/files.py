"""Where config files come from: a node's filesystem (optionally under a sandbox root)
or an in-memory layout (plans, tests, snapshots). Globs follow Go's filepath.Glob:
`*` never crosses `/`, matches are sorted byte-wise per directory."""

from __future__ import annotations

import fnmatch
import os
import posixpath
from pathlib import Path
from typing import Protocol

from gpuplane.containerd.errors import ConfigError

_META = "*?["


def has_meta(pattern: str) -> bool:
    return any(c in pattern for c in _META)


class FileSource(Protocol):
    """Read-only view of a node's files, addressed by absolute node paths."""

    def read(self, path: str) -> str | None:
        """The file's text, or None when it does not exist."""

    def listdir(self, path: str) -> list[str]:
        """Names in a directory (empty when it does not exist)."""


def glob_read(files: FileSource, pattern: str) -> list[tuple[str, str]]:
    """Expand an absolute pattern like Go's filepath.Glob, with each match's text, so the
    loader reads every file once."""
    parts = [p for p in pattern.split("/") if p]
    # The literal directories before the first wildcard need no listing: the deepest one
    # exists as a directory exactly when all of them do.
    first = next((i for i, part in enumerate(parts) if has_meta(part)), len(parts))
    if first == len(parts):
        paths = ["/" + "/".join(parts)]
    else:
        prefix = "/" + "/".join(parts[:first])
        paths = [prefix] if first == 0 or dir_exists(files, prefix) else []
    for index in range(first, len(parts)):
        part = parts[index]
        nxt: list[str] = []
        for base in paths:
            if has_meta(part):
                names = sorted(n for n in files.listdir(base) if fnmatch.fnmatchcase(n, part))
                nxt.extend(posixpath.join(base, n) for n in names)
            else:
                nxt.append(posixpath.join(base, part))
        paths = nxt
        if index != len(parts) - 1:
            paths = [p for p in paths if dir_exists(files, p)]
    found = []
    for path in paths:
        text = files.read(path)
        if text is not None:
            found.append((path, text))
    return found


def dir_exists(files: FileSource, path: str) -> bool:
    """Whether `path` is a directory in `files` (an empty one only where the source can
    tell, see `is_dir`)."""
    return bool(files.listdir(path)) or _is_dir(files, path)


def _is_dir(files: FileSource, path: str) -> bool:
    checker = getattr(files, "is_dir", None)
    return bool(checker and checker(path))


class MemoryFiles:
    """A layout held in memory: {absolute path: text}."""

    def __init__(self, files: dict[str, str]):
        self.files = {posixpath.normpath(k): v for k, v in files.items()}

    def read(self, path: str) -> str | None:
        return self.files.get(posixpath.normpath(path))

    def listdir(self, path: str) -> list[str]:
        prefix = posixpath.normpath(path).rstrip("/") + "/"
        names = {p[len(prefix):].split("/", 1)[0] for p in self.files if p.startswith(prefix)}
        return sorted(names)

    def is_dir(self, path: str) -> bool:
        return bool(self.listdir(path))


class LocalFiles:
    """The local filesystem, optionally under `root` (a directory standing in for `/`)."""

    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root else None
        self._root = str(self.root) if self.root else None

    def host_path(self, path: str) -> Path:
        if self.root is None:
            return Path(path)
        return self.root / path.lstrip("/")

    def _host(self, path: str) -> str:
        """host_path as a string; skips pathlib (slow) for paths already in its normal form."""
        if not _pathlib_normal(path):
            return str(self.host_path(path))
        if self._root is None:
            return path
        return os.path.join(self._root, path.lstrip("/"))

    def read(self, path: str) -> str | None:
        try:
            with open(self._host(path), "rb") as handle:
                raw = handle.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:   # e.g. permission denied: input error, not a traceback
            raise ConfigError(path, f"cannot read: {exc.strerror or exc}") from None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:   # containerd reads TOML as UTF-8 and refuses
            line = raw.count(b"\n", 0, exc.start) + 1
            raise ConfigError(path, f"not UTF-8 (byte 0x{raw[exc.start]:02x}); containerd "
                              "refuses it: save the file as UTF-8", line) from None

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self._host(path)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(self._host(path))


def _pathlib_normal(path: str) -> bool:
    """True when pathlib would keep `path` as it is (no empty or `.` parts, no trailing /)."""
    return (
        bool(path) and path != "/" and not path.endswith(("/", "/.")) and path != "."
        and "//" not in path and "/./" not in path and not path.startswith("./")
    )
