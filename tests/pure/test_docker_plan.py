"""Docker's part of a node plan: FM17 naming both containerd daemons, the agent plan
carrying daemon.json with its own restart (containerd's plan untouched), the policies
leaving daemon.json out of the containerd rules, captured daemon.json errors naming the
stack key and file:line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuplane.agent.payload import payload_docker_config, payload_files
from gpuplane.agent.script import agent_plan, apply_stdin
from gpuplane.config import StackConfigError, parse_stack_config
from gpuplane.config.baselines import node_baselines
from gpuplane.containerd import ContainerdVersion
from gpuplane.core.findings import Severity
from gpuplane.distros.docker_daemon import DAEMON_JSON, DOCKER_RESTART, DockerSettings
from gpuplane.distros.profiles import profile
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node
from gpuplane.rules.docker import check_docker_daemons

V17 = ContainerdVersion.parse("1.7")


@pytest.mark.parametrize(("distro", "base_dir", "severity", "kube_socket"), [
    ("kubeadm", None, Severity.WARNING, "/run/containerd/containerd.sock"),
    ("k8s-snap", None, Severity.WARNING, "/run/containerd/containerd.sock"),
    ("k8s-snap", "/var/lib/k8s-containerd", Severity.INFO,
     "/var/lib/k8s-containerd/k8s-containerd/run/containerd/containerd.sock"),
    ("rke2", None, Severity.INFO, "/run/k3s/containerd/containerd.sock"),
    ("k3s", None, Severity.INFO, "/run/k3s/containerd/containerd.sock"),
    ("microk8s", None, Severity.INFO, "/var/snap/microk8s/common/run/containerd.sock"),
    ("k0s", None, Severity.INFO, "/run/k0s/containerd.sock"),
])
def test_fm17_names_kubernetes_and_dockers_containerd(
        distro: str, base_dir: str | None, severity: Severity, kube_socket: str) -> None:
    [found] = check_docker_daemons(profile(distro, base_dir))
    assert found.id == "FM17" and found.severity is severity
    assert found.where == "gpuplane:docker.nvidiaRuntime"
    assert kube_socket in found.message
    assert "/run/containerd/containerd.sock (config /etc/containerd/config.toml)" \
        in found.message


def _plan(docker: DockerSettings | None, current: dict[str, str] | None = None) -> Any:
    return plan_node(profile("kubeadm"), V17, PlanOptions(toolkit=ToolkitMode.HOST),
                     current, docker=docker)


def test_containerd_plan_is_unchanged_by_docker_and_the_agent_plan_carries_it() -> None:
    without, with_docker = _plan(None), _plan(DockerSettings())
    assert with_docker.files == without.files and with_docker.bases == without.bases
    assert with_docker.restarts == without.restarts
    assert [f.id for f in with_docker.findings] == [f.id for f in without.findings] + ["FM17"]
    plain, ap = agent_plan(without), agent_plan(with_docker)
    assert plain.docker_config is None and ap.plan_id != plain.plan_id
    assert ap.files[DAEMON_JSON] == with_docker.docker.text
    assert ap.bases[DAEMON_JSON] is None and DAEMON_JSON in ap.edit_paths
    assert (ap.docker_restart, ap.docker_runtime) == (DOCKER_RESTART, "nvidia")
    assert ap.restart_command == plain.restart_command
    stdin = apply_stdin(ap)
    assert payload_docker_config(stdin) == DAEMON_JSON
    assert payload_docker_config(apply_stdin(plain)) is None
    assert json.loads((payload_files(stdin) or {})[DAEMON_JSON])["runtimes"]["nvidia"]


def test_a_captured_daemon_json_is_planned_from(tmp_path: Path) -> None:
    original = '{\n  "data-root": "/raid/docker"\n}\n'
    model = profile("kubeadm").baseline(V17)
    plan = _plan(DockerSettings(), {**model, DAEMON_JSON: original})
    assert plan.docker.original == original and plan.docker.changes
    assert list(json.loads(plan.docker.text)) == ["data-root", "runtimes"]
    assert DAEMON_JSON not in plan.baseline        # containerd never sees it
    assert agent_plan(plan).base_texts[DAEMON_JSON] == original


STACK: dict[str, Any] = {
    "cluster": {"kubernetesVersion": "1.31.4", "containerdVersion": "1.7"},
    "gpuOperator": {"chartVersion": "v25.10.1"}, "sshPrivateKey": "<secret>",
    "docker": {"nvidiaRuntime": True},
}


def test_a_broken_captured_daemon_json_names_the_stack_key_and_file_line(
        tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(profile("kubeadm").baseline(V17)[
        "/etc/containerd/config.toml"])
    (tmp_path / "daemon.json").write_text('{\n  "debug": true,\n}\n')
    cfg = parse_stack_config({**STACK, "nodes": [{
        "name": "gpu-1", "host": "10.0.0.1", "baselineFiles": {
            "/etc/containerd/config.toml": "config.toml", DAEMON_JSON: "daemon.json"}}]})
    with pytest.raises(StackConfigError) as exc:
        node_baselines(cfg, tmp_path)
    [(key, message)] = exc.value.problems
    assert key == "gpuplane:nodes[0].baselineFiles"
    assert message.startswith("daemon.json:3:1: not valid JSON")


def test_daemon_json_is_plannable_only_with_dockers_runtime(tmp_path: Path) -> None:
    (tmp_path / "daemon.json").write_text("{}\n")
    cfg = parse_stack_config({**STACK, "docker": {}, "nodes": [{
        "name": "gpu-1", "host": "10.0.0.1", "baselineFiles": {DAEMON_JSON: "daemon.json"}}]})
    with pytest.raises(StackConfigError) as exc:
        node_baselines(cfg, tmp_path)
    assert "not a file gpuplane plans from" in exc.value.problems[0][1]
