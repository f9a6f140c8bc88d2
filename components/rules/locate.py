"""`where` fields: the line of a table or key in a config file, for `path:line`."""

from __future__ import annotations


def locate(text: str, dotted: tuple[str, ...]) -> int | None:
    """First line that defines `dotted` or anything under it (a header or a key line).

    Unlike toml_io.line_of (exact headers, else the first key with the same last name,
    which can be another runtime's) this finds `[a.b.c.options]` for ("a", "b", "c") and
    dotted keys such as `c.options.x = 1` under `[a.b]`, and never guesses.
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
