"""The device plugin's time-slicing ConfigMap, and a restart of the plugin when it changes.

The GPU Operator does not watch this ConfigMap: after an edit the device plugin keeps the
old sharing config until its pods restart (FM10). `DevicePluginRestart` is a dynamic
resource whose input is the config's hash, so a change becomes an update that restarts
the plugin DaemonSet the way `kubectl rollout restart` does.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.dynamic as dynamic
import pulumi_kubernetes as k8s

from gpuplane.stack import child_options

DEVICE_PLUGIN_SELECTOR = "app=nvidia-device-plugin-daemonset"


def config_hash(data: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


class _RestartProvider(dynamic.ResourceProvider):
    """Patches the plugin DaemonSet's pod template; no DaemonSet yet means nothing to do
    (on first install the plugin starts with the new config anyway)."""

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        return dynamic.CreateResult(id_=props["namespace"] + "/device-plugin",
                                    outs={**props, "restarted": _restart(props)})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        changed = olds.get("configHash") != news.get("configHash")
        return dynamic.DiffResult(changes=changed, replaces=[], delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any],
               news: dict[str, Any]) -> dynamic.UpdateResult:
        return dynamic.UpdateResult(outs={**news, "restarted": _restart(news)})


def _restart(props: dict[str, Any]) -> list[str]:
    from kubernetes import client

    from gpuplane.kube.credentials import api_client

    apps = client.AppsV1Api(api_client(props.get("kubeconfig"), props.get("kubeContext")))
    now = datetime.datetime.now(datetime.UTC).isoformat()
    patch = {"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": now}}}}}
    names = [ds.metadata.name for ds in apps.list_namespaced_daemon_set(
        props["namespace"], label_selector=props["selector"]).items
        if ds.metadata and ds.metadata.name]   # always set on what the API returns
    for ds in names:
        apps.patch_namespaced_daemon_set(ds, props["namespace"], patch)
    return names


class DevicePluginRestart(dynamic.Resource):
    restarted: pulumi.Output[list[str]]

    def __init__(self, name: str, *, namespace: str, config_hash: str,
                 kube_context: str | None,
                 kubeconfig: pulumi.Input[str] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(_RestartProvider(), name, {
            "namespace": namespace, "selector": DEVICE_PLUGIN_SELECTOR,
            "configHash": config_hash, "kubeContext": kube_context,
            "kubeconfig": kubeconfig, "restarted": None,
        }, pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])))


@dataclass
class TimeSlicingArgs:
    """The ConfigMap (`config_map` in `namespace`, where the operator's
    `devicePlugin.config.name` points) and its `data` (`helm_values.time_slicing_data`)."""

    namespace: str
    config_map: str
    data: dict[str, str]


class TimeSlicing(pulumi.ComponentResource):
    """ConfigMap in the operator's namespace. It must exist before the operator starts the
    plugin; `restart` is created after the operator (`add_restart`), so a later change
    restarts the running plugin."""

    config_map: k8s.core.v1.ConfigMap
    restart: DevicePluginRestart | None

    def __init__(self, name: str, args: TimeSlicingArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuplane:index:TimeSlicing", name, None, opts)
        self._name, self._namespace = name, args.namespace
        self._hash = config_hash(args.data)
        self.restart = None
        self.config_map = k8s.core.v1.ConfigMap(
            name,
            metadata={"name": args.config_map, "namespace": args.namespace},
            data=args.data,
            opts=child_options(self, opts))
        self.register_outputs({"configMap": args.config_map})

    def add_restart(self, after: pulumi.Resource, kube_context: str | None,
                    kubeconfig: pulumi.Input[str] | None = None) -> None:
        """The plugin restart, after `after` (the operator's release)."""
        self.restart = DevicePluginRestart(
            f"{self._name}-restart", namespace=self._namespace, config_hash=self._hash,
            kube_context=kube_context, kubeconfig=kubeconfig,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.config_map, after]))


__all__ = ["DevicePluginRestart", "TimeSlicing", "TimeSlicingArgs", "config_hash"]
