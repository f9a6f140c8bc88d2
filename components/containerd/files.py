"""Where config files come from: a node's filesystem (optionally under a sandbox root)
or an in-memory layout (plans, tests, snapshots). Globs follow Go's filepath.Glob:
`*` never crosses `/`, matches are sorted byte-wise per directory."""

from __future__ import annotations

import fnmatch
import posixpath
from pathlib import Path
from typing import Protocol

_META = "*?["


def has_meta(pattern: str) -> bool:
    return any(c in pattern for c in _META)


class FileSource(Protocol):
    """Read-only view of a node's files, addressed by absolute node paths."""

    def read(self, path: str) -> str | None:
        """The file's text, or None when it does not exist."""

    def listdir(self, path: str) -> list[str]:
        """Names in a directory (empty when it does not exist)."""


def glob(files: FileSource, pattern: str) -> list[str]:
    """Expand an absolute pattern component by component, like Go's filepath.Glob."""
    parts = [p for p in pattern.split("/") if p]
    paths = ["/"]
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        nxt: list[str] = []
        for base in paths:
            if has_meta(part):
                names = sorted(n for n in files.listdir(base) if fnmatch.fnmatchcase(n, part))
                nxt.extend(posixpath.join(base, n) for n in names)
            else:
                nxt.append(posixpath.join(base, part))
        paths = nxt
        if not last:
            paths = [p for p in paths if files.listdir(p) or _is_dir(files, p)]
    return [p for p in paths if files.read(p) is not None]


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

    def host_path(self, path: str) -> Path:
        if self.root is None:
            return Path(path)
        return self.root / path.lstrip("/")

    def read(self, path: str) -> str | None:
        target = self.host_path(path)
        try:
            return target.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(p.name for p in self.host_path(path).iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return []

    def is_dir(self, path: str) -> bool:
        return self.host_path(path).is_dir()
