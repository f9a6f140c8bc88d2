"""What the plan's speed-ups must not change: masking copies only what it masks."""

from __future__ import annotations

import copy
from pathlib import Path

from gpuplane.cli.plan.report import SECRET_MASK, _masked


def test_masking_replaces_every_secret_and_leaves_the_registration_alone() -> None:
    inputs = {"connection": {"host": "h", "privateKey": "k"}, "stdin": "plan",
              "env": [{"name": "A", "value": "s"}, {"name": "B", "value": "t"}],
              "nested": {"deep": {"token": "x", "keep": 1}}}
    before = copy.deepcopy(inputs)
    out = _masked(inputs, ["connection.privateKey", "env.1.value", "nested.deep.token",
                           "missing.path", "stdin"])
    assert out == {"connection": {"host": "h", "privateKey": SECRET_MASK},
                   "stdin": SECRET_MASK,
                   "env": [{"name": "A", "value": "s"}, {"name": "B", "value": SECRET_MASK}],
                   "nested": {"deep": {"token": SECRET_MASK, "keep": 1}}}
    assert inputs == before, "the registration's inputs are not modified"
    assert _masked(inputs, ["connection"])["connection"] == SECRET_MASK


def test_options_are_copied_directly_and_the_same_under_the_plan_engine(monkeypatch) -> None:
    """`ResourceOptions.merge` copies options and hook bindings with `copy.copy` (three
    merges per node resource); the plan engine copies them without the generic
    `__reduce_ex__` path, to the same attributes, and puts the classes back after."""
    import copy

    import pulumi
    from pulumi.resource_hooks import ResourceHookBinding

    from gpuplane.cli.plan import options

    parent = pulumi.ComponentResource.__new__(pulumi.ComponentResource)
    opts = pulumi.ResourceOptions(parent=parent, protect=True, ignore_changes=["a"],
                                  additional_secret_outputs=["b"], version="1.2.3",
                                  hooks=ResourceHookBinding(before_create=[]))
    generic = copy.copy(opts)
    reconstructed: list[type] = []
    original = copy._reconstruct

    def counted(x, memo, func, args, *rest, **kw):
        reconstructed.append(type(x))
        return original(x, memo, func, args, *rest, **kw)

    monkeypatch.setattr(copy, "_reconstruct", counted)
    with options.quick_copies():
        quick = copy.copy(opts)
        merged = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=False))
    assert not reconstructed, "no generic copy of an option or a hook binding"
    assert type(quick) is type(generic) and quick is not opts
    assert vars(quick) == vars(generic)
    assert merged.protect is False and merged.parent is parent and merged.version == "1.2.3"
    assert "__copy__" not in vars(pulumi.ResourceOptions)
    assert "__copy__" not in vars(ResourceHookBinding)

    from gpuplane.cli.plan.run import plan_stack

    reconstructed.clear()
    plan = plan_stack("kubeadm-prod", Path(__file__).resolve().parents[2] / "stacks")
    generic_copies = [t for t in reconstructed
                      if t in (pulumi.ResourceOptions, ResourceHookBinding)]
    # Three merges of four copies per resource on the SDK's path; none while the program
    # runs under the plan engine (one options copy is made outside it).
    assert len(generic_copies) <= 1 < plan["summary"]["resources"], generic_copies
