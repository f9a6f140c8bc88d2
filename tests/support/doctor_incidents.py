"""Builds the doctor's incident snapshots in tests/data/doctor/incident-N/ from what
reference failure-modes.md describes (the five field incidents).

API objects are written in the shapes the API server returns. Node inspections are
produced by the packaged inspection program itself, run against each incident's
containerd files in a sandbox root with an injected /proc; `config_dump` is the output of
the real containerd of that line on the same files (fetched builds), and the CRI probe's
error text is what real containerd answers (tests/real/test_doctor_inspect.py shows it on
running daemons). Run `python tests/support/doctor_incidents.py` to regenerate (it puts
tests/ on its path); the snapshots
are committed so the incident tests need no containerd.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from hashlib import sha1
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT.parent)]

from gpuplane.containerd import ContainerdVersion  # noqa: E402
from gpuplane.core.intent import ClusterIntent, NodeIntent  # noqa: E402
from gpuplane.distros.profiles import Distro, profile  # noqa: E402
from gpuplane.doctor.snapshot import Snapshot, save  # noqa: E402
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node  # noqa: E402
from support import oracle  # noqa: E402
from support.doctor_support import DATA, KUBELET_PID, fake_process, inspect, meta, write_plain  # noqa: E402
from support.layouts import write_layout  # noqa: E402

T0 = "2026-11-20T09:00:00Z"
T1 = "2026-11-20T09:25:00Z"
CRI = 'plugins."io.containerd.grpc.v1.cri".containerd'
TOOLKIT_BIN = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
NO_RUNTIME = ('failed to get sandbox runtime: no runtime for "nvidia" is configured')


# ------------------------------------------------------------------ API objects

def node(name: str, *, kubelet: str, runtime: str, os_image: str, os_id: str, os_version: str,
         gpus: int = 1, allocatable: int | None = None, extra: dict[str, str] | None = None,
         ready: tuple[str, str, str] = ("True", "KubeletReady", "kubelet is posting ready "
                                                                 "status")) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/system-os_release.ID": os_id,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": os_version,
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.product": "NVIDIA-A10G", "nvidia.com/gpu.memory": "23028",
        **(extra or {}),
    }
    advertised = gpus if allocatable is None else allocatable
    resources = {"cpu": "16", "memory": "65021064Ki", "pods": "110",
                 "nvidia.com/gpu": str(advertised)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": meta(name, labels=labels),
        "spec": {},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": ready[0], "reason": ready[1],
                            "message": ready[2], "lastTransitionTime": T0}],
            "nodeInfo": {"kubeletVersion": kubelet, "containerRuntimeVersion": runtime,
                         "osImage": os_image, "kernelVersion": "5.15.0-1061-aws",
                         "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": meta(name, labels={"kubernetes.io/metadata.name": name, **labels})}


def pod(name: str, ns: str, *, node_name: str | None, image: str,
        gpu: dict[str, str] | None = None, runtime_class: str | None = None,
        phase: str = "Running", waiting: tuple[str, str] | None = None,
        init_waiting: tuple[str, str] | None = None, labels: dict[str, str] | None = None,
        owner: tuple[str, str] | None = None, env: list[dict[str, str]] | None = None,
        scheduler: str | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image,
                                 "resources": {"limits": dict(gpu)} if gpu else {}}
    if env:
        container["env"] = env
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": "Always",
                            "schedulerName": scheduler or "default-scheduler"}
    if node_name:
        spec["nodeName"] = node_name
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    metadata = meta(name, ns, labels=labels or {"app": name.rsplit("-", 1)[0]})
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0],
                                        "name": owner[1], "uid": f"uid-{owner[1]}",
                                        "controller": True}]
    status: dict[str, Any] = {"phase": phase}
    state = ({"waiting": {"reason": waiting[0], "message": waiting[1]}} if waiting
             else {"running": {"startedAt": T0}} if phase == "Running" else {})
    status["containerStatuses"] = [{"name": "main", "image": image, "ready": phase == "Running"
                                    and not waiting, "restartCount": 3 if waiting else 0,
                                    "state": state}]
    if init_waiting:
        spec["initContainers"] = [{"name": "toolkit-validation", "image": image}]
        status["initContainerStatuses"] = [{
            "name": "toolkit-validation", "image": image, "ready": False, "restartCount": 6,
            "state": {"waiting": {"reason": init_waiting[0], "message": init_waiting[1]}}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
            "status": status}


def event(obj: dict[str, Any], reason: str, message: str, *, count: int = 1,
          kind: str | None = None, source: str = "kubelet") -> dict[str, Any]:
    md = obj["metadata"]
    ns = md.get("namespace", "default")
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": meta(f"{md['name']}.{sha1((reason + message).encode()).hexdigest()[:12]}", ns),
        "involvedObject": {"kind": kind or obj["kind"], "namespace": ns, "name": md["name"],
                           "uid": md.get("uid", "")},
        "reason": reason, "message": message, "type": "Warning", "count": count,
        "firstTimestamp": T0, "lastTimestamp": T1, "source": {"component": source},
    }


def daemonset(name: str, ns: str, *, desired: int, ready: int, image: str,
              node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": name, "image": image}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta(name, ns),
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": spec}},
        "status": {"desiredNumberScheduled": desired, "currentNumberScheduled": desired,
                   "numberReady": ready, "numberAvailable": ready,
                   "numberUnavailable": desired - ready},
    }


def deployment(name: str, ns: str, *, images: dict[str, str], replicas: int = 1,
               ready: int | None = None) -> dict[str, Any]:
    ready = replicas if ready is None else ready
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(name, ns),
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {
                     "containers": [{"name": n, "image": i} for n, i in images.items()]}}},
        "status": {"replicas": replicas, "readyReplicas": ready,
                   "availableReplicas": ready},
    }


def runtimeclass(name: str) -> dict[str, Any]:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": meta(name),
            "handler": name}


def configmap(name: str, ns: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(name, ns), "data": data}


def release(name: str, ns: str, chart: str, version: str, app: str,
            values: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "namespace": ns, "revision": 1, "status": "deployed",
            "chart": {"name": chart, "version": version, "appVersion": app},
            "values": values, "chartValues": {}}


def cluster_policy(values: dict[str, Any], chart: str) -> dict[str, Any]:
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
            "metadata": meta("cluster-policy", labels={"helm.sh/chart": f"gpu-operator-{chart}",
                                                       "app.kubernetes.io/managed-by": "Helm"}),
            "spec": values, "status": {"state": "notReady"}}


def version(git: str) -> dict[str, Any]:
    major, minor = git.lstrip("v").split(".")[:2]
    return {"major": major, "minor": minor, "gitVersion": git, "platform": "linux/amd64"}


# ------------------------------------------------------------------ node inspections

def inspection(node_name: str, layout: dict[str, str], processes: list[tuple[int, list[str], str]],
               *, endpoint: str, line: str, version_text: str, kubelet_args: tuple[str, ...] = (),
               kubelet_bin: str = "/usr/bin/kubelet", binaries: dict[str, bytes] | None = None,
               libc: str = "2.35", os_release: str = "", probe: dict[str, Any],
               dump_config: str | None = None) -> dict[str, Any]:
    """Run the inspection program on `layout` (node paths) with the given processes, then
    add what host commands would have said: `--version`, the real config dump, the probe."""
    with tempfile.TemporaryDirectory(prefix="gp-inc-") as tmp:
        root, proc = Path(tmp) / "root", Path(tmp) / "proc"
        write_plain(layout, root)
        libc_path = root / "lib/x86_64-linux-gnu/libc.so.6"
        libc_path.parent.mkdir(parents=True, exist_ok=True)
        libc_path.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 57 + b"GLIBC_2.2.5\0"
                              + f"GNU C Library (GNU libc) stable release version {libc}.\n"
                              .encode())
        (root / "etc").mkdir(parents=True, exist_ok=True)
        (root / "etc/os-release").write_text(os_release)
        for path, data in (binaries or {}).items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(0o755)
        for pid, argv, exe in processes:
            fake_process(proc, pid, argv, exe)
        fake_process(proc, KUBELET_PID, [kubelet_bin, "--container-runtime-endpoint",
                                         f"unix://{endpoint}", *kubelet_args], kubelet_bin)
        report = inspect(root, proc, "--no-cri-probe")
        mine = next(d for d in report["daemons"] if d["pid"] == report["kubelet_daemon"])
        report.update(hostname=node_name, root="/host", exec="nsenter", elapsed_s=0.84,
                      errors=[], cri_probe=probe)
        for daemon in report["daemons"]:
            daemon["version"] = version_text
        report["config_dump"] = {"pid": mine["pid"], "ok": True, "ran": True, "rc": 0,
                                 "stderr": "", "stdout": real_dump(
                                     line, layout, dump_config or mine["config"])}
    return report


def real_dump(line: str, layout: dict[str, str], config: str) -> str:
    """`containerd config dump` of the real `line` on `layout`, with node paths."""
    with tempfile.TemporaryDirectory(prefix="gp-dump-") as tmp:
        write_layout(layout, Path(tmp))
        done = subprocess.run([str(oracle.binary(line)), "--config", tmp + config, "config",
                               "dump"], capture_output=True, text=True, check=True, cwd="/",
                              timeout=60)
        # 1.7 lists the files it read in `imports` in map order: sort them (reproducible).
        return re.sub(r"^imports = \[(.*)\]$",
                      lambda m: f"imports = [{', '.join(sorted(m[1].split(', ')))}]",
                      done.stdout.replace(tmp, ""), count=1, flags=re.MULTILINE)


def elf(*glibc: str) -> bytes:
    return b"\x7fELF\x02\x01\x01" + b"\0" * 57 + b"".join(
        f"GLIBC_{v}\0".encode() for v in glibc)


# ------------------------------------------------------------------ the incidents

def incident_1() -> Snapshot:
    """k8s-snap with a custom containerd base dir beside Docker's containerd: the toolkit
    (default env) configured Docker's daemon; the GPU pod waits in ContainerCreating."""
    base = "/var/lib/k8s-containerd"
    snap_prof = profile(Distro.K8S_SNAP, containerd_base_dir=base)
    v17 = ContainerdVersion.parse("1.7")
    docker = plan_node(profile(Distro.KUBEADM), v17, PlanOptions(toolkit=ToolkitMode.OPERATOR))
    kube = plan_node(snap_prof, v17, PlanOptions(toolkit=ToolkitMode.NONE))
    layout = {**docker.layout, **kube.layout}
    snap_bin = "/snap/k8s/2998/bin/containerd"
    probe = {"method": "crictl", "crictl": "/snap/k8s/current/bin/crictl", "handler": "nvidia",
             "socket": snap_prof.socket, "cgroup_parent": "gpuplane-probe.slice",
             "status": "failed", "error": NO_RUNTIME}
    insp = inspection(
        "gpu-a1", layout,
        [(812, ["/usr/bin/containerd"], "/usr/bin/containerd"),
         (1377, [snap_bin, "--config", snap_prof.config_path], snap_bin)],
        endpoint=snap_prof.socket, line="1.7", kubelet_bin="/snap/k8s/2998/bin/kubelet",
        kubelet_args=("--cgroup-driver=systemd",),
        version_text="containerd github.com/containerd/containerd v1.7.24 "
                     "88bf19b2105c8b17560993bee28a01ddc2f97182",
        os_release='ID=ubuntu\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.5 LTS"\n',
        probe=probe)
    values = {"driver": {"enabled": False}, "toolkit": {"enabled": True},
              "cdi": {"enabled": False}, "operator": {"runtimeClass": "nvidia"}}
    ns = "gpu-operator"
    toolkit_pod = pod("nvidia-container-toolkit-daemonset-7xk2p", ns, node_name="gpu-a1",
                      image="nvcr.io/nvidia/k8s/container-toolkit:v1.18.0",
                      waiting=("CrashLoopBackOff", "back-off 5m0s restarting failed container"),
                      labels={"app": "nvidia-container-toolkit-daemonset"})
    validator = pod("nvidia-operator-validator-q8d4n", ns, node_name="gpu-a1",
                    image="nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.10.1",
                    phase="Pending", init_waiting=("PodInitializing", ""),
                    runtime_class="nvidia", labels={"app": "nvidia-operator-validator"})
    cuda = pod("cuda-vectoradd", "default", node_name="gpu-a1",
               image="nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04",
               gpu={"nvidia.com/gpu": "1"}, runtime_class="nvidia", phase="Pending",
               waiting=("ContainerCreating", ""))
    cuda["status"]["containerStatuses"][0]["restartCount"] = 0
    return Snapshot(
        version=version("v1.31.4"),
        nodes=[node("gpu-a1", kubelet="v1.31.4", runtime="containerd://1.7.24",
                    os_image="Ubuntu 22.04.5 LTS", os_id="ubuntu", os_version="22.04")],
        namespaces=[namespace("default"), namespace(ns)],
        pods=[toolkit_pod, validator, cuda],
        events=[
            event(cuda, "FailedCreatePodSandBox",
                  "Failed to create pod sandbox: rpc error: code = Unknown desc = "
                  + NO_RUNTIME, count=97),
            event(validator, "FailedCreatePodSandBox",
                  "Failed to create pod sandbox: rpc error: code = Unknown desc = "
                  + NO_RUNTIME, count=88),
            event(toolkit_pod, "BackOff", "Back-off restarting failed container "
                  "nvidia-container-toolkit-ctr in pod nvidia-container-toolkit-daemonset-7xk2p",
                  count=42),
        ],
        daemonsets=[
            daemonset("nvidia-container-toolkit-daemonset", ns, desired=1, ready=0,
                      image="nvcr.io/nvidia/k8s/container-toolkit:v1.18.0"),
            daemonset("nvidia-operator-validator", ns, desired=1, ready=0,
                      image="nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.10.1"),
        ],
        deployments=[deployment("gpu-operator", ns,
                                images={"gpu-operator": "nvcr.io/nvidia/gpu-operator:v25.10.1"})],
        runtimeclasses=[runtimeclass("nvidia")],
        clusterpolicies=[cluster_policy(values, "v25.10.1")],
        helm_releases=[release("gpu-operator", ns, "gpu-operator", "v25.10.1", "v25.10.1",
                               values)],
        logs=[{"namespace": ns, "pod": toolkit_pod["metadata"]["name"],
               "container": "main", "previous": True,
               "text": "Using config path /etc/containerd/config.toml\n"
                       "Sending SIGHUP to containerd at /run/containerd/containerd.sock\n"
                       "Waiting for the runtime to be ready: timed out\n"}],
        inspections={"gpu-a1": insp},
        collected_at=T1, source={"server": "https://10.0.0.10:6443", "context": "k8s-snap"},
    )


def incident_2() -> Snapshot:
    """EKS-style Amazon Linux 2 node: toolkit 1.14 (chart v23.9, ubuntu20.04 flavour)
    rewrote the config with nvidia as default; its binaries need GLIBC_2.27."""
    top = "/etc/containerd/config.toml"
    config = (
        'version = 2\nroot = "/var/lib/containerd"\nstate = "/run/containerd"\n\n'
        '[grpc]\n  address = "/run/containerd/containerd.sock"\n\n'
        '[plugins."io.containerd.grpc.v1.cri"]\n'
        '  sandbox_image = "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.5"\n\n'
        f'[{CRI}]\n  default_runtime_name = "nvidia"\n\n'
        f'[{CRI}.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n\n'
        f'[{CRI}.runtimes.runc.options]\n  SystemdCgroup = true\n\n'
        f'[{CRI}.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n\n'
        f'[{CRI}.runtimes.nvidia.options]\n  BinaryName = "{TOOLKIT_BIN}"\n'
        "  SystemdCgroup = true\n")
    glibc_error = ("nvidia-container-cli: /lib64/libc.so.6: version `GLIBC_2.27' not found "
                   "(required by /usr/local/nvidia/toolkit/nvidia-container-cli)")
    probe = {"method": "crictl", "crictl": "/usr/bin/crictl", "handler": "nvidia",
             "socket": "/run/containerd/containerd.sock", "cgroup_parent": "gpuplane-probe.slice",
             "status": "failed",
             "error": "failed to create containerd task: failed to create shim task: OCI runtime "
                      "create failed: runc create failed: unable to start container process: "
                      f"error during container init: error running hook #0: exit status 1, "
                      f"stdout: , stderr: {glibc_error}"}
    insp = inspection(
        "ip-10-0-3-17.ec2.internal", {top: config},
        [(2301, ["/usr/bin/containerd"], "/usr/bin/containerd")],
        endpoint="/run/containerd/containerd.sock", line="1.7",
        version_text="containerd github.com/containerd/containerd 1.7.11 "
                     "64b8a811b07ba6288238eefc14d898ee0b5b99ba",
        binaries={TOOLKIT_BIN: elf("2.2.5", "2.14"),
                  "/usr/local/nvidia/toolkit/nvidia-container-cli": elf("2.2.5", "2.14", "2.27"),
                  "/usr/local/nvidia/toolkit/libnvidia-container.so.1": elf("2.2.5", "2.25",
                                                                          "2.27")},
        libc="2.26", os_release='NAME="Amazon Linux"\nID="amzn"\nVERSION_ID="2"\n'
                                'PRETTY_NAME="Amazon Linux 2"\n', probe=probe)
    ns = "gpu-operator"
    values = {"driver": {"enabled": False}, "toolkit": {"enabled": True},
              "operator": {"defaultRuntime": "containerd"}}
    pods = []
    events = []
    for name, app in (("nvidia-operator-validator-5hkzq", "nvidia-operator-validator"),
                      ("nvidia-device-plugin-daemonset-mm2x9", "nvidia-device-plugin-daemonset"),
                      ("gpu-feature-discovery-v7lcr", "gpu-feature-discovery")):
        p = pod(name, ns, node_name="ip-10-0-3-17.ec2.internal",
                image="nvcr.io/nvidia/cloud-native/gpu-operator-validator:v23.9.2",
                phase="Pending", init_waiting=("RunContainerError", f"failed to create "
                                               f"containerd task: {glibc_error}"),
                labels={"app": app})
        pods.append(p)
        events.append(event(p, "Failed", "Error: failed to create containerd task: failed to "
                            "create shim task: OCI runtime create failed: runc create failed: "
                            "unable to start container process: error during container init: "
                            "error running hook #0: error running hook: exit status 1, stdout: "
                            f", stderr: {glibc_error}: unknown", count=31))
    return Snapshot(
        version=version("v1.29.10-eks-7f9249a"),
        nodes=[node("ip-10-0-3-17.ec2.internal", kubelet="v1.29.10-eks-94953ac",
                    runtime="containerd://1.7.11", os_image="Amazon Linux 2", os_id="amzn",
                    os_version="2", allocatable=0)],
        namespaces=[namespace(ns)],
        pods=pods,
        events=events,
        daemonsets=[daemonset(app, ns, desired=1, ready=0,
                              image="nvcr.io/nvidia/cloud-native/gpu-operator-validator:v23.9.2")
                    for app in ("nvidia-operator-validator", "nvidia-device-plugin-daemonset",
                                "gpu-feature-discovery")]
        + [daemonset("nvidia-container-toolkit-daemonset", ns, desired=1, ready=1,
                     image="nvcr.io/nvidia/k8s/container-toolkit:v1.14.3-ubuntu20.04")],
        deployments=[deployment("gpu-operator", ns,
                                images={"gpu-operator": "nvcr.io/nvidia/gpu-operator:v23.9.2"})],
        runtimeclasses=[runtimeclass("nvidia")],
        clusterpolicies=[cluster_policy(values, "v23.9.2")],
        helm_releases=[release("gpu-operator", ns, "gpu-operator", "v23.9.2", "v23.9.2",
                               values)],
        inspections={"ip-10-0-3-17.ec2.internal": insp},
        collected_at=T1, source={"server": "https://ABC123.gr7.us-west-2.eks.amazonaws.com",
                                 "context": "eks-gpu"},
    )


def incident_3() -> Snapshot:
    """k8s-snap on containerd 1.7: the distro's 00-k8s-runc.toml and the toolkit's
    nvidia-only 99-nvidia.toml; runc is lost, the CRI plugin fails, the node is NotReady."""
    layout = {
        "/etc/containerd/config.toml":
            'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n\n[grpc]\n'
            '  address = "/run/containerd/containerd.sock"\n',
        "/etc/containerd/conf.d/00-k8s-runc.toml":
            f'version = 2\n\n[plugins."io.containerd.grpc.v1.cri"]\n'
            '  sandbox_image = "ghcr.io/canonical/k8s-snap/pause:3.10"\n\n'
            f'[{CRI}]\n  default_runtime_name = "runc"\n\n'
            f'[{CRI}.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n\n'
            f'[{CRI}.runtimes.runc.options]\n  SystemdCgroup = true\n',
        "/etc/containerd/conf.d/99-nvidia.toml":
            f'version = 2\n\n[{CRI}.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n'
            f'\n[{CRI}.runtimes.nvidia.options]\n  BinaryName = "{TOOLKIT_BIN}"\n'
            "  SystemdCgroup = true\n",
    }
    snap_bin = "/snap/k8s/3012/bin/containerd"
    probe = {"method": "crictl", "crictl": "/snap/k8s/current/bin/crictl", "handler": "nvidia",
             "socket": "/run/containerd/containerd.sock", "cgroup_parent": "gpuplane-probe.slice",
             "status": "failed",
             "error": "rpc error: code = Unimplemented desc = unknown service "
                      "runtime.v1.RuntimeService"}
    insp = inspection(
        "dgx-1", layout,
        [(1190, [snap_bin, "--config", "/etc/containerd/config.toml"], snap_bin)],
        endpoint="/run/containerd/containerd.sock", line="1.7",
        kubelet_bin="/snap/k8s/3012/bin/kubelet", kubelet_args=("--cgroup-driver=systemd",),
        version_text="containerd github.com/containerd/containerd v1.7.27 "
                     "05044ec0a9a75232cad458027ca83437aae3f4da",
        binaries={TOOLKIT_BIN: elf("2.2.5", "2.14")},
        os_release='ID=ubuntu\nVERSION_ID="24.04"\nPRETTY_NAME="Ubuntu 24.04.2 LTS"\n',
        probe=probe)
    ns = "gpu-operator"
    env = [{"name": "CONTAINERD_CONFIG", "value": "/etc/containerd/config.toml"},
           {"name": "CONTAINERD_SOCKET", "value": "/run/containerd/containerd.sock"},
           {"name": "RUNTIME_CONFIG_SOURCE", "value": "file=/etc/containerd/config.toml"},
           {"name": "RUNTIME_EXECUTABLE_PATH", "value": "/snap/k8s/current/bin/containerd"},
           {"name": "CONTAINERD_RUNTIME_CLASS", "value": "nvidia"},
           {"name": "CONTAINERD_SET_AS_DEFAULT", "value": "false"},
           {"name": "RUNTIME_DROP_IN_CONFIG", "value": "/etc/containerd/conf.d/99-nvidia.toml"}]
    values = {"driver": {"enabled": False}, "toolkit": {"enabled": True, "env": env},
              "cdi": {"enabled": False}, "operator": {"runtimeClass": "nvidia"},
              "devicePlugin": {"enabled": True, "config": {"create": False,
                                                           "name": "time-slicing-config",
                                                           "default": "any"}}}
    ts = ("version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n"
          "    renameByDefault: false\n    failRequestsGreaterThanOne: false\n"
          "    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n")
    cuda = pod("cuda-vectoradd", "default", node_name=None,
               image="nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04",
               gpu={"nvidia.com/gpu": "1"}, runtime_class="nvidia", phase="Pending")
    cuda["status"]["containerStatuses"] = []
    dgx = node("dgx-1", kubelet="v1.32.3", runtime="containerd://1.7.27",
               os_image="Ubuntu 24.04.2 LTS", os_id="ubuntu", os_version="24.04", gpus=1,
               allocatable=4, extra={"nvidia.com/gpu.replicas": "4"},
               ready=("False", "KubeletNotReady", "container runtime is down: PLEG is not "
                                                  "healthy: CRI v1 runtime API is not "
                                                  "implemented for endpoint "
                                                  "\"unix:///run/containerd/containerd.sock\""))
    return Snapshot(
        version=version("v1.32.3"),
        nodes=[dgx],
        namespaces=[namespace("default"), namespace(ns)],
        pods=[cuda],
        events=[event(cuda, "FailedScheduling", "0/1 nodes are available: 1 node(s) had "
                      "untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/1 nodes "
                      "are available: 1 Preemption is not helpful for scheduling.", count=12,
                      source="default-scheduler")],
        daemonsets=[daemonset("nvidia-container-toolkit-daemonset", ns, desired=1, ready=1,
                              image="nvcr.io/nvidia/k8s/container-toolkit:v1.18.0"),
                    daemonset("nvidia-device-plugin-daemonset", ns, desired=1, ready=1,
                              image="nvcr.io/nvidia/k8s-device-plugin:v0.18.0")],
        deployments=[deployment("gpu-operator", ns,
                                images={"gpu-operator": "nvcr.io/nvidia/gpu-operator:v25.10.1"})],
        runtimeclasses=[runtimeclass("nvidia")],
        configmaps=[configmap("time-slicing-config", ns, {"any": ts})],
        clusterpolicies=[cluster_policy(values, "v25.10.1")],
        helm_releases=[release("gpu-operator", ns, "gpu-operator", "v25.10.1", "v25.10.1",
                               values)],
        inspections={"dgx-1": insp},
        collected_at=T1, source={"server": "https://10.20.0.5:6443", "context": "dgx"},
    )


def incident_4() -> Snapshot:
    """RKE2: nvidia runtime configured (RKE2 found the host toolkit), GPU visible with
    crictl, but the pods have no runtimeClassName and no RuntimeClass exists."""
    prof = profile(Distro.RKE2)
    plan = plan_node(prof, ContainerdVersion.parse("1.7"), PlanOptions(toolkit=ToolkitMode.HOST))
    rke2_bin = "/var/lib/rancher/rke2/data/v1.31.4-rke2r1-6b3a8c1f0e2d/bin/containerd"
    probe = {"method": "crictl", "crictl": "/var/lib/rancher/rke2/bin/crictl",
             "handler": "nvidia", "socket": prof.socket, "cgroup_parent": "gpuplane-probe.slice",
             "status": "ok", "sandbox_id": "5d0c9e8f2a7b41c6"}
    insp = inspection(
        "rke2-gpu-0", plan.layout,
        [(977, [rke2_bin, "-c", prof.config_path, "-a", prof.socket, "--state",
                "/run/k3s/containerd", "--root", "/var/lib/rancher/rke2/agent/containerd"],
          rke2_bin)],
        endpoint=prof.socket, line="1.7",
        kubelet_bin="/var/lib/rancher/rke2/data/v1.31.4-rke2r1-6b3a8c1f0e2d/bin/kubelet",
        kubelet_args=("--cgroup-driver=systemd",),
        version_text="containerd github.com/k3s-io/containerd v1.7.23-k3s2 "
                     "ff6e6a1d6a3f2d5bfa5c1d2c1d1e5f1c9e0b1a2c",
        binaries={"/usr/bin/nvidia-container-runtime": elf("2.2.5", "2.14"),
                  "/usr/bin/nvidia-container-cli": elf("2.2.5", "2.14", "2.27")},
        os_release='ID="rocky"\nVERSION_ID="9.4"\nPRETTY_NAME="Rocky Linux 9.4 (Blue Onyx)"\n',
        libc="2.34", probe=probe)
    ns = "gpu-operator"
    values = {"driver": {"enabled": False}, "toolkit": {"enabled": False},
              "cdi": {"enabled": False}}
    train = pod("pytorch-train-6c9f7d8b5-wq2lx", "ml", node_name="rke2-gpu-0",
                image="nvcr.io/nvidia/pytorch:24.08-py3", gpu={"nvidia.com/gpu": "1"},
                owner=("ReplicaSet", "pytorch-train-6c9f7d8b5"))
    train2 = pod("pytorch-train-6c9f7d8b5-m4ndz", "ml", node_name="rke2-gpu-0",
                 image="nvcr.io/nvidia/pytorch:24.08-py3", gpu={"nvidia.com/gpu": "1"},
                 owner=("ReplicaSet", "pytorch-train-6c9f7d8b5"))
    return Snapshot(
        version=version("v1.31.4+rke2r1"),
        nodes=[node("rke2-gpu-0", kubelet="v1.31.4+rke2r1", runtime="containerd://1.7.23-k3s2",
                    os_image="Rocky Linux 9.4 (Blue Onyx)", os_id="rocky", os_version="9.4",
                    gpus=2)],
        namespaces=[namespace("ml"), namespace(ns)],
        pods=[train, train2],
        daemonsets=[daemonset("nvidia-device-plugin-daemonset", ns, desired=1, ready=1,
                              image="nvcr.io/nvidia/k8s-device-plugin:v0.18.0")],
        deployments=[deployment("gpu-operator", ns,
                                images={"gpu-operator": "nvcr.io/nvidia/gpu-operator:v25.10.1"})],
        clusterpolicies=[cluster_policy(values, "v25.10.1")],
        helm_releases=[release("gpu-operator", ns, "gpu-operator", "v25.10.1", "v25.10.1",
                               values)],
        inspections={"rke2-gpu-0": insp},
        collected_at=T1, source={"server": "https://rke2.lab:6443", "context": "rke2-lab"},
    )


def incident_5() -> Snapshot:
    """HAMi: installed in hami-system (the stack says kube-system), scheduler image of
    another minor, webhook Ignore and excluding the `ml` namespace, one GPU node without
    gpu=on, nvidia not default without a runtime class, a request no card can hold and
    CUDA_DISABLE_CONTROL set. Inspection skipped (`--no-inspect`)."""
    intent = ClusterIntent(
        distro="kubeadm", containerd_version="1.7", kubernetes_version="1.31.4",
        device_plugin="hami", toolkit="operator", driver_preinstalled=True, cdi=False,
        nvidia_default=False, runtime_class="nvidia", operator_namespace="gpu-operator",
        hami_namespace="kube-system",
        nodes=(NodeIntent("gpu-c1", 2, "ubuntu22.04"), NodeIntent("gpu-c2", 2, "ubuntu22.04")))
    ops, hns = "gpu-operator", "hami-system"
    operator_values = {"driver": {"enabled": False}, "toolkit": {"enabled": True, "env": [
        {"name": "CONTAINERD_CONFIG", "value": "/etc/containerd/config.toml"},
        {"name": "CONTAINERD_SOCKET", "value": "/run/containerd/containerd.sock"},
        {"name": "RUNTIME_CONFIG_SOURCE", "value": "file=/etc/containerd/config.toml"},
        {"name": "CONTAINERD_SET_AS_DEFAULT", "value": "false"},
        {"name": "RUNTIME_DROP_IN_CONFIG", "value": "/etc/containerd/conf.d/99-nvidia.toml"}]},
        "cdi": {"enabled": False}, "devicePlugin": {"enabled": False}}
    hami_values = {"scheduler": {"kubeScheduler": {"image": {"tag": "v1.29.0"}},
                                 "admissionWebhook": {"failurePolicy": "Ignore"},
                                 "replicas": 1},
                   "devicePlugin": {"deviceSplitCount": 10, "deviceMemoryScaling": 1,
                                    "runtimeClassName": ""}}
    train = pod("train-0", "ml", node_name=None, image="nvcr.io/nvidia/pytorch:24.08-py3",
                gpu={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "30000"}, phase="Pending")
    train["status"]["containerStatuses"] = []
    infer = pod("infer-0", "ml", node_name="gpu-c1", image="ghcr.io/acme/infer:2.3.1",
                gpu={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000",
                     "nvidia.com/gpucores": "30"},
                env=[{"name": "CUDA_DISABLE_CONTROL", "value": "true"}])
    scheduler_pod = pod("hami-scheduler-5b9d7c6f4d-2kq8m", hns, node_name="cp-0",
                        image="registry.k8s.io/kube-scheduler:v1.29.0",
                        waiting=("CrashLoopBackOff", "back-off 5m0s restarting failed "
                                                     "container=kube-scheduler"),
                        labels={"app": "hami-scheduler"})
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": meta("hami-webhook"),
        "webhooks": [{
            "name": "vgpu.hami.io", "failurePolicy": "Ignore", "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"name": "hami-scheduler", "namespace": hns,
                                         "path": "/webhook", "port": 443}},
            "namespaceSelector": {"matchExpressions": [
                {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]},
            "objectSelector": {"matchExpressions": [
                {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods"], "scope": "*"}],
        }],
    }
    c1 = node("gpu-c1", kubelet="v1.31.4", runtime="containerd://1.7.24",
              os_image="Ubuntu 22.04.5 LTS", os_id="ubuntu", os_version="22.04", gpus=2,
              allocatable=20, extra={"gpu": "on"})
    c2 = node("gpu-c2", kubelet="v1.31.4", runtime="containerd://1.7.24",
              os_image="Ubuntu 22.04.5 LTS", os_id="ubuntu", os_version="22.04", gpus=2,
              allocatable=0)
    return Snapshot(
        version=version("v1.31.4"),
        nodes=[c1, c2],
        namespaces=[namespace("ml", **{"hami.io/webhook": "ignore"}), namespace(ops),
                    namespace(hns)],
        pods=[train, infer, scheduler_pod],
        events=[event(train, "FailedScheduling", "0/3 nodes are available: 1 node(s) had "
                      "untolerated taint {node-role.kubernetes.io/control-plane: }, 2 "
                      "Insufficient nvidia.com/gpumem. preemption: 0/3 nodes are available: "
                      "1 Preemption is not helpful for scheduling, 2 No preemption victims "
                      "found for incoming pod.", count=25, source="default-scheduler"),
                event(scheduler_pod, "BackOff", "Back-off restarting failed container "
                      "kube-scheduler in pod hami-scheduler-5b9d7c6f4d-2kq8m", count=64)],
        daemonsets=[daemonset("hami-device-plugin", hns, desired=1, ready=1,
                              image="projecthami/hami:v2.10.0", node_selector={"gpu": "on"}),
                    daemonset("nvidia-container-toolkit-daemonset", ops, desired=2, ready=2,
                              image="nvcr.io/nvidia/k8s/container-toolkit:v1.18.0")],
        deployments=[deployment("hami-scheduler", hns, ready=0, images={
                         "kube-scheduler": "registry.k8s.io/kube-scheduler:v1.29.0",
                         "vgpu-scheduler-extender": "projecthami/hami:v2.10.0"}),
                     deployment("gpu-operator", ops,
                                images={"gpu-operator": "nvcr.io/nvidia/gpu-operator:v25.10.1"})],
        runtimeclasses=[runtimeclass("nvidia")],
        configmaps=[configmap("gpuplane-intent", ops, {"intent.json": intent.to_json()})],
        webhooks=[webhook],
        clusterpolicies=[cluster_policy(operator_values, "v25.10.1")],
        helm_releases=[
            release("gpu-operator", ops, "gpu-operator", "v25.10.1", "v25.10.1",
                    operator_values),
            release("hami", hns, "hami", "2.10.0", "2.10.0", hami_values)],
        collected_at=T1, source={"server": "https://10.1.0.2:6443", "context": "shared"},
        notes=["nodes not inspected (--no-inspect)"],
    )


def healthy() -> Snapshot:
    """kubeadm + GPU Operator as gpuplane plans it: the toolkit's drop-in is read, the
    CRI probe starts a sandbox, the CUDA pod ran with runtimeClassName nvidia."""
    v17 = ContainerdVersion.parse("1.7")
    prof = profile(Distro.KUBEADM)
    options = PlanOptions(toolkit=ToolkitMode.OPERATOR)
    plan = plan_node(prof, v17, options)
    from gpuplane.plan.node import toolkit_env_for

    env = toolkit_env_for(prof, v17, options)
    probe = {"method": "crictl", "crictl": "/usr/bin/crictl", "handler": "nvidia",
             "socket": prof.socket, "cgroup_parent": "gpuplane-probe.slice", "status": "ok",
             "sandbox_id": "9a1e7f3c5b2d4e6f"}
    insp = inspection(
        "gpu-d1", plan.layout, [(640, ["/usr/bin/containerd"], "/usr/bin/containerd")],
        endpoint=prof.socket, line="1.7", kubelet_args=("--config=/var/lib/kubelet/config.yaml",),
        version_text="containerd containerd.io 1.7.24 88bf19b2105c8b17560993bee28a01ddc2f97182",
        binaries={TOOLKIT_BIN: elf("2.2.5", "2.14"),
                  "/usr/local/nvidia/toolkit/nvidia-container-cli": elf("2.2.5", "2.27")},
        os_release='ID=ubuntu\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.5 LTS"\n',
        probe=probe)
    ns = "gpu-operator"
    values = {"operator": {"runtimeClass": "nvidia"}, "driver": {"enabled": False},
              "toolkit": {"enabled": True, "env": env}, "cdi": {"enabled": False},
              "devicePlugin": {"enabled": True}}
    intent = ClusterIntent(distro="kubeadm", containerd_version="1.7.24",
                           kubernetes_version="1.31.4", nodes=(NodeIntent("gpu-d1", 1),))
    cuda = pod("cuda-vectoradd", "default", node_name="gpu-d1",
               image="nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04",
               gpu={"nvidia.com/gpu": "1"}, runtime_class="nvidia", phase="Succeeded")
    cuda["status"]["containerStatuses"][0]["state"] = {
        "terminated": {"exitCode": 0, "reason": "Completed"}}
    return Snapshot(
        version=version("v1.31.4"),
        nodes=[node("gpu-d1", kubelet="v1.31.4", runtime="containerd://1.7.24",
                    os_image="Ubuntu 22.04.5 LTS", os_id="ubuntu", os_version="22.04")],
        namespaces=[namespace("default"), namespace(ns)],
        pods=[cuda],
        daemonsets=[daemonset("nvidia-container-toolkit-daemonset", ns, desired=1, ready=1,
                              image="nvcr.io/nvidia/k8s/container-toolkit:v1.18.0"),
                    daemonset("nvidia-device-plugin-daemonset", ns, desired=1, ready=1,
                              image="nvcr.io/nvidia/k8s-device-plugin:v0.18.0")],
        deployments=[deployment("gpu-operator", ns,
                                images={"gpu-operator": "nvcr.io/nvidia/gpu-operator:v25.10.1"})],
        runtimeclasses=[runtimeclass("nvidia")],
        configmaps=[configmap("gpuplane-intent", ns, {"intent.json": intent.to_json()})],
        clusterpolicies=[cluster_policy(values, "v25.10.1")],
        helm_releases=[release("gpu-operator", ns, "gpu-operator", "v25.10.1", "v25.10.1",
                               values)],
        inspections={"gpu-d1": insp},
        collected_at=T1, source={"server": "https://10.9.0.1:6443", "context": "prod"},
    )


INCIDENTS = {"incident-1": incident_1, "incident-2": incident_2, "incident-3": incident_3,
             "incident-4": incident_4, "incident-5": incident_5, "healthy": healthy}


# ------------------------------------------------------------------ recorded API responses

def helm_secret(record: dict[str, Any], revision: int = 1) -> dict[str, Any]:
    """The Secret helm 3 keeps for a release revision, as the API returns it."""
    from gpuplane.doctor.helm import encode_release

    chart = record["chart"]
    payload = {"name": record["name"], "namespace": record["namespace"], "version": revision,
               "info": {"status": record["status"], "first_deployed": T0,
                        "last_deployed": T0, "description": "Install complete"},
               "chart": {"metadata": {"name": chart["name"], "version": chart["version"],
                                      "appVersion": chart["appVersion"], "apiVersion": "v2"},
                         "values": record["chartValues"], "templates": []},
               "config": record["values"], "manifest": "---\n# Source: (omitted)\n"}
    name = f"sh.helm.release.v1.{record['name']}.v{revision}"
    return {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": meta(name, record["namespace"], labels={
                "name": record["name"], "owner": "helm", "status": record["status"],
                "version": str(revision)}),
            "data": {"release": encode_release(payload)}}


def record_api(snap: Snapshot, target: Path) -> None:
    """Write what the API server would answer for `snap`'s cluster, plus objects the
    doctor must leave out (kube-system's own pods, another Helm release, ...)."""
    import json as _json

    noise_pod = pod("coredns-7db6d8ff4d-5x2rk", "kube-system", node_name="cp-0",
                    image="registry.k8s.io/coredns/coredns:v1.11.1",
                    labels={"k8s-app": "kube-dns"})
    other = release("ingress-nginx", "ingress", "ingress-nginx", "4.11.3", "1.11.3",
                    {"controller": {"admissionWebhooks": {"enabled": True},
                                    "apiToken": "s3cr3t"}})
    bodies: dict[str, Any] = {
        "version": snap.version,
        "api/v1/nodes": snap.nodes,
        "api/v1/pods": [*snap.pods, noise_pod],
        "api/v1/namespaces": [*snap.namespaces, namespace("kube-system")],
        "api/v1/events": [*snap.events, event(noise_pod, "Unhealthy",
                                              "Readiness probe failed: HTTP probe failed")],
        "apis/apps/v1/daemonsets": [*snap.daemonsets, daemonset(
            "kube-proxy", "kube-system", desired=3, ready=3,
            image="registry.k8s.io/kube-proxy:v1.31.4")],
        "apis/apps/v1/deployments": [*snap.deployments, deployment(
            "coredns", "kube-system", images={"coredns": "registry.k8s.io/coredns:v1.11.1"})],
        "apis/apps/v1/replicasets": [*snap.replicasets, {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": meta("coredns-7db6d8ff4d", "kube-system"),
            "spec": {"replicas": 2, "selector": {"matchLabels": {"k8s-app": "kube-dns"}}}}],
        "apis/node.k8s.io/v1/runtimeclasses": snap.runtimeclasses,
        "api/v1/configmaps": [*snap.configmaps, configmap("kube-root-ca.crt", "default",
                                                          {"ca.crt": "-----BEGIN..."})],
        "apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations": snap.webhooks,
        "apis/nvidia.com/v1/clusterpolicies": snap.clusterpolicies,
        "api/v1/secrets": [helm_secret(r) for r in [*snap.helm_releases, other]],
    }
    for path, body in bodies.items():
        if isinstance(body, list):
            body = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"},
                    "items": body}
        out = target / f"{path}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(_json.dumps(body, indent=1, sort_keys=True) + "\n")
    for entry in snap.logs:
        out = target / f"api/v1/namespaces/{entry['namespace']}/pods/{entry['pod']}/log.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(entry["text"])


def main() -> None:
    for name, build in INCIDENTS.items():
        target = DATA / name
        shutil.rmtree(target, ignore_errors=True)
        snap = build()
        save(snap, target)
        print(f"wrote {target}")
        if name == "incident-1":
            api = DATA / "api" / name
            shutil.rmtree(api, ignore_errors=True)
            record_api(snap, api)
            print(f"wrote {api}")


if __name__ == "__main__":
    main()
