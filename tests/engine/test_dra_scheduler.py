"""Dynamic Resource Allocation against the real control plane (issue #48, "Real, not
mocked"): kube-apiserver, kube-controller-manager (Job and resourceclaim controllers) and
kube-scheduler v1.34.3 (tests/support/control_plane.py).

Three fake GPU nodes (tests/support/dra_cluster.py): gpu-a with 2 GPUs and gpu-b with 1
published as NVIDIA's kubelet plugin publishes them, gpu-c with no ResourceSlice; the
DeviceClasses as chart dra-driver-nvidia-gpu v0.4.1 renders them through Helm's engine.
gpuplane's own code creates the probe claim templates and Jobs (ProbeJobCheckProvider,
the official client) and judges them; the doctor collects and analyses the same cluster.
No kubelet: a bound pod stays Pending, which is all the scheduler's part needs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from support import control_plane, dra_cluster, oracle

from gpuplane.checks.live import (
    CheckFailed,
    KubeCluster,
    Waiter,
    run_job_checks,
    run_resourceslice_check,
)
from gpuplane.checks.manifests import plan_checks
from gpuplane.checks.provider import ProbeJobCheckProvider
from gpuplane.checks.settings import ChecksSettings
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.doctor import analyse, collect
from gpuplane.doctor.dra import unpublished
from gpuplane.kube.client import KubeClient

# After the control plane is built: `make test` runs these with the engine tier.
pytestmark = pytest.mark.engine
NS = "gpu-operator"
INTENT = ClusterIntent(dra=True, kubernetes_version="1.34.3", containerd_version="2.1",
                       nodes=(NodeIntent("gpu-a", gpus=2), NodeIntent("gpu-b", gpus=1),
                              NodeIntent("gpu-c", gpus=1)))
# A selector on `index`, as demo/specs/quickstart/v1/gpu-test6.yaml@v0.4.1 still writes:
# the driver has not published that attribute since v25.8.0.
INDEX_SELECTOR = "device.attributes['gpu.nvidia.com'].index == 0"


@pytest.fixture(scope="module")
def dra() -> Iterator[tuple[control_plane.ControlPlane, Any]]:
    """The control plane with the chart's DeviceClasses, three Ready GPU nodes and the
    slices of gpu-a and gpu-b."""
    if why := control_plane.missing():
        oracle.unavailable(f"the control plane: {why}", "make containerd")
    classes = dra_cluster.device_classes("v0.4.1")
    from kubernetes import client, config

    cp = control_plane.start(Path(tempfile.mkdtemp(prefix="gp-dra-", dir="/tmp")) / "cp")
    try:
        api = config.new_client_from_config(config_file=str(cp.kubeconfig))
        resource = client.ResourceV1Api(api)
        for device_class in classes:
            resource.create_device_class(device_class)
        with dra_cluster.FakeNodes(api) as nodes:
            for node in INTENT.nodes:
                nodes.add(node.name, {dra_cluster.NFD_GPU_LABEL: "true"})
            for node_name, gpus in (("gpu-a", 2), ("gpu-b", 1)):
                resource.create_resource_slice(dra_cluster.gpu_slice(node_name, gpus))
            client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
            yield cp, api
    finally:
        cp.stop()


def _pod(api: Any, job: str) -> Any:
    from kubernetes import client

    pods = client.CoreV1Api(api).list_namespaced_pod(NS, label_selector=f"job-name={job}").items
    return pods[0] if pods else None


def _claim_of(api: Any, pod: Any) -> Any:
    from kubernetes import client

    statuses = pod.status.resource_claim_statuses or []
    if not statuses or not statuses[0].resource_claim_name:
        return None
    return client.ResourceV1Api(api).read_namespaced_resource_claim(
        statuses[0].resource_claim_name, NS)


def _scheduled_false(pod: Any) -> str | None:
    return next((c.message for c in pod.status.conditions or []
                 if c.type == "PodScheduled" and c.status == "False"), None) if pod else None


def test_fm38_scheduler_allocates_the_probe_claim_on_its_node_and_not_on_a_node_without_slices(
        dra: tuple[control_plane.ControlPlane, Any]) -> None:
    cp, api = dra
    cluster = KubeCluster.connect(str(cp.kubeconfig))

    # The ResourceSlice check, read through resource.k8s.io/v1 with the official client.
    with pytest.raises(CheckFailed) as failed:
        run_resourceslice_check(cluster, INTENT.gpu_nodes, waiter=Waiter(timeout=2, poll=1))
    assert [(f.id, f.where.split(" ")[1]) for f in failed.value.findings] == [("FM38", "gpu-c")]
    assert "no ResourceSlice from gpu.nvidia.com on node gpu-c" in str(failed.value)
    ok = run_resourceslice_check(cluster, INTENT.gpu_nodes[:2], waiter=Waiter(timeout=2))
    assert ok["resourceSlices"] == {"gpu-a": ["gpu-0", "gpu-1"], "gpu-b": ["gpu-0"]}

    # gpuplane's probe: a claim template and a Job per node, made by the provider itself.
    settings = ChecksSettings(timeout_seconds=120)
    checks = plan_checks(INTENT, settings)
    props: dict[str, Any] = {
        "checkName": "dra-nodes-check", "checks": [c.key for c in checks],
        "intent": INTENT.to_json(), "namespace": NS, "settings": asdict(settings),
        "jobPrefix": "dra", "fingerprint": "0123456789abcdef", "configmap": "dra-probe-x",
        "timeoutSeconds": settings.timeout_seconds, "kubeconfig": None}
    provider = ProbeJobCheckProvider()
    provider.cluster_factory = lambda _kubeconfig, _context: cluster
    made: dict[str, Any] = {}
    provider.prepare(props, None, made)
    jobs = dict(zip([c.node for c in checks], made["jobNames"], strict=True))

    for node in ("gpu-a", "gpu-b"):
        pod = dra_cluster.until(f"the probe pod of {node} bound", lambda n=node: (
            (p := _pod(api, jobs[n])) is not None and p.spec.node_name and p))
        assert pod.spec.node_name == node
        claim = dra_cluster.until(f"the probe claim of {node} allocated", lambda p=pod: (
            (c := _claim_of(api, _pod(api, jobs[p.spec.node_name]))) is not None
            and c.status and c.status.allocation and c))
        (result,) = claim.status.allocation.devices.results
        assert (result.driver, result.pool, result.request) == ("gpu.nvidia.com", node, "gpu")
        assert result.device in {"gpu-a": {"gpu-0", "gpu-1"}, "gpu-b": {"gpu-0"}}[node]
        terms = claim.status.allocation.node_selector.node_selector_terms
        assert [f.values for t in terms for f in t.match_fields or []] == [[node]]
        # The pod takes its GPU through the claim, not an extended resource.
        ctr = pod.spec.containers[0]
        assert [c.name for c in ctr.resources.claims] == ["gpu"]
        assert not any(k.startswith("nvidia.com/") for k in ctr.resources.limits or {})

    # gpu-c publishes nothing: the scheduler cannot allocate, and the verdict says FM38.
    pending = dra_cluster.until("the probe pod of gpu-c found unschedulable",
                     lambda: _scheduled_false(_pod(api, jobs["gpu-c"])))
    assert "cannot allocate all claims" in pending
    check_c = next(c for c in checks if c.node == "gpu-c")
    with pytest.raises(CheckFailed) as failed:
        run_job_checks(cluster, [(check_c, jobs["gpu-c"])], INTENT, namespace=NS,
                       waiter=Waiter(timeout=1, poll=1))
    assert [f.id for f in failed.value.findings] == ["FM38"]
    assert "kubelet plugin" in failed.value.findings[0].fix

    # `pulumi destroy` (or the next run) takes the claim templates with the Jobs.
    from kubernetes import client

    provider.delete("x", {**props, **made})
    assert client.ResourceV1Api(api).list_namespaced_resource_claim_template(NS).items == []


def test_fm38_a_selector_on_index_stays_unallocated_as_predicted_and_the_doctor_says_why(
        dra: tuple[control_plane.ControlPlane, Any]) -> None:
    from kubernetes import client

    cp, api = dra
    resource, core = client.ResourceV1Api(api), client.CoreV1Api(api)
    slices = [api.sanitize_for_serialization(s) for s in resource.list_resource_slice().items]
    assert unpublished([INDEX_SELECTOR], slices) == ["gpu.nvidia.com.index"]   # predicted
    resource.create_namespaced_resource_claim_template("default", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu-zero"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "selectors": [{"cel": {"expression": INDEX_SELECTOR}}]}}]}}}})
    core.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer"},
        "spec": {"containers": [{"name": "ctr", "image": "busybox",
                                 "resources": {"claims": [{"name": "gpu"}]}}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-zero"}]}})

    def pod() -> Any:
        return core.read_namespaced_pod("trainer", "default")

    message = dra_cluster.until("the trainer pod found unschedulable",
                                lambda: _scheduled_false(pod()))
    claim = dra_cluster.until("the trainer's claim made", lambda: (
        (statuses := pod().status.resource_claim_statuses) and statuses[0].resource_claim_name
        and resource.read_namespaced_resource_claim(statuses[0].resource_claim_name,
                                                    "default")))
    time.sleep(3)     # the scheduler retries; the claim must still be unallocated
    claim = resource.read_namespaced_resource_claim(claim.metadata.name, "default")
    assert claim.status is None or claim.status.allocation is None, message
    assert pod().spec.node_name is None

    # The doctor against the same API server: the node without slices and both pending
    # GPU claims (the one on index, and gpu-c's probe if still there) are FM38.
    report = analyse(collect(KubeClient(str(cp.kubeconfig)), inspect=False))
    fm38 = {d.finding.where: d.finding for d in report.diagnoses if d.finding.id == "FM38"}
    node = fm38["node gpu-c (ResourceSlices of driver gpu.nvidia.com)"]
    assert "no ResourceSlice from gpu.nvidia.com on node gpu-c" in node.message
    assert not any("gpu-a" in w or "gpu-b" in w for w in fm38 if w.startswith("node "))
    wrong = fm38[f"ResourceClaim default/{claim.metadata.name}"]
    assert "gpu.nvidia.com.index" in wrong.message
    assert "uuid" in wrong.fix
    assert report.verdict == "problems"
    # The same through the CLI: exit 1, FM38 in the JSON report, no traceback.
    done = subprocess.run(
        [sys.executable, "-m", "gpuplane.cli.main", "doctor", "--kubeconfig",
         str(cp.kubeconfig), "--no-inspect", "--format", "json"],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    cli = {(f["id"], f["where"]) for f in json.loads(done.stdout)["findings"]}
    assert ("FM38", f"ResourceClaim default/{claim.metadata.name}") in cli
    assert ("FM38", "node gpu-c (ResourceSlices of driver gpu.nvidia.com)") in cli
