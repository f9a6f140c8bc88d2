"""Reading and writing containerd TOML with tomlkit, so existing files keep their
comments and layout, and every parse error names file, line and column."""

from __future__ import annotations

import tomllib
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError
from tomlkit.toml_document import TOMLDocument

from components.containerd.errors import ConfigError


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


def render(data: dict[str, Any]) -> str:
    return tomlkit.dumps(data)


def line_of(text: str, dotted: tuple[str, ...]) -> int | None:
    """Best-effort 1-based line where a table or key is defined, for `where` fields."""
    if not dotted:
        return None
    lines = text.splitlines()
    last = dotted[-1]
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith("[") and _header_matches(stripped, dotted):
            return number
    for number, line in enumerate(lines, start=1):
        key = line.split("=", 1)[0].strip().strip("\"'")
        if "=" in line and key == last:
            return number
    return None


def _header_matches(header: str, dotted: tuple[str, ...]) -> bool:
    return _split_dotted(header.strip("[]").strip()) == dotted


def _split_dotted(inner: str) -> tuple[str, ...]:
    parts: list[str] = []
    current = ""
    quote = ""
    for char in inner:
        if quote:
            if char == quote:
                quote = ""
            else:
                current += char
        elif char in "\"'":
            quote = char
        elif char == ".":
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return tuple(parts)


def _reason(exc: ParseError) -> str:
    message = str(exc)
    suffix = f" at line {exc.line} col {exc.col}"
    return message[: -len(suffix)] if message.endswith(suffix) else message
