"""The runtime-binary record `gpuplane nodes capture` writes per node, and its reader.

A node's config files alone do not say whether the binaries they name (a runtime's
`BinaryName`) exist; the capture looks on the node and records it, so a later
`gpuplane containerd check --binaries FILE` on the copied files judges them instead of
leaving them unchecked. JSON: {"node": NAME, "binaries": {"/usr/sbin/runc": true, ...}}.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from gpuplane.containerd.errors import ConfigError


class BinariesRecord(BaseModel):
    """One node's record: node path -> whether a file is there."""

    model_config = ConfigDict(extra="forbid", strict=True)

    node: str
    binaries: dict[str, bool]


def record_name(node: str) -> str:
    """The record's file name in the capture's output folder."""
    return f"{node}.binaries.json"


def record_text(node: str, binaries: Mapping[str, bool]) -> str:
    return BinariesRecord(node=node, binaries=dict(sorted(binaries.items()))) \
        .model_dump_json(indent=2) + "\n"


def load_binaries(path: Path) -> dict[str, bool]:
    """The record's binaries. Raises ConfigError naming the file (and line) and the fix."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(str(path), f"not JSON: {exc.msg}", exc.lineno) from None
    try:
        record = BinariesRecord.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}"
                             for e in exc.errors())
        raise ConfigError(str(path), f"not a binaries record ({problems}); pass the "
                          "<node>.binaries.json that `gpuplane nodes capture` wrote") from None
    bad = [p for p in record.binaries if not p.startswith("/")]
    if bad:
        raise ConfigError(str(path), f"binaries: {', '.join(bad)}: not absolute node paths")
    return record.binaries


__all__ = ["BinariesRecord", "load_binaries", "record_name", "record_text"]
