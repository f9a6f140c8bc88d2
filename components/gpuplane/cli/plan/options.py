"""`ResourceOptions` copies and merges, as the SDK does them, without its generic paths.

Every generated resource class (`pulumi_command`'s, `pulumi_kubernetes`') merges its
options three times (its defaults, its secret outputs, its replace-on-changes), and each
`ResourceOptions.merge` (pulumi 3.260.0, pulumi/resource.py) copies both options and two
hook bindings with `copy.copy`, runs `_map2_input` over two `depends_on` lists and
rebuilds `providers` twice: at 10,000 nodes a tenth of a plan's program, for options that
are plain attribute bags.

:func:`quick_copies` copies those bags directly; :func:`quick_merges` merges them
directly where every attribute is one the SDK's merge treats as data (`providers` unset,
`depends_on` not an Output or awaitable, exact classes, the attribute set of 3.260.0)
and hands every other call to the SDK. tests/pure/test_plan_options.py checks, with
hypothesis, that both merges give the same attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from inspect import isawaitable
from typing import Any

from pulumi import Output
from pulumi.resource import ResourceOptions
from pulumi.resource_hooks import ResourceHookBinding

# What `ResourceOptions.merge` does per attribute (pulumi/resource.py@v3.260.0): lists are
# concatenated (`_merge_lists`: one side when the other is None), scalars are replaced
# when the second side sets them; `providers`, `depends_on` and `hooks` are special.
LISTS = ("ignore_changes", "replace_on_changes", "aliases", "additional_secret_outputs",
         "transformations", "transforms", "replace_with", "hide_diffs")
SCALARS = ("parent", "protect", "provider", "delete_before_replace", "version",
           "plugin_download_url", "custom_timeouts", "id", "import_", "urn",
           "replacement_trigger", "retain_on_delete", "deleted_with",
           "env_var_mappings")
SPECIAL = ("providers", "depends_on", "hooks")
HOOK_LISTS = ("before_create", "after_create", "before_update", "after_update",
              "before_delete", "after_delete", "on_error")


def _attributes(cls: type) -> frozenset[str]:
    return frozenset(vars(cls()))


@contextmanager
def quick_copies() -> Iterator[None]:
    """`copy.copy` of an option or a hook binding makes a new instance of the same class
    with the original's `__dict__`: its generic path (`__reduce_ex__`,
    `copyreg.__newobj__`, `copy._reconstruct`) was a twentieth of a 10,000-node plan.
    Both classes are plain (no `__slots__`, no `__getstate__`/`__setstate__`), so that
    is done here directly; a class that defines any copy hook keeps its own."""
    classes: list[Any] = [c for c in (ResourceOptions, ResourceHookBinding)
                          if not any(k in vars(c) for k in _COPY_HOOKS)]
    for cls in classes:
        cls.__copy__ = _shallow_copy
    try:
        yield
    finally:
        for cls in classes:
            del cls.__copy__


_COPY_HOOKS = ("__copy__", "__slots__", "__reduce__", "__reduce_ex__", "__getstate__",
               "__setstate__")


def _shallow_copy(self: Any) -> Any:
    cls: Any = type(self)
    new = cls.__new__(cls)
    new.__dict__.update(self.__dict__)
    return new


def _depends_on_list(value: Any) -> list[Any]:
    """`ResourceOptions._depends_on_list` for a value that is not an Output."""
    if value is None:
        return []
    return list(value) if isinstance(value, Sequence) else [value]


def _hooks(value: Any) -> dict[str, Any] | None:
    if value is None:
        return _EMPTY_HOOKS
    if type(value) is not ResourceHookBinding or not vars(value).keys() >= _HOOK_ATTRIBUTES:
        return None
    return vars(value)


def _options(value: Any) -> dict[str, Any] | None:
    if value is None:
        return _EMPTY_OPTIONS
    if type(value) is not ResourceOptions:
        return None
    data: dict[str, Any] = value.__dict__
    if not data.keys() >= _OPTION_ATTRIBUTES or data["providers"] is not None:
        return None
    depends_on = data["depends_on"]
    if isinstance(depends_on, Output) or isawaitable(depends_on):
        return None
    return data


def merge(opts1: Any, opts2: Any) -> ResourceOptions:
    """`ResourceOptions.merge(opts1, opts2)`: the same new options, the same attributes."""
    dest = _options(opts1)
    source = _options(opts2)
    hooks1 = None if dest is None else _hooks(dest["hooks"])
    hooks2 = None if source is None else _hooks(source["hooks"])
    if dest is None or source is None or hooks1 is None or hooks2 is None:
        return _SDK_MERGE(opts1, opts2)
    out: Any = _merged(ResourceOptions, dest, source, LISTS)
    merged = out.__dict__
    for key in SCALARS:
        second = source[key]
        if second is not None:
            merged[key] = second
    merged["depends_on"] = (_depends_on_list(dest["depends_on"])
                            + _depends_on_list(source["depends_on"]))
    merged["hooks"] = _merged(ResourceHookBinding, hooks1, hooks2, HOOK_LISTS)
    return out


def _merged(cls: Any, first: dict[str, Any], second: dict[str, Any],
            lists: tuple[str, ...]) -> Any:
    """A new `cls` with `first`'s attributes and each of `lists` as `_merge_lists` joins
    them: the second side where the first is None, the first where the second is."""
    out: Any = cls.__new__(cls)
    data = out.__dict__
    data.update(first)
    for key in lists:
        tail = second[key]
        if tail is not None:
            head = first[key]
            data[key] = tail if head is None else head + tail
    return out


_SDK_MERGE: Callable[[Any, Any], ResourceOptions] = ResourceOptions.merge
_OPTION_ATTRIBUTES = _attributes(ResourceOptions)
_HOOK_ATTRIBUTES = _attributes(ResourceHookBinding)
_EMPTY_OPTIONS: dict[str, Any] = dict(vars(ResourceOptions()))
_EMPTY_HOOKS: dict[str, Any] = dict(vars(ResourceHookBinding()))
# The short path covers exactly the attributes this SDK has; another SDK merges its way.
_COVERED = (frozenset(LISTS + SCALARS + SPECIAL) == _OPTION_ATTRIBUTES
            and frozenset(HOOK_LISTS) == _HOOK_ATTRIBUTES)


@contextmanager
def quick_merges() -> Iterator[None]:
    """`ResourceOptions.merge` (static or bound: `a.merge(b)`) answered by :func:`merge`
    while the program runs; the SDK's own merge again after."""
    sdks = getattr(vars(ResourceOptions).get("merge"), "__module__", None) == "pulumi.resource"
    if not _COVERED or not sdks:
        yield
        return
    original = vars(ResourceOptions)["merge"]
    ResourceOptions.merge = merge   # type: ignore[method-assign]
    try:
        yield
    finally:
        ResourceOptions.merge = original   # type: ignore[method-assign]


__all__ = ["merge", "quick_copies", "quick_merges"]
