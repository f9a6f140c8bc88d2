"""`gpuplane containerd check --runtime-classes-from-cluster` against a real kube-apiserver
(tests/support/control_plane.py, #39 item 2): the RuntimeClasses made in the API server are
the handlers judged as used, through the official client and the kubeconfig's client
certificate; a user without RBAC gets exit 2 naming the permission it lacks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support import control_plane, oracle

pytestmark = pytest.mark.engine
CONFIG = "/etc/containerd/config.toml"
V2 = '"io.containerd.grpc.v1.cri"'
NODE = f"""version = 2
[plugins.{V2}.containerd]
default_runtime_name = "runc"
[plugins.{V2}.containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
[plugins.{V2}.containerd.runtimes.runc.options]
SystemdCgroup = true
[plugins.{V2}.containerd.runtimes.nvidia]
runtime_type = "io.containerd.runc.v2"
[plugins.{V2}.containerd.runtimes.nvidia.options]
BinaryName = "/usr/bin/nvidia-container-runtime"
SystemdCgroup = true
"""


def _check(root: Path, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuplane.cli.main", "containerd", "check", "--root",
         str(root), "--config", CONFIG, "--containerd-version", "1.7", "--format", "json",
         "--runtime-classes-from-cluster", "--kubeconfig", str(kubeconfig)],
        capture_output=True, text=True, timeout=120, check=False)


def test_runtime_class_handlers_from_a_real_api_server(tmp_path: Path) -> None:
    if why := control_plane.missing():
        oracle.unavailable(f"the control plane: {why}", "make containerd")
    from kubernetes import client, config

    root = tmp_path / "node"
    for path, text in ((CONFIG, NODE), ("/usr/bin/nvidia-container-runtime", "#!/bin/sh\n")):
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).write_text(text)
    base = Path(tempfile.mkdtemp(prefix="gp-cc-", dir="/tmp"))
    cp = control_plane.start(base / "cp")
    try:
        node_api = client.NodeV1Api(config.new_client_from_config(config_file=str(cp.kubeconfig)))
        for name, handler in (("nvidia", "nvidia"), ("gpu-cdi", "nvidia-cdi")):
            node_api.create_runtime_class({"apiVersion": "node.k8s.io/v1",
                                           "kind": "RuntimeClass",
                                           "metadata": {"name": name}, "handler": handler})
        done = _check(root, cp.kubeconfig)
        assert "Traceback" not in done.stderr, done.stderr
        data = json.loads(done.stdout)
        assert done.returncode == 1, done.stderr
        assert data["runtime_classes"] == [{"name": "gpu-cdi", "handler": "nvidia-cdi"},
                                           {"name": "nvidia", "handler": "nvidia"}]
        (error,) = [f for f in data["findings"] if f["severity"] == "error"]
        assert error["id"] == "FM01"
        assert "pods of RuntimeClass gpu-cdi (handler nvidia-cdi)" in error["message"]

        # A client certificate RBAC grants nothing: forbidden, the permission named.
        pki = cp.root / "pki"
        control_plane.cert(pki, "nobody", "/CN=gpuplane-test-nobody")
        nobody = cp.root / "nobody.kubeconfig"
        control_plane.kubeconfig(nobody, cp.server, pki, "nobody")
        done = _check(root, nobody)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert "Traceback" not in done.stderr
        assert "forbidden: needs permission to list runtimeclasses.node.k8s.io" in done.stderr
    finally:
        cp.stop()
        shutil.rmtree(base, ignore_errors=True)
