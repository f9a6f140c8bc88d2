"""`NodeLabelsProvider` against a recorded CoreV1Api: labels the listed nodes, reports the
ones not in the cluster yet and retries them, removes only the labels it set. (Under the
real engine and API server: tests/engine/test_pulumi_engine.py, the hami-shared stack.)"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kubernetes.client.exceptions import ApiException

from gpuplane.stack.node_labels import NodeLabelsProvider

ON = {"gpu": "on"}


class FakeCore:
    """Nodes as label dicts; `patch_node` merges like a JSON merge patch (None removes)."""

    def __init__(self, **nodes: dict[str, str]) -> None:
        self.nodes = {name: dict(labels) for name, labels in nodes.items()}
        self.patches: list[str] = []

    def _get(self, name: str) -> dict[str, str]:
        if name not in self.nodes:
            raise ApiException(status=404, reason="Not Found")
        return self.nodes[name]

    def read_node(self, name: str) -> Any:
        return SimpleNamespace(metadata=SimpleNamespace(labels=dict(self._get(name))))

    def patch_node(self, name: str, body: dict[str, Any]) -> None:
        labels = self._get(name)
        self.patches.append(name)
        for key, value in body["metadata"]["labels"].items():
            if value is None:
                labels.pop(key, None)
            else:
                labels[key] = value


def provider(core: FakeCore) -> NodeLabelsProvider:
    p = NodeLabelsProvider()
    p.core_factory = lambda kubeconfig, context: core
    return p


def props(*nodes: str, labels: dict[str, str] = ON) -> dict[str, Any]:
    return {"__provider": "opaque", "nodes": list(nodes), "labels": labels,
            "kubeconfig": None}


def test_create_labels_present_nodes_and_lists_the_missing() -> None:
    core = FakeCore(a={"pool": "x"}, b={})
    out = provider(core).create(props("a", "b", "later"))
    assert core.nodes == {"a": {"pool": "x", "gpu": "on"}, "b": {"gpu": "on"}}
    assert out.outs["labelled"] == ["a", "b"] and out.outs["missing"] == ["later"]
    assert "__provider" not in out.outs


def test_a_missing_node_makes_the_next_up_try_again() -> None:
    p = provider(FakeCore(a={}))
    old = {**props("a", "later"), "labelled": ["a"], "missing": ["later"]}
    assert p.diff("id", old, props("a", "later")).changes is True
    done = {**props("a"), "labelled": ["a"], "missing": []}
    assert p.diff("id", done, props("a")).changes is False
    assert p.diff("id", done, props("a", "b")).changes is True


def test_update_unlabels_dropped_nodes_and_dropped_keys_only_where_still_ours() -> None:
    core = FakeCore(a={"gpu": "on", "x": "1"}, b={"gpu": "on"}, c={"gpu": "mine"})
    old = {**props("a", "b", "c", labels={"gpu": "on", "x": "1"}),
           "labelled": ["a", "b", "c"], "missing": []}
    out = provider(core).update("id", old, props("a"))
    assert core.nodes == {"a": {"gpu": "on"}, "b": {}, "c": {"gpu": "mine"}}
    assert out.outs["labelled"] == ["a"]


def test_delete_removes_the_labels_and_skips_nodes_that_are_gone() -> None:
    core = FakeCore(a={"gpu": "on", "pool": "x"})
    provider(core).delete("id", {**props("a", "gone"), "labelled": ["a", "gone"]})
    assert core.nodes == {"a": {"pool": "x"}}
