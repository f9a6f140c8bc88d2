"""Input errors: a file gpuplane cannot read. They name the file and line (CLI exit 2)."""

from __future__ import annotations


class ConfigError(Exception):
    """A config file that is unreadable or not valid TOML, with file and line."""

    def __init__(self, path: str, message: str, line: int | None = None, col: int | None = None):
        self.path = path
        self.line = line
        self.col = col
        self.reason = message
        where = path if line is None else f"{path}:{line}" + (f":{col}" if col else "")
        super().__init__(f"{where}: {message}")
