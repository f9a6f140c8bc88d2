"""The doctor judges the handlers of the RuntimeClasses a node serves (#39 item 2, as
`containerd check --runtime-classes-from-cluster` does): the classes of the pods bound to
the node and the classes whose nodeSelector picks it. A class nothing ties to the node
(a kata class for other nodes) is not judged there."""

from __future__ import annotations

from typing import Any

from gpuplane.core.findings import Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.doctor.cluster import ClusterView
from gpuplane.doctor.nodes import NodeContext, analyse_node
from gpuplane.doctor.snapshot import Snapshot

TOP = "/etc/containerd/config.toml"
V2 = 'plugins."io.containerd.grpc.v1.cri".containerd'
CONFIG = (f'version = 2\n[{V2}]\ndefault_runtime_name = "runc"\n'
          f'[{V2}.runtimes.runc]\nruntime_type = "io.containerd.runc.v2"\n'
          f'[{V2}.runtimes.nvidia]\nruntime_type = "io.containerd.runc.v2"\n')


def rc(name: str, handler: str, selector: dict[str, str] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"kind": "RuntimeClass", "metadata": {"name": name},
                           "handler": handler}
    if selector:
        obj["scheduling"] = {"nodeSelector": selector}
    return obj


def pod(name: str, node: str, runtime_class: str) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"nodeName": node, "runtimeClassName": runtime_class,
                     "containers": [{"name": "c"}]}}


def view() -> ClusterView:
    snap = Snapshot()
    snap.nodes = [{"kind": "Node", "metadata": {"name": "gpu-1",
                                                "labels": {"gpu": "h100"}}},
                  {"kind": "Node", "metadata": {"name": "cpu-1"}}]
    snap.runtimeclasses = [rc("nvidia", "nvidia"), rc("gpu-cdi", "nvidia-cdi"),
                           rc("kata", "kata"), rc("h100-legacy", "nvidia-legacy",
                                                   {"gpu": "h100"})]
    snap.pods = [pod("train", "gpu-1", "gpu-cdi"), pod("web", "cpu-1", "kata")]
    return ClusterView(snap)


def test_the_classes_a_node_serves() -> None:
    v = view()
    assert v.runtime_classes_on("gpu-1") == (("gpu-cdi", "nvidia-cdi"),
                                             ("h100-legacy", "nvidia-legacy"))
    assert v.runtime_classes_on("cpu-1") == (("kata", "kata"),)


def test_fm01_a_handler_the_nodes_containerd_lacks_names_its_runtime_class() -> None:
    inspection = {"daemons": [{"pid": 100, "config": TOP,
                               "version": "containerd github.com/containerd/containerd "
                                          "v1.7.24 abc"}],
                  "kubelet_daemon": 100, "files": {TOP: CONFIG}}
    intent = ClusterIntent(distro="kubeadm", containerd_version="1.7", toolkit="host")
    ctx = NodeContext("gpu-1", intent, "containerd://1.7.24", None,
                      view().runtime_classes_on("gpu-1"))
    errors = [d.finding for d in analyse_node(inspection, ctx).diagnoses
              if d.finding.severity is Severity.ERROR]
    said = " ".join(f.message for f in errors)
    assert {f.id for f in errors} == {"FM01"}, said
    assert "gpu-cdi" in said and "nvidia-cdi" in said
    assert "h100-legacy" in said and "nvidia-legacy" in said
    assert "kata" not in said
