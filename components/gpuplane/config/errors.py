"""How an invalid stack config is reported: one `StackConfigError` holding every problem,
each a `Problem` that carries its full stack key and a message with the fix.

The key travels as data, never inside the message, so `gpuplane plan` can put the stack
file's `file:line` in front of it (plan/stackfile.py `located`) and a stack with several
mistakes gets all of them in one run instead of one per `pulumi up`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

NAMESPACE = "gpuplane"


def stack_key(path: str = "") -> str:
    """`gpuplane:<path>` for a key path as users write it (`nodes[0].host`); the bare
    namespace for the stack as a whole."""
    return f"{NAMESPACE}:{path}" if path else NAMESPACE


class Problem(NamedTuple):
    """One invalid value or combination: the full stack key a user edits, and what is
    wrong with the fix. A tuple, so `for key, message in problems` and `dict(problems)`
    keep working for the callers that build `StackConfigError` from plain pairs."""

    key: str
    message: str


class StackConfigError(Exception):
    """Invalid stack config; each problem names its `gpuplane:` key."""

    def __init__(self, problems: Iterable[tuple[str, str]]) -> None:
        self.problems: list[Problem] = [Problem(key, message) for key, message in problems]
        super().__init__("\n".join(f"{key}: {msg}" for key, msg in self.problems))


def field_problem(err: Any) -> Problem:
    """A pydantic error (one of `ValidationError.errors()`) in the stack file's terms: its
    location as a stack key and pydantic's message, with the fix where one is known."""
    loc = [str(p) for p in err["loc"] if p != "[key]"]   # a mapping key: named already
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown key"
    message = _with_fix(err["type"], message, err.get("input"))
    path = "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in loc[1:])
    return Problem(stack_key(loc[0]) + path if loc else NAMESPACE, message)


# pydantic's wording for the commonest type errors, in the stack file's terms, with the fix.
_TYPE_FIXES = {
    "missing": "required; fix: add it (docs/reference/config.md)",
    "model_type": "must be a mapping (keys indented under it), not {shown}",
    "dict_type": "must be a mapping (keys indented under it), not {shown}",
    "list_type": "must be a list (`- item` lines or [a, b]), not {shown}",
    "int_parsing": "must be a whole number, not {shown}",
    "int_type": "must be a whole number, not {shown}",
    "int_from_float": "must be a whole number, not {shown}",
    "bool_parsing": "must be true or false, not {shown}",
    "bool_type": "must be true or false, not {shown}",
    "string_type": "must be text, not {shown}; quote it",
}


def _with_fix(kind: str, message: str, value: Any) -> str:
    """pydantic's message, or the stack-file wording with the fix where one is known."""
    template = _TYPE_FIXES.get(kind)
    if template is None:
        return message
    shown = f"the {type(value).__name__} {value!r}" if value is not None else "empty"
    return template.format(shown=shown)
