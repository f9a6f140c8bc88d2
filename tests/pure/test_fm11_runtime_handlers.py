"""FM11 on RuntimeClasses and the classes GPU workloads name, whatever decides the nodes'
runtimes: the GPU Operator's toolkit, the host's toolkit (gpuplane writes the runtime
`gpuplane:runtime.name`; HAMi alone), or, for a stack gpuplane did not make, the pack
config's `runtimeClass` / `nvidiaDefault` facts. Before, only the operator's toolkit
decided the handlers, and only on stacks without gpuplane's intent."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from support.stack_cases import as_pod, config_of

from gpuplane.cli.plan.project import load_project
from gpuplane.cli.plan.run import plan_stack
from gpuplane.core.intent import ClusterIntent
from gpuplane.policy.pack import policy_names

GPU_CLUSTER = """
from gpuplane import GpuCluster, GpuClusterArgs
from gpuplane.config import parse_stack_config
GpuCluster("gpu", GpuClusterArgs(config=parse_stack_config({cfg!r})))
"""
RUNTIME_CLASS = ('k8s.node.v1.RuntimeClass("gpu", metadata={{"name": "gpu"}}, '
                 'handler="{handler}")\n')
WORKLOAD = """
k8s.apps.v1.Deployment("trainer", metadata={{"name": "trainer", "namespace": "apps"}}, spec={{
    "selector": {{"matchLabels": {{"app": "t"}}}},
    "template": {{"metadata": {{"labels": {{"app": "t"}}}}, "spec": {{
        "runtimeClassName": "{rc}",
        "containers": [{{"name": "t", "image": "trainer:1.0",
                        "resources": {{"limits": {{"nvidia.com/gpu": 1}}}}}}]}}}}}})
"""
HAMI_RELEASE = ('k8s.helm.v3.Release("hami", name="hami", chart="hami", version="2.6.0", '
                'namespace="kube-system", values={})\n')
FACTS = {"distro": "kubeadm", "containerdVersion": "1.7", "driver": "preinstalled",
         "kubernetesVersion": "1.31.0"}


def plan(tmp_path: Path, body: str, facts: dict[str, Any] | None = None) -> dict[str, Any]:
    folder = tmp_path / "infra"
    folder.mkdir(exist_ok=True)
    (folder / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    (folder / "__main__.py").write_text("import pulumi_kubernetes as k8s\n" + body)
    (folder / "Pulumi.dev.yaml").write_text("config: {}\n")
    config = {name: dict(facts) for name in policy_names()} if facts is not None else None
    return plan_stack("dev", folder, config, load_project(folder))


def fm11(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["id"] == "FM11" and f["severity"] == "error"]


def hami_host() -> str:
    cfg = {k.removeprefix("gpuplane:"): v for k, v in as_pod(config_of("hami-host")).items()}
    return textwrap.dedent(GPU_CLUSTER).format(cfg=cfg)


def test_fm11_runtime_class_handler_is_judged_with_the_hosts_toolkit(tmp_path: Path) -> None:
    """HAMi alone on the host's toolkit: gpuplane writes the runtime `nvidia`; a
    RuntimeClass whose handler is `nvidia-container-runtime` names no runtime."""
    bad = plan(tmp_path, hami_host() + RUNTIME_CLASS.format(handler="nvidia-container-runtime"))
    found = fm11(bad)
    assert [f["where"] for f in found] == ["RuntimeClass gpu handler"], bad["findings"]
    assert "the host's toolkit" in found[0]["message"]
    good = plan(tmp_path, hami_host() + RUNTIME_CLASS.format(handler="nvidia"))
    assert fm11(good) == [] and good["verdict"] == "ok", good["findings"]


def test_fm11_workload_naming_a_runtime_class_the_hosts_toolkit_has_not(
        tmp_path: Path) -> None:
    """`nvidia-cdi` is a RuntimeClass the GPU Operator creates; with the host's toolkit
    (no operator) there is none of that name, and the pod is never admitted."""
    bad = plan(tmp_path, hami_host() + WORKLOAD.format(rc="nvidia-cdi"))
    assert [f["where"].split(" ", 2)[:2] for f in fm11(bad)] == \
        [["Deployment", "apps/trainer"]], bad["findings"]
    assert fm11(plan(tmp_path, hami_host() + WORKLOAD.format(rc="nvidia"))) == []


@pytest.mark.parametrize("facts", [{"runtimeClass": "nvidia"}, {"nvidiaDefault": True}])
def test_fm11_foreign_runtime_class_is_judged_from_the_pack_config(
        tmp_path: Path, facts: dict[str, Any]) -> None:
    """HAMi alone, installed by a plain Release (no operator toolkit): the config's
    runtime facts say which runtime the nodes have."""
    body = HAMI_RELEASE + RUNTIME_CLASS.format(handler="nvidia-container-runtime")
    bad = plan(tmp_path, body, {**FACTS, **facts})
    assert [f["where"] for f in fm11(bad)] == ["RuntimeClass gpu handler"], bad["findings"]
    assert "runtimeClass" in fm11(bad)[0]["message"]
    good = HAMI_RELEASE + RUNTIME_CLASS.format(handler="nvidia")
    assert fm11(plan(tmp_path, good, {**FACTS, **facts})) == []


def test_fm11_foreign_runtime_class_without_runtime_facts_is_advice(tmp_path: Path) -> None:
    """No operator toolkit and no runtime facts: not judged, and said once as advice."""
    body = HAMI_RELEASE + RUNTIME_CLASS.format(handler="nvidia-container-runtime")
    report = plan(tmp_path, body, FACTS)
    assert fm11(report) == []
    advice = [f for f in report["findings"] if "`runtimeClass`" in f["message"]]
    assert len(advice) == 1 and advice[0]["severity"] == "warning", report["findings"]


@pytest.mark.parametrize(("intent", "handlers"), [
    (ClusterIntent(toolkit="operator", runtime_class="gpu"),
     ("gpu", "nvidia-cdi", "nvidia-legacy", "runc")),
    (ClusterIntent(toolkit="host"), ("nvidia", "runc")),
    (ClusterIntent(toolkit="none", runtime_class="nvidia-container-runtime"),
     ("nvidia-container-runtime", "runc")),
])
def test_fm11_node_runtime_handlers_follow_the_toolkit(intent: ClusterIntent,
                                                       handlers: tuple[str, ...]) -> None:
    from gpuplane.rules.device_plugins import node_runtime_handlers

    assert node_runtime_handlers(intent)[0] == handlers


@pytest.mark.parametrize("handler", ["kata-qemu", "runsc", "kata-qemu-nvidia-gpu", "spin"])
def test_fm11_a_runtime_another_tool_configures_is_advice_not_an_error(
        tmp_path: Path, handler: str) -> None:
    """kata-deploy, gVisor or a Wasm shim configure runtimes gpuplane does not manage (and,
    on nodes without captured files, cannot see): their RuntimeClasses are not refused,
    only named once, with what a pod naming them needs."""
    report = plan(tmp_path, hami_host() + RUNTIME_CLASS.format(handler=handler))
    assert fm11(report) == [] and report["verdict"] != "error", report["findings"]
    advice = [f for f in report["findings"] if f["id"] == "FM11"]
    assert [(f["severity"], f["where"]) for f in advice] == \
        [("warning", "RuntimeClass gpu handler")], report["findings"]
    assert repr(handler) in advice[0]["message"] and "nodeSelector" in advice[0]["fix"]


@pytest.mark.parametrize("handler", ["nvidai", "Nvidia", "nvidia-container-runtime", ""])
def test_fm11_a_misspelt_or_wrong_nvidia_handler_stays_an_error(tmp_path: Path,
                                                                handler: str) -> None:
    report = plan(tmp_path, hami_host() + RUNTIME_CLASS.format(handler=handler))
    assert [f["where"] for f in fm11(report)] == ["RuntimeClass gpu handler"], \
        report["findings"]
