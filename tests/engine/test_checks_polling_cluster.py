"""The checks' polling bound against the real control plane (#49; kube-apiserver,
kube-controller-manager and kube-scheduler v1.34.3, tests/support/control_plane.py): a
fleet of probe Jobs, made and judged by gpuplane's own provider through the official
client, costs a fixed number of HTTP requests per polling round however many Jobs wait.

No kubelet, and Node objects with no GPUs: every probe pod stays Pending, so each check
waits for its whole timeout, the checks' worst case (benchmarks/check_rounds.py measures
the same at 10, 100 and 1,000 nodes). What the real API server proves beyond the fakes of
tests/pure/test_checks_polling.py: the check selector (a set-based one) finds the Jobs the
provider made and the pods the Job controller made for them (grouped by their `job-name`
label), and the one LIST of the namespace's events holds the scheduler's reason for each
pod."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from support import control_plane, oracle

from gpuplane.checks.create import WORKERS
from gpuplane.checks.live import KubeCluster
from gpuplane.checks.manifests import plan_checks
from gpuplane.checks.provider import ProbeJobCheckProvider
from gpuplane.checks.settings import ChecksSettings
from gpuplane.core.intent import ClusterIntent, NodeIntent

pytestmark = pytest.mark.engine
NODES = 12


@pytest.fixture(scope="module")
def cluster() -> Iterator[control_plane.ControlPlane]:
    if why := control_plane.missing():
        oracle.unavailable(f"the control plane: {why}", "make containerd")
    from kubernetes import client, config

    cp = control_plane.start(Path(tempfile.mkdtemp(prefix="gp-poll-", dir="/tmp")) / "cp")
    try:
        core = client.CoreV1Api(config.new_client_from_config(config_file=str(cp.kubeconfig)))
        for i in range(NODES):
            core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=f"gpu-{i:02d}")))
        core.create_namespace({"metadata": {"name": "gpu-operator"}})
        client.NodeV1Api(core.api_client).create_runtime_class(
            {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
             "metadata": {"name": "nvidia"}, "handler": "nvidia"})
        yield cp
    finally:
        cp.stop()


class Requests:
    """The HTTP requests the kubernetes client sends, cut into rounds at the waiter's
    sleeps."""

    def __init__(self, cluster: KubeCluster):
        self.rounds: list[list[str]] = [[]]
        self.posters: set[str] = set()    # the threads that sent a create
        rest = cluster.api_client.rest_client
        request = rest.request

        def counted(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            self.rounds[-1].append(f"{method} {url.split('/api', 1)[-1]}")
            if method == "POST":
                self.posters.add(threading.current_thread().name)
            return request(method, url, *args, **kwargs)

        rest.request = counted

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
        self.rounds.append([])


def test_a_polling_round_is_two_lists_whatever_the_fleet(
        cluster: control_plane.ControlPlane) -> None:
    intent = ClusterIntent(nodes=tuple(NodeIntent(f"gpu-{i:02d}", 1) for i in range(NODES)))
    settings = ChecksSettings(timeout_seconds=12)          # wait budget 10.8 s
    checks = plan_checks(intent, settings)
    kube = KubeCluster.connect(str(cluster.kubeconfig))
    seen = Requests(kube)
    provider = ProbeJobCheckProvider()
    provider.cluster_factory = lambda _kubeconfig, _context: kube
    provider.poll_seconds, provider.sleep = 2.0, seen.sleep
    outs = provider.create({
        "checkName": "checks-nodes-check", "checks": [c.key for c in checks],
        "intent": intent.to_json(), "namespace": "gpu-operator", "settings": asdict(settings),
        "jobPrefix": "checks", "fingerprint": "poll0123", "configmap": "checks-probe",
        "timeoutSeconds": 12.0, "kubeconfig": None}).outs

    first, *middle, last = seen.rounds
    assert [r.split(" ")[0] for r in first].count("POST") == NODES   # the Jobs made
    # ... a few at a time, through one client shared by the pool's threads
    # (gpuplane.checks.create), before the first poll.
    assert 1 < len(seen.posters) <= WORKERS, seen.posters
    assert all(r.startswith("POST ") for r in first[:NODES]), first
    assert len(middle) >= 3
    for reads in [first[NODES:], *middle]:
        assert len(reads) == 2, reads                      # one LIST of Jobs, one of pods
        assert all(r.startswith("GET ") and "labelSelector=" in r for r in reads)
    # The last round, then the namespace's events once; no pod was placed, so no log.
    assert len(last) == 3 and "/events" in last[-1] and "/log" not in " ".join(last)

    report = outs["result"]["report"]
    assert report.startswith(f"gpuplane: {NODES} of {NODES} GPU checks failed")
    assert report.count("gave up after 11s") == NODES
    # Each check has its own pod (the LIST of pods, by `job-name`) and the scheduler's
    # reason for it (the one LIST of the namespace's events, or its PodScheduled condition).
    for i in range(NODES):
        assert f"on node gpu-{i:02d}" in report
    assert report.count("Pending") >= NODES
    assert report.count("nodes are available") >= NODES
