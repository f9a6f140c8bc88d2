"""Run a stack's program in-process under Pulumi's mock engine and record every resource.

No CLI, no cluster, no credentials: resources are registered with a monitor that echoes
inputs as outputs (`preview=False`, so every `apply` runs) and remembers, per resource,
what the real engine would hand to a policy pack — type, name, parent, inputs,
dependencies, and which inputs are secret.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulumi.asset import FileAsset
from pulumi.runtime import mocks, rpc

from gpuplane.cli.plan import cycles, fastreg, known, options
from gpuplane.cli.plan.echo import provider_additions as _provider_additions
from gpuplane.cli.plan.fastreg import file_asset
from gpuplane.cli.plan.pump import Pump, inline_executor

_SECRET = rpc._special_secret_sig
_SIG = rpc._special_sig_key
_DYNAMIC_PROVIDER_KEY = "__provider"


@dataclass
class Registered:
    """One registered resource, as the engine would describe it."""

    urn: str
    type: str
    name: str
    custom: bool
    parent: str
    inputs: dict[str, Any]
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    secret_paths: list[str] = field(default_factory=list)
    protect: bool = False
    ignore_changes: list[str] = field(default_factory=list)
    delete_before_replace: bool | None = None
    additional_secret_outputs: list[str] = field(default_factory=list)
    provider: str = ""    # "<provider URN>::<id>" when the resource names its provider


# What the program logs (`pulumi.log`: every finding on GpuCluster) is in the report
# already; under mocks it would go to the root logger, i.e. stderr, a second time.
_QUIET = logging.getLogger("gpuplane.plan.program")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


class _EchoMocks(mocks.Mocks):
    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        state = dict(args.inputs)
        for key, value in _provider_additions(args.typ, args.name, state).items():
            if key == "metadata.name":
                state["metadata"] = {**state["metadata"], "name": value}
            else:
                state[key] = value
        return f"{args.name}-id", state

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[str, Any], list[Any] | None]:
        return {}, None


class _RecordingMonitor(mocks.MockMonitor):
    """The SDK's mock monitor, registering with one deserialisation instead of three: the
    response echoes the request's own protobuf (plus what a provider adds) rather than
    re-serialising the inputs."""

    def __init__(self, registered: list[Registered] | None = None) -> None:
        super().__init__(_EchoMocks())
        self.registered: list[Registered] = [] if registered is None else registered

    def RegisterResource(self, request: Any) -> Any:
        from google.protobuf import struct_pb2
        from pulumi.runtime.proto import resource_pb2
        from pulumi.runtime.sync_await import _ensure_event_loop

        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        _ensure_event_loop()   # deserialising resource references needs one
        inputs = rpc.deserialize_properties(request.object)
        outputs = request.object
        added = _provider_additions(request.type, request.name, inputs)
        if added:
            outputs = struct_pb2.Struct()
            outputs.CopyFrom(request.object)
            for key, value in added.items():
                if key == "metadata.name":
                    outputs.get_or_create_struct("metadata")["name"] = value
                else:
                    outputs[key] = value
        resource_id = f"{request.name}-id"
        self.resources[urn] = mocks.MockMonitor.ResourceRegistration(urn, resource_id, inputs)
        self._record(urn, request, inputs)
        return resource_pb2.RegisterResourceResponse(urn=urn, id=resource_id, object=outputs)

    def _record(self, urn: str, request: Any, inputs: dict[str, Any]) -> None:
        inputs = {k: v for k, v in inputs.items() if k != _DYNAMIC_PROVIDER_KEY}
        self.registered.append(Registered(
            urn=urn, type=request.type, name=request.name,
            custom=bool(request.custom), parent=request.parent,
            inputs=_plain(inputs), dependencies=list(request.dependencies),
            property_dependencies={k: list(v.urns)
                                   for k, v in request.propertyDependencies.items()},
            secret_paths=[p for p in _secret_paths(request.object, "")
                          if p.split(".")[0] != _DYNAMIC_PROVIDER_KEY],
            protect=bool(request.protect), ignore_changes=list(request.ignoreChanges),
            delete_before_replace=(request.deleteBeforeReplace
                                   if request.deleteBeforeReplaceDefined else None),
            additional_secret_outputs=list(request.additionalSecretOutputs),
            provider=request.provider,
        ))


    def record_plain(self, urn: str, typ: str, name: str, parent: str, inputs: dict[str, Any],
                     dependencies: list[str], property_dependencies: dict[str, list[str]],
                     secret_paths: list[str], additional_secret_outputs: list[str]) -> None:
        """A registration from the short path (gpuplane.cli.plan.fastreg), already plain."""
        self.resources[urn] = mocks.MockMonitor.ResourceRegistration(urn, f"{name}-id", inputs)
        if _DYNAMIC_PROVIDER_KEY in inputs:   # a dynamic resource (a rollout barrier)
            inputs = {k: v for k, v in inputs.items() if k != _DYNAMIC_PROVIDER_KEY}
        self.registered.append(Registered(
            urn=urn, type=typ, name=name, custom=True, parent=parent, inputs=inputs,
            dependencies=dependencies, property_dependencies=property_dependencies,
            secret_paths=secret_paths, additional_secret_outputs=additional_secret_outputs))


def _plain(value: Any) -> Any:
    """Inputs as JSON-able values, secrets unwrapped (`secret_paths` remembers them), numbers
    as numbers (the wire turns ints into floats)."""
    if isinstance(value, dict):
        if value.get(_SIG) == _SECRET:
            return _plain(value.get("value"))
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, FileAsset):
        return file_asset(value.path)
    return value


def _secret_paths(struct: Any, prefix: str) -> list[str]:
    """Dotted paths of the inputs the program marked secret (before deserialisation)."""
    from google.protobuf import struct_pb2

    out: list[str] = []
    items: Any
    if isinstance(struct, struct_pb2.Struct):
        if struct.fields.get(_SIG) is not None and struct[_SIG] == _SECRET:
            return [prefix or "."]
        items = ((k, struct.fields[k]) for k in struct.fields)
    elif isinstance(struct, struct_pb2.ListValue):
        items = ((str(i), v) for i, v in enumerate(struct.values))
    else:
        return out
    for key, value in items:
        path = f"{prefix}.{key}" if prefix else key
        kind = value.WhichOneof("kind")
        if kind == "struct_value":
            out += _secret_paths(value.struct_value, path)
        elif kind == "list_value":
            out += _secret_paths(value.list_value, path)
    return out


def run_program(program: Callable[[], Any], *, project: str, stack: str,
                config: dict[str, str], secret_keys: list[str],
                root_directory: Path | None = None,
                recorded: list[Registered] | None = None) -> tuple[Any, list[Registered]]:
    """Run `program` to completion under mocks; return its result and the registrations.
    `recorded`: a list the registrations are also appended to as they happen, so a caller
    has them when the program raises."""
    import pulumi
    from pulumi.runtime import settings
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

    # The loop first: `set_mocks` registers the root Stack, whose outputs are futures of
    # the current loop, and a caller (a test, an embedding program) may have cleared it.
    loop = _ensure_event_loop()
    monitor = _RecordingMonitor(recorded)
    settings.ROOT.set(None)
    pulumi.runtime.set_all_config({}, [])
    mocks.set_mocks(monitor.mocks, project=project, stack=stack, preview=False,
                    monitor=monitor, logger=_QUIET)
    pulumi.runtime.set_all_config(config, secret_keys)
    # What `pulumi.get_root_directory()` answers: the project root (Pulumi.yaml's dir).
    settings.SETTINGS.root_directory = str(root_directory or Path.cwd())
    settings.SETTINGS.rpc_manager.clear()
    settings.SETTINGS.outputs.clear()
    result: list[Any] = []
    pump = Pump()
    constructed: list[Any] = []

    def started() -> None:
        with pump.running():
            result.append(program())

    def registered(res: Any) -> None:
        constructed.append(res)
        pump.tick()

    try:
        with cycles.installed(cycles.DependencyOrder()), no_full_gc(), \
                _no_source_positions(), options.quick_copies(), options.quick_merges(), \
                inline_executor(loop), known.installed(), \
                fastreg.installed(monitor.record_plain, monitor.make_urn, registered):
            _sync_await(run_pulumi_func(started))
    finally:
        _in_program_order(monitor.registered, constructed)
    return result[0], monitor.registered


def _in_program_order(registered: list[Registered], constructed: list[Any]) -> None:
    """Sort the records in the order the program constructed their resources, each
    component's children right after it, not the order their registrations happened to
    finish in (which depends on when the loop ran). Children grouped under their parent:
    a component that makes some children later, from an apply (the node-agent rollout's
    batches, gpuplane.stack.node_pod), shows them in the same place however the loop ran."""
    order: dict[str, int] = {}
    for index, res in enumerate(constructed):
        data = res.__dict__.get("urn")
        future = getattr(data, "_data", None)
        if future is not None and future.done() and not future.cancelled() \
                and future.exception() is None:
            order.setdefault(future.result().value, index)
    registered.sort(key=lambda r: order.get(r.urn, len(order)))
    known = {r.urn for r in registered}
    children: dict[str, list[Registered]] = {}
    for r in registered:
        children.setdefault(r.parent if r.parent in known else "", []).append(r)
    tree: list[Registered] = []
    stack = list(reversed(children.get("", [])))
    while stack:
        r = stack.pop()
        tree.append(r)
        stack.extend(reversed(children.get(r.urn, [])))
    registered[:] = tree

@contextmanager
def _no_source_positions() -> Iterator[None]:
    """The SDK walks the Python stack for every resource to tell the engine where it was
    declared (for the Pulumi Cloud UI); a plan never shows that, so skip the walk."""
    from pulumi.runtime import resource
    from pulumi.runtime.proto import source_pb2

    original = resource._get_stack_trace
    resource._get_stack_trace = source_pb2.StackTrace
    try:
        yield
    finally:
        resource._get_stack_trace = original


@contextmanager
def no_full_gc() -> Iterator[None]:
    """Registration allocates millions of objects while the heap grows, and every full
    collection re-scans that heap (a third of a 1000-node plan's time). Young collections
    still free asyncio's short-lived cycles; full ones wait until the run is over."""
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], 1 << 30)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


__all__ = ["Registered", "no_full_gc", "run_program"]
