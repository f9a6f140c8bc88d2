"""End to end on a kind cluster: `pulumi up` of the `kind-smoke` stack, assertions on the
live objects, `pulumi destroy`. Needs the Pulumi CLI, kind, kubectl and a container
engine (docker or podman); skips naming what is missing (none exist on CI machines)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLUSTER = "gpuplane-e2e"
TOOLS = ("pulumi", "kind", "kubectl")


def _missing() -> list[str]:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if not (shutil.which("docker") or shutil.which("podman")):
        missing.append("docker or podman")
    return missing


pytestmark = pytest.mark.skipif(
    bool(_missing()), reason=f"e2e needs {', '.join(_missing())} on PATH")


def sh(*args: str, env: dict[str, str] | None = None, timeout: int = 900) -> str:
    done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if done.returncode:
        raise AssertionError(f"{' '.join(args)} failed ({done.returncode}):\n"
                             f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done.stdout


@pytest.fixture(scope="module")
def pulumi_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    state = tmp_path_factory.mktemp("pulumi-state")
    env = {**os.environ, "PULUMI_BACKEND_URL": f"file://{state}",
           "PULUMI_CONFIG_PASSPHRASE": "", "PULUMI_SKIP_UPDATE_CHECK": "1"}
    sh("kind", "create", "cluster", "--name", CLUSTER, "--wait", "120s")
    try:
        sh("pulumi", "stack", "select", "--create", "kind-smoke", env=env)
        sh("pulumi", "config", "set", "kubernetes:context", f"kind-{CLUSTER}",
           "--stack", "kind-smoke", env=env)
        yield env
    finally:
        subprocess.run(["pulumi", "destroy", "--yes", "--stack", "kind-smoke"], cwd=REPO,
                       env=env, check=False, capture_output=True, timeout=900)
        subprocess.run(["kind", "delete", "cluster", "--name", CLUSTER], check=False,
                       capture_output=True, timeout=300)


def test_pulumi_up_kind_smoke(pulumi_env: dict[str, str]) -> None:
    sh("pulumi", "up", "--yes", "--skip-preview", "--stack", "kind-smoke", env=pulumi_env)
    ctx = f"--context=kind-{CLUSTER}"
    ns = json.loads(sh("kubectl", ctx, "get", "namespace", "gpu-operator", "-o", "json"))
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    cm = json.loads(sh("kubectl", ctx, "-n", "gpu-operator", "get", "configmap",
                       "gpuplane-intent", "-o", "json"))
    assert json.loads(cm["data"]["intent.json"])["distro"] == "kubeadm"
    deploy = json.loads(sh("kubectl", ctx, "-n", "gpu-operator", "get", "deployments",
                           "-o", "json"))
    assert any(d["metadata"]["name"] == "gpu-operator" for d in deploy["items"])
    outputs = json.loads(sh("pulumi", "stack", "output", "--json", "--stack", "kind-smoke",
                            env=pulumi_env))
    assert outputs["rolloutBatches"] == []
    sh("pulumi", "destroy", "--yes", "--stack", "kind-smoke", env=pulumi_env)
    gone = subprocess.run(["kubectl", ctx, "get", "namespace", "gpu-operator"],
                          capture_output=True, text=True, check=False)
    assert gone.returncode != 0 or "Terminating" in gone.stdout
