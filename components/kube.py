"""The official Kubernetes client, configured the way the user's kubectl is.

Used where gpuplane must read or nudge the live cluster during `pulumi up` (dynamic
providers) or diagnose it (doctor): in-cluster credentials when running in a pod,
otherwise the kubeconfig (KUBECONFIG or ~/.kube/config) and an optional context.
"""

from __future__ import annotations

from typing import Any


def api_client(context: str | None = None, kubeconfig: str | None = None) -> Any:
    """A configured `kubernetes.client.ApiClient`; raises with the reason when none can be."""
    from kubernetes import client, config

    try:
        if kubeconfig or context or not _in_cluster():
            return config.new_client_from_config(config_file=kubeconfig, context=context)
        config.load_incluster_config()
        return client.ApiClient()
    except config.ConfigException as exc:
        raise RuntimeError(f"no usable Kubernetes credentials: {exc}") from exc


def _in_cluster() -> bool:
    import os

    return "KUBERNETES_SERVICE_HOST" in os.environ


__all__ = ["api_client"]
