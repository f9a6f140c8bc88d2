"""The post-deploy checks against a real kubelet's allocatable (issue #47, item 4): a
namespaced node (tests/support/ns_node.py: kubelet 1.34.3 on real containerd, under the
real API server and scheduler) with a device plugin of the tests' own
(tests/support/device_plugin.py, the kubelet's device-plugin API v1beta1) advertising MIG
instances as NVIDIA's plugin does under the mixed strategy.

- the allocatable check passes when every `nvidia.com/mig-<profile>` count matches the
  pool's, and fails with FM10 naming node, resource, expected and got when one MIG
  instance turns unhealthy (the kubelet drops it from allocatable);
- with MIG Manager's labels on the node (`nvidia.com/mig.config.state=pending`, the device
  plugin `paused-for-mig-change`) the same short count is reported as a node being
  reconfigured, not as a broken GPU;
- the probe Job asks for the MIG resource: the scheduler places it on the node and the
  kubelet admits it by calling the plugin's Allocate for one instance.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import control_plane, device_plugin, kubelet_node, oracle
from support.ns_node import NsNode, running

from gpuplane.checks.live import CheckFailed, KubeCluster, Waiter, run_allocatable_check
from gpuplane.checks.manifests import job_manifest, plan_checks, probe_configmap
from gpuplane.checks.settings import ChecksSettings
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.probe import PROBE_PATH

pytestmark = pytest.mark.engine
LINE = "1.7"
NODE = "gpu-mig-1"
MIG_1G, MIG_3G = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"
INTENT = ClusterIntent(
    nodes=(NodeIntent(NODE, 1, pool="mig", resources=((MIG_1G, 4), (MIG_3G, 1))),),
    nvidia_default=True)      # no RuntimeClass: the node's containerd has no nvidia runtime
PAUSED = {"nvidia.com/mig.config": "mixed-h100", "nvidia.com/mig.config.state": "pending",
          "nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[control_plane.ControlPlane]:
    for why in (kubelet_node.missing(), device_plugin.missing()):
        if why:
            oracle.unavailable(f"a device plugin on the real kubelet: {why}", "make test")
    oracle.require_daemon_support(LINE)
    cp = control_plane.start(Path(tempfile.mkdtemp(prefix="gp-dp-", dir="/tmp")) / "cp")
    try:
        yield cp
    finally:
        cp.stop()


def _core(cp: control_plane.ControlPlane) -> Any:
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(config_file=str(cp.kubeconfig)))


def _wait(what: str, ready: Any, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = ready()
        if got:
            return got
        time.sleep(1)
    raise AssertionError(f"{what} after {timeout:.0f} s")


def _allocatable(core: Any) -> dict[str, str]:
    return dict(core.read_node(NODE).status.allocatable or {})


def _plugins(node: NsNode) -> list[device_plugin.DevicePlugin]:
    """The node's MIG instances as the kubelet's device manager sees them."""
    plugin_dir = node.host(device_plugin.PLUGIN_DIR)
    _wait("the kubelet's device-plugin socket", (plugin_dir / "kubelet.sock").exists)
    started: list[device_plugin.DevicePlugin] = []
    try:
        for resource, count in INTENT.nodes[0].resources:
            started.append(device_plugin.DevicePlugin(plugin_dir, resource, count).start())
    except BaseException:
        for plugin in started:
            plugin.stop()
        raise
    return started


def test_fm10_allocatable_check_on_a_real_kubelet_advertising_mig_instances(
        cluster: control_plane.ControlPlane) -> None:
    with running(cluster, [NODE], LINE) as made:
        plugins = _plugins(made[NODE])
        try:
            _check_counts(cluster, plugins)
            _probe_job_asks_for_the_mig_resource(cluster, plugins[0])
        finally:
            for plugin in plugins:
                plugin.stop()


def _check_counts(cluster: control_plane.ControlPlane,
                  plugins: list[device_plugin.DevicePlugin]) -> None:
    kube, core = KubeCluster.connect(str(cluster.kubeconfig)), _core(cluster)
    out = run_allocatable_check(kube, INTENT.gpu_nodes, INTENT,
                                waiter=Waiter(timeout=90, poll=2), settle=2)
    assert out == {"passed": True, "allocatable": {NODE: {MIG_1G: 4, MIG_3G: 1}}}, out

    # One 3g.40gb instance unhealthy: capacity keeps it, allocatable drops it.
    plugins[1].set_devices(0, unhealthy=1)
    _wait("allocatable 3g.40gb 0", lambda: _allocatable(core).get(MIG_3G) == "0")
    assert core.read_node(NODE).status.capacity[MIG_3G] == "1"
    with pytest.raises(CheckFailed) as short:
        run_allocatable_check(kube, INTENT.gpu_nodes, INTENT,
                              waiter=Waiter(timeout=6, poll=2), settle=2)
    text = str(short.value)
    assert [f.id for f in short.value.findings] == ["FM10"], text
    assert f"node {NODE} (pool mig): {MIG_3G} is 0, expected 1 MIG instances" in text, text
    assert f"{MIG_1G} is" not in text           # the count that matches is not blamed

    # MIG Manager at work on the node: the same count is a node being reconfigured.
    core.patch_node(NODE, {"metadata": {"labels": PAUSED}})
    with pytest.raises(CheckFailed) as busy:
        run_allocatable_check(kube, INTENT.gpu_nodes, INTENT,
                              waiter=Waiter(timeout=4, poll=2), settle=2)
    text = str(busy.value)
    assert [f.id for f in busy.value.findings] == ["FM10"], text
    assert f"node {NODE} is still being reconfigured by MIG Manager" in text, text
    assert "nvidia.com/mig.config.state=pending" in text and "not a broken GPU" in text

    # Layout applied: labels at success, the instance healthy again; the check passes.
    core.patch_node(NODE, {"metadata": {"labels": {
        "nvidia.com/mig.config.state": "success",
        "nvidia.com/gpu.deploy.device-plugin": "true"}}})
    plugins[1].set_devices(1)
    out = run_allocatable_check(kube, INTENT.gpu_nodes, INTENT,
                                waiter=Waiter(timeout=90, poll=2), settle=2)
    assert out["allocatable"] == {NODE: {MIG_1G: 4, MIG_3G: 1}}, out


def _probe_job_asks_for_the_mig_resource(cluster: control_plane.ControlPlane,
                                         plugin: device_plugin.DevicePlugin) -> None:
    """The node check's Job, as the checks create it: the real scheduler places it on the
    node by its MIG resource and the kubelet admits it through the plugin's Allocate. (The
    probe itself cannot pass here: no GPU, and no registry for its image.)"""
    from kubernetes import client

    core = _core(cluster)
    settings = ChecksSettings()
    (job,) = plan_checks(INTENT, settings)
    assert job.resource == MIG_1G
    configmap = probe_configmap("default", PROBE_PATH.read_text(), "checks-probe")
    core.create_namespaced_config_map("default", configmap)
    manifest = job_manifest(job, INTENT, settings, namespace="default",
                            configmap="checks-probe", name="checks-probe-mig")
    batch = client.BatchV1Api(core.api_client)
    batch.create_namespaced_job("default", manifest)
    try:
        _wait("Allocate for the probe pod", lambda: plugin.allocated, timeout=120)
        assert [len(ids) for ids in plugin.allocated] == [1], plugin.allocated
        (pod,) = core.list_namespaced_pod("default", label_selector="job-name="
                                          "checks-probe-mig").items
        assert pod.spec.node_name == NODE
        assert pod.spec.containers[0].resources.limits[MIG_1G] == "1"
        assert "nvidia.com/gpu" not in pod.spec.containers[0].resources.limits
    finally:
        batch.delete_namespaced_job("checks-probe-mig", "default",
                                    propagation_policy="Background")
