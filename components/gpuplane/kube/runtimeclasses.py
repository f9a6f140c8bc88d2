"""The cluster's RuntimeClasses and the handlers they name: the runtimes pods are run with,
which `gpuplane containerd check --runtime-classes-from-cluster` judges as used."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuplane.kube.client import ClusterClient, CollectError, get_required

RUNTIME_CLASSES = "/apis/node.k8s.io/v1/runtimeclasses"
# RuntimeClass.handler is a DNS label (k8s.io/api node/v1 RuntimeClass: "must be lowercase
# and conform to the DNS Label (RFC 1123) requirements").
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class RuntimeClassHandler:
    """One RuntimeClass (None: a handler named by hand) and its CRI handler."""

    name: str | None
    handler: str


def handler_error(handler: str) -> str | None:
    """Why `handler` cannot be a RuntimeClass handler, or None."""
    if not handler:
        return "a handler name may not be empty"
    if len(handler) > 63 or not _DNS_LABEL.match(handler):
        return (f"{handler!r} is not a RuntimeClass handler: lowercase letters, digits and "
                "'-', starting and ending with a letter or digit, at most 63 characters")
    return None


def runtime_classes(client: ClusterClient) -> list[RuntimeClassHandler]:
    """Every `node.k8s.io/v1` RuntimeClass with its handler, in the API's order. Raises
    CollectError when the list cannot be read (unreachable, unauthorised, forbidden: the
    permission named) or an item has no usable handler."""
    body = get_required(client, RUNTIME_CLASSES, "RuntimeClasses")
    items = body.get("items") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise CollectError(f"{RUNTIME_CLASSES} did not answer a RuntimeClassList")
    out = []
    for index, item in enumerate(items):
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            raise CollectError(f"RuntimeClass items[{index}] has no metadata.name")
        handler = item.get("handler")
        why = handler_error(handler) if isinstance(handler, str) else "no handler"
        if why is not None:
            raise CollectError(f"RuntimeClass {name}: handler: {why}")
        out.append(RuntimeClassHandler(name, handler))
    return out


__all__ = ["RUNTIME_CLASSES", "RuntimeClassHandler", "handler_error", "runtime_classes"]
