"""The plan engine's `Output.secret` for known input types (gpuplane.cli.plan.known) resolves to
exactly what the SDK's chain resolves to, and plans are the same with and without it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pulumi.output
import pulumi_command as command
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pulumi import Output
from pulumi.output import _OutputData
from test_plan_pump import _fleet
from test_stacks import STACKS

from gpuplane.cli.plan import known
from gpuplane.cli.plan.run import plan_stack

SCALARS = st.one_of(st.none(), st.text(max_size=8), st.integers(-5, 70000), st.booleans(),
                    st.floats(allow_nan=False, allow_infinity=False))
# An Output field: (value, known?, secret?, resources, resolved yet?)
OUTPUTS = st.tuples(st.one_of(SCALARS, st.lists(st.text(max_size=3), max_size=2)),
                    st.booleans(), st.booleans(),
                    st.frozensets(st.sampled_from(["res-a", "res-b"])), st.booleans())
FIELDS = st.one_of(SCALARS, OUTPUTS)


def _output(spec: tuple[Any, bool, bool, frozenset[str], bool]) -> Output[Any]:
    value, is_known, secret, resources, resolved = spec
    data = _OutputData(resources=set(resources), value=value, is_known=is_known,
                       is_secret=secret)
    if resolved:
        future: asyncio.Future[Any] = asyncio.Future()
        future.set_result(data)
        return Output._from_data(future)

    async def later() -> Any:
        await asyncio.sleep(0)
        return data
    return Output._from_data(later())


def _resolved(out: Output[Any]) -> tuple[Any, ...]:
    data = asyncio.get_event_loop().run_until_complete(out._data)
    value = vars(data.value) if data.is_known else data.value
    return value, data.is_known, data.is_secret, data.resources


@settings(max_examples=300, deadline=None)
@given(host=FIELDS, user=FIELDS, port=FIELDS, key=FIELDS)
def test_the_short_way_resolves_to_what_the_sdk_resolves_to(host: Any, user: Any, port: Any,
                                                            key: Any) -> None:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        def args() -> command.remote.ConnectionArgs:
            fields = [_output(f) if isinstance(f, tuple) else f for f in (host, user, port, key)]
            return command.remote.ConnectionArgs(host=fields[0], user=fields[1],
                                                 port=fields[2], private_key=fields[3])

        sdk = Output.secret(args())
        short = known.known_secret(args())
        specs = [f for f in (host, user, port, key) if isinstance(f, tuple)]
        takes_it = all(s[1] and s[4] and not isinstance(s[0], list) for s in specs)
        assert (short is not None) == takes_it
        if short is not None:
            assert _resolved(short) == _resolved(sdk)
        else:
            _resolved(sdk)   # the SDK's chain is left to run on its own
    finally:
        loop.close()


def test_values_that_are_not_input_types_go_the_sdks_way() -> None:
    asyncio.set_event_loop(asyncio.new_event_loop())
    assert known.known_secret("key") is None
    assert known.known_secret({"host": "a"}) is None
    assert known.known_secret(["a"]) is None


@pytest.mark.parametrize("access", ["ssh", "pod"])
def test_a_fleet_plans_the_same_with_and_without_it(
        access: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "Pulumi.fleet.yaml").write_text(yaml.safe_dump(_fleet(30, access)))
    with_it = json.dumps(plan_stack("fleet", tmp_path), sort_keys=True)
    monkeypatch.setattr(known, "known_secret", lambda val: None)
    assert with_it == json.dumps(plan_stack("fleet", tmp_path), sort_keys=True)


@pytest.mark.parametrize("name", ["kubeadm-prod", "microk8s-edge", "rke2-lab"])
def test_a_stack_with_node_commands_plans_the_same_with_and_without_it(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with_it = json.dumps(plan_stack(name, STACKS), sort_keys=True)
    monkeypatch.setattr(known, "known_secret", lambda val: None)
    assert with_it == json.dumps(plan_stack(name, STACKS), sort_keys=True)


def test_the_node_connections_take_the_short_way(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[bool] = []
    short = known.known_secret
    monkeypatch.setattr(known, "known_secret",
                        lambda val: taken.append(short(val) is not None) or short(val))
    (tmp_path / "Pulumi.fleet.yaml").write_text(yaml.safe_dump(_fleet(40, "ssh")))
    plan_stack("fleet", tmp_path)
    # Two resources per node; only the first few, before the key is resolved, cannot.
    assert taken.count(True) >= 70, taken


VALUES = st.recursive(
    st.one_of(SCALARS, st.just(pulumi.output.UNKNOWN)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=2), inner, max_size=3)),
    max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_contains_unknowns_answers_as_the_sdk_does(value: Any) -> None:
    assert known.contains_unknowns(value) == pulumi.output.contains_unknowns(value)


def test_contains_unknowns_is_the_short_one_in_the_block_only() -> None:
    sdk = pulumi.output.contains_unknowns
    with known.installed():
        assert pulumi.output.contains_unknowns is known.contains_unknowns
    assert pulumi.output.contains_unknowns is sdk
