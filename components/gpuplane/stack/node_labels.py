"""`NodeLabels`: the same labels on a list of nodes, from one resource.

HAMi's device plugin DaemonSet selects nodes by label (`gpu=on`). One `NodePatch` per
node kept the whole Node object the API server returns in the state: 5.3 KB a node on a
bare test node, far more on a real one (its status lists every image). One resource for
the whole list keeps the node names only (tens of bytes a node) and labels a fleet in one
pass instead of one engine step per node.

A node that is not in the cluster yet (it joins later) is not an error: it is listed in
`missing`, the component warns, and the next `pulumi up` tries again. Labels are removed
from nodes dropped from the list and at `pulumi destroy`, but only where they still hold
the value this resource set.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, UpdateResult

from gpuplane.kube.provider import KubeResourceProvider

PROVIDER_KEY = "__provider"
_OUTPUT_KEYS = frozenset({"labelled", "missing"})


class NodeLabelsProvider(KubeResourceProvider):
    """Patches `metadata.labels` of each node with the official kubernetes client."""

    # Test seam: None means the real client (see `core()`); kept a plain attribute so dill
    # can pickle the provider.
    core_factory: Callable[[str | None, str | None], Any] | None = None

    def core(self, props: Mapping[str, Any]) -> Any:
        """A `CoreV1Api` for the cluster the stack deploys to."""
        kubeconfig = self.kubeconfig(props)
        if self.core_factory is not None:
            return self.core_factory(kubeconfig, self.stack_context)
        from kubernetes import client

        from gpuplane.kube.credentials import api_client

        return client.CoreV1Api(api_client(kubeconfig, self.stack_context))

    def _apply(self, props: Mapping[str, Any],
               old: Mapping[str, Any] | None = None) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        core = self.core(props)
        labels = dict(props["labels"])
        nodes = [str(n) for n in props["nodes"]]
        if old is not None:
            dropped = [n for n in old.get("labelled") or [] if n not in nodes]
            _unlabel(core, dropped, dict(old["labels"]))
            gone = {k: v for k, v in dict(old["labels"]).items() if k not in labels}
            _unlabel(core, [n for n in old.get("labelled") or [] if n in nodes], gone)
        labelled, missing = [], []
        for node in nodes:
            try:
                core.patch_node(node, {"metadata": {"labels": labels}})
                labelled.append(node)
            except ApiException as error:
                if error.status != 404:
                    raise
                missing.append(node)
        inputs = {k: v for k, v in props.items() if k != PROVIDER_KEY and k not in _OUTPUT_KEYS}
        return {**inputs, "labelled": labelled, "missing": missing}

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_="node-labels", outs=self._apply(props))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """The node list or the labels changed, or a node was missing last time."""
        changed = any(olds.get(k) != news.get(k) for k in ("nodes", "labels"))
        return DiffResult(changes=changed or bool(olds.get("missing")))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self._apply(news, olds))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        _unlabel(self.core(props), list(props.get("labelled") or []), dict(props["labels"]))


def _unlabel(core: Any, nodes: Sequence[str], labels: Mapping[str, str]) -> None:
    """Remove `labels` from `nodes` where they still have this value (a node that is gone
    has nothing to remove)."""
    from kubernetes.client.exceptions import ApiException

    for node in nodes if labels else ():
        try:
            current = core.read_node(node).metadata.labels or {}
        except ApiException as error:
            if error.status != 404:
                raise
            continue
        ours = {k: None for k, v in labels.items() if current.get(k) == v}
        if ours:
            core.patch_node(node, {"metadata": {"labels": ours}})


class NodeLabels(pulumi.dynamic.Resource, module="gpuplane", name="NodeLabels"):
    """`labels` on every node of `nodes`; `missing` lists those not in the cluster yet."""

    labelled: pulumi.Output[list[str]]
    missing: pulumi.Output[list[str]]

    def __init__(self, name: str, *, nodes: Sequence[str], labels: Mapping[str, str],
                 kubeconfig: pulumi.Input[str] | None = None,
                 opts: pulumi.ResourceOptions | None = None,
                 provider: NodeLabelsProvider | None = None):
        props = {"nodes": list(nodes), "labels": dict(labels), "kubeconfig": kubeconfig,
                 "labelled": None, "missing": None}
        super().__init__(provider or NodeLabelsProvider(), name, props,
                         pulumi.ResourceOptions.merge(
                             opts or pulumi.ResourceOptions(),
                             pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])))

        def warn(missing: list[str] | None) -> None:
            if missing:
                pulumi.log.warn(f"nodes not in the cluster yet, not labelled {dict(labels)}: "
                                f"{', '.join(missing)}; the next `pulumi up` labels them",
                                resource=self)

        self.missing.apply(warn)


__all__ = ["NodeLabels", "NodeLabelsProvider"]
