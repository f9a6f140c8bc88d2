"""A real node under the real control plane (issue #28, first part): a kubelet built from
`k8s.io/kubernetes` on real containerd running the files gpuplane plans for a kubeadm
node registers and goes Ready; a pod whose RuntimeClass names handler `nvidia` is run by
the kubelet through containerd's nvidia runtime, the one gpuplane's plan adds; a pod
without the RuntimeClass never touches it (FM11's premise)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import control_plane, kubelet_node, oracle

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.distros.profiles import Distro, profile
from gpuplane.plan.node import plan_node
from gpuplane.toolkit.options import PlanOptions, ToolkitMode

pytestmark = pytest.mark.engine
LINE = "1.7"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[control_plane.ControlPlane]:
    for why in (kubelet_node.missing(),):
        if why:
            oracle.unavailable(f"the real kubelet node: {why}", "make test")
    oracle.require_daemon_support(LINE)
    root = Path(tempfile.mkdtemp(prefix="gp-kn-", dir="/tmp"))
    cp = control_plane.start(root / "cp")
    try:
        yield cp
    finally:
        cp.stop()


def _api(cp: control_plane.ControlPlane) -> Any:
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(config_file=str(cp.kubeconfig)))


def _runtime_class(core: Any) -> None:
    """RuntimeClass `nvidia` (handler `nvidia`), unless a test before made it."""
    from kubernetes import client

    try:
        client.NodeV1Api(core.api_client).create_runtime_class(
            {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
             "metadata": {"name": "nvidia"}, "handler": "nvidia"})
    except client.exceptions.ApiException as error:
        if error.status != 409:
            raise


def _pod(name: str, image: str, runtime_class: str | None,
         node: str = "gpu-node-1") -> dict[str, Any]:
    """A pod of the locally imported pause image: nothing to pull, nothing to mount."""
    spec: dict[str, Any] = {
        "nodeName": node, "hostNetwork": True,
        "automountServiceAccountToken": False,
        "containers": [{"name": "c", "image": image, "imagePullPolicy": "Never"}]}
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _running(core: Any, name: str, node: Any,
             timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        status = core.read_namespaced_pod(name, "default").status
        if status.phase == "Running":
            return
        time.sleep(1)
    events = [e.message for e in core.list_namespaced_event("default").items
              if e.involved_object.name == name]
    raise AssertionError(f"pod {name} is {status.phase if status else None} after "
                         f"{timeout:.0f} s: {status}\nevents: {events}\n{node.log()}")


def test_a_planned_kubeadm_node_goes_ready_and_runs_the_nvidia_handler(
        cluster: control_plane.ControlPlane, tmp_path: Path) -> None:
    from kubernetes import client

    plan = plan_node(profile(Distro.KUBEADM), ContainerdVersion.parse(LINE),
                     PlanOptions(toolkit=ToolkitMode.HOST))
    node = kubelet_node.start(cluster, Path(tempfile.mkdtemp(prefix="gp-kn-", dir="/tmp")),
                              plan.layout, plan.profile.config_path, line=LINE)
    try:
        core = _api(cluster)
        client.NodeV1Api(core.api_client).create_runtime_class(
            {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
             "metadata": {"name": "nvidia"}, "handler": "nvidia"})
        core.create_namespaced_pod("default", _pod("plain", node.pause, None))
        _running(core, "plain", node)
        assert oracle.wrapper_calls(node.wrapper) == [], "a pod without the class used nvidia"
        core.create_namespaced_pod("default", _pod("gpu", node.pause, "nvidia"))
        _running(core, "gpu", node)
        assert oracle.wrapper_calls(node.wrapper), "the kubelet did not run the nvidia handler"
    finally:
        node.stop()


def test_the_probe_job_runs_on_the_node_and_fails_with_no_nvidia_driver(
        cluster: control_plane.ControlPlane, tmp_path: Path) -> None:
    """The post-deploy check's Job, as gpuplane makes it, runs as a real pod on the node
    through handler `nvidia`; with no NVIDIA driver here the probe exits 2 and the
    verdict (FM01) names the node and the missing driver. (With a driver, the same test is the
    GPU chain: tests/gpu/test_gpu_chain.py runs it when one is lent.)"""
    from dataclasses import asdict

    from support import gpu_chain

    from gpuplane.checks.live import KubeCluster
    from gpuplane.checks.manifests import plan_checks, probe_configmap
    from gpuplane.checks.provider import ProbeJobCheckProvider
    from gpuplane.checks.settings import ChecksSettings
    from gpuplane.core.intent import ClusterIntent, NodeIntent
    from gpuplane.probe import PROBE_PATH

    plan = plan_node(profile(Distro.KUBEADM), ContainerdVersion.parse(LINE),
                     PlanOptions(toolkit=ToolkitMode.HOST))
    node = kubelet_node.start(cluster, Path(tempfile.mkdtemp(prefix="gp-kn-", dir="/tmp")),
                              plan.layout, plan.profile.config_path, line=LINE,
                              name="gpu-node-probe")
    try:
        settings = ChecksSettings(timeout_seconds=120)
        node.import_image(gpu_chain.build_python_image(
            tmp_path / "python3.tar", name=f"docker.io/library/{settings.image}"))
        core = _api(cluster)
        # What the device plugin would advertise: one GPU (the pod requests it).
        core.patch_node_status(node.name, {"status": {"capacity": {"nvidia.com/gpu": "1"}}})
        _runtime_class(core)
        namespace = "gpu-operator"
        core.create_namespace({"metadata": {"name": namespace}})
        configmap = probe_configmap(namespace, PROBE_PATH.read_text(), "checks-probe")
        core.create_namespaced_config_map(namespace, configmap)
        intent = ClusterIntent(nodes=(NodeIntent(node.name, 1),))
        check = plan_checks(intent, settings)[0]
        provider = ProbeJobCheckProvider()
        provider.cluster_factory = lambda *_: KubeCluster.connect(str(cluster.kubeconfig))
        provider.poll_seconds = 2.0
        outs = provider.create({
            "checkName": "checks-nodes-check", "checks": [check.key],
            "intent": intent.to_json(), "namespace": namespace, "settings": asdict(settings),
            "jobPrefix": "checks", "fingerprint": "fp0123",
            "configmap": configmap["metadata"]["name"],
            "timeoutSeconds": 120.0, "kubeconfig": None}).outs
        report = outs["result"]["report"]
        assert outs["passed"] is False, outs
        assert f"[FM01] node {node.name}: the CUDA probe found no GPU" in report, report
        assert "no NVIDIA driver (no_driver)" in report and "exit 2" in report, report
        assert oracle.wrapper_calls(node.wrapper), "the probe did not run through nvidia"
    finally:
        node.stop()


def test_the_doctor_live_finds_a_gpu_pod_without_runtime_class_on_the_node(
        cluster: control_plane.ControlPlane, tmp_path: Path) -> None:
    """`gpuplane doctor` against the live API of a cluster with a real node: a GPU pod
    that the kubelet runs without `runtimeClassName` is FM11 and names the pod; the pod
    with the class is not. (Inspecting the node's own containerd needs the node in a
    mount namespace of its own: issue #28, not yet.)"""
    import sys


    plan = plan_node(profile(Distro.KUBEADM), ContainerdVersion.parse(LINE),
                     PlanOptions(toolkit=ToolkitMode.HOST))
    node = kubelet_node.start(cluster, Path(tempfile.mkdtemp(prefix="gp-kn-", dir="/tmp")),
                              plan.layout, plan.profile.config_path, line=LINE,
                              name="gpu-node-doctor")
    try:
        core = _api(cluster)
        core.patch_node_status(node.name, {"status": {"capacity": {"nvidia.com/gpu": "2"}}})
        _runtime_class(core)
        for pod_name, runtime_class in (("doctor-with-class", "nvidia"),
                                        ("doctor-no-class", None)):
            pod = _pod(pod_name, node.pause, runtime_class, node.name)
            pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
            core.create_namespaced_pod("default", pod)
            _running(core, pod_name, node)
        done = subprocess.run(
            [sys.executable, "-m", "gpuplane.cli.main", "doctor", "--kubeconfig",
             str(cluster.kubeconfig), "--no-inspect", "--format", "json"],
            capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode in (0, 1), done.stderr
        report = json.loads(done.stdout)
        fm11 = [f for f in report["findings"] if f["id"] == "FM11"]
        assert [f["where"] for f in fm11] == [
            "Pod default/doctor-no-class spec.runtimeClassName (gpuplane:runtime.name)"], fm11
    finally:
        node.stop()


def test_the_node_agent_applies_and_restores_on_a_ready_node(
        cluster: control_plane.ControlPlane) -> None:
    """The node agent (the same script `pulumi up` runs over SSH) on a Ready kubeadm node:
    containerd restarts exactly once and the node is Ready after it; a pod of RuntimeClass
    `nvidia` then runs through the planned runtime; the same plan again restarts nothing;
    `restore` gives every file back byte for byte, restarts once more, and the node is
    Ready."""

    tmp = Path(tempfile.mkdtemp(prefix="gp-", dir="/tmp"))
    node = kubelet_node.KubeletSandbox(tmp, LINE, profile(Distro.KUBEADM))
    node.boot()
    name = "gpu-node-agent"
    kubelet = kubelet_node.attach(cluster, node, tmp / "k", name)
    try:
        snap = node.snapshot()
        plan = node.plan()
        applied = node.run("apply", plan)
        assert applied.rc == 0, applied.err
        assert node.restarts == 1
        kubelet_node.wait_ready(cluster, name, kubelet, tmp / "k" / "kubelet.log", 60)
        core = _api(cluster)
        _runtime_class(core)
        assert node.daemon is not None
        pod = _pod("agent-gpu", node.daemon.ensure_pause_image(), "nvidia", name)
        core.create_namespaced_pod("default", pod)
        _running(core, "agent-gpu", _Log(tmp / "k" / "kubelet.log"))
        assert oracle.wrapper_calls(node.wrapper), "the pod did not run through nvidia"
        again = node.run("apply", plan)
        assert again.rc == 0, again.err
        assert node.restarts == 1, "an unchanged plan restarted containerd"
        core.delete_namespaced_pod("agent-gpu", "default", grace_period_seconds=0)
        restored = node.run("restore")
        assert restored.rc == 0, restored.err
        assert node.restarts == 2 and node.snapshot() == snap
        kubelet_node.wait_ready(cluster, name, kubelet, tmp / "k" / "kubelet.log", 60)
    finally:
        kubelet_node.stop_kubelet(kubelet, tmp / "k", cluster, name)
        node.close()
        oracle.unmount_under(tmp)


class _Log:
    """What `_running` reads from a node for its failure message."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def log(self) -> str:
        return self.path.read_text(errors="replace")[-4000:]


def test_pulumi_up_runs_the_probe_on_the_real_node_and_fails_with_no_nvidia_driver(
        cluster: control_plane.ControlPlane, tmp_path: Path) -> None:
    """`pulumi up` under the real CLI and kubernetes provider (a `nodeAccess: none` stack
    naming the real node): the RuntimeClass `nvidia` it creates is the one the probe Job
    runs through on the node, the probe exits 2 with no NVIDIA driver here, and the
    verdict fails `pulumi up` with the node's name and "no NVIDIA driver" (FM01), no
    traceback. A second `up` runs the failed check again (a new Job, the same verdict), not
    the one that passed (the node advertises its GPU), and
    `pulumi refresh` keeps the stack consistent; `destroy` removes the Jobs."""
    from kubernetes import client
    from support import gpu_chain, pulumi_engine
    from test_pulumi_engine import check_jobs, stack_file

    from gpuplane.checks.settings import ChecksSettings

    for why in (pulumi_engine.missing(),):
        if why:
            oracle.unavailable(f"the real Pulumi engine: {why}", "make test")
    plan = plan_node(profile(Distro.KUBEADM), ContainerdVersion.parse(LINE),
                     PlanOptions(toolkit=ToolkitMode.HOST))
    node = kubelet_node.start(cluster, Path(tempfile.mkdtemp(prefix="gp-kn-", dir="/tmp")),
                              plan.layout, plan.profile.config_path, line=LINE,
                              name="gpu-real-01")
    try:
        node.import_image(gpu_chain.build_python_image(
            tmp_path / "python3.tar", name=f"docker.io/library/{ChecksSettings().image}"))
        core = _api(cluster)
        # What the device plugin would advertise: one GPU (the probe requests it).
        core.patch_node_status(node.name, {"status": {"capacity": {"nvidia.com/gpu": "1"}}})
        # The stack makes RuntimeClass `nvidia`; a test above may have made it already.
        with contextlib.suppress(client.exceptions.ApiException):
            client.NodeV1Api(core.api_client).delete_runtime_class("nvidia")
        engine = pulumi_engine.Engine(tmp_path / "engine", kubeconfig=cluster.kubeconfig)
        path = stack_file(tmp_path / "stacks", "kind-smoke", {
            "gpuplane:nodes": [{"name": node.name, "gpus": 1}],
            "gpuplane:runtime": {"createRuntimeClass": True},
            "gpuplane:checks": {"enabled": True, "timeoutSeconds": 180}})
        up = engine.run("up", "kind-smoke", stack_file=path, timeout=600)
        text = up.stdout + up.stderr
        assert not up.ok, text[-4000:]
        assert f"[FM01] node {node.name}: the CUDA probe found no GPU in its pod" in text, \
            text[-4000:]
        assert "no NVIDIA driver (no_driver)" in text, text[-4000:]
        assert "Traceback" not in text, text[-4000:]
        assert oracle.wrapper_calls(node.wrapper), "the probe did not run through nvidia"
        first = [j for j in check_jobs(cluster) if j.startswith("gpu-checks-")]
        assert len(first) == 1 and first[0].startswith(f"gpu-checks-probe-{node.name}-"), first

        refreshed = engine.run("refresh", "kind-smoke", stack_file=path, timeout=300)
        assert refreshed.ok, refreshed.stdout + refreshed.stderr
        assert "Traceback" not in refreshed.stdout + refreshed.stderr
        again = engine.run("up", "kind-smoke", stack_file=path, timeout=600)
        assert not again.ok
        assert f"[FM01] node {node.name}: the CUDA probe found no GPU" in \
            again.stdout + again.stderr
        # Only the failed check runs again: the node does advertise its GPU.
        assert sorted(s["name"] for s in again.steps if s["op"] in ("update", "replace")) \
            == ["gpu-checks-nodes-check"], again.steps
        second = [j for j in check_jobs(cluster) if j.startswith("gpu-checks-")]
        assert len(second) == 1 and second != first, (first, second)
        with control_plane.helm_hooks_succeed(cluster, "gpu-operator"):
            down = engine.run("destroy", "kind-smoke", stack_file=path)
        assert down.ok, down.stdout + down.stderr
        assert [j for j in check_jobs(cluster) if j.startswith("gpu-checks-")] == []
        print(f"real node: up to verdict {up.seconds:.1f} s, second up {again.seconds:.1f} s")
    finally:
        node.stop()


def _doctor(cp: control_plane.ControlPlane, *args: str) -> tuple[int, dict[str, Any], str]:
    """`gpuplane doctor` live against the test cluster, with its node inspection: a
    privileged pod per GPU node (the locally imported python3 image) reads the node's
    containerd and runs `config dump` there."""
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "gpuplane.cli.main", "doctor", "--kubeconfig", str(cp.kubeconfig),
         "--format", "json", *args],
        capture_output=True, text=True, timeout=300, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def _inspected_node(cp: control_plane.ControlPlane, tmp_path: Path, name: str,
                    layout: dict[str, str], top: str) -> kubelet_node.KubeletNode:
    """A Ready node advertising one GPU, with the python3 image the doctor's inspection
    pod and the probe run in, and RuntimeClass `nvidia` in the cluster."""
    from support import gpu_chain

    from gpuplane.doctor.inspect import DEFAULT_IMAGE

    node = kubelet_node.start(cp, Path(tempfile.mkdtemp(prefix="gp-kn-", dir="/tmp")),
                              layout, top, line=LINE, name=name)
    try:
        node.import_image(gpu_chain.build_python_image(
            tmp_path / "python3.tar", name=f"docker.io/library/{DEFAULT_IMAGE}"))
        core = _api(cp)
        core.patch_node_status(name, {"status": {"capacity": {"nvidia.com/gpu": "1"}}})
        _runtime_class(core)
    except BaseException:
        node.stop()
        raise
    return node


def _events(cp: control_plane.ControlPlane, pod: str, text: str, timeout: float = 60) -> None:
    """Wait until an event of `pod` says `text`."""
    core = _api(cp)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(text in (e.message or "") for e in core.list_namespaced_event("default").items
               if e.involved_object.name == pod):
            return
        time.sleep(1)
    raise AssertionError(f"no event of pod {pod} says {text!r} after {timeout:.0f} s")


def test_the_doctor_inspects_a_healthy_live_node_then_one_without_the_nvidia_runtime(
        tmp_path: Path) -> None:
    """`gpuplane doctor` live, node inspection included (its privileged pod runs on the
    real node), on a cluster of its own: a node planned with the nvidia runtime and a GPU
    pod of RuntimeClass `nvidia` is a healthy cluster; the same node with the nvidia
    runtime removed from its containerd config is named, with the runtime missing."""
    cluster = control_plane.start(Path(tempfile.mkdtemp(prefix="gp-kd-", dir="/tmp")) / "cp")
    try:
        _doctor_healthy_then_broken(cluster, tmp_path)
    finally:
        cluster.stop()


def _doctor_healthy_then_broken(cluster: control_plane.ControlPlane, tmp_path: Path) -> None:
    plan = plan_node(profile(Distro.KUBEADM), ContainerdVersion.parse(LINE),
                     PlanOptions(toolkit=ToolkitMode.HOST))
    node = _inspected_node(cluster, tmp_path, "gpu-node-healthy", plan.layout,
                           plan.profile.config_path)
    try:
        pod = _pod("healthy-gpu", node.pause, "nvidia", node.name)
        pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        _api(cluster).create_namespaced_pod("default", pod)
        _running(_api(cluster), "healthy-gpu", node)
        code, report, _ = _doctor(cluster, "--node", node.name)
        assert (code, report["verdict"], report["findings"]) == (0, "healthy", []), report
        assert report["cluster"]["inspectedNodes"] == [node.name]
        assert not [n for n in report["notes"] if node.name in n], report["notes"]
    finally:
        node.stop()
    with contextlib.suppress(Exception):   # collected with its node, or still there
        _api(cluster).delete_namespaced_pod("healthy-gpu", "default", grace_period_seconds=0)

    # The same node with the nvidia runtime gone from its containerd config.
    baseline = profile(Distro.KUBEADM).baseline(ContainerdVersion.parse(LINE))
    node = _inspected_node(cluster, tmp_path, "gpu-node-broken", dict(baseline),
                           plan.profile.config_path)
    try:
        pod = _pod("broken-gpu", node.pause, "nvidia", node.name)
        pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        _api(cluster).create_namespaced_pod("default", pod)
        _events(cluster, "broken-gpu", "no runtime for \"nvidia\" is configured")
        code, report, _ = _doctor(cluster, "--node", node.name)
        assert (code, report["verdict"]) == (1, "problems"), report
        assert [(f["id"], f["scope"]) for f in report["findings"]] == [
            ("FM01", f"node:{node.name}")], report["findings"]
        finding = report["findings"][0]
        assert finding["message"].startswith("no file containerd reads defines runtime 'nvidia'")
        assert finding["where"].startswith(f"node {node.name}: ")
        assert any("FailedCreatePodSandBox" in e["source"] for e in finding["evidence"])
    finally:
        node.stop()
