"""`gpuplane doctor --from` on snapshots that are malformed, empty or from clusters gpuplane
does not model: exit 2 naming the file and what was expected, never a traceback; a
containerd outside the model is noted and the rules that do not depend on it still run."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support.doctor_support import DATA

from gpuplane.cli.main import main
from gpuplane.doctor import analyse, load

AL2_NODE = "ip-10-0-3-17.ec2.internal"


def _copy(incident: str, target: Path) -> Path:
    if incident == "hand-made":
        target.mkdir(parents=True)
        for file in ("nodes.json", "pods.json"):
            shutil.copy(DATA / "incident-4" / file, target / file)
        return target
    shutil.copytree(DATA / incident, target)
    return target


def _doctor(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(["doctor", "--from", str(path), "--format", "json"])
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------ malformed files


@pytest.mark.parametrize(("file", "text", "message"), [
    ("version.json", "[1]", "version.json: expected the API server's version object"),
    ("snapshot.json", "[1]", "snapshot.json: expected the snapshot's metadata object"),
    ("version.json", '"v1.31"', "version.json: expected the API server's version object"),
    ("version.json", '{"gitVersion": 131}', "version.json: gitVersion: expected a string"),
    ("snapshot.json", '{"format": "gpuplane-doctor-snapshot", "formatVersion": 1, '
                      '"notes": "x"}', "snapshot.json: notes: expected a list"),
    ("nodes.json", '{"items": [{"metadata": {"labels": [1]}}]}',
     "nodes.json: items[0].metadata.labels: expected an object, got a list"),
    ("pods.json", '{"items": [{"spec": {"containers": [{"resources": {"limits": '
                  '{"nvidia.com/gpu": [1]}}}]}}]}',
     "pods.json: items[0].spec.containers[0].resources.limits.nvidia.com/gpu: expected a "
     "string or an integer or a number, got a list"),
    ("events.json", '{"items": [{"involvedObject": "Pod x"}]}',
     "events.json: items[0].involvedObject: expected an object, got the string 'Pod x'"),
    ("nodes/gpu-d1/inspection.json", "[]", "inspection.json: expected the JSON object"),
    ("nodes/gpu-d1/inspection.json", '{"daemons": [{"pid": "12"}]}',
     "inspection.json: daemons[0].pid: expected an integer"),
    ("pods.json", "\xff\xfe", "pods.json: not UTF-8 text"),
    ("nodes.json", "[" * 100000, "nodes.json: not JSON"),
])
def test_malformed_file_exits_2_naming_the_file_and_what_was_expected(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, text: str,
        message: str) -> None:
    snap = _copy("healthy", tmp_path / "snap")
    target = snap / file
    if text == "\xff\xfe":
        target.write_bytes(b"\xff\xfe{")
    else:
        target.write_text(text)
    rc, out, err = _doctor(snap, capsys)
    assert rc == 2 and out == ""
    assert err.startswith("gpuplane doctor: cannot read the snapshot: ")
    assert str(target) in err and message in err, err


def test_a_file_the_snapshot_lists_but_lacks_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = _copy("healthy", tmp_path / "snap")
    (snap / "events.json").unlink()
    rc, _, err = _doctor(snap, capsys)
    assert rc == 2
    assert f"{snap / 'events.json'}: missing, but snapshot.json lists it" in err


def test_an_empty_snapshot_has_nothing_to_diagnose(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _doctor(tmp_path, capsys)
    assert (rc, out) == (2, "")
    assert "nothing to diagnose" in err and "no nodes" in err
    (tmp_path / "nodes.json").write_text('{"kind": "List", "items": []}')
    (tmp_path / "pods.json").write_text('{"kind": "List", "items": []}')
    rc, out, err = _doctor(tmp_path, capsys)
    assert rc == 2 and "nothing to diagnose" in err


# ------------------------------------------------------------------ containerd outside the model


def _set_containerd(snap: Path, version: str) -> None:
    """The Amazon Linux 2 node of incident 2, reporting another containerd (as the node's
    status and the daemon's own `--version` would)."""
    nodes = json.loads((snap / "nodes.json").read_text())
    nodes["items"][0]["status"]["nodeInfo"]["containerRuntimeVersion"] = f"containerd://{version}"
    (snap / "nodes.json").write_text(json.dumps(nodes))
    path = snap / "nodes" / AL2_NODE / "inspection.json"
    inspection = json.loads(path.read_text())
    for daemon in inspection["daemons"]:
        daemon["version"] = (f"containerd github.com/containerd/containerd v{version} "
                             "7ad184331fa3e55e52b890ea95e65ba581ae3429")
    path.write_text(json.dumps(inspection))


@pytest.mark.parametrize("version", ["1.4.13", "1.5.18", "3.0.0"])
def test_containerd_outside_the_model_is_noted_and_fm15_still_found(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str) -> None:
    snap = _copy("incident-2", tmp_path / "snap")
    _set_containerd(snap, version)
    rc, out, err = _doctor(snap, capsys)
    assert rc == 1, err
    data = json.loads(out)
    fm15 = [f for f in data["findings"] if f["id"] == "FM15"]
    assert len(fm15) == 1 and fm15[0]["severity"] == "error"
    assert "gpuplane:gpuOperator.toolkitImage.tag" in fm15[0]["fix"]
    sources = " ".join(e["source"] for e in fm15[0]["evidence"])
    assert "nvidia-container-cli" in sources and "CRI probe" in sources
    line = ".".join(version.split(".")[:2])
    assert any(f"containerd {version} on the nodes: containerd {line} is not supported"
               in n for n in data["notes"]), data["notes"]
    assert any(f"node {AL2_NODE}: containerd {line} is not supported" in n
               for n in data["notes"]), data["notes"]
    assert data["nodes"][AL2_NODE]["containerd"].startswith("containerd github.com")


def test_findings_that_depend_on_the_containerd_line_are_not_guessed(tmp_path: Path) -> None:
    """CDI on: FM16 depends on the line (1.6 has no CDI), so on 1.4 it is not checked."""
    snap = load(_copy("incident-2", tmp_path / "snap"))
    for record in snap.helm_releases:
        record["values"]["cdi"] = {"enabled": True}
    snap.clusterpolicies[0]["spec"]["cdi"] = {"enabled": True}
    snap.nodes[0]["status"]["nodeInfo"]["containerRuntimeVersion"] = "containerd://1.6.20"
    assert "FM16" in {d.finding.id for d in analyse(snap).diagnoses}
    snap.nodes[0]["status"]["nodeInfo"]["containerRuntimeVersion"] = "containerd://1.4.13"
    report = analyse(snap)
    assert "FM16" not in {d.finding.id for d in report.diagnoses}
    assert "FM15" in {d.finding.id for d in report.diagnoses}
    assert any("not checked: " in n and "FM16" in n for n in report.notes), report.notes


# ------------------------------------------------------------------ fuzz

_FILES = ["snapshot.json", "version.json", "nodes.json", "pods.json", "events.json",
          "replicasets.json",
          "daemonsets.json", "deployments.json", "runtimeclasses.json", "configmaps.json",
          "mutatingwebhookconfigurations.json", "clusterpolicies.json", "helm-releases.json",
          "logs.json", "namespaces.json"]
_BASES = {"incident-1": "nodes/gpu-a1/inspection.json",
          "incident-5": None, "healthy": "nodes/gpu-d1/inspection.json",
          "hand-made": None}       # incident-4's nodes and pods only, no snapshot.json
_TEMPLATES: dict[str, Path] = {}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False)
    | st.text(max_size=12) | st.sampled_from([
        "nvidia", "containerd://1.4.13", "containerd://3.0.0", "v1.31.4+k3s1", "v1.29.0",
        "registry.k8s.io/kube-scheduler:v1.2", "Ready", "True", "Warning", "1", "-1",
        "10Gi", "0.5", "1e309", "abc", "", "/etc/containerd/config.toml", "[plugins",
        "hami-scheduler", "device-plugin", "GLIBC_2.27' not found"]),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.sampled_from(["items", "metadata", "name", "spec", "status",
                                       "labels", "kind", "data", "count"]) | st.text(max_size=6),
                      children, max_size=3),
    max_leaves=8)


def _mutate(data: st.DataObject, doc: Any) -> Any:
    """Replace or delete one value somewhere in `doc` (or the whole document)."""
    if data.draw(st.integers(0, 4)) == 0:
        return data.draw(json_values)
    path: list[Any] = []
    node = doc
    while isinstance(node, (dict, list)) and node and data.draw(st.integers(0, 3)) > 0:
        key = data.draw(st.sampled_from(sorted(node) if isinstance(node, dict)
                                        else range(len(node))))
        path.append(key)
        node = node[key]
    if not path:
        return data.draw(json_values)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and data.draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(json_values)
    return doc


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_snapshot_files_never_give_a_traceback(
        capsys: pytest.CaptureFixture[str], data: st.DataObject) -> None:
    base = data.draw(st.sampled_from(sorted(_BASES)))
    files = _FILES + ([_BASES[base]] if _BASES[base] else [])
    chosen = data.draw(st.lists(st.sampled_from(files), min_size=1, max_size=3, unique=True))
    with tempfile.TemporaryDirectory(prefix="gp-fuzz-") as tmp:
        snap = _copy(base, Path(tmp) / "snap")
        for file in chosen:
            path = snap / file
            if not path.is_file():
                path.write_text(json.dumps(data.draw(json_values)))
                continue
            if data.draw(st.integers(0, 9)) == 0:
                path.write_bytes(data.draw(st.binary(max_size=20)))
                continue
            doc = json.loads(path.read_text())
            for _ in range(data.draw(st.integers(1, 3))):
                doc = _mutate(data, doc)
            path.write_text(json.dumps(doc))
        rc = main(["doctor", "--from", str(snap), "--format", "json"])
        out, err = capsys.readouterr()
    event(f"exit {rc}")
    assert rc in (0, 1, 2)
    assert "Traceback" not in err
    if rc == 2:
        assert err.startswith("gpuplane doctor: ") and out == ""
    else:
        assert json.loads(out)["verdict"] in ("healthy", "incomplete", "problems")


def test_fields_newer_servers_add_are_accepted(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The shape check reads only what the doctor uses: a v1.31 node's `nodeInfo.swap`
    object, a pod's `resources.claims`, an event with `eventTime: null` are fine."""
    snap = _copy("incident-4", tmp_path / "snap")
    nodes = json.loads((snap / "nodes.json").read_text())
    nodes["items"][0]["status"]["nodeInfo"]["swap"] = {"capacity": 0}
    nodes["items"][0]["status"]["features"] = {"supplementalGroupsPolicy": True}
    (snap / "nodes.json").write_text(json.dumps(nodes))
    pods = json.loads((snap / "pods.json").read_text())
    pods["items"][0]["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    (snap / "pods.json").write_text(json.dumps(pods))
    (snap / "events.json").write_text(json.dumps({"kind": "EventList", "items": [{
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "x"},
        "eventTime": None, "series": None, "reason": "Scheduled", "type": "Normal"}]}))
    rc, _, err = _doctor(snap, capsys)
    assert rc == 1, err
