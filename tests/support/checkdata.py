"""Recorded API objects and pod logs for the post-deploy check tests.

Pods, Jobs, Nodes and Events are dicts in the API's JSON shape (what `kubectl get -o json`
prints). Probe logs are produced by the probe's own report and render functions, so they
follow the probe's real output contract; the "no driver" log is the real probe's output on
this machine (no NVIDIA driver here), captured by running it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpuplane.checks.manifests import job_name
from gpuplane.probe import PROBE_PATH
from gpuplane.probe import cuda_probe as cp

MIB = 1 << 20
UUID_A = "GPU-8f6d1c2e-1a2b-4c3d-9e8f-0123456789ab"
UUID_B = "GPU-11111111-2222-3333-4444-555555555555"
T0 = "2026-01-10T12:00:00Z"
FP = "fp0123"                                       # the checks' fingerprint in these tests
JOB = job_name("checks", "probe-gpu-a1", FP, 1)     # gpu-a1's probe Job, first run


def device(index: int = 0, uuid: str = UUID_A, memory_mib: int = 81559,
           name: str = "NVIDIA H100 80GB HBM3", ok: bool = True) -> dict[str, Any]:
    """One device entry as `probe_device` reports it."""
    return {
        "index": index, "ok": ok, "name": name, "uuid": uuid, "mig": False,
        "pci_bus_id": f"00000000:{index + 0x18:02X}:00.0", "compute_capability": "9.0",
        "multiprocessor_count": 132,
        "memory_total_bytes": memory_mib * MIB, "memory_total_mib": memory_mib,
        "memory_free_bytes": (memory_mib - 500) * MIB, "memory_free_mib": memory_mib - 500,
        "memory_info_total_bytes": memory_mib * MIB, "memory_info_total_mib": memory_mib,
        "kernel": {"ok": ok, "elements": 1 << 20, "grid": [4096, 1, 1], "block": [256, 1, 1],
                   "kernel_ms": 0.412, "mismatches": 0, "first_bad_index": None,
                   "expected": None, "got": None, "got_bits": None,
                   "message": "all 1048576 elements correct"},
        "errors": [], "elapsed_ms": 180.2,
    }


def probe_log(devices: list[dict[str, Any]] | None = None,
              failures: list[tuple[str, str]] = (), max_memory_mib: int | None = None) -> str:
    """A container log as the kubelet keeps it: the probe's stderr summary, then stdout."""
    devices = [device()] if devices is None else devices
    report = cp.build_report(
        library=cp.DEFAULT_LIBRARY, elements=1 << 20,
        failures=[cp.Failure(kind, message) for kind, message in failures],
        devices=devices, driver_version_raw=12040, device_count=len(devices),
        selected=list(range(len(devices))), max_memory_mib=max_memory_mib, elapsed_ms=412.0)
    out, err = cp.render(report, json_only=False)
    return err + out


@cache
def real_no_driver_log() -> tuple[int, str]:
    """(exit code, output) of the real probe where libcuda cannot be loaded."""
    run = subprocess.run([sys.executable, str(PROBE_PATH), "--library",
                          "/nonexistent/libcuda.so.1"], capture_output=True, text=True,
                         check=False)
    return run.returncode, run.stderr + run.stdout


def pod(name: str, node: str | None = "gpu-a1", phase: str = "Succeeded",
        exit_code: int | None = 0, started: str | None = T0,
        finished: str | None = "2026-01-10T12:00:05Z", reason: str | None = None,
        message: str | None = None, waiting: str | None = None,
        unschedulable: str | None = None, scheduler: str = "default-scheduler",
        job: str = JOB) -> dict[str, Any]:
    """A Job's pod in one of its lifecycle states."""
    status: dict[str, Any] = {"phase": phase, "conditions": []}
    if unschedulable:
        status["conditions"].append({"type": "PodScheduled", "status": "False",
                                     "reason": "Unschedulable", "message": unschedulable,
                                     "lastTransitionTime": T0})
    else:
        status["conditions"].append({"type": "PodScheduled", "status": "True",
                                     "lastTransitionTime": T0})
    state: dict[str, Any] | None = None
    if waiting:
        state = {"waiting": {"reason": waiting, **({"message": message} if message else {})}}
    elif phase in ("Succeeded", "Failed"):
        state = {"terminated": {"exitCode": exit_code, "reason": reason or (
            "Completed" if exit_code == 0 else "Error"), "startedAt": started,
            "finishedAt": finished, "containerID": "containerd://abc"}}
        if message:
            state["terminated"]["message"] = message
    elif phase == "Running":
        state = {"running": {"startedAt": started}}
    if state is not None:
        status["containerStatuses"] = [{
            "name": "probe", "state": state, "ready": phase == "Running", "restartCount": 0,
            "image": "docker.io/library/python:3.12-slim", "imageID": "", "started":
            phase == "Running"}]
    spec: dict[str, Any] = {"schedulerName": scheduler, "restartPolicy": "Never",
                            "containers": [{"name": "probe", "image": "python:3.12-slim"}]}
    if node and not unschedulable:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "gpu-operator",
                         "labels": {"job-name": job, "batch.kubernetes.io/job-name": job}},
            "spec": spec, "status": status}


def job(name: str = JOB, condition: str | None = "Complete",
        reason: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"startTime": T0}
    if condition:
        status["conditions"] = [{"type": condition, "status": "True",
                                 "reason": reason or "", "lastProbeTime": T0,
                                 "lastTransitionTime": T0}]
    else:
        status["active"] = 1
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "gpu-operator"},
            "spec": {"template": {"spec": {"containers": [{"name": "probe"}]}}},
            "status": status}


def event(obj: str, reason: str, message: str, kind: str = "Pod",
          at: str = T0) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{obj}.17a", "namespace": "gpu-operator"},
            "involvedObject": {"kind": kind, "name": obj, "namespace": "gpu-operator"},
            "reason": reason, "message": message, "type": "Warning",
            "firstTimestamp": at, "lastTimestamp": at, "count": 1}


def node(name: str, gpus: int | None) -> dict[str, Any]:
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    if gpus is not None:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": allocatable, "capacity": dict(allocatable)}}


# --------------------------------------------------------------------------- fake client

_API = client.ApiClient()


def model(data: dict[str, Any], kind: str) -> Any:
    """A kubernetes client model object, as the real client returns it (the client's own
    deserializer, whose public wrapper changed signature across client versions)."""
    return _API._ApiClient__deserialize(json.loads(json.dumps(data)), kind)


class Raw:
    """What a call with `_preload_content=False` returns: the response, its body in
    `data` (the recorded objects' JSON, as the API server writes it)."""

    def __init__(self, data: dict[str, Any]):
        self.data = json.dumps(data).encode()


def listed(data: dict[str, Any], kind: str, preload: bool) -> Any:
    return model(data, kind) if preload else Raw(data)


class FakeKube:
    """CoreV1Api + BatchV1Api stand-ins that replay recorded frames.

    `jobs` and `pods` map a Job name to a list of frames (each poll takes the next; the
    last repeats); a LIST of Jobs, of pods by a selector other than `job-name=`, or of
    nodes takes the next frame of every one it knows (each one is a check's, whatever the
    selector). Methods have the real client's names and return its model classes; every
    read is in `calls`.
    """

    def __init__(self, *, jobs: dict[str, list[dict | None]] | None = None,
                 pods: dict[str, list[list[dict]]] | None = None,
                 logs: dict[str, str] | None = None, events: list[dict] = (),
                 nodes: dict[str, list[dict | None]] | None = None):
        self.jobs, self.pods = jobs or {}, pods or {}
        self.logs, self.event_list, self.nodes = logs or {}, list(events), nodes or {}
        self.calls: list[str] = []
        self.created: dict[str, dict[str, Any]] = {}    # Job name -> manifest
        self.create_errors: dict[str, int] = {}          # Job name -> API status to raise
        self._at: dict[tuple[str, str], int] = {}

    def _frame(self, kind: str, name: str, frames: list) -> Any:
        i = self._at.get((kind, name), 0)
        self._at[(kind, name)] = i + 1
        return frames[min(i, len(frames) - 1)]

    # BatchV1Api
    def create_namespaced_job(self, namespace: str, body: dict[str, Any]) -> Any:
        name = body["metadata"]["name"]
        self.calls.append(f"create job {name}")
        if name in self.create_errors:    # 409: a Job of that name exists; 403: RBAC
            raise ApiException(status=self.create_errors[name], reason="refused")
        self.created[name] = body
        return model(body, "V1Job")

    def delete_namespaced_job(self, name: str, namespace: str,
                              propagation_policy: str = "") -> Any:
        self.calls.append(f"delete job {name} ({propagation_policy})")
        if name not in self.jobs and name not in self.created:
            raise ApiException(status=404, reason="Not Found")
        return None

    def read_namespaced_job(self, name: str, namespace: str) -> Any:
        self.calls.append(f"job {name}")
        frames = self.jobs.get(name) or [None]
        data = self._frame("job", name, frames)
        if data is None:
            raise ApiException(status=404, reason="Not Found")
        return model(data, "V1Job")

    def list_namespaced_job(self, namespace: str, label_selector: str = "",
                            _preload_content: bool = True) -> Any:
        self.calls.append(f"jobs {label_selector}")
        items = [data for name, frames in self.jobs.items()
                 if (data := self._frame("job", name, frames)) is not None]
        return listed({"apiVersion": "batch/v1", "kind": "JobList", "metadata": {},
                       "items": items}, "V1JobList", _preload_content)

    # CoreV1Api
    def list_namespaced_pod(self, namespace: str, label_selector: str = "",
                            _preload_content: bool = True) -> Any:
        if not label_selector.startswith("job-name="):
            self.calls.append(f"pods {label_selector}")
            items = [p for name, frames in self.pods.items()
                     for p in self._frame("pods", name, frames)]
        else:
            name = label_selector.removeprefix("job-name=")
            self.calls.append(f"pods {name}")
            items = self._frame("pods", name, self.pods.get(name) or [[]])
        return listed({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items},
                      "V1PodList", _preload_content)

    def read_namespaced_pod_log(self, name: str, namespace: str, container: str = "") -> str:
        self.calls.append(f"log {name}/{container}")
        if name not in self.logs:
            raise ApiException(status=400, reason="container is waiting to start")
        return self.logs[name]

    def list_namespaced_event(self, namespace: str, field_selector: str = "",
                              _preload_content: bool = True) -> Any:
        name = field_selector.removeprefix("involvedObject.name=")
        self.calls.append(f"events {name}".strip())
        items = [e for e in self.event_list
                 if not field_selector or e["involvedObject"]["name"] == name]
        return listed({"apiVersion": "v1", "kind": "EventList", "metadata": {},
                       "items": items}, "CoreV1EventList", _preload_content)

    def list_node(self, _preload_content: bool = True, label_selector: str = "") -> Any:
        """Every node; with `label_selector` (`key=value`, comma-joined) the nodes whose
        labels hold each pair (only a node the LIST returns moves on to its next frame)."""
        self.calls.append(f"nodes {label_selector}" if label_selector else "nodes")
        wanted = dict(p.split("=", 1) for p in label_selector.split(",") if p)

        def match(name: str, frames: list) -> bool:
            data = frames[min(self._at.get(("node", name), 0), len(frames) - 1)]
            return data is not None and wanted.items() <= (
                (data.get("metadata") or {}).get("labels") or {}).items()

        items = [self._frame("node", name, frames) for name, frames in self.nodes.items()
                 if match(name, frames)]
        return listed({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items},
                      "V1NodeList", _preload_content)

    def read_node(self, name: str) -> Any:
        self.calls.append(f"node {name}")
        data = self._frame("node", name, self.nodes.get(name) or [None])
        if data is None:
            raise ApiException(status=404, reason="Not Found")
        return model(data, "V1Node")


class FakeClock:
    """A monotonic clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(seconds, 0.001)
