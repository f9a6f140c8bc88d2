"""The plan engine's cycle check gives the Pulumi SDK's answers (differential, generated
edge sequences), and is only swapped in while a plan runs."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulumi.runtime import resource_cycle_breaker as breaker
from pulumi.runtime import rpc

from gpuplane.cli.plan import cycles


class _Res:
    """Stands in for a Resource: the SDK's check only needs identity and an attribute."""


edges = st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=80)


@settings(max_examples=300, deadline=None)
@given(edges)
def test_same_answers_as_the_sdk(pairs: list[tuple[int, int]]) -> None:
    sdk_nodes = [_Res() for _ in range(12)]
    ours_nodes = [_Res() for _ in range(12)]
    order = cycles.DependencyOrder()
    for frm, to in pairs:
        want = breaker.declare_dependency(sdk_nodes[frm], sdk_nodes[to])
        assert order.declare(ours_nodes[frm], ours_nodes[to]) == want, (frm, to)
    # The order it keeps is topological: every dependency sits below its dependent.
    for frm, deps in order.deps.items():
        assert all(order.position[d] < order.position[frm] for d in deps)


def test_a_chain_of_batches_closing_a_cycle_is_refused() -> None:
    batches = [[_Res() for _ in range(3)] for _ in range(4)]
    order = cycles.DependencyOrder()
    for earlier, later in itertools.pairwise(batches):
        for node in later:
            for dep in earlier:
                assert order.declare(node, dep)
    assert not order.declare(batches[0][0], batches[-1][2])   # would close a cycle
    assert not order.declare(batches[1][1], batches[1][1])    # a resource on itself
    assert order.declare(batches[0][0], _Res())               # a fresh one is fine


def test_installed_only_while_the_block_runs() -> None:
    original = rpc.declare_dependency
    order = cycles.DependencyOrder()
    a, b = _Res(), _Res()
    with cycles.installed(order):
        assert rpc.declare_dependency is not original
        assert rpc.declare_dependency(a, b)          # routed through `order`
        assert not rpc.declare_dependency(b, a)      # which refuses the cycle
    assert order.deps == {a: {b}}
    assert rpc.declare_dependency is original
    with pytest.raises(RuntimeError), cycles.installed(order):
        raise RuntimeError("program failed")
    assert rpc.declare_dependency is original
