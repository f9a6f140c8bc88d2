"""The official Kubernetes client, configured the way the Pulumi kubernetes provider and
kubectl find credentials: an explicit kubeconfig (YAML text or a path), else $KUBECONFIG
or ~/.kube/config, else the in-cluster service account. One place, used by the dynamic
resources during `pulumi up` and by the doctor."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def api_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A configured `kubernetes.client.ApiClient`."""
    from kubernetes import client, config

    if kubeconfig and "\n" not in kubeconfig and Path(kubeconfig).expanduser().is_file():
        return config.new_client_from_config(config_file=str(Path(kubeconfig).expanduser()),
                                             context=context)
    if kubeconfig:
        import yaml

        return config.new_client_from_config_dict(yaml.safe_load(kubeconfig), context=context)
    if os.environ.get("KUBECONFIG") or Path("~/.kube/config").expanduser().is_file():
        return config.new_client_from_config(context=context)
    config.load_incluster_config()
    return client.ApiClient()


__all__ = ["api_client"]
