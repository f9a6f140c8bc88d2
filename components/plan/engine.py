"""Run a stack's program in-process under Pulumi's mock engine and record every resource.

No CLI, no cluster, no credentials: resources are registered with a monitor that echoes
inputs as outputs (`preview=False`, so every `apply` runs) and remembers, per resource,
what the real engine would hand to a policy pack — type, name, parent, inputs,
dependencies, and which inputs are secret.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pulumi.runtime import mocks, rpc

_SECRET = rpc._special_secret_sig
_SIG = rpc._special_sig_key
_DYNAMIC_PROVIDER_KEY = "__provider"
AUTONAME_SUFFIX = "xxxxxxxx"


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


class _EchoMocks(mocks.Mocks):
    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        state = dict(args.inputs)
        if args.typ.startswith("kubernetes:") and isinstance(state.get("metadata"), dict):
            # The provider auto-names objects without metadata.name: <name>-<8 random
            # characters>. A fixed suffix keeps plans comparable.
            state["metadata"] = {"name": f"{args.name}-{AUTONAME_SUFFIX}",
                                 **state["metadata"]}
        if args.typ == "kubernetes:helm.sh/v3:Release":
            state.setdefault("status", {"status": "deployed"})
        return f"{args.name}-id", state

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[str, Any], list[Any] | None]:
        return {}, None


class _RecordingMonitor(mocks.MockMonitor):
    def __init__(self) -> None:
        super().__init__(_EchoMocks())
        self.registered: list[Registered] = []

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            return response
        inputs = rpc.deserialize_properties(request.object)
        inputs = {k: v for k, v in inputs.items() if k != _DYNAMIC_PROVIDER_KEY}
        self.registered.append(Registered(
            urn=response.urn, type=request.type, name=request.name,
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
        ))
        return response


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


class _CycleCheck:
    """Pulumi's dependency-cycle check, same answers, less work. The SDK walks the whole
    dependency closure of `to` for every dependency declared, with nested generators
    (O(depth) per step): quadratic in rollout batches and checks. A new dependency
    `frm -> to` closes a cycle only if `frm` is reachable from `to`, which needs some
    resource to depend on `frm` already; a resource nothing depends on yet (every freshly
    registered one) is answered at once, the rest by an iterative walk."""

    def __init__(self) -> None:
        self.targets: set[Any] = set()

    def install(self) -> None:
        from pulumi.runtime import resource_cycle_breaker as breaker

        original_add = breaker._add_dep

        def add_dep(frm: Any, to: Any) -> None:
            self.targets.add(to)
            original_add(frm, to)

        breaker._add_dep = add_dep
        breaker._reachable = self.reachable

    def reachable(self, from_resource: Any, to_resource: Any) -> bool:
        from pulumi.runtime import resource_cycle_breaker as breaker

        if to_resource is from_resource:
            return True
        if to_resource not in self.targets:
            return False
        seen: set[int] = set()
        stack = [from_resource]
        while stack:
            res = stack.pop()
            if res is to_resource:
                return True
            if id(res) not in seen:
                seen.add(id(res))
                stack.extend(breaker._deps(res))
        return False


def run_program(program: Callable[[], Any], *, project: str, stack: str,
                config: dict[str, str], secret_keys: list[str]) -> tuple[Any, list[Registered]]:
    """Run `program` to completion under mocks; return its result and the registrations."""
    import pulumi
    from pulumi.runtime import settings
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    _CycleCheck().install()
    monitor = _RecordingMonitor()
    settings.ROOT.set(None)
    pulumi.runtime.set_all_config({}, [])
    mocks.set_mocks(monitor.mocks, project=project, stack=stack, preview=False,
                    monitor=monitor)
    pulumi.runtime.set_all_config(config, secret_keys)
    settings.SETTINGS.rpc_manager.clear()
    settings.SETTINGS.outputs.clear()
    result: list[Any] = []
    _sync_await(run_pulumi_func(lambda: result.append(program())))
    return result[0], monitor.registered


__all__ = ["Registered", "run_program"]
