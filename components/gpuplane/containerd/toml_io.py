"""Reading and writing containerd TOML with tomlkit, so existing files keep their
comments and layout, and every parse error names file, line and column."""

from __future__ import annotations

import tomllib
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError
from tomlkit.toml_document import TOMLDocument

from gpuplane.containerd.errors import ConfigError


def parse_document(text: str, path: str) -> TOMLDocument:
    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        raise ConfigError(path, _reason(exc), exc.line, exc.col) from exc


def parse(text: str, path: str) -> dict[str, Any]:
    """Plain Python data of a TOML file (ints, strs, bools, dicts, lists).

    The stdlib parser is ~20x faster than tomlkit and gives the same data; it is stricter
    on a few inputs tomlkit accepts (e.g. a trailing comma in an inline table), so when it
    refuses, tomlkit decides: the result and the error (file, line, column) are the ones
    tomlkit alone would give.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return parse_document(text, path).unwrap()


def line_of(text: str, dotted: tuple[str, ...]) -> int | None:
    """First line that defines `dotted` or anything under it (a header or a key line).

    Finds `[a.b.c.options]` for ("a", "b", "c") and dotted keys such as
    `c.options.x = 1` under `[a.b]`; never guesses. Used for `path:line` in messages.
    """
    if not dotted:
        return None
    size = len(dotted)
    table: tuple[str, ...] = ()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            table = _split(line.lstrip("["), stop="]")
            path = table
        else:
            path = table + _split(line, stop="=")
        if path[:size] == dotted:
            return number
    return None


def _split(text: str, stop: str) -> tuple[str, ...]:
    """Dotted key parts of `text` up to the first unquoted `stop` character."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    for char in text:
        if quote:
            if char == quote:
                quote = ""
            else:
                current.append(char)
        elif char in "\"'":
            quote = char
        elif char == stop:
            break
        elif char == ".":
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return tuple(parts)


def _reason(exc: ParseError) -> str:
    message = str(exc)
    suffix = f" at line {exc.line} col {exc.col}"
    return message[: -len(suffix)] if message.endswith(suffix) else message
