"""The seed incidents as partial snapshots of API-shaped objects (tests/support/doctor_api.py:
what `kubectl get -A -o json` prints, never the doctor's own `save`): only nodes and
pods, no RuntimeClass list, no node inspection. Each case says what the doctor must
find from that evidence alone, and what it must not claim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.doctor_api import (
    container,
    event,
    node,
    pod,
    running,
    waiting,
    workload,
    write,
    write_version,
)

from gpuplane.cli.main import main
from gpuplane.doctor import DoctorReport, analyse, load

CUDA = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"
GLIBC = ("nvidia-container-cli: /lib64/libc.so.6: version `GLIBC_2.27' not found (required "
         "by /usr/local/nvidia/toolkit/nvidia-container-cli)")
NO_RUNTIME = ('failed to get sandbox runtime: no runtime for "nvidia" is configured')


def _run(snap: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    rc = main(["doctor", "--from", str(snap), "--format", "json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, json.loads(out)


def _ids(report: DoctorReport) -> list[tuple[str, str]]:
    return [(d.finding.severity, d.finding.id) for d in report.diagnoses]


# ------------------------------------------------------------------ incident 1


def test_incident_1_from_nodes_pods_and_events(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """k8s-snap, toolkit pointed at Docker's containerd: without a node inspection the
    event still names the missing runtime; the distro comes from k8sd's node label."""
    write(tmp_path, "nodes.json", [node(
        "gpu-a1", kubelet="v1.31.4", runtime="containerd://1.7.24", gpus=1,
        labels={"k8sd.io/role": "worker", "nvidia.com/gpu.present": "true"})])
    cuda = pod("cuda-vectoradd", "default", [container("cuda", CUDA, {"nvidia.com/gpu": "1"})],
               node_name="gpu-a1", runtime_class="nvidia", phase="Pending",
               statuses=[waiting("cuda", CUDA, "ContainerCreating")])
    write(tmp_path, "pods.json", [cuda])
    write(tmp_path, "events.json", [event(
        "Pod", "default", "cuda-vectoradd", "FailedCreatePodSandBox",
        "Failed to create pod sandbox: rpc error: code = Unknown desc = " + NO_RUNTIME,
        count=97)])
    rc, data = _run(tmp_path, capsys)
    assert rc == 1
    assert [(f["severity"], f["id"]) for f in data["findings"]] == [("error", "FM01")]
    finding = data["findings"][0]
    assert "the node was not inspected" in finding["message"]
    assert finding["evidence"][0]["source"].startswith(
        "event Pod default/cuda-vectoradd: FailedCreatePodSandBox (x97)")
    assert data["intent"]["values"]["distro"] == "k8s-snap"
    assert data["intent"]["inferred"]["distro"] == "Node gpu-a1 label k8sd.io/role=worker"
    assert ("not checked: runtimeclasses not collected: whether RuntimeClass nvidia exists "
            "(FM11)") in data["notes"]


# ------------------------------------------------------------------ incident 2


def _al2(tmp_path: Path, *, policy: bool) -> Path:
    """Amazon Linux 2 node reporting containerd 1.4.13; the operator's pods fail with
    GLIBC_2.27 not found. With `policy`, the ClusterPolicy of chart v23.9.2 too."""
    write(tmp_path, "nodes.json", [node(
        "ip-10-0-3-17.ec2.internal", kubelet="v1.29.10-eks-94953ac",
        runtime="containerd://1.4.13", os_image="Amazon Linux 2", gpus=1, allocatable=0,
        labels={"feature.node.kubernetes.io/pci-10de.present": "true",
                "eks.amazonaws.com/nodegroup": "gpu"})])
    validator = "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v23.9.2"
    pods = []
    events = []
    for app in ("nvidia-operator-validator", "nvidia-device-plugin-daemonset"):
        name = f"{app}-5hkzq"
        pods.append(pod(
            name, "gpu-operator", [container(app, validator)],
            node_name="ip-10-0-3-17.ec2.internal", labels={"app": app}, phase="Pending",
            owner=("DaemonSet", app), statuses=[waiting(app, validator, "PodInitializing")],
            init=[container("toolkit-validation", validator)],
            init_statuses=[waiting("toolkit-validation", validator, "RunContainerError",
                                   f"failed to create containerd task: {GLIBC}", 6)]))
        events.append(event("Pod", "gpu-operator", name, "Failed",
                            "Error: failed to create containerd task: failed to create shim "
                            f"task: OCI runtime create failed: {GLIBC}: unknown", count=31))
    write(tmp_path, "pods.json", pods)
    write(tmp_path, "events.json", events)
    write_version(tmp_path, "v1.29.10-eks-7f9249a")
    if policy:
        write(tmp_path, "clusterpolicies.json", [{
            "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy", "uid": "1", "creationTimestamp": "x",
                         "labels": {"helm.sh/chart": "gpu-operator-v23.9.2",
                                    "app.kubernetes.io/managed-by": "Helm"}},
            "spec": {"driver": {"enabled": False}, "toolkit": {"enabled": True},
                     "operator": {"defaultRuntime": "containerd"}},
            "status": {"state": "notReady"}}])
    return tmp_path


@pytest.mark.parametrize("policy", [True, False])
def test_incident_2_on_containerd_1_4_finds_the_glibc_mismatch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: bool) -> None:
    rc, data = _run(_al2(tmp_path, policy=policy), capsys)
    assert rc == 1
    assert [(f["severity"], f["id"]) for f in data["findings"]] == [("error", "FM15")]
    fm15 = data["findings"][0]
    assert "gpuplane:gpuOperator.toolkitImage.tag" in fm15["fix"]
    seen = " ".join(e["source"] for e in fm15["evidence"])
    assert "event Pod gpu-operator/nvidia-operator-validator-5hkzq: Failed (x31)" in seen
    assert "container toolkit-validation" in seen
    if policy:   # the values rule names the cause: the chart's default ubuntu20.04 image
        assert fm15["where"].startswith("ClusterPolicy cluster-policy values.toolkit.version")
    assert any(n.startswith("containerd 1.4.13 on the nodes: containerd 1.4 is not "
                            "supported") for n in data["notes"]), data["notes"]


# ------------------------------------------------------------------ incident 3


def test_incident_3_with_a_node_inspection(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """k8s-snap drop-ins on 1.7: the inspection (the program's JSON shape, written by hand)
    holds the three files; the model finds the CRI table replaced, the node NotReady is
    its evidence."""
    cri = 'plugins."io.containerd.grpc.v1.cri".containerd'
    files = {
        "/etc/containerd/config.toml":
            'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n',
        "/etc/containerd/conf.d/00-k8s-runc.toml":
            f'version = 2\n[{cri}]\n  default_runtime_name = "runc"\n'
            f'[{cri}.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n',
        "/etc/containerd/conf.d/99-nvidia.toml":
            f'version = 2\n[{cri}.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n',
    }
    write(tmp_path, "nodes.json", [node(
        "dgx-1", kubelet="v1.32.3", runtime="containerd://1.7.27", gpus=1, ready=False,
        message="container runtime is down: PLEG is not healthy",
        labels={"nvidia.com/gpu.present": "true"})])
    write(tmp_path, "pods.json", [])
    inspection = {
        "format": 1, "hostname": "dgx-1", "kubelet_daemon": 1190, "errors": [],
        "daemons": [{"pid": 1190, "binary": "/snap/k8s/3012/bin/containerd",
                     "config": "/etc/containerd/config.toml",
                     "address": "/run/containerd/containerd.sock",
                     "version": "containerd github.com/containerd/containerd v1.7.27 05044ec"}],
        "files": files, "kubelet": {"cgroup_driver": "systemd"},
        "cri_probe": {"status": "failed", "method": "crictl", "handler": "nvidia",
                      "error": "rpc error: code = Unimplemented desc = unknown service "
                               "runtime.v1.RuntimeService"},
        "os_release": {"ID": "ubuntu", "VERSION_ID": "24.04"},
    }
    (tmp_path / "nodes" / "dgx-1").mkdir(parents=True)
    (tmp_path / "nodes" / "dgx-1" / "inspection.json").write_text(json.dumps(inspection))
    rc, data = _run(tmp_path, capsys)
    assert rc == 1
    fm02 = [f for f in data["findings"] if f["id"] == "FM02"]
    assert fm02 and fm02[0]["where"] == "node dgx-1: /etc/containerd/conf.d/99-nvidia.toml:2"
    seen = " ".join(e["source"] for e in fm02[0]["evidence"])
    assert "Node dgx-1: Ready=False" in seen and "CRI probe" in seen
    assert data["intent"]["values"]["distro"] == "k8s-snap"
    assert data["intent"]["inferred"]["distro"] == \
        "node dgx-1: containerd /snap/k8s/3012/bin/containerd"


# ------------------------------------------------------------------ incident 4


def test_incident_4_from_nodes_and_pods_only(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """RKE2 pods without runtimeClassName: from nodes and pods alone the doctor knows the
    distro (kubelet suffix) but not the default runtime or the RuntimeClasses, and says so."""
    write(tmp_path, "nodes.json", [node(
        "rke2-gpu-0", kubelet="v1.31.4+rke2r1", runtime="containerd://1.7.23-k3s2",
        os_image="Rocky Linux 9.4 (Blue Onyx)", gpus=2,
        labels={"node.kubernetes.io/instance-type": "rke2"})])
    image = "nvcr.io/nvidia/pytorch:24.08-py3"
    write(tmp_path, "pods.json", [pod(
        f"pytorch-train-6c9f7d8b5-{s}", "ml", [container("train", image,
                                                         {"nvidia.com/gpu": "1"})],
        node_name="rke2-gpu-0", owner=("ReplicaSet", "pytorch-train-6c9f7d8b5"),
        labels={"app": "pytorch-train"}) for s in ("wq2lx", "m4ndz")])
    rc, data = _run(tmp_path, capsys)
    assert rc == 0
    assert [(f["severity"], f["id"]) for f in data["findings"]] == [("warning", "FM11")]
    assert data["findings"][0]["message"].startswith(
        "not known whether nvidia is containerd's default runtime")
    assert data["intent"]["values"]["distro"] == "rke2"
    assert data["intent"]["inferred"]["distro"] == "Node rke2-gpu-0 kubeletVersion v1.31.4+rke2r1"
    assert any(n.startswith("not checked: runtimeclasses not collected")
               for n in data["notes"])


# ------------------------------------------------------------------ incident 5


def _hami(tmp_path: Path, *, operator_plugin: bool = False, scheduler: str = "v1.29.0",
          allocatable: int = 20) -> Path:
    """HAMi in hami-system: its scheduler pod (no Deployment collected) and its device
    plugin pod; a control-plane node tells the Kubernetes version (no version.json)."""
    write(tmp_path, "nodes.json", [
        node("cp-0", kubelet="v1.31.4", runtime="containerd://1.7.24",
             labels={"node-role.kubernetes.io/control-plane": ""}),
        node("gpu-c1", kubelet="v1.31.4", runtime="containerd://1.7.24", gpus=2,
             allocatable=allocatable, labels={"gpu": "on", "nvidia.com/gpu.count": "2",
                                              "nvidia.com/gpu.present": "true"})])
    ks = f"registry.k8s.io/kube-scheduler:{scheduler}"
    pods = [
        pod("hami-scheduler-5b9d7c6f4d-2kq8m", "hami-system",
            [container("kube-scheduler", ks),
             container("vgpu-scheduler-extender", "projecthami/hami:v2.10.0")],
            node_name="cp-0", labels={"app.kubernetes.io/component": "hami-scheduler"},
            owner=("ReplicaSet", "hami-scheduler-5b9d7c6f4d"),
            statuses=[waiting("kube-scheduler", ks, "CrashLoopBackOff",
                              "back-off 5m0s restarting failed container=kube-scheduler", 64),
                      running("vgpu-scheduler-extender", "projecthami/hami:v2.10.0")]),
        pod("hami-device-plugin-x7m2k", "hami-system",
            [container("device-plugin", "projecthami/hami:v2.10.0")], node_name="gpu-c1",
            labels={"app.kubernetes.io/component": "hami-device-plugin"},
            owner=("DaemonSet", "hami-device-plugin")),
    ]
    if operator_plugin:
        pods.append(pod("nvidia-device-plugin-daemonset-8c2lp", "gpu-operator",
                        [container("nvidia-device-plugin-ctr",
                                   "nvcr.io/nvidia/k8s-device-plugin:v0.17.0")],
                        node_name="gpu-c1", labels={"app": "nvidia-device-plugin-daemonset"},
                        owner=("DaemonSet", "nvidia-device-plugin-daemonset")))
    write(tmp_path, "pods.json", pods)
    write(tmp_path, "events.json", [event(
        "Pod", "hami-system", "hami-scheduler-5b9d7c6f4d-2kq8m", "BackOff",
        "Back-off restarting failed container kube-scheduler in pod "
        "hami-scheduler-5b9d7c6f4d-2kq8m", count=64)])
    return tmp_path


def test_incident_5_scheduler_tag_from_its_crash_looping_pod(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, data = _run(_hami(tmp_path), capsys)
    assert rc == 1
    fm13 = [f for f in data["findings"] if f["id"] == "FM13" and "kube-scheduler" in f["where"]]
    assert len(fm13) == 1, data["findings"]
    finding = fm13[0]
    assert finding["where"] == "HAMi scheduler in namespace hami-system: kube-scheduler image"
    assert "registry.k8s.io/kube-scheduler:v1.29.0 against a v1.31.4 API server" in \
        finding["message"]
    assert "gpuplane:hami.schedulerImageTag: v1.31.4" in finding["fix"]
    seen = [e["source"] for e in finding["evidence"]]
    assert "Pod hami-system/hami-scheduler-5b9d7c6f4d-2kq8m container kube-scheduler" in seen
    assert any(s.startswith("event Pod hami-system/hami-scheduler-5b9d7c6f4d-2kq8m: BackOff")
               for s in seen), seen
    assert data["intent"]["values"]["device_plugin"] == "hami"
    assert data["intent"]["inferred"]["kubernetes_version"].startswith(
        "kubeletVersion of control-plane node cp-0")
    assert not [f for f in data["findings"] if f["id"] == "FM12"]


def test_matching_scheduler_tag_gives_no_finding(tmp_path: Path) -> None:
    report = analyse(load(_hami(tmp_path, scheduler="v1.31.4")))
    assert not [d for d in report.diagnoses if "kube-scheduler" in d.finding.where]


# ------------------------------------------------------------------ FM12


def test_fm12_needs_two_device_plugins_on_the_node(tmp_path: Path) -> None:
    """gpu-c1 advertises 2 nvidia.com/gpu, its physical count: with HAMi's plugin alone
    that is no proof (it may not have registered yet); with the operator's plugin pod on
    the same node it is FM12, with both pods as evidence."""
    alone = analyse(load(_hami(tmp_path / "a", scheduler="v1.31.4", allocatable=2)))
    assert not [d for d in alone.diagnoses if d.finding.id == "FM12"]
    assert any("no second device plugin was seen" in n for n in alone.notes), alone.notes
    both = analyse(load(_hami(tmp_path / "b", scheduler="v1.31.4", allocatable=2,
                              operator_plugin=True)))
    fm12 = [d for d in both.diagnoses if d.finding.id == "FM12"]
    assert [(d.finding.severity, d.finding.where) for d in fm12] == [("error", "Node gpu-c1")]
    detail = " ".join(e.detail for e in fm12[0].evidence)
    assert "Pod hami-system/hami-device-plugin-x7m2k" in detail
    assert "Pod gpu-operator/nvidia-device-plugin-daemonset-8c2lp" in detail


# ------------------------------------------------------------------ workloads


def test_a_gpu_deployment_whose_pods_were_refused_is_checked(tmp_path: Path) -> None:
    """No pod exists (the API refused them: RuntimeClass not found); the Deployment's own
    template is checked and the ReplicaSet's event is the evidence."""
    write(tmp_path, "nodes.json", [node("gpu-d1", kubelet="v1.31.4",
                                        runtime="containerd://1.7.24", gpus=1)])
    write(tmp_path, "pods.json", [])
    image = "ghcr.io/acme/infer:2.3.1"
    write(tmp_path, "deployments.json", [workload(
        "Deployment", "infer", "ml", [container("infer", image, {"nvidia.com/gpu": "1"})],
        runtime_class="nvidia-gpu", ready=0)])
    write(tmp_path, "runtimeclasses.json", [])
    write(tmp_path, "events.json", [event(
        "ReplicaSet", "ml", "infer-7d9c", "FailedCreate",
        'Error creating: pods "infer-7d9c-" is forbidden: pod rejected: RuntimeClass '
        '"nvidia-gpu" not found', count=14, source="replicaset-controller")])
    report = analyse(load(tmp_path))
    got = {(d.finding.id, d.finding.where.split(" spec")[0]) for d in report.diagnoses}
    assert ("FM11", "Deployment ml/infer") in got
    rc = [d for d in report.diagnoses if d.finding.where == "RuntimeClass nvidia-gpu"]
    assert rc and rc[0].evidence[0].source.startswith(
        "event ReplicaSet ml/infer-7d9c: FailedCreate (x14)")


# ------------------------------------------------------------------ distro


@pytest.mark.parametrize(("kubelet", "runtime", "labels", "distro", "why"), [
    ("v1.31.4+rke2r1", "containerd://1.7.23-k3s2", {}, "rke2",
     "Node n1 kubeletVersion v1.31.4+rke2r1"),
    ("v1.30.6+k3s1", "containerd://1.7.22-k3s1", {}, "k3s",
     "Node n1 kubeletVersion v1.30.6+k3s1"),
    ("v1.31.2+k0s", "containerd://1.7.24", {}, "k0s", "Node n1 kubeletVersion v1.31.2+k0s"),
    ("v1.31.4", "containerd://1.7.23-k3s2", {}, "k3s",
     "Node n1 containerRuntimeVersion containerd://1.7.23-k3s2 (k3s-io's containerd, which "
     "K3s and RKE2 ship); K3s taken, as no label or daemon names RKE2"),
    ("v1.31.4", "containerd://1.7.23-k3s2", {"node.kubernetes.io/instance-type": "rke2"},
     "rke2", "Node n1 containerRuntimeVersion containerd://1.7.23-k3s2 (k3s-io's containerd, "
             "which K3s and RKE2 ship); Node n1 label node.kubernetes.io/instance-type=rke2"),
    ("v1.31.4", "containerd://1.7.24", {"microk8s.io/cluster": "true"}, "microk8s",
     "Node n1 label microk8s.io/cluster=true"),
    ("v1.31.4+rke2r1", "containerd://1.7.23-k3s2",
     {"node.kubernetes.io/instance-type": "k3s"}, "rke2",
     "Node n1 kubeletVersion v1.31.4+rke2r1 (trusted over: Node n1 label "
     "node.kubernetes.io/instance-type=k3s says k3s)"),
    ("v1.31.4", "containerd://1.7.24", {}, "kubeadm",
     "no distro-specific kubelet or runtime version, node label or containerd path"),
])
def test_distro_from_version_suffixes_then_labels(tmp_path: Path, kubelet: str, runtime: str,
                                                  labels: dict[str, str], distro: str,
                                                  why: str) -> None:
    write(tmp_path, "nodes.json", [node("n1", kubelet=kubelet, runtime=runtime, gpus=1,
                                        labels=labels)])
    report = analyse(load(tmp_path))
    assert report.intent.distro == distro
    assert report.inferred["distro"] == why


def test_fm12_from_the_operator_daemonset_when_its_pods_were_not_kept(tmp_path: Path) -> None:
    """The operator's device-plugin DaemonSet (no pods of it collected) whose nodeSelector
    selects the node and that has pods scheduled is evidence of the second plugin too."""
    snap = _hami(tmp_path, scheduler="v1.31.4", allocatable=2)
    nodes = json.loads((snap / "nodes.json").read_text())
    nodes["items"][1]["metadata"]["labels"]["nvidia.com/gpu.deploy.device-plugin"] = "true"
    (snap / "nodes.json").write_text(json.dumps(nodes))
    plugin = workload("DaemonSet", "nvidia-device-plugin-daemonset", "gpu-operator",
                      [container("nvidia-device-plugin-ctr",
                                 "nvcr.io/nvidia/k8s-device-plugin:v0.17.0")],
                      node_selector={"nvidia.com/gpu.deploy.device-plugin": "true"})
    write(snap, "daemonsets.json", [plugin])
    fm12 = [d for d in analyse(load(snap)).diagnoses if d.finding.id == "FM12"]
    assert len(fm12) == 1
    assert any("DaemonSet gpu-operator/nvidia-device-plugin-daemonset (1 pod(s) scheduled, "
               "nodeSelector nvidia.com/gpu.deploy.device-plugin=true)" in e.detail
               for e in fm12[0].evidence), fm12[0].evidence
    # Its nodeSelector does not select a node without the label: no evidence, no finding.
    del nodes["items"][1]["metadata"]["labels"]["nvidia.com/gpu.deploy.device-plugin"]
    (snap / "nodes.json").write_text(json.dumps(nodes))
    assert not [d for d in analyse(load(snap)).diagnoses if d.finding.id == "FM12"]


def test_a_node_that_does_not_run_containerd_assumes_no_line(tmp_path: Path) -> None:
    """cri-o: the containerd version is not known, so nothing that depends on the line is
    claimed (CDI on would be FM16 on an assumed 1.6)."""
    write(tmp_path, "nodes.json", [node("gpu-o1", kubelet="v1.31.4", runtime="cri-o://1.31.2",
                                        gpus=1)])
    write(tmp_path, "clusterpolicies.json", [{
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy",
                     "labels": {"helm.sh/chart": "gpu-operator-v25.10.1"}},
        "spec": {"driver": {"enabled": False}, "cdi": {"enabled": True}}}])
    report = analyse(load(tmp_path))
    assert report.intent.containerd_version == "unknown"
    assert report.inferred["containerd_version"] == \
        "not known: Node gpu-o1 reports containerRuntimeVersion cri-o://1.31.2"
    assert "FM16" not in {d.finding.id for d in report.diagnoses}
    assert any(n.startswith("the nodes' containerd version is not known") for n in report.notes)


def test_the_operators_toolkit_is_seen_from_its_pod(tmp_path: Path) -> None:
    """No values collected: a toolkit pod of the operator still says who owns the toolkit."""
    _al2(tmp_path, policy=False)
    pods = json.loads((tmp_path / "pods.json").read_text())["items"]
    image = "nvcr.io/nvidia/k8s/container-toolkit:v1.14.3-ubuntu20.04"
    pods.append(pod("nvidia-container-toolkit-daemonset-q2x7d", "gpu-operator",
                    [container("nvidia-container-toolkit-ctr", image)],
                    node_name="ip-10-0-3-17.ec2.internal",
                    owner=("DaemonSet", "nvidia-container-toolkit-daemonset")))
    write(tmp_path, "pods.json", pods)
    report = analyse(load(tmp_path))
    assert report.intent.toolkit == "operator"
    assert report.inferred["toolkit"] == (
        "the operator's toolkit runs as gpu-operator/nvidia-container-toolkit-daemonset-q2x7d "
        "(its values were not collected)")
    assert report.intent.operator_namespace == "gpu-operator"
