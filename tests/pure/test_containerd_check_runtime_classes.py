"""`gpuplane containerd check` judges the handlers of the cluster's RuntimeClasses as
used GPU runtimes (#39 item 2): taken from a live cluster through the doctor's
`ClusterClient` (faked here, as the doctor's tests fake it), or named offline with
`--runtime-class-handler`. A handler the node's effective config does not define, or
defines with FM07, is an error naming the RuntimeClass and the handler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from gpuplane.cli.main import main
from gpuplane.kube.client import ApiError

CONFIG = "/etc/containerd/config.toml"
V2 = '"io.containerd.grpc.v1.cri"'
RC_PATH = "/apis/node.k8s.io/v1/runtimeclasses"


def _runtime(name: str, systemd: bool, binary: str = "/usr/bin/nvidia-container-runtime") -> str:
    return (f"[plugins.{V2}.containerd.runtimes.{name}]\n"
            'runtime_type = "io.containerd.runc.v2"\n'
            f"[plugins.{V2}.containerd.runtimes.{name}.options]\n"
            f'BinaryName = "{binary}"\n'
            f"SystemdCgroup = {str(systemd).lower()}\n")


def _node(tmp_path: Path, *runtimes: str) -> Path:
    """A node whose one config.toml holds runc (SystemdCgroup = true) and `runtimes`."""
    root = tmp_path / "node"
    text = (f"version = 2\n[plugins.{V2}.containerd]\ndefault_runtime_name = \"runc\"\n"
            f"[plugins.{V2}.containerd.runtimes.runc]\n"
            'runtime_type = "io.containerd.runc.v2"\n'
            f"[plugins.{V2}.containerd.runtimes.runc.options]\nSystemdCgroup = true\n"
            + "".join(runtimes))
    for path, body in ((CONFIG, text), ("/usr/bin/nvidia-container-runtime", "#!/bin/sh\n")):
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    return root


def _rc(name: str, handler: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "handler": handler}


class FakeCluster:
    """A `ClusterClient` that serves a RuntimeClassList, or fails with `status`."""

    made: ClassVar[list[tuple[str | None, str | None]]] = []

    def __init__(self, items: list[dict[str, Any]], status: int | None = None) -> None:
        self.items, self.status = items, status
        self.calls: list[str] = []
        self.server = "https://fake:6443"

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        self.calls.append(path)
        if self.status is not None:
            message = ("cannot reach https://fake:6443: connection refused" if self.status == 0
                       else "runtimeclasses.node.k8s.io is forbidden")
            raise ApiError(self.status, "GET", path, message)
        if path != RC_PATH:
            raise ApiError(404, "GET", path, "not found")
        return {"kind": "RuntimeClassList", "apiVersion": "node.k8s.io/v1", "items": self.items}

    def get_text(self, path: str, params: dict[str, str] | None = None) -> str:
        raise AssertionError("containerd check reads no logs")

    def post(self, path: str, body: dict[str, Any]) -> Any:
        raise AssertionError("containerd check creates nothing")

    def delete(self, path: str) -> None:
        raise AssertionError("containerd check deletes nothing")


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    """The fake stands in for `KubeClient(kubeconfig, context)`; what it was made with is
    recorded."""
    fake = FakeCluster([])

    def make(kubeconfig: str | None = None, context: str | None = None,
             *_: object, **__: object) -> FakeCluster:
        FakeCluster.made.append((kubeconfig, context))
        return fake

    FakeCluster.made = []
    monkeypatch.setattr("gpuplane.kube.client.KubeClient", make)
    return fake


def _check(capsys: pytest.CaptureFixture[str], root: Path,
           *extra: str) -> tuple[int, dict[str, Any] | None, str]:
    code = main(["containerd", "check", "--root", str(root), "--config", CONFIG,
                 "--containerd-version", "1.7", "--format", "json", *extra])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, (json.loads(out) if out else None), err


def _errors(data: dict[str, Any] | None) -> list[dict[str, Any]]:
    assert data is not None
    return [f for f in data["findings"] if f["severity"] == "error"]


def test_handlers_are_taken_from_the_clusters_runtime_classes(
        tmp_path: Path, cluster: FakeCluster, capsys: pytest.CaptureFixture[str]) -> None:
    cluster.items = [_rc("nvidia", "nvidia"), _rc("nvidia-cdi", "nvidia-cdi"),
                     _rc("nvidia-legacy", "nvidia")]
    root = _node(tmp_path, _runtime("nvidia", True), _runtime("nvidia-cdi", True))
    code, data, _ = _check(capsys, root, "--runtime-classes-from-cluster",
                           "--kubeconfig", "/k/config", "--context", "prod")
    assert data is not None
    assert (code, _errors(data)) == (0, [])
    assert FakeCluster.made == [("/k/config", "prod")] and cluster.calls == [RC_PATH]
    assert data["runtime_classes"] == [
        {"name": "nvidia", "handler": "nvidia"},
        {"name": "nvidia-cdi", "handler": "nvidia-cdi"},
        {"name": "nvidia-legacy", "handler": "nvidia"}]


def test_a_handler_no_runtime_defines_is_an_error_naming_class_and_handler(
        tmp_path: Path, cluster: FakeCluster, capsys: pytest.CaptureFixture[str]) -> None:
    cluster.items = [_rc("nvidia", "nvidia"), _rc("gpu-cdi", "nvidia-cdi")]
    root = _node(tmp_path, _runtime("nvidia", True))
    # Without the cluster's RuntimeClasses nothing is wrong with this node.
    code, data, _ = _check(capsys, root)
    assert (code, _errors(data)) == (0, [])
    code, data, _ = _check(capsys, root, "--runtime-classes-from-cluster")
    (error,) = _errors(data)
    assert code == 1 and error["id"] == "FM01"
    assert "RuntimeClass gpu-cdi" in error["message"] and "'nvidia-cdi'" in error["message"]
    assert "nvidia-cdi" in error["fix"]


def test_fm07_on_a_runtime_class_handler_is_an_error(
        tmp_path: Path, cluster: FakeCluster, capsys: pytest.CaptureFixture[str]) -> None:
    # nvidia-legacy runs cgroupfs beside a systemd runc: unused, a warning ...
    root = _node(tmp_path, _runtime("nvidia", True), _runtime("nvidia-legacy", False))
    code, data, _ = _check(capsys, root)
    assert data is not None and code == 0
    assert [(f["id"], f["severity"]) for f in data["findings"]] == [("FM07", "warning")]
    # ... an error once a RuntimeClass names it as its handler.
    cluster.items = [_rc("nvidia", "nvidia"), _rc("old-gpus", "nvidia-legacy")]
    code, data, _ = _check(capsys, root, "--runtime-classes-from-cluster")
    (error,) = _errors(data)
    assert code == 1 and error["id"] == "FM07"
    assert "RuntimeClass old-gpus" in error["message"]
    assert "nvidia-legacy" in error["message"]


def test_explicit_handlers_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _node(tmp_path, _runtime("nvidia", True), _runtime("nvidia-legacy", False))
    code, data, _ = _check(capsys, root, "--runtime-class-handler", "nvidia-legacy",
                           "--runtime-class-handler", "nvidia-cdi")
    assert data is not None and code == 1
    assert sorted(f["id"] for f in _errors(data)) == ["FM01", "FM07"]
    assert data["runtime_classes"] == [{"name": None, "handler": "nvidia-legacy"},
                                       {"name": None, "handler": "nvidia-cdi"}]


def test_an_unreachable_cluster_says_so_and_exits_2(
        tmp_path: Path, cluster: FakeCluster, capsys: pytest.CaptureFixture[str]) -> None:
    cluster.status = 0
    root = _node(tmp_path, _runtime("nvidia", True))
    code, data, err = _check(capsys, root, "--runtime-classes-from-cluster")
    assert (code, data) == (2, None)
    assert "cluster unreachable" in err and "https://fake:6443" in err
    assert "--runtime-classes-from-cluster" in err


def test_forbidden_names_the_permission(
        tmp_path: Path, cluster: FakeCluster, capsys: pytest.CaptureFixture[str]) -> None:
    cluster.status = 403
    code, data, err = _check(capsys, _node(tmp_path), "--runtime-classes-from-cluster")
    assert (code, data) == (2, None)
    assert "list runtimeclasses.node.k8s.io" in err


def test_a_real_client_to_nowhere_is_unreachable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The official client against a closed port, and a kubeconfig that is not there."""
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "down",
        "clusters": [{"name": "down", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "down", "context": {"cluster": "down", "user": "u"}}]}))
    root = _node(tmp_path, _runtime("nvidia", True))
    code, data, err = _check(capsys, root, "--runtime-classes-from-cluster",
                             "--kubeconfig", str(kubeconfig))
    assert (code, data) == (2, None) and "cluster unreachable" in err
    code, data, err = _check(capsys, root, "--runtime-classes-from-cluster",
                             "--kubeconfig", str(tmp_path / "absent"))
    assert (code, data) == (2, None) and "no kubeconfig" in err


@pytest.mark.parametrize(("args", "flag"), [
    (["--runtime-class-handler", "Not_A_Label"], "--runtime-class-handler"),
    (["--runtime-class-handler", ""], "--runtime-class-handler"),
    (["--kubeconfig", "/k/config"], "--kubeconfig"),
    (["--context", "prod"], "--context"),
])
def test_bad_input_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  args: list[str], flag: str) -> None:
    code, data, err = _check(capsys, _node(tmp_path), *args)
    assert (code, data) == (2, None)
    assert err.startswith("gpuplane: ") and flag in err


def test_a_runtime_class_without_a_handler_is_named(
        tmp_path: Path, cluster: FakeCluster, capsys: pytest.CaptureFixture[str]) -> None:
    cluster.items = [{"metadata": {"name": "broken"}}]
    code, data, err = _check(capsys, _node(tmp_path), "--runtime-classes-from-cluster")
    assert (code, data) == (2, None)
    assert "RuntimeClass broken" in err and "handler" in err
