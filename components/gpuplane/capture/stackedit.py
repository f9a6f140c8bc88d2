"""Point a stack file's `baselineFiles` at captured copies, keeping its comments and order.

ruamel.yaml's round-trip mode keeps comments, key order, quoting and flow style; the
indentation is taken from the file itself (the settings under which an untouched load and
dump give back the same bytes), so only the lines about `baselineFiles` change.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from gpuplane.config import NAMESPACE

_INDENTS = ((2, 4, 2), (2, 2, 0), (4, 4, 2), (4, 6, 4), (2, 2, 2), (4, 4, 0))


def _null(representer: Any, _: None) -> Any:
    """None as `null` (ruamel's round trip writes nothing): `<node path>: null` in
    `baselineFiles` says the node has no such file."""
    return representer.represent_scalar("tag:yaml.org,2002:null", "null")


def _yaml(indent: tuple[int, int, int]) -> YAML:
    y = YAML()
    y.representer.add_representer(type(None), _null)
    y.preserve_quotes = True
    y.width = 4096
    y.indent(mapping=indent[0], sequence=indent[1], offset=indent[2])
    return y


def _dump(y: YAML, doc: Any) -> str:
    buf = io.StringIO()
    y.dump(doc, buf)
    return buf.getvalue()


def _round_tripper(text: str) -> YAML:
    for indent in _INDENTS:
        y = _yaml(indent)
        if _dump(y, y.load(text)) == text:
            return y
    return _yaml(_INDENTS[0])


def _set(parent: Any, key: str, files: Mapping[str, str | None]) -> None:
    """Set `key` to `files` (sorted), or remove it when empty; an equal value is left as
    it is, so a rerun writes the same bytes."""
    if not files:
        if key in parent:
            del parent[key]
        return
    wanted = dict(sorted(files.items()))
    if key in parent and dict(parent[key]) == wanted:
        return
    value = CommentedMap(wanted)
    if getattr(parent, "fa", None) is not None and parent.fa.flow_style():
        value.fa.set_flow_style()
    parent[key] = value


def updated_text(text: str, per_node: Mapping[int, Mapping[str, str | None]],
                 all_nodes: int) -> str:
    """The stack file with `baselineFiles` set for the captured nodes (index -> files).

    Every node captured with the same files: one `cluster.baselineFiles`, no per-node
    entries. Otherwise each captured node lists its own, and `cluster.baselineFiles` is
    kept only while some node was not captured (it still plans from it)."""
    y = _round_tripper(text)
    doc = y.load(text)
    config = doc["config"]
    cluster = config[f"{NAMESPACE}:cluster"]
    nodes = config[f"{NAMESPACE}:nodes"]
    values = [dict(v) for v in per_node.values()]
    if len(per_node) == all_nodes and all(v == values[0] for v in values):
        _set(cluster, "baselineFiles", values[0])
        for node in nodes:
            _set(node, "baselineFiles", {})
    else:
        if len(per_node) == all_nodes:
            _set(cluster, "baselineFiles", {})
        for index, files in per_node.items():
            _set(nodes[index], "baselineFiles", files)
    return _dump(y, doc)


def write_atomically(path: Path, text: str) -> bool:
    """Replace `path` with `text` in one step (a reader sees the old or the new file, never
    half of one); False, and nothing written, when the bytes are already those."""
    data = text.encode("utf-8")
    if path.read_bytes() == data:
        return False
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


__all__ = ["updated_text", "write_atomically"]
