"""Collection against recorded API responses (tests/data/doctor/api/incident-1): through
the ClusterClient interface, and through the official kubernetes client talking HTTP to a
loopback server that replays them. No cluster is needed."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest
from support.doctor_support import DATA

from gpuplane.cli.main import main
from gpuplane.doctor import analyse, load, report_to_json
from gpuplane.doctor.collect import collect
from gpuplane.doctor.helm import (
    REDACTED,
    ReleaseDecodeError,
    decode_release,
    encode_release,
    release_record,
)
from gpuplane.kube.client import ApiError, CollectError, KubeClient, describe_permission

API = DATA / "api" / "incident-1"
SNAP = DATA / "incident-1"
_POD = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)(?P<log>/log)?$")


class RecordedClient:
    """ClusterClient replaying recorded responses; inspection pods 'run' at once and
    print the inspection recorded for their node."""

    def __init__(self, root: Path, *, fail: dict[tuple[str, str], int] | None = None,
                 inspections: dict[str, dict[str, Any]] | None = None):
        self.root, self.fail = root, fail or {}
        self.inspections = inspections or {}
        self.calls: list[tuple[str, str, dict[str, str] | None]] = []
        self.pods: dict[str, dict[str, Any]] = {}

    def _check(self, method: str, path: str) -> None:
        status = self.fail.get((method, path))
        if status is not None:
            raise ApiError(status, method, path, f"recorded {status}")

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        self.calls.append(("GET", path, params))
        self._check("GET", path)
        match = _POD.match(path)
        if match and match["name"] in self.pods:
            return {"status": {"phase": "Succeeded"}}
        file = self.root / f"{path.lstrip('/')}.json"
        if not file.is_file():
            raise ApiError(404, "GET", path, "the server could not find the requested resource")
        return json.loads(file.read_text())

    def get_text(self, path: str, params: dict[str, str] | None = None) -> str:
        self.calls.append(("LOG", path, params))
        self._check("GET", path)
        match = _POD.match(path)
        if match and match["name"] in self.pods:
            node = self.pods[match["name"]]["spec"]["nodeName"]
            return "starting\n" + json.dumps(self.inspections[node]) + "\n"
        file = self.root / f"{path.lstrip('/')}.txt"
        if not file.is_file():
            raise ApiError(404, "GET", path, "not found")
        return file.read_text()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        self.calls.append(("POST", path, None))
        self._check("POST", path)
        self.pods[body["metadata"]["name"]] = body
        return body

    def delete(self, path: str) -> None:
        self.calls.append(("DELETE", path, None))


def test_collect_keeps_the_gpu_objects_and_drops_the_rest() -> None:
    snap = load(SNAP)
    client = RecordedClient(API)
    got = collect(client, inspect=False)
    for attr in ("nodes", "pods", "events", "daemonsets", "deployments", "replicasets",
                 "runtimeclasses",
                 "configmaps", "webhooks", "clusterpolicies", "namespaces", "logs"):
        assert getattr(got, attr) == getattr(snap, attr), attr
    assert got.version == snap.version
    assert [r["name"] for r in got.helm_releases] == ["gpu-operator"]   # not ingress-nginx
    assert got.helm_releases == snap.helm_releases
    assert got.notes == [] and got.inspections == {}
    logs = [c for c in client.calls if c[0] == "LOG"]
    assert logs == [("LOG", "/api/v1/namespaces/gpu-operator/pods/"
                     "nvidia-container-toolkit-daemonset-7xk2p/log",
                     {"container": "main", "tailLines": "60", "previous": "true"})]
    secrets = next(c for c in client.calls if c[1] == "/api/v1/secrets")
    assert secrets[2] == {"labelSelector": "owner=helm,status=deployed"}


def test_collect_with_inspection_gives_the_same_diagnosis_as_the_snapshot() -> None:
    snap = load(SNAP)
    client = RecordedClient(API, inspections=snap.inspections)
    got = collect(client, inspect=True)
    assert got.inspections == snap.inspections
    posts = [c for c in client.calls if c[0] == "POST"]
    assert posts == [("POST", "/api/v1/namespaces/kube-system/pods", None)]
    pod = next(iter(client.pods.values()))
    assert pod["spec"]["nodeName"] == "gpu-a1"
    deletes = [c[1] for c in client.calls if c[0] == "DELETE"]
    assert deletes[-1].endswith(pod["metadata"]["name"])   # the pod is removed again
    ours, theirs = report_to_json(analyse(got)), report_to_json(analyse(snap))
    assert ours["findings"] == theirs["findings"] and ours["intent"] == theirs["intent"]


@pytest.mark.parametrize(("path", "status", "message"), [
    ("/api/v1/nodes", 403, "forbidden: the doctor needs permission to list nodes"),
    ("/api/v1/pods", 403, r"list pods \(all namespaces\)"),
    ("/version", 0, "cluster unreachable"),
    ("/version", 401, "unauthorized"),
])
def test_collect_cannot_go_on_without_nodes_or_pods(path: str, status: int,
                                                     message: str) -> None:
    with pytest.raises(CollectError, match=message):
        collect(RecordedClient(API, fail={("GET", path): status}), inspect=False)


def test_missing_optional_permissions_become_notes() -> None:
    client = RecordedClient(API, fail={("GET", "/api/v1/secrets"): 403,
                                       ("GET", "/apis/nvidia.com/v1/clusterpolicies"): 404,
                                       ("POST", "/api/v1/namespaces/kube-system/pods"): 403})
    got = collect(client, inspect=True)
    assert got.helm_releases == [] and got.clusterpolicies == []
    assert got.notes == [
        "secrets not collected (forbidden: needs permission to list secrets (all namespaces))",
        "node gpu-a1 was not inspected: forbidden: needs permission to create pods in "
        "namespace kube-system (recorded 403)"]
    report = analyse(got)          # still diagnoses: the pod's event names FM01 by itself
    assert [d.finding.id for d in report.diagnoses if d.finding.severity == "error"] == ["FM01"]


def test_only_named_nodes_are_inspected_and_unknown_ones_refused() -> None:
    client = RecordedClient(API, inspections=load(SNAP).inspections)
    with pytest.raises(CollectError, match="--node gpu-zz: no such node"):
        collect(client, inspect=True, only_nodes=["gpu-zz"])


@pytest.mark.parametrize(("method", "path", "want"), [
    ("GET", "/api/v1/nodes", "list nodes"),
    ("GET", "/api/v1/pods", "list pods (all namespaces)"),
    ("GET", "/apis/nvidia.com/v1/clusterpolicies", "list clusterpolicies.nvidia.com"),
    ("POST", "/api/v1/namespaces/kube-system/pods", "create pods in namespace kube-system"),
    ("GET", "/api/v1/namespaces/gpu-operator/pods/x/log", "get pods/log in namespace "
                                                          "gpu-operator"),
])
def test_permissions_are_named_as_rbac_rules(method: str, path: str, want: str) -> None:
    assert describe_permission(method, path) == want


# ------------------------------------------------------------------ helm


def test_helm_release_secret_round_trip_and_redaction() -> None:
    release = {"name": "gpu-operator", "namespace": "gpu-operator", "version": 3,
               "info": {"status": "deployed"},
               "chart": {"metadata": {"name": "gpu-operator", "version": "v25.10.1",
                                      "appVersion": "v25.10.1"},
                         "values": {"driver": {"enabled": True}}},
               "config": {"driver": {"enabled": False, "licensingConfig": {
                   "nlsEnabled": True, "secretName": "nls", "configMapName": ""}},
                   "ngc": {"apiKey": "abc"}}}
    secret = {"metadata": {"name": "sh.helm.release.v1.gpu-operator.v3"},
              "data": {"release": encode_release(release)}}
    assert decode_release(secret) == release
    record = release_record(decode_release(secret))
    assert record["revision"] == 3 and record["chart"]["version"] == "v25.10.1"
    assert record["values"]["ngc"]["apiKey"] == REDACTED
    assert record["values"]["driver"]["licensingConfig"]["secretName"] == REDACTED
    assert record["chartValues"] == {"driver": {"enabled": True}}
    other = {**release, "chart": {"metadata": {"name": "ingress-nginx"}}}
    assert release_record(other) is None


def test_helm_release_garbage_is_a_clear_error() -> None:
    with pytest.raises(ReleaseDecodeError, match="Secret x: `release` is not base64"):
        decode_release({"metadata": {"name": "x"}, "data": {"release": "%%%"}})
    with pytest.raises(ReleaseDecodeError, match="no `release` key"):
        decode_release({"metadata": {"name": "x"}, "data": {}})


# ------------------------------------------------------------------ the real client over HTTP


class _Replay(BaseHTTPRequestHandler):
    root: Path = API
    token = "t0ken"
    forbidden: ClassVar[set[str]] = {"/api/v1/secrets"}

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any, ctype: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if self.headers.get("Authorization") != f"Bearer {self.token}":
            self._send(401, {"kind": "Status", "code": 401, "message": "Unauthorized"})
            return
        if url.path in self.forbidden:
            self._send(403, {"kind": "Status", "code": 403, "reason": "Forbidden",
                             "message": f"{url.path.rsplit('/', 1)[-1]} is forbidden: User "
                                        "\"doctor\" cannot list resource at the cluster scope"})
            return
        if url.path.endswith("/log"):
            query = parse_qs(url.query)
            file = self.root / f"{url.path.lstrip('/')}.txt"
            if file.is_file() and query.get("container"):
                self._send(200, file.read_bytes(), "text/plain")
                return
        file = self.root / f"{url.path.lstrip('/')}.json"
        if file.is_file():
            self._send(200, file.read_bytes())
        else:
            self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound",
                             "message": "the server could not find the requested resource"})


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Replay)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _kubeconfig(path: Path, server: str, token: str = "t0ken") -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": server}}],
        "users": [{"name": "doctor", "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "doctor"}}],
    }))
    return path


def test_kube_client_reads_api_json_and_names_the_missing_permission(
        server: str, tmp_path: Path) -> None:
    client = KubeClient(str(_kubeconfig(tmp_path / "kc", server)))
    assert client.get("/api/v1/nodes")["items"][0]["metadata"]["name"] == "gpu-a1"
    assert client.get_text("/api/v1/namespaces/gpu-operator/pods/nvidia-container-toolkit-"
                           "daemonset-7xk2p/log", {"container": "main"}).startswith("Using")
    with pytest.raises(ApiError) as err:
        client.get("/api/v1/secrets", {"labelSelector": "owner=helm"})
    assert err.value.status == 403 and "secrets is forbidden" in str(err.value)
    assert err.value.permission == "list secrets (all namespaces)"
    snap = collect(client, inspect=False)
    assert snap.notes == ["secrets not collected (forbidden: needs permission to list "
                          "secrets (all namespaces))"]
    assert [n["metadata"]["name"] for n in snap.nodes] == ["gpu-a1"]
    assert snap.clusterpolicies == load(SNAP).clusterpolicies


def test_cli_against_a_live_api_and_its_failures(server: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    good = _kubeconfig(tmp_path / "good", server)
    assert main(["doctor", "--kubeconfig", str(good), "--no-inspect", "--format", "json",
                 "--save", str(tmp_path / "snap")]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "problems"
    assert load(tmp_path / "snap").nodes == load(SNAP).nodes

    bad = _kubeconfig(tmp_path / "bad", server, token="wrong")
    assert main(["doctor", "--kubeconfig", str(bad), "--no-inspect"]) == 2
    assert "could not collect: unauthorized" in capsys.readouterr().err

    down = _kubeconfig(tmp_path / "down", "http://127.0.0.1:1")
    assert main(["doctor", "--kubeconfig", str(down), "--no-inspect"]) == 2
    assert "could not collect: cluster unreachable" in capsys.readouterr().err
