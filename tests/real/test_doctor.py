"""`gpuplane doctor` on the five field incidents (snapshots in tests/data/doctor/): exactly
the expected findings, their evidence and fixes; the snapshot format; the report's JSON
contract; the CLI's exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.doctor_support import DATA

from gpuplane.cli.main import main
from gpuplane.core.findings import Finding, Severity
from gpuplane.doctor import DoctorReport, analyse, load, report_to_json, save
from gpuplane.doctor.diagnosis import Diagnosis, Evidence, Symptom, combine
from gpuplane.doctor.snapshot import FORMAT_VERSION, SnapshotError

E, W, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO

# (severity, rule, where contains, fix contains, evidence sources contain)
EXPECTED: dict[str, list[tuple[Severity, str, str, tuple[str, ...], tuple[str, ...]]]] = {
    # k8s-snap custom base dir + Docker's containerd: the toolkit configured the other one.
    "incident-1": [
        (E, "FM17", "Release gpu-operator/gpu-operator values.toolkit.env",
         ("gpuplane:cluster.distro: k8s-snap",
          "gpuplane:cluster.containerdBaseDir: /var/lib/k8s-containerd",
          "{name: CONTAINERD_CONFIG, value: /var/lib/k8s-containerd/k8s-containerd/etc/"
          "containerd/config.toml}",
          "{name: CONTAINERD_SOCKET, value: /var/lib/k8s-containerd/k8s-containerd/run/"
          "containerd/containerd.sock}"),
         ("node gpu-a1: containerd daemons", "node gpu-a1: CRI probe",
          "event Pod default/cuda-vectoradd: FailedCreatePodSandBox",
          "event Pod gpu-operator/nvidia-operator-validator-q8d4n: FailedCreatePodSandBox",
          "log Pod gpu-operator/nvidia-container-toolkit-daemonset-7xk2p")),
        (W, "FM09", "values.toolkit.env (gpuplane:runtime.nvidiaDefault)",
         ("gpuplane:runtime.nvidiaDefault", "CONTAINERD_SET_AS_DEFAULT=false"), ()),
        (INFO, "FM01", "node gpu-a1: /var/lib/k8s-containerd/k8s-containerd/etc/containerd/"
                    "config.toml:5", (), ("containerd config dump (pid 1377)",)),
    ],
    # Amazon Linux 2 + ubuntu20.04-flavoured toolkit: GLIBC_2.27 not found everywhere.
    "incident-2": [
        (E, "FM15", "values.toolkit.version (gpuplane:gpuOperator.toolkitImage)",
         ("gpuplane:gpuOperator.toolkitImage.tag", "-centos7", "toolkit.version="),
         ("nvidia-container-cli", "libnvidia-container.so.1", "CRI probe",
          "event Pod gpu-operator/nvidia-operator-validator-5hkzq: Failed",
          "Pod gpu-operator/gpu-feature-discovery-v7lcr container toolkit-validation")),
    ],
    # k8s-snap drop-ins on containerd 1.7: runc lost, CRI plugin down, node NotReady.
    "incident-3": [
        (E, "FM02", "node dgx-1: /etc/containerd/conf.d/99-nvidia.toml:3",
         ("copy what /etc/containerd/conf.d/00-k8s-runc.toml defines",
          "gpuplane:cluster.containerdVersion"),
         ("containerd config dump (pid 1190)", "CRI probe", "Node dgx-1: Ready=False",
          "event Pod default/cuda-vectoradd: FailedScheduling")),
    ],
    # RKE2: the runtime works (crictl), pods lack runtimeClassName, no RuntimeClass.
    "incident-4": [
        (E, "FM11", "RuntimeClass nvidia",
         ("gpuplane:runtime.createRuntimeClass: true", "operator.runtimeClass=nvidia"),
         ("node rke2-gpu-0: CRI probe",)),
        (E, "FM11", "Pod ml/pytorch-train-6c9f7d8b5-wq2lx (of ReplicaSet pytorch-train-6c9f7d8b5)",
         ("runtimeClassName: nvidia", "gpuplane:runtime.nvidiaDefault: true"), ()),
    ],
    # HAMi pending or unshared.
    "incident-5": [
        (E, "FM13", "MutatingWebhookConfiguration hami-webhook webhook vgpu.hami.io",
         ("gpuplane:hami.values",), ("Pod ml/train-0", "Pod ml/infer-0")),
        (E, "FM13", "Node gpu-c2 metadata.labels.gpu", ("gpuplane:nodes", "kubectl label node "
                                                        "gpu-c2 gpu=on"), ()),
        (E, "FM13", "Release hami-system/hami values.devicePlugin.runtimeClassName",
         ("devicePlugin.runtimeClassName=nvidia",), ()),
        (E, "FM13", "Release hami-system/hami values.scheduler.kubeScheduler.image.tag",
         ("gpuplane:hami.schedulerImageTag: v1.31.4",),
         ("Deployment hami-system/hami-scheduler container kube-scheduler",
          "event Pod hami-system/hami-scheduler-5b9d7c6f4d-2kq8m: BackOff")),
        (E, "FM14", "Pod ml/train-0 resources.limits['nvidia.com/gpumem']",
         ("gpuplane:hami.deviceMemoryScaling", "23028 MiB"),
         ("event Pod ml/train-0: FailedScheduling",)),
        (W, "FM13", "HAMi in namespace hami-system", ("gpuplane:hami.namespace: hami-system",),
         ()),
        (W, "FM13", "values.scheduler.admissionWebhook.failurePolicy",
         ("gpuplane:hami.webhookFailurePolicy: Fail",),
         ("MutatingWebhookConfiguration hami-webhook",)),
        (W, "FM14", "Pod ml/infer-0 spec.containers[0].env[0]", ("CUDA_DISABLE_CONTROL",), ()),
    ],
    "healthy": [],
}


@pytest.mark.parametrize("incident", sorted(EXPECTED))
def test_incident_gives_exactly_the_expected_findings(incident: str) -> None:
    report = analyse(load(DATA / incident))
    got = [(d.finding.severity, d.finding.id) for d in report.diagnoses]
    assert got == [(s, r) for s, r, *_ in EXPECTED[incident]], \
        "\n".join(f"{d.finding.severity} {d.finding.id} {d.finding.where}"
                  for d in report.diagnoses)
    for diagnosis, (_, _, where, fixes, sources) in zip(report.diagnoses, EXPECTED[incident],
                                                          strict=True):
        finding = diagnosis.finding
        assert where in finding.where, finding.where
        for text in fixes:
            assert text in finding.fix, (text, finding.fix)
        seen = [f"{e.source}: {e.detail}" for e in diagnosis.evidence]
        for text in sources:
            assert any(text in s for s in seen), (text, seen)
    assert report.failed is any(s is E for s, *_ in EXPECTED[incident])


@pytest.mark.parametrize("incident", sorted(EXPECTED))
def test_every_fix_names_the_stack_key_and_the_raw_change(incident: str) -> None:
    report = analyse(load(DATA / incident))
    for diagnosis in report.diagnoses:
        fix = diagnosis.finding.fix
        if diagnosis.finding.severity is INFO:
            continue
        assert "gpuplane:" in fix, fix
        raw = ("raw", "without gpuplane", "helm", "kubectl", ".toml", "pod spec",
               "container")
        assert any(word in fix.lower() for word in raw), fix


def test_intent_record_wins_over_inference_and_a_broken_one_is_reported(tmp_path: Path) -> None:
    report = analyse(load(DATA / "incident-5"))
    assert report.intent_source == "ConfigMap gpu-operator/gpuplane-intent"
    assert report.inferred == {}
    assert report.intent.hami_namespace == "kube-system"

    broken = tmp_path / "snap"
    shutil.copytree(DATA / "incident-5", broken)
    cms = json.loads((broken / "configmaps.json").read_text())
    cms["items"][0]["data"]["intent.json"] = "{not json"
    (broken / "configmaps.json").write_text(json.dumps(cms))
    report = analyse(load(broken))
    assert report.intent_source == "inferred"
    assert report.intent.hami_namespace == "hami-system"
    assert any("gpuplane-intent data.intent.json" in n for n in report.notes), report.notes


def test_inferred_intent_says_where_each_fact_came_from() -> None:
    report = analyse(load(DATA / "incident-1"))
    assert report.intent_source == "inferred"
    intent = report.intent
    assert (intent.distro, intent.containerd_base_dir) == ("k8s-snap", "/var/lib/k8s-containerd")
    assert intent.containerd_version == "1.7.24" and intent.kubernetes_version == "1.31.4"
    assert report.inferred["distro"].startswith("node gpu-a1: containerd reads ")
    assert report.inferred["nvidia_default"] == "node gpu-a1: containerd config dump"
    assert [(n.name, n.gpus, n.os) for n in intent.nodes] == [("gpu-a1", 1, "ubuntu22.04")]
    rke2 = analyse(load(DATA / "incident-4")).intent
    assert (rke2.distro, rke2.toolkit, rke2.cdi) == ("rke2", "host", False)
    assert rke2.nodes[0].os == "rocky9.4" and rke2.nodes[0].gpus == 2


# ------------------------------------------------------------------ snapshots


def test_snapshot_save_load_round_trip(tmp_path: Path) -> None:
    original = load(DATA / "incident-1")
    save(original, tmp_path / "copy")
    again = load(tmp_path / "copy")
    assert again == original
    assert report_to_json(analyse(again)) == report_to_json(analyse(original))
    meta = json.loads((tmp_path / "copy" / "snapshot.json").read_text())
    assert meta["format"] == "gpuplane-doctor-snapshot"
    assert meta["formatVersion"] == FORMAT_VERSION
    assert "nodes/gpu-a1/inspection.json" in meta["files"]
    nodes = json.loads((tmp_path / "copy" / "nodes.json").read_text())
    assert (nodes["apiVersion"], nodes["kind"]) == ("v1", "NodeList")


def test_a_hand_made_snapshot_needs_only_the_lists_it_has(tmp_path: Path) -> None:
    """`kubectl get nodes,pods -o json` output is enough to run the doctor."""
    nodes = json.loads((DATA / "incident-4" / "nodes.json").read_text())
    pods = json.loads((DATA / "incident-4" / "pods.json").read_text())
    (tmp_path / "nodes.json").write_text(json.dumps(nodes))
    (tmp_path / "pods.json").write_text(json.dumps(pods))
    report = analyse(load(tmp_path))
    ids = sorted(d.finding.id for d in report.diagnoses)
    assert "FM11" in ids and report.intent_source == "inferred"


@pytest.mark.parametrize(("file", "text", "message"), [
    ("nodes.json", '{"items": [\n1,', "nodes.json:2:3: not JSON"),
    ("pods.json", '{"items": {}}', "pods.json: expected a list object"),
    ("snapshot.json", '{"format": "gpuplane-doctor-snapshot", "formatVersion": 99}',
     "formatVersion 99 is not supported"),
    ("snapshot.json", '{"format": "other"}', "`format` is 'other'"),
])
def test_bad_snapshot_files_name_the_file_and_the_problem(tmp_path: Path, file: str,
                                                          text: str, message: str) -> None:
    (tmp_path / file).write_text(text)
    with pytest.raises(SnapshotError, match=message.replace("[", r"\[")):
        load(tmp_path)


# ------------------------------------------------------------------ causes and symptoms


def _finding(rule: str, where: str, message: str = "m") -> Finding:
    return Finding(rule, Severity.ERROR, message, where, "fix")


def test_symptom_becomes_evidence_of_the_first_matching_cause() -> None:
    causes = [Diagnosis(_finding("FM01", "a"), "node:n1"),
              Diagnosis(_finding("FM17", "b"), "operator")]
    seen = Evidence("event", "no runtime")
    out = combine(causes, [Symptom(("FM17", "FM01"), ("node:n1", "operator"), seen)])
    # FM17 is tried before FM01 (the report then sorts by id)
    assert {d.finding.id: d.evidence for d in out} == {"FM01": [], "FM17": [seen]}


def test_symptom_without_cause_reports_its_fallback_once() -> None:
    fallback = _finding("FM13", "webhook")
    one, two = Evidence("pod a", "x"), Evidence("pod b", "y")
    out = combine([], [Symptom(("FM13",), ("hami",), one, fallback),
                       Symptom(("FM13",), ("hami",), two, fallback)])
    assert len(out) == 1 and out[0].evidence == [one, two]
    assert combine([], [Symptom(("FM13",), ("hami",), one)]) == []


def test_about_keeps_a_symptom_off_an_unrelated_finding_of_the_same_rule() -> None:
    tag = Diagnosis(_finding("FM13", "values.scheduler.kubeScheduler.image.tag"), "hami")
    fallback = _finding("FM13", "webhook selector")
    seen = Evidence("pod", "not mutated")
    out = combine([tag], [Symptom(("FM13",), ("hami",), seen, fallback, about=("Selector",))])
    assert [d.finding.where for d in out] == ["values.scheduler.kubeScheduler.image.tag",
                                              "webhook selector"]
    assert out[0].evidence == [] and out[1].evidence == [seen]


# ------------------------------------------------------------------ CLI


def test_cli_exit_codes_from_snapshots(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--from", str(DATA / "healthy")]) == 0
    out = capsys.readouterr().out
    assert "HEALTHY: 0 error(s)" in out
    assert main(["doctor", "--from", str(DATA / "incident-3")]) == 1
    out = capsys.readouterr().out
    assert "ERROR   FM02" in out and "fix: On containerd < 2.1" in out
    assert "seen: node dgx-1: containerd config dump (pid 1190)" in out


def test_cli_json_is_the_documented_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--from", str(DATA / "incident-2"), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"format", "formatVersion", "verdict", "summary", "cluster", "intent",
                         "findings", "nodes", "notes"}
    assert data["verdict"] == "problems"
    assert data["summary"] == {"error": 1, "warning": 0, "info": 0}
    finding = data["findings"][0]
    assert set(finding) == {"id", "severity", "title", "message", "where", "fix", "scope",
                            "evidence"}
    assert finding["title"] == "toolkit image flavour does not fit the node OS"
    assert all(set(e) == {"source", "detail"} for e in finding["evidence"])
    assert data["intent"]["source"] == "inferred"
    assert data["intent"]["values"]["nodes"][0]["os"] == "amzn2"
    node = data["nodes"]["ip-10-0-3-17.ec2.internal"]
    assert node["effective"]["default_runtime"] == "nvidia"


def test_cli_cannot_collect_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--from", str(tmp_path / "missing")]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert main(["doctor", "--kubeconfig", str(tmp_path / "nope.yaml"), "--no-inspect"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuplane doctor: could not collect:") and "nope.yaml" in err


def test_cli_save_writes_a_snapshot_that_loads(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--from", str(DATA / "incident-4"), "--save",
                 str(tmp_path / "out"), "--format", "json"]) == 1
    assert load(tmp_path / "out") == load(DATA / "incident-4")
    assert "snapshot written to" in capsys.readouterr().err


@pytest.mark.real
def test_committed_incident_snapshots_are_what_the_generator_writes(tmp_path: Path) -> None:
    """The snapshots are reproducible: the inspection program and real containerd 1.7
    (config dump) give exactly the committed files, so they cannot drift from the code."""
    from support import oracle
    from support.doctor_incidents import INCIDENTS, record_api
    oracle.require_line("1.7")
    for incident, build in INCIDENTS.items():
        snap = build()
        save(snap, tmp_path / incident)
        committed = sorted(p.relative_to(DATA / incident) for p in (DATA / incident).rglob("*")
                           if p.is_file())
        written = sorted(p.relative_to(tmp_path / incident)
                         for p in (tmp_path / incident).rglob("*") if p.is_file())
        assert written == committed, incident
        for rel in written:
            assert json.loads((tmp_path / incident / rel).read_text()) == json.loads(
                (DATA / incident / rel).read_text()), f"{incident}/{rel}"
        if incident == "incident-1":
            record_api(snap, tmp_path / "api")
            for path in (DATA / "api" / incident).rglob("*"):
                if path.is_file():
                    rel = path.relative_to(DATA / "api" / incident)
                    assert (tmp_path / "api" / rel).read_text() == path.read_text(), rel


# ------------------------------------------------------------------ event symptoms


def _with_events(incident: str, *events: dict) -> DoctorReport:
    snap = load(DATA / incident)
    snap.events = [*snap.events, *events]
    return analyse(snap)


def _event(kind: str, ns: str, name: str, reason: str, message: str) -> dict:
    return {"kind": "Event", "type": "Warning", "reason": reason, "message": message,
            "count": 3, "involvedObject": {"kind": kind, "namespace": ns, "name": name},
            "metadata": {"name": f"{name}.1", "namespace": ns}}


def test_runtimeclass_rejection_of_a_replicaset_is_evidence_of_the_missing_class() -> None:
    report = _with_events("incident-4", _event(
        "ReplicaSet", "ml", "infer-7d9c", "FailedCreate",
        'Error creating: pods "infer-7d9c-" is forbidden: pod rejected: RuntimeClass '
        '"nvidia" not found'))
    cluster = next(d for d in report.diagnoses if d.scope == "cluster")
    assert any(e.source == "event ReplicaSet ml/infer-7d9c: FailedCreate (x3)"
               for e in cluster.evidence)
    assert len(report.diagnoses) == 2          # evidence, not a new finding


def test_cdi_and_admission_errors_point_at_hami_causes() -> None:
    report = _with_events(
        "incident-5",
        _event("Pod", "ml", "infer-0", "Failed", "Error: failed to create containerd task: "
               "failed to inject CDI devices: unresolvable CDI devices nvidia.com/gpu=all"),
        _event("Pod", "ml", "infer-0", "UnexpectedAdmissionError", "Allocate failed due to "
               "requested number of devices unavailable for nvidia.com/gpu"))
    cdi = [d for d in report.diagnoses if "unresolvable CDI devices" in d.finding.message]
    assert len(cdi) == 1 and cdi[0].finding.id == "FM13"
    assert "gpuplane:gpuOperator.cdi: false" in cdi[0].finding.fix
    # No FM12 cause exists and admission errors have no fallback: nothing is invented.
    assert not any(d.finding.id == "FM12" for d in report.diagnoses)


def test_insufficient_gpus_with_time_slicing_point_at_the_allocatable_check() -> None:
    snap = load(DATA / "incident-3")
    node = snap.nodes[0]
    node["status"]["allocatable"]["nvidia.com/gpu"] = "1"        # plugin ignored the config
    node["status"]["conditions"][0].update(status="True", reason="KubeletReady")
    snap.inspections = {}
    snap.events.append(_event("Pod", "default", "cuda-vectoradd", "FailedScheduling",
                              "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."))
    report = analyse(snap)
    fm10 = [d for d in report.diagnoses if d.finding.id == "FM10"]
    assert len(fm10) == 1 and "advertises 1 nvidia.com/gpu" in fm10[0].finding.message
    assert any("Insufficient nvidia.com/gpu" in e.detail for e in fm10[0].evidence)
