"""The snapshot records what was collected (kinds, namespaces, permissions denied), and a
rule that needs a kind that was not collected says "not checked" instead of a finding."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.doctor_support import DATA
from test_doctor_collect import API, RecordedClient, _kubeconfig, server  # noqa: F401

from gpuplane.cli.main import main
from gpuplane.doctor import analyse, load, save
from gpuplane.doctor.collect import collect


def _hand_made(tmp_path: Path, incident: str, *files: str) -> Path:
    """`kubectl get ... -o json > <file>` for the given lists only (no snapshot.json)."""
    target = tmp_path / "snap"
    target.mkdir()
    for file in files:
        shutil.copy(DATA / incident / file, target / file)
    return target


def _rc_missing(report) -> list[str]:
    return [d.finding.where for d in report.diagnoses
            if d.finding.id == "FM11" and d.finding.where.startswith("RuntimeClass")]


def test_no_runtimeclass_list_means_fm11_not_checked(tmp_path: Path) -> None:
    snap = _hand_made(tmp_path, "incident-4", "nodes.json", "pods.json", "version.json")
    report = analyse(load(snap))
    assert _rc_missing(report) == []
    assert ("not checked: runtimeclasses not collected: whether RuntimeClass nvidia exists "
            "(FM11)") in report.notes
    # The same snapshot with an (empty) RuntimeClass list: now its absence is a finding.
    (snap / "runtimeclasses.json").write_text('{"kind": "List", "items": []}')
    report = analyse(load(snap))
    assert _rc_missing(report) == ["RuntimeClass nvidia"]


def test_a_denied_list_is_recorded_saved_and_reported(tmp_path: Path) -> None:
    client = RecordedClient(API, fail={("GET", "/apis/node.k8s.io/v1/runtimeclasses"): 403})
    snap = collect(client, inspect=False)
    assert snap.collected.denied == {"runtimeclasses": "list runtimeclasses.node.k8s.io"}
    assert snap.collected.namespaces == "all"
    save(snap, tmp_path / "out")
    assert not (tmp_path / "out" / "runtimeclasses.json").exists()
    meta = json.loads((tmp_path / "out" / "snapshot.json").read_text())
    assert meta["collected"]["denied"] == {"runtimeclasses": "list runtimeclasses.node.k8s.io"}
    assert "runtimeclasses" not in meta["collected"]["kinds"]
    assert {"nodes", "pods", "events", "replicasets", "version"} <= set(
        meta["collected"]["kinds"])
    again = load(tmp_path / "out")
    assert again.collected == snap.collected
    notes = analyse(again).notes
    assert ("not checked: runtimeclasses not collected (forbidden: needs permission to list "
            "runtimeclasses.node.k8s.io): whether RuntimeClass nvidia exists (FM11)") in notes


def test_a_hand_made_snapshot_says_its_namespaces_are_unknown(tmp_path: Path) -> None:
    snap = load(_hand_made(tmp_path, "incident-4", "nodes.json", "pods.json"))
    assert snap.collected.namespaces is None
    assert snap.collected.kinds == frozenset({"nodes", "pods"})
    assert snap.missing("events") == "events not collected"
    assert snap.missing("pods") is None
    only_nodes = tmp_path / "only-nodes"
    only_nodes.mkdir()
    (only_nodes / "nodes.json").write_text((tmp_path / "snap" / "nodes.json").read_text())
    assert ("not checked: pods not collected: GPU workloads (FM11, FM14) and the GPU "
            "components' pods") in analyse(load(only_nodes)).notes


def test_without_configmaps_the_intent_is_inferred_and_says_why(tmp_path: Path) -> None:
    snap = load(DATA / "incident-5")
    snap.configmaps = []
    snap.collected.denied["configmaps"] = "list configmaps (all namespaces)"
    report = analyse(snap)
    assert report.intent_source == "inferred"
    assert any(n.startswith("configmaps not collected (forbidden") and "inferred" in n
               for n in report.notes), report.notes


def test_live_save_fills_the_record(server: str, tmp_path: Path,  # noqa: F811
                                    capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = _kubeconfig(tmp_path / "kc", server)
    assert main(["doctor", "--kubeconfig", str(kubeconfig), "--no-inspect", "--format",
                 "json", "--save", str(tmp_path / "snap")]) == 1
    data = json.loads(capsys.readouterr().out)
    meta = json.loads((tmp_path / "snap" / "snapshot.json").read_text())
    assert meta["collected"]["denied"] == {"helm-releases": "list secrets (all namespaces)"}
    assert meta["collected"]["namespaces"] == "all"
    assert "helm-releases" not in meta["collected"]["kinds"]
    assert not (tmp_path / "snap" / "helm-releases.json").exists()
    assert load(tmp_path / "snap").collected.denied == meta["collected"]["denied"]
    assert data["cluster"]["collected"]["denied"] == meta["collected"]["denied"]


def test_without_a_node_inspection_a_missing_runtime_class_is_a_hedged_warning(
        tmp_path: Path) -> None:
    """Pods without runtimeClassName get no GPU only if runc is the default runtime, which
    only a node's containerd (or the gpuplane-intent record) can say."""
    report = analyse(load(_hand_made(tmp_path, "incident-4", "nodes.json", "pods.json")))
    pods = [d.finding for d in report.diagnoses if d.finding.where.startswith("Pod ")]
    assert [(f.id, f.severity) for f in pods] == [("FM11", "warning")]
    assert pods[0].message.startswith("not known whether nvidia is containerd's default")
    assert not report.failed
    full = analyse(load(DATA / "incident-4"))
    assert [d.finding.severity for d in full.diagnoses
            if d.finding.where.startswith("Pod ")] == ["error"]


def test_collect_keeps_gpu_workloads_whose_pods_were_refused(tmp_path: Path) -> None:
    """A GPU Deployment with no pods (refused: RuntimeClass not found), its ReplicaSet and
    the ReplicaSet's event are kept; other workloads are not."""
    api = tmp_path / "api"
    shutil.copytree(API, api)
    limits = {"limits": {"nvidia.com/gpu": "1"}}
    template = {"spec": {"runtimeClassName": "nvidia-gpu", "containers": [
        {"name": "infer", "image": "ghcr.io/acme/infer:2.3.1", "resources": limits}]}}
    deployment = {"metadata": {"name": "infer", "namespace": "ml"},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "infer"}},
                           "template": template}}
    replicaset = {"metadata": {"name": "infer-7d9c", "namespace": "ml", "ownerReferences": [
        {"kind": "Deployment", "name": "infer", "controller": True}]},
        "spec": {"replicas": 1, "template": template}}
    rejected = {"metadata": {"name": "infer-7d9c.1", "namespace": "ml"}, "type": "Warning",
                "involvedObject": {"kind": "ReplicaSet", "namespace": "ml",
                                   "name": "infer-7d9c"},
                "reason": "FailedCreate", "message": "Error creating: pods is forbidden"}
    for path, extra in (("apis/apps/v1/deployments.json", deployment),
                        ("apis/apps/v1/replicasets.json", replicaset),
                        ("api/v1/events.json", rejected)):
        body = json.loads((api / path).read_text())
        body["items"].append(extra)
        (api / path).write_text(json.dumps(body))
    snap = collect(RecordedClient(api), inspect=False)
    assert [d["metadata"]["name"] for d in snap.deployments] == ["gpu-operator", "infer"]
    assert [r["metadata"]["name"] for r in snap.replicasets] == ["infer-7d9c"]
    assert rejected in snap.events
    report = analyse(snap)
    assert any(d.finding.where.startswith("Deployment ml/infer") for d in report.diagnoses)


def test_scheduler_tag_not_judged_without_the_clusters_version(tmp_path: Path) -> None:
    """HAMi's values set kube-scheduler v1.29.0: against an unknown API server version (no
    version.json, no control-plane node, no gpuplane-intent) it is not checked."""
    snap = load(DATA / "incident-5")
    snap.configmaps = []              # no gpuplane-intent: the intent is inferred
    tag = [d for d in analyse(snap).diagnoses if "kubeScheduler" in d.finding.where]
    assert [d.finding.severity for d in tag] == ["error"]       # v1.31.4 from version.json
    snap.version = {}
    snap.collected.kinds = (snap.collected.kinds or frozenset()) - {"version"}
    report = analyse(snap)
    assert not [d for d in report.diagnoses if "kubeScheduler" in d.finding.where]
    assert any(n.startswith("not checked: Release hami-system/hami values.scheduler."
                            "kubeScheduler.image.tag") for n in report.notes), report.notes


def test_an_unexpected_api_answer_is_exit_2_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A live API (or a CRD) answering a shape the doctor does not read: the same check as
    for a snapshot file, naming the list, item and field."""
    api = tmp_path / "api"
    shutil.copytree(API, api)
    path = api / "apis/node.k8s.io/v1/runtimeclasses.json"
    body = json.loads(path.read_text())
    body["items"][0]["metadata"]["labels"] = ["nvidia"]
    path.write_text(json.dumps(body))

    class Recorded(RecordedClient):
        server = "recorded"

        def __init__(self, *_: object) -> None:
            super().__init__(api)

    monkeypatch.setattr("gpuplane.kube.client.KubeClient", Recorded)
    rc = main(["doctor", "--no-inspect", "--format", "json"])
    out, err = capsys.readouterr()
    assert (rc, out) == (2, "")
    assert ("gpuplane doctor: could not collect: runtimeclasses as the API returned them: "
            "items[0].metadata.labels: expected an object, got a list") in err
