"""docs/reference/config.md: every `gpuplane:*` key from the stack config's pydantic models
(`gpuplane.config.StackConfig`): its type and bounds from the annotation, its default from
the field, its description from the field's docstring (the models set
`use_attribute_docstrings`). A key added, renamed or re-described in the code changes the
page, and tests/pure/test_docs.py fails until the page is regenerated."""

from __future__ import annotations

import enum
import inspect
import types
import typing
from collections.abc import Iterator
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from docgen.md import header, prose, table, value

PAGE = "config.md"


def pages() -> dict[str, str]:
    from gpuplane.config import NAMESPACE, StackConfig

    parts = [header("components/gpuplane/config/"),
             "# Stack config reference (`gpuplane:*`)\n\n",
             prose(inspect.cleandoc(StackConfig.__doc__ or "")), "\n\n"]
    for name, field in StackConfig.model_fields.items():
        key = field.alias or name
        parts.append(f"## `{NAMESPACE}:{key}`\n\n")
        if _section(field.annotation)[0] is not None:   # a plain key's row says it all
            parts.append(prose(field.description or "") + "\n\n")
        rows = [(f"`{k}`", kind, default, prose(about, cell=True))
                for k, kind, default, about in _rows(key, field)]
        parts.append(table(("key", "type", "default", "meaning"), rows) + "\n")
    return {PAGE: "".join(parts).rstrip() + "\n"}


def _rows(key: str, field: FieldInfo, top: bool = True) -> Iterator[tuple[str, str, str, str]]:
    """The key's own row (a top-level section has its heading instead), then its sub-keys'
    rows when it is a section (`cluster.*`), a list of sections (`nodes[].*`) or a
    mapping of names to sections (`sharing.pools.<name>.*`)."""
    model, many = _section(field.annotation)
    if model is None or not top:
        yield key, _kind(field.annotation, field.metadata), _default(field), \
            field.description or ""
    if model is None:
        model = _named_sections(field.annotation)
        if model is not None:
            for name, sub in model.model_fields.items():
                yield from _rows(f"{key}.<name>.{sub.alias or name}", sub, top=False)
    elif model is not None:
        prefix = f"{key}[]." if many else f"{key}."
        for name, sub in model.model_fields.items():
            yield from _rows(prefix + (sub.alias or name), sub, top=False)


def _section(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """(the model, whether it is a list of them) for a section-typed annotation."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is list:
        inner, _ = _section(args[0])
        return inner, inner is not None
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return _section(args[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def _named_sections(annotation: Any) -> type[BaseModel] | None:
    """The model of a `dict[str, <section>]` key (e.g. `sharing.pools`), else None."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is dict and len(args) == 2:
        return _section(args[1])[0]
    return None


def _kind(annotation: Any, metadata: list[Any]) -> str:
    """The values a key takes, as a stack file writes them."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_kind(a, metadata) for a in args if a is not type(None))
    if origin is typing.Literal:
        return ", ".join(value(a) for a in args)
    if origin is typing.Annotated:
        return _kind(args[0], [*metadata, *args[1:]])
    if origin is list:
        return f"list of {_kind(args[0], [])}"
    if origin is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return ", ".join(value(m.value) for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    names = {bool: "`true`, `false`", int: "integer", float: "number", str: "text"}
    return names.get(annotation, str(annotation)) + _bounds(metadata)


_BOUNDS = ((annotated_types.Ge, "ge", "≥"), (annotated_types.Gt, "gt", ">"),
           (annotated_types.Le, "le", "≤"), (annotated_types.Lt, "lt", "<"))


def _bounds(metadata: list[Any]) -> str:
    found = [f"{word} {getattr(m, attr)}" for m in metadata
             for kind, attr, word in _BOUNDS if isinstance(m, kind)]
    return f" ({', '.join(found)})" if found else ""


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    default = field.get_default(call_default_factory=True)
    if default is None:
        return "unset"
    if isinstance(default, BaseModel):
        return "—"
    if isinstance(default, enum.Enum):
        default = default.value
    return value(default)
