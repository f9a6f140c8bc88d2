"""The plan engine's `ResourceOptions` copies and merges (gpuplane.cli.plan.options) give
exactly the SDK's options, and plans are the same with and without them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pulumi.resource_hooks import ResourceHookBinding
from test_plan_pump import _fleet
from test_stacks import STACKS

from gpuplane.cli.plan import options
from gpuplane.cli.plan.run import plan_stack

SDK_MERGE = pulumi.ResourceOptions.merge


# Resources for `depends_on` (the SDK checks the type), never registered.
RESOURCES = [pulumi.CustomResource.__new__(pulumi.CustomResource) for _ in range(2)]
LIST = st.one_of(st.none(), st.lists(st.sampled_from(["a", "b", "c"]), max_size=3))
SCALAR = st.one_of(st.none(), st.booleans(), st.text(max_size=3), st.just(RESOURCES[0]))
DEPENDS_ON = st.one_of(st.none(), st.sampled_from(RESOURCES),
                       st.lists(st.sampled_from(RESOURCES), max_size=2),
                       st.lists(st.sampled_from(RESOURCES), max_size=2).map(tuple))
HOOKS = st.one_of(st.none(), st.builds(
    lambda lists: ResourceHookBinding(**lists),
    st.fixed_dictionaries({key: LIST for key in options.HOOK_LISTS})))
OPTIONS = st.one_of(st.none(), st.builds(
    lambda lists, scalars, depends_on, hooks: pulumi.ResourceOptions(
        **lists, **scalars, depends_on=depends_on, hooks=hooks),
    st.fixed_dictionaries({key: LIST for key in options.LISTS}),
    st.fixed_dictionaries({key: SCALAR for key in options.SCALARS}),
    DEPENDS_ON, HOOKS))


def _described(opts: pulumi.ResourceOptions, first: Any, second: Any) -> dict[str, Any]:
    """Every attribute's value, and for lists which input list (if any) it is."""
    out: dict[str, Any] = {}
    for key, value in vars(opts).items():
        if isinstance(value, ResourceHookBinding):
            value = vars(value)
        shared = ("first" if first is not None and value is vars(first)[key]
                  else "second" if second is not None and value is vars(second)[key]
                  else None) if isinstance(value, list) else None
        out[key] = (value, shared)
    return out


@settings(max_examples=400, deadline=None)
@given(OPTIONS, OPTIONS)
def test_the_short_merge_gives_the_sdks_options(first: Any, second: Any) -> None:
    before = [copy.copy(vars(o)) if o is not None else None for o in (first, second)]
    expected = SDK_MERGE(first, second)
    merged = options.merge(first, second)
    assert type(merged) is pulumi.ResourceOptions
    assert merged is not first and merged is not second
    assert _described(merged, first, second) == _described(expected, first, second)
    assert merged.hooks is not None
    assert all(merged.hooks is not o.hooks for o in (first, second) if o is not None)
    assert [vars(o) if o is not None else None for o in (first, second)] == before


def test_what_the_short_merge_does_not_cover_goes_the_sdks_way() -> None:
    provider = pulumi.ProviderResource.__new__(pulumi.ProviderResource)
    provider.package = "kubernetes"
    with_providers = pulumi.ResourceOptions(providers=[provider], protect=True)
    merged = options.merge(with_providers, pulumi.ResourceOptions(version="1"))
    assert merged.providers == {"kubernetes": provider} and merged.version == "1"

    class Mine(pulumi.ResourceOptions):
        pass

    with pytest.raises(TypeError):
        options.merge(pulumi.ResourceOptions(), object())   # type: ignore[arg-type]
    mine = options.merge(Mine(protect=True), None)
    assert type(mine) is Mine and mine.protect is True


def test_the_merge_is_installed_for_the_program_only() -> None:
    opts = pulumi.ResourceOptions(protect=True)
    with options.quick_merges():
        assert pulumi.ResourceOptions.merge is options.merge
        assert opts.merge(pulumi.ResourceOptions(version="2")).version == "2"
    assert vars(pulumi.ResourceOptions)["merge"] is SDK_MERGE


@pytest.mark.parametrize("access", ["ssh", "pod"])
def test_a_fleet_plans_the_same_with_and_without_it(
        access: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "Pulumi.fleet.yaml").write_text(yaml.safe_dump(_fleet(30, access)))
    calls: list[str] = []
    short, sdk = options.merge, options._SDK_MERGE
    monkeypatch.setattr(options, "merge", lambda a, b: calls.append("merge") or short(a, b))
    monkeypatch.setattr(options, "_SDK_MERGE", lambda a, b: calls.append("sdk") or sdk(a, b))
    with_it = json.dumps(plan_stack("fleet", tmp_path), sort_keys=True)
    assert calls.count("merge") >= 30 > calls.count("sdk"), "the program's merges are short"
    monkeypatch.setattr(options, "quick_merges", _not_installed)
    assert with_it == json.dumps(plan_stack("fleet", tmp_path), sort_keys=True)


@pytest.mark.parametrize("name", ["kubeadm-prod", "microk8s-edge", "rke2-lab"])
def test_a_bundled_stack_plans_the_same_with_and_without_it(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with_it = json.dumps(plan_stack(name, STACKS), sort_keys=True)
    monkeypatch.setattr(options, "quick_merges", _not_installed)
    assert with_it == json.dumps(plan_stack(name, STACKS), sort_keys=True)


def _not_installed() -> Any:
    import contextlib
    return contextlib.nullcontext()
