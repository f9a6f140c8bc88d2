"""The policy config file (`--policy-pack-config`, as `pulumi preview` takes it), checked
before any policy runs.

Pulumi's own loader refuses a bad enforcement level; the offline plan used to crash on
one (a traceback, exit 1 — read by CI as a policy violation). Each problem here names
the file, the line of its key and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

LEVELS = ("mandatory", "advisory", "disabled")


class PackConfigError(ValueError):
    """The policy config is not usable; the message holds every problem, one per line."""


def _line(text: str, key: str) -> int:
    """The line of `"key"` in the JSON text (1 when it is not found)."""
    at = text.find(json.dumps(key))
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


def config_problems(data: Any, text: str, path: str,
                    policies: Iterable[str]) -> list[str]:
    """Every problem of a parsed policy config, as `file:line: key: message; fix`."""
    names = set(policies) | {"all"}
    if not isinstance(data, Mapping):
        return [f"{path}:1: expected a JSON object {{\"<policy name>\": LEVEL or "
                f"{{\"enforcementLevel\": LEVEL, ...}}}}; fix: wrap the entries in {{}}"]
    problems = []
    for name, entry in data.items():
        where = f"{path}:{_line(text, name)}: {name}"
        if name not in names:
            known = ", ".join(sorted(n for n in names if not n.endswith("-advisory")))
            problems.append(f"{where}: no such policy; fix: use one of {known} (or their "
                            "-advisory twins), or all")
            continue
        level = entry.get("enforcementLevel") if isinstance(entry, Mapping) else entry
        if isinstance(entry, Mapping) and "enforcementLevel" not in entry:
            continue   # properties only: the policy keeps its own level
        if not isinstance(level, str) or level not in LEVELS:
            problems.append(f"{where}: enforcement level {level!r} is not one of "
                            f"{', '.join(LEVELS)}; fix: write e.g. \"{name}\": \"advisory\"")
    return problems


def load_pack_config(path: Path, policies: Iterable[str]) -> dict[str, Any]:
    """The parsed config; PackConfigError naming file:line on anything unusable."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PackConfigError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}"
                              "; fix: give a UTF-8 JSON file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PackConfigError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}; fix: "
                              "correct the JSON there") from None
    problems = config_problems(data, text, str(path), policies)
    if problems:
        raise PackConfigError("\n".join(problems))
    return dict(data)


__all__ = ["LEVELS", "PackConfigError", "config_problems", "load_pack_config"]
