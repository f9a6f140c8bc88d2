"""`gpuplane:draDriver.pools` against the real control plane (issue #48): kube-apiserver,
kube-controller-manager (the DaemonSet controller) and kube-scheduler v1.34.3
(tests/support/control_plane.py), with four fake Ready GPU nodes of the kubeadm-dra-pools
stack (tests/support/dra_cluster.py).

gpuplane's `NodeLabelsProvider` labels the training pool's nodes through the official
client. The DRA driver's kubelet plugin DaemonSet is the one chart dra-driver-nvidia-gpu
v0.4.1 renders through Helm's engine with gpuplane's values; the real DaemonSet
controller and scheduler place its pods. The GPU Operator is not run here: what it does
is stated from its code and modelled in two lines (a GPU node without
`nvidia.com/gpu.deploy.device-plugin` gets "true", a value already there is kept:
addGPUStateLabels in controllers/state_manager.go@v24.3.0..v26.7.0), and its device
plugin DaemonSet is a minimal one with the operator's node selector
(assets/state-device-plugin/0500_daemonset.yaml@every supported tag). No kubelet: a pod
the scheduler binds stays Pending, which is all placement needs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import charts, control_plane, dra_cluster, oracle
from support.stack_cases import config_of

from gpuplane.config import StackConfig
from gpuplane.config.helm_values import dra_labels, dra_values
from gpuplane.rules.dra import served_twice
from gpuplane.rules.dra_facts import DEVICE_PLUGIN_DEPLOY
from gpuplane.stack.node_labels import NodeLabelsProvider

# After the control plane is built: `make test` runs these with the engine tier.
pytestmark = pytest.mark.engine
DRA_NS = "nvidia-dra-driver-gpu"
OP_NS = "gpu-operator"


def _stack() -> StackConfig:
    cfg = {k.removeprefix("gpuplane:"): v for k, v in config_of("kubeadm-dra-pools").items()}
    return StackConfig.model_validate(cfg)


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[control_plane.ControlPlane, Any]]:
    if why := control_plane.missing():
        oracle.unavailable(f"the control plane: {why}", "make containerd")
    charts.chart_dirs("dra-driver-nvidia-gpu")    # skips (with the reason) without them
    from kubernetes import client, config

    cp = control_plane.start(Path(tempfile.mkdtemp(prefix="gp-drapools-", dir="/tmp")) / "cp")
    try:
        api = config.new_client_from_config(config_file=str(cp.kubeconfig))
        core = client.CoreV1Api(api)
        with dra_cluster.FakeNodes(api) as nodes:
            for node in _stack().nodes:
                nodes.add(node.name, {dra_cluster.NFD_GPU_LABEL: "true",
                                      "nvidia.com/gpu.present": "true"})
            for ns in (DRA_NS, OP_NS):
                core.create_namespace({"metadata": {"name": ns}})
            yield cp, api
    finally:
        cp.stop()


def _operator_labels(core: Any) -> None:
    """The operator's rule for its device plugin's deploy label (see the module doc)."""
    for node in core.list_node().items:
        labels = node.metadata.labels or {}
        if labels.get("nvidia.com/gpu.present") == "true" and DEVICE_PLUGIN_DEPLOY not in labels:
            core.patch_node(node.metadata.name,
                            {"metadata": {"labels": {DEVICE_PLUGIN_DEPLOY: "true"}}})


def _device_plugin_daemonset() -> dict[str, Any]:
    labels = {"app": "nvidia-device-plugin-daemonset"}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": OP_NS},
            "spec": {"selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"nodeSelector": {DEVICE_PLUGIN_DEPLOY: "true"},
                         "containers": [{"name": "plugin", "image": "registry.invalid/p:1"}]}}}}


def _placed(core: Any, namespace: str, selector: str, count: int) -> list[str]:
    """The nodes the scheduler bound the DaemonSet's `count` pods to."""
    def bound() -> list[str] | None:
        pods = core.list_namespaced_pod(namespace, label_selector=selector).items
        nodes = sorted(p.spec.node_name for p in pods if p.spec.node_name)
        return nodes if len(nodes) == count and len(pods) == count else None
    return dra_cluster.until(f"{count} pod(s) of {selector} bound", bound)  # type: ignore[no-any-return]


def test_fm32_the_dra_and_device_plugin_pools_get_one_plugin_each(
        cluster: tuple[control_plane.ControlPlane, Any]) -> None:
    cp, api = cluster
    from kubernetes import client, utils

    core = client.CoreV1Api(api)
    cfg = _stack()
    wanted = dra_labels(cfg)
    (labels,) = {tuple(sorted(v.items())) for v in wanted.values()}

    # gpuplane labels the DRA pool first (before the operator is installed).
    provider = NodeLabelsProvider()
    out = provider.create({"nodes": list(wanted), "labels": dict(labels),
                           "kubeconfig": str(cp.kubeconfig)}).outs
    assert out["labelled"] == ["h100-01", "h100-02"] and out["missing"] == []
    _operator_labels(core)
    live = {n.metadata.name: dict(n.metadata.labels or {}) for n in core.list_node().items}
    assert {n: live[n][DEVICE_PLUGIN_DEPLOY] for n in live} == {
        "h100-01": "false", "h100-02": "false", "l40s-01": "true", "l40s-02": "true"}

    # The driver's kubelet plugin as its chart renders it with gpuplane's values.
    docs = charts.render(charts.chart_dirs("dra-driver-nvidia-gpu")["v0.4.1"], dra_values(cfg),
                         namespace=DRA_NS, name="dra")
    for doc in docs:
        if doc["kind"] in ("ServiceAccount", "DaemonSet"):
            utils.create_from_dict(api, doc, namespace=DRA_NS)
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    match = ",".join(f"{k}={v}" for k, v in ds["spec"]["selector"]["matchLabels"].items())
    utils.create_from_dict(api, _device_plugin_daemonset(), namespace=OP_NS)

    assert _placed(core, DRA_NS, match, 2) == ["h100-01", "h100-02"]
    assert _placed(core, OP_NS, "app=nvidia-device-plugin-daemonset", 2) == [
        "l40s-01", "l40s-02"]
    # The rule's verdict on the same live labels: no node with both.
    assert served_twice(dra_values(cfg), sorted(live), live, live=True) == []

    # Delete: the labels it set are removed again (the operator's "true" stays).
    provider.delete("node-labels", {**out, "kubeconfig": str(cp.kubeconfig)})
    after = {n.metadata.name: dict(n.metadata.labels or {}) for n in core.list_node().items}
    assert all("gpuplane.dev/dra-driver" not in after[n] for n in after)
    assert after["l40s-01"][DEVICE_PLUGIN_DEPLOY] == "true"
