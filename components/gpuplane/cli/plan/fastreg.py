"""A short registration path for the per-node resources of a plan (thousands of them).

The SDK registers every resource through a protobuf request, a hop to a thread pool, the
monitor and back, and resolves every output property from the response: a few
milliseconds each, which at 10,000 nodes (their node commands) is most of a plan.
The plan engine only records what the engine would see, so for simple custom resources
(plain inputs, input types, Outputs, file assets; among the options only `parent`,
`depends_on` and what the generated classes set themselves) this path computes the same
record directly: the inputs under their wire names with secrets unwrapped
(`secret_paths` remembers them) and the dependencies (expanded by the SDK's own helpers);
their outputs, which gpuplane does not read, stay unset.
tests/pure/test_plan_fastreg.py checks that it records exactly what the SDK path records for
every stack; anything else takes the SDK path.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import types
from collections.abc import Callable, Coroutine, Generator, Iterator
from contextlib import contextmanager
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from pulumi import Output, _types
from pulumi.asset import FileAsset
from pulumi.resource import CustomResource, Resource
from pulumi.runtime import rpc, settings
from pulumi.runtime._depends_on import _resolve_depends_on_urns
from pulumi.runtime.resource import _get_rpc_manager, resource_output

_ECHO_TYPES = frozenset({"command:remote:Command", "command:remote:CopyToRemote"})
# The rollout's barriers between batches (gpuplane.stack.barrier: one per batch of 10, a
# tenth of the node commands' count), whose only input is their serialized provider and
# whose URN alone is read.
ROLLOUT_BARRIER = "pulumi-python:dynamic/gpuplane:RolloutBarrier"
# The node commands: gpuplane reads none of their outputs, which stay unset (None) under
# the plan (an Output per property costs four futures and a task per resource).
FAST_TYPES = _ECHO_TYPES | {ROLLOUT_BARRIER}

# Options the short path understands; any other one set sends the resource the SDK way.
_DEFAULTS: dict[str, Any] = {
    "protect": None, "provider": None, "providers": None, "delete_before_replace": None,
    "ignore_changes": None, "aliases": None, "custom_timeouts": None,
    "transformations": None, "transforms": None, "urn": None, "id": None, "import_": None,
    "retain_on_delete": None, "deleted_with": None, "replace_with": None,
    "hide_diffs": None, "replacement_trigger": None, "env_var_mappings": None,
    "state_migrations": None,
}
# Set by the generated resource classes themselves: additional_secret_outputs is recorded,
# replace_on_changes is not part of the record, hooks must be empty.


_PENDING: set[asyncio.Future[Any]] = set()


class _Unsupported(Exception):
    """A value the short path does not serialize (never raised for gpuplane's inputs)."""


@contextmanager
def installed(record: Callable[..., None], make_urn: Callable[[str, str, str], str],
              after_each: Callable[[Any], None] | None = None) -> Iterator[None]:
    """Route FAST_TYPES registrations through :func:`_register` while the block runs.
    `record(urn, ty, name, parent, inputs, dependencies, property_dependencies,
    secret_paths, additional_secret_outputs)` stores the registration; `after_each(res)`
    runs after every registration, whichever path it took."""
    import pulumi.resource as resource_module

    original = resource_module.register_resource

    def register(res: Any, ty: str, name: str, custom: bool, remote: bool,
                 new_dependency: Any, props: Any, opts: Any, typ: Any = None,
                 package_ref: Any = None) -> None:
        if not _eligible(res, ty, custom, remote, opts, package_ref):
            original(res, ty, name, custom, remote, new_dependency, props, opts, typ,
                     package_ref)
        else:
            _register(res, ty, name, props, opts, typ, record, make_urn)
        if after_each is not None:
            after_each(res)

    resource_module.register_resource = register
    try:
        yield
    finally:
        resource_module.register_resource = original


def _eligible(res: Any, ty: str, custom: bool, remote: bool, opts: Any,
              package_ref: Any) -> bool:
    if ty not in FAST_TYPES or not custom or remote or package_ref is not None:
        return False
    if opts is None:
        return True
    if any(getattr(opts, key, None) not in (default, [], {}, False)
           for key, default in _DEFAULTS.items()):
        return False
    hooks = getattr(opts, "hooks", None)
    return hooks is None or not any(vars(hooks).values())


def _register(res: Any, ty: str, name: str, props: Any, opts: Any, typ: Any,
              record: Callable[..., None], make_urn: Callable[[str, str, str], str]) -> None:
    resolve_urn, res.__dict__["urn"] = resource_output(res)
    resolve_id, res.__dict__["id"] = resource_output(res)
    names = _wire_names(typ) if typ is not None else {}

    async def do_register() -> None:
        try:
            parent = opts.parent if opts is not None else None
            parent = parent or settings.get_root_resource()
            parent_urn = (_resolved_urn(parent) or await parent.urn.future()
                          if parent is not None else None) or ""
            dependencies: set[str] = set()
            depends_on = opts._depends_on_list() if opts is not None else None
            if depends_on and all(isinstance(d, Resource) for d in depends_on):
                # A plain list: what _resolve_depends_on_urns computes, without an Output
                # per entry (the expansion and its cycle check are the SDK's own).
                dependencies = set(await _expanded(set(depends_on), res))
            elif depends_on:
                dependencies = await _resolve_depends_on_urns(depends_on, from_resource=res)
            inputs: dict[str, Any] = {}
            secret_paths: list[str] = []
            property_dependencies: dict[str, list[str]] = {}
            for key in props:
                deps: set[Any] = set()
                wire = names.get(key, key)
                value = _plain_or_none(props[key])   # most inputs: no coroutine
                if value is _AWAIT:
                    value, _ = await _plain(props[key], deps, secret_paths, wire)
                if value is None:
                    continue
                inputs[wire] = value
                urns = list(await _expanded(deps, res)) if deps else []
                property_dependencies[wire] = urns
                dependencies |= set(urns)
            urn = make_urn(parent_urn, ty, name)
            extra = [names.get(k, k) for k in
                     (opts.additional_secret_outputs or [] if opts is not None else [])]
            record(urn, ty, name, parent_urn, inputs, list(dependencies), property_dependencies,
                   secret_paths, extra)
        except Exception as exn:
            resolve_urn(None, True, False, exn)
            resolve_id(None, True, False, exn)
            raise
        resolve_urn(urn, True, False, None)
        resolve_id(f"{name}-id", True, False, None)

    _run_now(do_register())


def _run_now(coro: Coroutine[Any, Any, None]) -> None:
    """Run a registration's coroutine to its end now, where it awaits nothing pending (what
    it awaits is nearly always resolved by then: its parent's URN, the batch before it):
    no task for it and its RPC wrapper, two per node command, nor the loop's turns to run
    them. An exception is the RPC manager's, as its wrapper would record it. Where the
    coroutine must wait, the rest of it becomes the RPC task the SDK would have made."""
    try:
        waiting = coro.send(None)
    except StopIteration:
        return
    except Exception as exn:   # what the SDK's RPC wrapper does with it
        manager = _get_rpc_manager()
        if manager.unhandled_exception is None:
            manager.unhandled_exception = exn
            manager.exception_traceback = exn.__traceback__
        return
    # Until a task waits on it, the future must not look awaited: another registration
    # may await it first (asyncio marks a future being awaited on the future itself).
    if asyncio.isfuture(waiting):
        waiting._asyncio_future_blocking = False

    async def rest() -> None:
        await _resumed(coro, waiting)

    # The RPC manager awaits it; the set only keeps a reference until it is done.
    task = asyncio.ensure_future(_get_rpc_manager().do_rpc("register resource", rest)())
    _PENDING.add(task)
    task.add_done_callback(_PENDING.discard)


@types.coroutine
def _resumed(coro: Coroutine[Any, Any, None], waiting: Any) -> Generator[Any, Any, None]:
    """`await` the rest of `coro`, which has already run up to yielding `waiting` (a future
    the task running this waits on), as `yield from` would delegate to it."""
    while True:
        if asyncio.isfuture(waiting):
            waiting._asyncio_future_blocking = True   # as its own __await__ left it
        try:
            received = yield waiting
        except BaseException as thrown:   # a cancellation: passed on, as yield from does
            try:
                waiting = coro.throw(thrown)
            except StopIteration:
                return
        else:
            try:
                waiting = coro.send(received)
            except StopIteration:
                return


async def _expanded(deps: set[Any], res: Any) -> dict[str, Any]:
    """`rpc._expand_dependencies(deps, from_resource=res)`, computed without a coroutine per
    dependency where the SDK's walk would not await anything: every dependency a custom
    resource (no children to expand) whose URN is already resolved. A node command has a
    dozen dependencies (its upload, the batch before it), 110,000 walks at 10,000 nodes.
    The cycle check is the SDK's own (`rpc.declare_dependency`, as installed); anything
    else, a cycle included, takes the SDK's path, which answers as it always does."""
    expanded: dict[str, Any] = {}
    for dep in deps:
        if not isinstance(dep, CustomResource):
            return await rpc._expand_dependencies(deps, from_resource=res)
        data = getattr(dep.urn, "_data", None)
        if data is None or not data.done() or data.cancelled() or \
                data.exception() is not None or not rpc.declare_dependency(res, dep):
            return await rpc._expand_dependencies(deps, from_resource=res)
        urn = data.result().value
        if urn and (type(urn) is str or not rpc.contains_unknowns(urn)):
            expanded[urn] = dep
    return expanded


def _resolved_urn(res: Any) -> str | None:
    """`await res.urn.future()` where the URN is resolved already (a batch's parent is,
    nearly always): a URN is a string, never unknown. None where it must be awaited."""
    data = getattr(res.urn, "_data", None)
    if data is None or not data.done() or data.cancelled() or data.exception() is not None:
        return None
    urn = data.result().value
    return urn if type(urn) is str else None


def file_asset(path: str) -> dict[str, str]:
    """A file asset as Pulumi's state records it: its path and the sha256 of its bytes (the
    engine hashes it; the text itself is never stored)."""
    stat = os.stat(path)
    return {"path": path, "hash": _sha256_of(path, stat.st_mtime_ns, stat.st_size)}


@lru_cache(maxsize=64)
def _sha256_of(path: str, mtime_ns: int, size: int) -> str:
    """The file's digest, read once per version of it: every node uploads the same agent.
    (`mtime_ns` and `size` are the cache key: a rewritten file is read again.)"""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@cache
def _wire_names(typ: type) -> dict[str, str]:
    return _types.input_type_py_to_pulumi_names(typ) if _types.is_input_type(typ) else {}


async def _plain(value: Any, deps: set[Any], secret_paths: list[str], path: str
                 ) -> tuple[Any, bool]:
    """(JSON-able value as the engine records it, secret?) — Outputs awaited, input types
    under their wire names, None dropped from mappings, integral floats as ints, file
    assets as path and hash. Only the outermost secret of a path is listed."""
    if not isinstance(value, Output):
        try:
            return _plain_sync(value), False
        except _NeedsAwait:
            pass
    secret = False
    while isinstance(value, Output):
        data = await value._data
        if not data.is_known:
            raise _Unsupported(f"{path}: unknown value")
        deps |= {r for r in data.resources if isinstance(r, Resource)}
        secret = secret or data.is_secret
        value = data.value
    if secret:
        secret_paths.append(path)
        inner: list[str] = []   # deeper secrets are inside this one
    else:
        inner = secret_paths
    if asyncio.isfuture(value) or asyncio.iscoroutine(value):
        raise _Unsupported(f"{path}: awaitable input")
    if isinstance(value, str | bool | int) or value is None:
        return value, secret
    if isinstance(value, float):
        return (int(value) if value.is_integer() else value), secret
    if isinstance(value, FileAsset):
        return file_asset(value.path), secret
    if _types.is_input_type(type(value)):
        value = _types.input_type_to_dict(value)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            plain, _ = await _plain(item, deps, inner, f"{path}.{key}")
            if plain is not None:
                out[key] = plain
        return out, secret
    if isinstance(value, list | tuple):
        items = [(await _plain(item, deps, inner, f"{path}.{i}"))[0]
                 for i, item in enumerate(value)]
        return items, secret
    raise _Unsupported(f"{path}: {type(value).__name__}")


class _NeedsAwait(Exception):
    """An Output inside a value: the async walker takes over."""


_AWAIT = object()


def _plain_or_none(value: Any) -> Any:
    """:func:`_plain_sync`'s value, or `_AWAIT` where :func:`_plain` must await it."""
    if isinstance(value, Output):
        return _AWAIT
    try:
        return _plain_sync(value)
    except _NeedsAwait:
        return _AWAIT


def _plain_sync(value: Any) -> Any:
    """:func:`_plain` for values without Outputs (most of a command's inputs): no coroutine per
    node of the tree."""
    if isinstance(value, str | bool | int) or value is None:
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            plain = _plain_sync(item)
            if plain is not None:
                out[key] = plain
        return out
    if isinstance(value, list | tuple):
        return [_plain_sync(item) for item in value]
    if isinstance(value, FileAsset):
        return file_asset(value.path)
    if _types.is_input_type(type(value)):
        return _plain_sync(_types.input_type_to_dict(value))
    raise _NeedsAwait


__all__ = ["FAST_TYPES", "installed"]
