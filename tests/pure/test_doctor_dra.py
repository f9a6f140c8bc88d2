"""The doctor under DRA (gpuplane.doctor.dra): a GPU node with no ResourceSlice from
gpu.nvidia.com and unallocated GPU claims are FM38, each with its reason; a cluster
without DRA is not touched. The same against the real API server and scheduler:
tests/engine/test_dra_scheduler.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.doctor_api import node
from support.dra_cluster import NFD_GPU_LABEL, gpu_slice

from gpuplane.core.intent import INTENT_CONFIGMAP, INTENT_KEY, ClusterIntent, NodeIntent
from gpuplane.doctor import Snapshot, SnapshotError, analyse, load, save
from gpuplane.doctor.collect import collect
from gpuplane.doctor.dra import claim_finding, unpublished
from gpuplane.doctor.snapshot import Collected
from gpuplane.kube.client import ApiError

CLASSES = [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": n}} for n in ("gpu.nvidia.com", "mig.nvidia.com")]
INDEX = "device.attributes['gpu.nvidia.com'].index == 0"


def claim(name: str, device_class: str = "gpu.nvidia.com", *, cel: str | None = None,
          allocated_on: str | None = None, pod: str | None = "trainer",
          v1beta1: bool = False) -> dict[str, Any]:
    request: dict[str, Any] = {"deviceClassName": device_class}
    if cel:
        request["selectors"] = [{"cel": {"expression": cel}}]
    meta: dict[str, Any] = {"name": name, "namespace": "ml"}
    if pod:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": pod,
                                    "uid": "u", "controller": True}]
    status: dict[str, Any] = {}
    if allocated_on:
        status["allocation"] = {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": allocated_on,
             "device": "gpu-0"}]}}
    shape = {"name": "gpu", **request} if v1beta1 else {"name": "gpu", "exactly": request}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": {"devices": {"requests": [shape]}}, "status": status}


def snapshot(**lists: Any) -> Snapshot:
    nodes = [node(n, kubelet="v1.34.3", runtime="containerd://2.1.4",
                  labels={NFD_GPU_LABEL: "true"}) for n in ("gpu-a", "gpu-b")]
    nodes.append(node("cpu-1", kubelet="v1.34.3", runtime="containerd://2.1.4"))
    base: dict[str, Any] = {"version": {"gitVersion": "v1.34.3"}, "nodes": nodes,
                            "resourceslices": [gpu_slice("gpu-a", 2)],
                            "deviceclasses": list(CLASSES)}
    return Snapshot(**{**base, **lists})


def fm38(snap: Snapshot) -> dict[str, Any]:
    return {d.finding.where: d for d in analyse(snap).diagnoses if d.finding.id == "FM38"}


def test_fm38_doctor_names_each_gpu_node_without_a_resourceslice() -> None:
    found = fm38(snapshot())
    assert list(found) == ["node gpu-b (ResourceSlices of driver gpu.nvidia.com)"]
    diagnosis = found["node gpu-b (ResourceSlices of driver gpu.nvidia.com)"]
    assert diagnosis.finding.message.startswith(
        "no ResourceSlice from gpu.nvidia.com on node gpu-b")
    assert diagnosis.scope == "node:gpu-b"
    assert diagnosis.evidence[0].detail == "0 GPU device(s) from gpu.nvidia.com"
    healthy = snapshot(resourceslices=[gpu_slice("gpu-a", 2), gpu_slice("gpu-b", 1)])
    assert fm38(healthy) == {}
    assert analyse(healthy).verdict == "healthy"


def test_fm38_doctor_explains_unallocated_claims() -> None:
    slices = [gpu_slice("gpu-a", 2), gpu_slice("gpu-b", 1)]
    claims = [
        claim("c-class", "imex.nvidia.com"),      # the v0.4.1 demo's class no chart makes
        claim("c-index", cel=INDEX),
        claim("c-full", pod="other"),             # nothing provably wrong: no device left
        claim("c-ok", allocated_on="gpu-a"),
        claim("c-unused", pod=None),              # no pod waits for it: not a problem
        claim("c-old", "imex.nvidia.com", v1beta1=True, pod=None),
    ]
    found = fm38(snapshot(resourceslices=slices, resourceclaims=claims))
    assert sorted(found) == ["ResourceClaim ml/c-class", "ResourceClaim ml/c-full",
                             "ResourceClaim ml/c-index", "ResourceClaim ml/c-old"]
    assert "DeviceClass imex.nvidia.com does not exist (NVIDIA classes here: " \
        "gpu.nvidia.com, mig.nvidia.com)" in found["ResourceClaim ml/c-class"].finding.message
    index = found["ResourceClaim ml/c-index"].finding
    assert "its selector reads gpu.nvidia.com.index, which no published device has" \
        in index.message
    assert "`index` and `minor` are gone since driver v25.8.0" in index.fix
    assert "3 GPU device(s) from gpu.nvidia.com, 2 not allocated" in \
        found["ResourceClaim ml/c-full"].finding.message
    assert found["ResourceClaim ml/c-full"].scope == "claim:ml/c-full"


def test_fm38_selector_prediction_reads_both_cel_spellings() -> None:
    slices = [gpu_slice("gpu-a", 1)]
    assert unpublished([INDEX], slices) == ["gpu.nvidia.com.index"]
    assert unpublished(['device.attributes["gpu.nvidia.com"]["minor"] == 1'],
                       slices) == ["gpu.nvidia.com.minor"]
    ok = ("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && "
          "device.attributes['resource.kubernetes.io'].pciBusID != ''")
    assert unpublished([ok], slices) == []
    # A domain nothing publishes is not judged (another driver, a stale snapshot).
    assert unpublished(["device.attributes['compute-domain.nvidia.com'].id == 0"], slices) == []
    assert claim_finding(claim("x", cel=INDEX, pod=None), None, [], []) is None


def test_fm38_no_dra_no_notes_and_the_intent_record_turns_it_on() -> None:
    plain = Snapshot(version={"gitVersion": "v1.34.3"}, nodes=snapshot().nodes)
    assert fm38(plain) == {}
    assert not [n for n in analyse(plain).notes if "ResourceSlice" in n]
    intent = ClusterIntent(dra=True, kubernetes_version="1.34.3", containerd_version="2.1",
                           nodes=(NodeIntent("gpu-a", 2),))
    record = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": INTENT_CONFIGMAP, "namespace": "gpu-operator"},
        "data": {INTENT_KEY: intent.to_json()}}
    denied = Snapshot(version={"gitVersion": "v1.34.3"}, nodes=snapshot().nodes,
                      configmaps=[record], runtimeclasses=[{
                          "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                          "metadata": {"name": "nvidia"}, "handler": "nvidia"}],
                      collected=Collected(denied={"resourceslices": "list resourceslices"}))
    report = analyse(denied)
    assert "not checked: resourceslices not collected (forbidden: needs permission to list " \
        "resourceslices): the DRA driver's ResourceSlices (FM38)" in report.notes
    assert report.verdict == "incomplete"


def test_fm38_snapshot_round_trip_and_a_bad_slice_named(tmp_path: Path) -> None:
    snap = snapshot(resourceclaims=[claim("c-index", cel=INDEX)])
    save(snap, tmp_path / "s")
    back = load(tmp_path / "s")
    assert (back.resourceslices, back.resourceclaims, back.deviceclasses) == (
        snap.resourceslices, snap.resourceclaims, snap.deviceclasses)
    bad = json.loads((tmp_path / "s" / "resourceslices.json").read_text())
    bad["items"][0]["spec"]["driver"] = 7
    (tmp_path / "s" / "resourceslices.json").write_text(json.dumps(bad))
    with pytest.raises(SnapshotError, match=r"resourceslices\.json: items\[0\]\.spec\.driver"):
        load(tmp_path / "s")


class _Api:
    """A ClusterClient serving a few lists; the DRA group can be absent (404)."""

    def __init__(self, lists: dict[str, list[dict[str, Any]]]):
        self.lists = lists

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        if path == "/version":
            return {"gitVersion": "v1.34.3"}
        if path not in self.lists:
            raise ApiError(404, "GET", path, "the server could not find the requested resource")
        return {"items": self.lists[path]}

    def get_text(self, path: str, params: dict[str, str] | None = None) -> str:
        return ""

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return body

    def delete(self, path: str) -> None:
        return None


def test_fm38_collect_keeps_nvidia_slices_and_the_gpu_claims() -> None:
    other = {**gpu_slice("gpu-a", 1), "spec": {**gpu_slice("gpu-a", 1)["spec"],
                                               "driver": "dra.example.com"}}
    foreign = claim("nic", "nic.example.com")
    api = _Api({"/api/v1/nodes": snapshot().nodes, "/api/v1/pods": [],
                "/apis/resource.k8s.io/v1/resourceslices": [gpu_slice("gpu-a", 2), other],
                "/apis/resource.k8s.io/v1/deviceclasses": [
                    *CLASSES, {"metadata": {"name": "nic.example.com"}}],
                "/apis/resource.k8s.io/v1/resourceclaims": [
                    claim("c-index", cel=INDEX), claim("c-gone", "gone.example.com"), foreign]})
    snap = collect(api, inspect=False)
    assert [s["spec"]["driver"] for s in snap.resourceslices] == ["gpu.nvidia.com"]
    assert [c["metadata"]["name"] for c in snap.resourceclaims] == ["c-index", "c-gone"]
    assert len(snap.deviceclasses) == 3
    # A cluster before 1.34 answers 404: empty lists, no note.
    older = collect(_Api({"/api/v1/nodes": snapshot().nodes, "/api/v1/pods": []}),
                    inspect=False)
    assert (older.resourceslices, older.resourceclaims) == ([], [])
    assert not [n for n in older.notes if "resourceslices" in n or "resourceclaims" in n
                or "deviceclasses" in n]
