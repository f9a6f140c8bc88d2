"""The post-deploy checks under DRA (`ClusterIntent.dra`): the probe claims its GPU through
a ResourceClaimTemplate (valid Kubernetes 1.34 objects, strict schema), the ResourceSlice
check replaces the allocatable one, and a claim the scheduler cannot satisfy is FM38.
The same objects against the real scheduler: tests/engine/test_dra_scheduler.py."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import kubernetes_validate
import pytest
from support.dra_cluster import gpu_slice

from gpuplane.checks.causes import classify
from gpuplane.checks.dra import (
    dra_cause,
    dra_job,
    gpu_devices,
    probe_claim_template,
    resourceslice_findings,
)
from gpuplane.checks.live import CheckFailed, Waiter, run_resourceslice_check
from gpuplane.checks.manifests import job_manifest, plan_checks
from gpuplane.checks.provider import AllocatableCheckProvider, ProbeJobCheckProvider
from gpuplane.checks.settings import ChecksSettings
from gpuplane.checks.verdicts import job_findings, pod_run
from gpuplane.core.intent import ClusterIntent, NodeIntent

K8S = "1.34.0"
NODES = (NodeIntent("gpu-a", 2), NodeIntent("gpu-b", 1), NodeIntent("cpu-1", 0))
DRA = ClusterIntent(dra=True, kubernetes_version="1.34.3", containerd_version="2.1",
                    nodes=NODES, time_slicing_replicas=4)
UNSCHEDULABLE = ("0/3 nodes are available: 1 cannot allocate all claims, 2 node(s) didn't "
                 "match Pod's node affinity/selector.")   # kube-scheduler 1.34.3, recorded


def _props(intent: ClusterIntent = DRA) -> dict[str, Any]:
    settings = ChecksSettings()
    return {"checkName": "c-nodes-check",
            "checks": [c.key for c in plan_checks(intent, settings)],
            "intent": intent.to_json(), "namespace": "gpu-operator",
            "settings": asdict(settings), "jobPrefix": "c", "fingerprint": "0123abcd",
            "configmap": "c-probe-x", "timeoutSeconds": 300, "kubeconfig": None}


def test_fm38_probe_claim_template_is_the_v1_shape_and_valid() -> None:
    rct = probe_claim_template("gpu-operator", "c-probe-gpu-a-1a2b3c4d", "gpu-a")
    assert kubernetes_validate.validate(rct, K8S, strict=True) == "1.34"
    (request,) = rct["spec"]["spec"]["devices"]["requests"]
    assert request == {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}


def test_fm38_dra_probe_job_claims_its_gpu_pinned_to_its_node() -> None:
    from gpuplane.checks.provider import check_manifests

    jobs = check_manifests(_props(), 1)
    assert [c.node for c, _ in jobs] == ["gpu-a", "gpu-b"]     # one per pool, no sharing Job
    for check, job in jobs:
        assert kubernetes_validate.validate(job, K8S, strict=True) == "1.34"
        pod = job["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"kubernetes.io/hostname": check.node}
        assert pod["resourceClaims"] == [{"name": "gpu",
                                          "resourceClaimTemplateName": job["metadata"]["name"]}]
        ctr = pod["containers"][0]
        assert ctr["resources"]["claims"] == [{"name": "gpu"}]
        assert not [k for k in ctr["resources"]["limits"] if k.startswith("nvidia.com/")]
        assert "runtimeClassName" not in pod
        assert ctr["command"][:2] == ["python3", "/probe/cuda_probe.py"]   # the same probe
    # Without DRA the same stack asks for nvidia.com/gpu as before.
    plain = ClusterIntent(nodes=NODES)
    (first, *_) = plan_checks(plain, ChecksSettings())
    old = job_manifest(first, plain, ChecksSettings(), namespace="n", configmap="cm")
    assert "resourceClaims" not in old["spec"]["template"]["spec"]
    assert dra_job(old, "t")["spec"]["template"]["spec"]["containers"][0]["resources"][
        "limits"] == {"memory": "1Gi"}


def test_fm38_fm08_resourceslice_findings() -> None:
    slices = [gpu_slice("gpu-a", 2), gpu_slice("gpu-b", 1)]
    nodes = (NodeIntent("gpu-a", 2), NodeIntent("gpu-b", 2), NodeIntent("gpu-c", 1))
    assert gpu_devices(slices, "gpu-a") == ["gpu-0", "gpu-1"]
    found = resourceslice_findings(nodes, slices)
    assert [(f.id, f.where.split(" ")[1]) for f in found] == [("FM08", "gpu-b"),
                                                              ("FM38", "gpu-c")]
    assert found[1].message.startswith("no ResourceSlice from gpu.nvidia.com on node gpu-c")
    assert "nvidiaDriverRoot" in found[1].fix and "spec.nodeName=gpu-c" in found[1].fix
    # A slice with only MIG devices (or another driver's slice) is no full GPU.
    mig = gpu_slice("gpu-c", 1)
    mig["spec"]["devices"][0]["attributes"]["type"] = {"string": "mig"}
    other = {**gpu_slice("gpu-c", 1), "spec": {**gpu_slice("gpu-c", 1)["spec"],
                                               "driver": "compute-domain.nvidia.com"}}
    (f,) = resourceslice_findings([nodes[2]], [mig, other])
    assert f.id == "FM38" and "1 ResourceSlice(s) without a full GPU" in f.message
    (f,) = resourceslice_findings([nodes[2]], [], served=False)
    assert f.id == "FM38" and "does not serve resource.k8s.io/v1" in f.message
    assert resourceslice_findings(nodes[:1], slices) == []


class _Slices:
    """A Cluster whose ResourceSlices appear after some reads (the plugin starting)."""

    def __init__(self, frames: list[list[dict[str, Any]] | None]):
        self.frames, self.reads = frames, 0
        self.calls: list[str] = []

    def resource_slices(self) -> list[dict[str, Any]] | None:
        self.reads += 1
        return self.frames[min(self.reads - 1, len(self.frames) - 1)]

    def create_claim_template(self, namespace: str, manifest: dict[str, Any]) -> None:
        self.calls.append(f"create template {manifest['metadata']['name']}")

    def delete_claim_template(self, namespace: str, name: str) -> None:
        self.calls.append(f"delete template {name}")

    def create_job(self, namespace: str, manifest: dict[str, Any]) -> None:
        self.calls.append(f"create job {manifest['metadata']['name']}")

    def delete_job(self, namespace: str, name: str) -> None:
        self.calls.append(f"delete job {name}")


def test_fm38_resourceslice_check_waits_for_the_plugin_then_fails_naming_the_node() -> None:
    from support.checkdata import FakeClock

    nodes = DRA.gpu_nodes
    later = _Slices([[], [gpu_slice("gpu-a", 2)], [gpu_slice("gpu-a", 2), gpu_slice("gpu-b", 1)]])
    clock = FakeClock()
    ok = run_resourceslice_check(later, nodes,  # type: ignore[arg-type]
                                 waiter=Waiter(timeout=60, poll=5, clock=clock,
                                               sleep=clock.sleep))
    assert ok == {"passed": True, "resourceSlices": {"gpu-a": ["gpu-0", "gpu-1"],
                                                     "gpu-b": ["gpu-0"]}}
    assert later.reads == 3
    never = _Slices([[gpu_slice("gpu-a", 2)]])
    clock = FakeClock()
    with pytest.raises(CheckFailed) as failed:
        run_resourceslice_check(never, nodes,  # type: ignore[arg-type]
                                waiter=Waiter(timeout=30, poll=5, clock=clock, sleep=clock.sleep))
    assert [f.id for f in failed.value.findings] == ["FM38"]
    assert "ResourceSlices of gpu.nvidia.com after 30s" in str(failed.value)


def test_fm38_allocatable_provider_checks_slices_under_dra() -> None:
    provider = AllocatableCheckProvider()
    cluster = _Slices([None])      # resource.k8s.io/v1 not served
    provider.cluster_factory = lambda _k, _c: cluster  # type: ignore[assignment,return-value]
    out = provider._outs({"checkName": "c", "intent": DRA.to_json(), "timeoutSeconds": 5,
                          "hamiSplitCount": 10, "kubeconfig": None}, None)
    assert out["passed"] is False and out["result"]["findings"] == ["FM38", "FM38"]


def test_fm38_provider_creates_each_claim_template_before_its_job_and_deletes_both() -> None:
    provider = ProbeJobCheckProvider()
    cluster = _Slices([[]])
    provider.cluster_factory = lambda _k, _c: cluster  # type: ignore[assignment,return-value]
    made: dict[str, Any] = {}
    provider.prepare(_props(), None, made)
    names = made["jobNames"]
    assert cluster.calls == [c for n in names for c in (f"create template {n}",
                                                         f"create job {n}")]
    cluster.calls.clear()
    provider.delete("id", {**_props(), **made})
    assert cluster.calls == [c for n in names for c in (f"delete job {n}",
                                                        f"delete template {n}")]


def test_fm38_a_probe_pod_whose_claim_cannot_be_allocated() -> None:
    (check, *_) = plan_checks(DRA, ChecksSettings())
    pending = pod_run({"metadata": {"name": "p"}, "spec": {}, "status": {
        "phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                            "reason": "Unschedulable",
                                            "message": UNSCHEDULABLE}]}})
    (finding,) = job_findings(check, [pending], DRA)
    assert finding.id == "FM38" and "cannot allocate all claims" in finding.message
    assert "kubelet plugin" in finding.fix
    assert dra_cause(["deviceclass.resource.k8s.io \"gpu.nvidia.com\" not found"],
                     "gpu-a") == ("FM38", "DeviceClass gpu.nvidia.com does not exist: install "
                                  "the DRA driver with GPUs enabled (`resources.gpus.enabled: "
                                  "true` in its chart values)")
    # Only under DRA, and before the event table (which reads the same message's
    # "didn't match Pod's node affinity" as a wrong node name): others keep their causes.
    assert classify([UNSCHEDULABLE], ClusterIntent(nodes=NODES), "gpu-a")[0] == "FM01"
    assert dra_cause(["Insufficient nvidia.com/gpu"], "gpu-a") is None
