"""The bundled stacks under the mock engine (`preview=False`): resource graph, Helm values
per distro, rollout batching, secrets, and every rendered manifest validated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from gpuplane.checks.provider import check_manifests
from gpuplane.cli.plan.engine import Registered, run_program
from gpuplane.cli.plan.run import plan_stack
from gpuplane.config.stackfile import available_stacks, load_stack_file

STACKS = Path(__file__).resolve().parents[2] / "stacks"
BUNDLED = ["aks-ubuntu", "bottlerocket-nvidia", "eks-al2023", "eks-al2023-nvidia", "gke-cos",
           "gke-ubuntu", "h100-mig", "hami-host", "hami-pools", "hami-shared", "inference-mps",
           "k0s-operator", "k8s-snap-dgx", "kind-smoke", "kubeadm-dra", "kubeadm-dra-pools",
           "kubeadm-prod", "microk8s-edge", "rke2-lab", "rke2-operator", "two-pools"]
# The managed platforms (cluster.platform): gpuplane writes no node files there.
PLATFORM_STACKS = ["aks-ubuntu", "bottlerocket-nvidia", "eks-al2023", "eks-al2023-nvidia",
                   "gke-cos", "gke-ubuntu"]
# Platforms whose own config defines runtimes gpuplane cannot change and pods are not known
# to use (containerd 2.x's built-in runc, AKS's `untrusted`) with another SystemdCgroup
# than the kubelet's: an FM07 information, the platform's own.
PLATFORM_INFOS = {"aks-ubuntu": ["FM07"], "bottlerocket-nvidia": ["FM07"],
                  "eks-al2023-nvidia": ["FM07"]}


def registered(name: str, stacks: Path = STACKS) -> list[Registered]:
    from gpuplane.stack import program

    stack = load_stack_file(name, stacks)
    stack.config()
    _, resources = run_program(program.run, project="gpuplane", stack=name,
                               config=stack.pulumi_config(), secret_keys=stack.secret_keys)
    return resources


def by_name(resources: list[Registered]) -> dict[str, Registered]:
    return {r.name: r for r in resources}


def deps(resources: list[Registered], name: str) -> set[str]:
    urns = {r.urn: r.name for r in resources}
    return {urns[d] for d in by_name(resources)[name].dependencies}


def env_of(values: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in values["toolkit"].get("env", [])}


@pytest.fixture(scope="module")
def plans() -> dict[str, dict[str, Any]]:
    return {name: plan_stack(name, STACKS) for name in BUNDLED}


def test_bundled_stacks_are_the_documented_ones() -> None:
    assert available_stacks(STACKS) == BUNDLED


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_stack_plans_clean(plans: dict[str, dict[str, Any]], name: str) -> None:
    plan = plans[name]
    # Clean: nothing to fix. The one information a bundled stack carries is k8s-snap-dgx's
    # account of its two containerd daemons (Docker beside Kubernetes, FM17).
    infos = ["FM17"] if name == "k8s-snap-dgx" else PLATFORM_INFOS.get(name, [])
    assert [f["id"] for f in plan["findings"] if f["severity"] == "info"] == infos
    assert [f for f in plan["findings"] if f["severity"] != "info"] == [], plan["findings"]
    assert plan["summary"]["errors"] == 0
    # HAMi alone (no gpuplane:gpuOperator) installs HAMi and no operator.
    assert list(plan["helm"]) == ["hami"] if name == "hami-host" else \
        "gpu-operator" in plan["helm"]
    json.dumps(plan)  # the JSON contract: serialisable as is
    if name in PLATFORM_STACKS:   # the platform owns the nodes' files: none are written
        assert plan["summary"]["restarts"] == 0 and plan["cluster"]["platform"]
        assert not [r for r in registered(name) if r.type == "command:remote:Command"]


def test_k8s_snap_custom_base_dir_gives_incident_1_toolkit_env(
        plans: dict[str, dict[str, Any]]) -> None:
    values = plans["k8s-snap-dgx"]["helm"]["gpu-operator"]["values"]
    base = "/var/lib/k8s-containerd/k8s-containerd"
    assert env_of(values) == {
        "CONTAINERD_CONFIG": f"{base}/etc/containerd/config.toml",
        "CONTAINERD_SOCKET": f"{base}/run/containerd/containerd.sock",
        "RUNTIME_CONFIG_SOURCE": f"file={base}/etc/containerd/config.toml",
        "RUNTIME_DROP_IN_CONFIG": f"{base}/etc/containerd/conf.d/99-nvidia.toml",
        "RUNTIME_EXECUTABLE_PATH": "/snap/k8s/current/bin/containerd",
        "CONTAINERD_RUNTIME_CLASS": "nvidia",
        "CONTAINERD_SET_AS_DEFAULT": "false",
    }
    assert values["driver"] == {"enabled": False}
    assert values["devicePlugin"]["config"] == {
        "create": False, "name": "time-slicing-config", "default": "any"}


def test_time_slicing_configmap_and_plugin_restart_order() -> None:
    resources = registered("k8s-snap-dgx")
    res = by_name(resources)
    cm = res["gpu-time-slicing"]
    assert cm.inputs["metadata"] == {"name": "time-slicing-config", "namespace": "gpu-operator"}
    import yaml

    profile = yaml.safe_load(cm.inputs["data"]["any"])
    assert profile["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 4}]
    assert "renameByDefault" not in profile["flags"]
    # The ConfigMap exists before the operator, the restart comes after it.
    assert "gpu-time-slicing" in deps(resources, "gpu-gpu-operator")
    assert {"gpu-time-slicing", "gpu-gpu-operator"} <= deps(resources, "gpu-time-slicing-restart")


def test_rke2_points_the_toolkit_at_the_template_and_k3s_socket(
        plans: dict[str, dict[str, Any]]) -> None:
    values = plans["rke2-lab"]["helm"]["gpu-operator"]["values"]
    env = env_of(values)
    etc = "/var/lib/rancher/rke2/agent/etc/containerd"
    assert env["CONTAINERD_CONFIG"] == f"{etc}/config-v3.toml.tmpl"   # containerd 2.0
    assert env["CONTAINERD_SOCKET"] == "/run/k3s/containerd/containerd.sock"
    assert env["RUNTIME_CONFIG_SOURCE"] == f"file={etc}/config.toml"
    # Set to RKE2's own dir: left unset, the operator writes the host-wide
    # /etc/containerd/conf.d/99-nvidia.toml.
    assert env["RUNTIME_DROP_IN_CONFIG"] == f"{etc}/conf.d/99-nvidia.toml"
    assert values["driver"] == {"enabled": True}
    assert values["operator"] == {"runtimeClass": "nvidia"}
    # gpuplane writes RKE2's whole template over SSH before the toolkit runs, one node
    # at a time (canary first).
    assert plans["rke2-lab"]["batches"] == [["lab-gpu-1"], ["lab-gpu-2"]]


def test_hami_shared_disables_the_operator_plugin_and_labels_nodes() -> None:
    resources = registered("hami-shared")
    res = by_name(resources)
    op = res["gpu-gpu-operator"]
    assert op.type == "kubernetes:helm.sh/v3:Release"
    assert op.inputs["values"]["devicePlugin"] == {"enabled": False}
    hami = res["gpu-hami"].inputs
    assert hami["chart"] == "hami" and hami["version"] == "2.10.0"
    assert hami["repositoryOpts"] == {"repo": "https://project-hami.github.io/HAMi/"}
    values = hami["values"]
    assert values["scheduler"]["kubeScheduler"]["image"]["tag"] == "v1.30.8"
    assert values["scheduler"]["admissionWebhook"]["failurePolicy"] == "Fail"
    assert values["scheduler"]["replicas"] == 2
    assert values["devicePlugin"]["runtimeClassName"] == "nvidia"
    labels = res["gpu-hami-node-labels"]
    assert labels.type == "pulumi-python:dynamic/gpuplane:NodeLabels"
    assert labels.inputs["nodes"] == ["infer-01", "infer-02"]
    assert labels.inputs["labels"] == {"gpu": "on"}
    assert {"gpu-gpu-operator", "gpu-hami-node-labels"} <= deps(resources, "gpu-hami")


def test_kubeadm_prod_rolls_out_canary_then_batches_of_two() -> None:
    resources = registered("kubeadm-prod")
    commands = [r for r in resources if r.type == "command:remote:Command"
                and r.name.startswith("containerd-")]
    assert sorted(c.name for c in commands) == [
        "containerd-a100-01", "containerd-a100-02", "containerd-a100-03",
        "containerd-l40s-01", "containerd-l40s-02"]
    # Each node command also waits for its node's agent upload (which waits for nothing):
    # the batches order only the node commands, each batch after the canary through one
    # barrier that waits for the whole batch before it (gpuplane.stack.barrier).
    assert deps(resources, "containerd-a100-01") == {"gpuplane-agent-copy-a100-01"}
    assert deps(resources, "gpu-containerd-after-batch-0") == {"containerd-a100-01"}
    assert deps(resources, "containerd-a100-02") == {"gpu-containerd-after-batch-0",
                                                     "gpuplane-agent-copy-a100-02"}
    assert deps(resources, "containerd-a100-03") == {"gpu-containerd-after-batch-0",
                                                     "gpuplane-agent-copy-a100-03"}
    second = {"containerd-a100-02", "containerd-a100-03"}
    assert deps(resources, "gpu-containerd-after-batch-1") == second
    barrier = {"gpu-containerd-after-batch-1"}
    assert deps(resources, "containerd-l40s-01") == barrier | {"gpuplane-agent-copy-l40s-01"}
    assert deps(resources, "containerd-l40s-02") == barrier | {"gpuplane-agent-copy-l40s-02"}
    assert deps(resources, "gpuplane-agent-copy-l40s-02") == set()
    # The operator (and its toolkit) only starts once every node is done: it waits for
    # the last batch, which waited for every earlier one.
    assert {"containerd-l40s-01", "containerd-l40s-02"} <= deps(resources, "gpu-gpu-operator")


def test_node_commands_carry_the_planned_files_and_keep_the_key_secret() -> None:
    stack = load_stack_file("kubeadm-prod", STACKS)
    plan_files = _planned_files("kubeadm-prod")
    for cmd in (r for r in registered("kubeadm-prod") if r.type == "command:remote:Command"
                and r.name.startswith("containerd-")):
        assert cmd.secret_paths == ["connection"]
        assert cmd.inputs["connection"]["user"] == "ubuntu"
        for path, content in plan_files.items():
            assert path in cmd.inputs["stdin"]
            assert content.splitlines()[-1] in cmd.inputs["stdin"]
        assert "update" not in cmd.inputs   # an update runs `create` again
        assert "restore" in cmd.inputs["delete"]
        assert "triggers" not in cmd.inputs
    assert stack.secret_keys == ["gpuplane:sshPrivateKey"]


def test_the_plan_report_masks_secrets(plans: dict[str, dict[str, Any]]) -> None:
    text = json.dumps(plans["kubeadm-prod"])
    commands = [r for r in plans["kubeadm-prod"]["resources"]
                if r["type"] == "command:remote:Command"]
    assert commands and all(c["inputs"]["connection"] == "[secret]" for c in commands)
    assert "not decrypted offline" not in text


def _planned_files(name: str) -> dict[str, str]:
    from gpuplane.plan.node import plan_node

    cfg = load_stack_file(name, STACKS).config()
    return plan_node(cfg.profile, cfg.containerd, cfg.plan_options()).files


def test_microk8s_edge_writes_the_template_with_host_toolkit(
        plans: dict[str, dict[str, Any]]) -> None:
    plan = plans["microk8s-edge"]
    template = "/var/snap/microk8s/current/args/containerd-template.toml"
    for node in plan["nodes"]:
        assert list(node["files"]) == [template]
        assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in node["files"][template]
        assert node["restart"] is True
    assert plan["batches"] == [["edge-01"], ["edge-02"], ["edge-03"]]
    assert plan["helm"]["gpu-operator"]["values"]["toolkit"] == {"enabled": False}


def test_kind_smoke_has_no_node_access_and_no_gpu_parts(
        plans: dict[str, dict[str, Any]]) -> None:
    plan = plans["kind-smoke"]
    types = {r["type"] for r in plan["resources"]}
    assert "command:remote:Command" not in types
    assert plan["nodes"] == [] and plan["batches"] == []


def test_intent_configmap_carries_the_stack_decisions() -> None:
    from gpuplane.core.intent import INTENT_KEY, ClusterIntent

    res = by_name(registered("k8s-snap-dgx"))
    intent = ClusterIntent.from_json(res["gpu-intent"].inputs["data"][INTENT_KEY])
    assert intent.distro == "k8s-snap"
    assert intent.containerd_base_dir == "/var/lib/k8s-containerd"
    assert intent.time_slicing_replicas == 4
    assert [n.name for n in intent.nodes] == ["dgx-01", "dgx-02"]


_KIND = {
    "kubernetes:core/v1:Namespace": ("v1", "Namespace"),
    "kubernetes:core/v1:ConfigMap": ("v1", "ConfigMap"),
    "kubernetes:node.k8s.io/v1:RuntimeClass": ("node.k8s.io/v1", "RuntimeClass"),
}


@pytest.mark.parametrize("name", BUNDLED)
def test_every_rendered_manifest_validates_strictly(name: str) -> None:
    cfg = load_stack_file(name, STACKS).config()
    version = cfg.cluster.kubernetes_version
    checked = 0
    for r in registered(name):
        if r.type.endswith(":GpuJobCheck"):   # the Jobs it creates
            for _, job in check_manifests(r.inputs, 1):
                kubernetes_validate.validate(job, version, strict=True)
                checked += 1
        if r.type not in _KIND:
            continue
        api_version, kind = _KIND[r.type]
        manifest = {"apiVersion": api_version, "kind": kind,
                    **{k: v for k, v in r.inputs.items() if k not in ("apiVersion", "kind")}}
        kubernetes_validate.validate(manifest, version, strict=True)
        checked += 1
    assert checked >= 2


def test_a_broken_manifest_fails_strict_validation() -> None:
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
           "data": {"a": 1}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.31.4", strict=True)


def test_k8s_snap_dgx_gives_docker_the_nvidia_runtime_with_one_restart(
        plans: dict[str, dict[str, Any]]) -> None:
    plan = plans["k8s-snap-dgx"]
    assert plan["cluster"]["dockerRestartCommand"] == "systemctl restart docker"
    for node in plan["nodes"]:
        daemon = json.loads(node["files"]["/etc/docker/daemon.json"])
        assert daemon["runtimes"]["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"
        assert "default-runtime" not in daemon
        assert node["dockerRestart"] and not node["restart"]
    assert plan["summary"]["dockerRestarts"] == len(plan["nodes"])
    commands = [r for r in plan["resources"] if r["name"].startswith("containerd-")]
    assert len(commands) == len(plan["nodes"])
