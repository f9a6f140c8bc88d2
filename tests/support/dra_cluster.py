"""NVIDIA's DRA driver as the API server sees it, for the DRA tests.

`gpu_slice` is a ResourceSlice shaped as the driver's GPU kubelet plugin publishes it
(../shared/reference/dra.md: driver `gpu.nvidia.com`, one pool per node named after it,
devices `gpu-<minor>` with the attributes of cmd/gpu-kubelet-plugin/deviceinfo.go@v0.4.1
and capacity `memory`); `device_classes` are the DeviceClasses the chart renders through
Helm's engine (tests/support/charts.py). `FakeNodes` registers Node objects the scheduler
accepts without a kubelet: Ready, with allocatable CPU and memory, and a Lease renewed
while the test runs, so the node lifecycle controller does not taint them unreachable.
"""

from __future__ import annotations

import contextlib
import threading
import time
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from support import charts

DRIVER = "gpu.nvidia.com"
NFD_GPU_LABEL = "feature.node.kubernetes.io/pci-10de.present"   # kubeletPlugin.affinity


def gpu_device(minor: int, node: str) -> dict[str, Any]:
    """One full GPU as deviceinfo.go@v0.4.1 publishes it (an H100 on driver 570)."""
    return {
        "name": f"gpu-{minor}",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{zlib.crc32(node.encode()):08x}-0000-0000-0000-"
                               f"{minor:012d}"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": "Hopper"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "driverVersion": {"version": "570.158.1"},
            "cudaDriverVersion": {"version": "12.8.0"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x1b + minor:02x}:00.0"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:10"},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }


def gpu_slice(node: str, gpus: int) -> dict[str, Any]:
    """The ResourceSlice of `node`'s pool (one slice holds the whole pool)."""
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu.nvidia.com-x7k2p"},
        "spec": {"driver": DRIVER, "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [gpu_device(i, node) for i in range(gpus)]},
    }


def device_classes(version: str = "v0.4.1") -> list[dict[str, Any]]:
    """The DeviceClasses chart dra-driver-nvidia-gpu `version` renders (GPUs and
    ComputeDomains on, `resource.k8s.io/v1` pinned as an offline render must)."""
    folder = charts.charts_dir() / "dra-driver-nvidia-gpu" / version
    if not folder.is_dir():
        from support import oracle

        oracle.unavailable(f"upstream charts: {folder} is missing",
                           "lay ../shared/charts beside the checkout")
    docs = charts.render(Path(folder), {"gpuResourcesEnabledOverride": True,
                                        "resourceApiVersion": "resource.k8s.io/v1"},
                         name="dra", namespace="nvidia-dra-driver-gpu")
    return [d for d in docs if d.get("kind") == "DeviceClass"]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeNodes:
    """Node objects (no kubelet) the scheduler will bind pods to, kept Ready."""

    def __init__(self, api: Any):
        from kubernetes import client

        self.core = client.CoreV1Api(api)
        self.coord = client.CoordinationV1Api(api)
        self.names: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def add(self, name: str, labels: dict[str, str] | None = None) -> None:
        self.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                     **(labels or {})}}})
        self.names.append(name)
        self._heartbeat(name)

    def _heartbeat(self, name: str) -> None:
        now = _now()
        resources = {"cpu": "8", "memory": "32Gi", "pods": "110"}
        self.core.patch_node_status(name, {"status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "fake node", "lastHeartbeatTime": now,
                            "lastTransitionTime": now}]}})
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": name, "namespace": "kube-node-lease"},
                 "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                          "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}
        try:
            self.coord.replace_namespaced_lease(name, "kube-node-lease", lease)
        except Exception:
            with contextlib.suppress(Exception):
                self.coord.create_namespaced_lease("kube-node-lease", lease)

    def _beat(self) -> None:
        while not self._stop.wait(5.0):
            for name in list(self.names):
                with contextlib.suppress(Exception):
                    self._heartbeat(name)

    def __enter__(self) -> FakeNodes:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def until(what: str, done: Callable[[], Any], timeout: float = 120) -> Any:
    """`done()`'s first truthy value, polled each second; fails naming `what` after
    `timeout` seconds (a control plane's controllers act within seconds, not at once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = done()
        if found:
            return found
        time.sleep(1)
    raise AssertionError(f"not within {timeout:.0f}s: {what}")
