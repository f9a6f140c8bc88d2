"""The checks' polling stays bounded as the fleet grows (#49): a round reads the cluster
with a fixed number of requests however many checks are unfinished, the reads after the
wait are linear, and each Job's wait is measured from when that Job was made.

Fakes with a fake clock here (tests/support/checkdata.py); the same bound against a real
kube-apiserver is tests/engine/test_checks_polling_cluster.py."""

from __future__ import annotations

import itertools
from dataclasses import asdict
from typing import Any

from support import checkdata as cd

from gpuplane.checks.live import KubeCluster
from gpuplane.checks.manifests import job_name, plan_checks
from gpuplane.checks.provider import AllocatableCheckProvider, ProbeJobCheckProvider
from gpuplane.checks.settings import ChecksSettings
from gpuplane.checks.verdicts import event_texts
from gpuplane.core.intent import ClusterIntent, NodeIntent

UNSCHEDULABLE = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
POLL_READS = ("job ", "jobs ", "pods ", "node", "nodes")


def fleet(n: int) -> tuple[ClusterIntent, list[str]]:
    intent = ClusterIntent(nodes=tuple(NodeIntent(f"gpu-{i:03d}", 1) for i in range(n)))
    checks = plan_checks(intent, ChecksSettings())
    return intent, [job_name("checks", c.key, cd.FP, 1) for c in checks]


def props(intent: ClusterIntent, timeout: float = 100.0) -> dict[str, Any]:
    checks = plan_checks(intent, ChecksSettings())
    settings = {k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v
                for k, v in asdict(ChecksSettings(timeout_seconds=int(timeout))).items()}
    return {"__provider": "opaque", "checkName": "checks-nodes-check",
            "checks": [c.key for c in checks], "intent": intent.to_json(),
            "namespace": "gpu-operator", "settings": settings, "jobPrefix": "checks",
            "fingerprint": cd.FP, "configmap": "checks-probe-0123456789",
            "timeoutSeconds": timeout, "kubeconfig": None}


def pending_fleet(n: int) -> tuple[ClusterIntent, cd.FakeKube]:
    """n probe Jobs whose pods the scheduler never places: the checks' worst case, every
    one waits for its whole timeout (the benchmark's cluster without a kubelet)."""
    intent, names = fleet(n)
    return intent, cd.FakeKube(
        jobs={name: [cd.job(name, condition=None)] for name in names},
        pods={name: [[cd.pod(f"{name}-p", phase="Pending", unschedulable=UNSCHEDULABLE,
                             job=name)]] for name in names},
        events=[cd.event(f"{name}-p", "FailedScheduling", UNSCHEDULABLE) for name in names])


def rounds(provider: Any, fake: cd.FakeKube, clock: cd.FakeClock,
           call: Any) -> tuple[Any, list[list[str]]]:
    """Run `call` with the fake clock; the fake's calls cut at each of the waiter's sleeps
    (Job creates left out)."""
    marks: list[int] = []

    def sleep(seconds: float) -> None:
        marks.append(len(fake.calls))
        clock.sleep(seconds)

    provider.cluster_factory = lambda kubeconfig, context: KubeCluster(fake, fake, cd._API)
    provider.clock, provider.sleep, provider.poll_seconds = clock, sleep, 5.0
    outcome = call(provider)
    cuts = [0, *marks, len(fake.calls)]
    return outcome, [[c for c in fake.calls[a:b] if not c.startswith(("create", "delete"))]
                     for a, b in itertools.pairwise(cuts)]


def polls(calls: list[str]) -> list[str]:
    return [c for c in calls if c.startswith(POLL_READS)]


def test_a_round_reads_the_same_few_times_whatever_the_fleet() -> None:
    """8 or 80 nodes, all pending for the whole 90 s: every round is one LIST of the
    checks' Jobs and one of their pods (one GET of each Job and a LIST of its pods each
    made a round 2 reads per node), the same number of rounds; and gpu-000's failure in
    the fleet is word for word its failure checked alone (a GET of its Job, a LIST of its
    pods, their events by name)."""
    one = ClusterIntent(nodes=fleet(1)[0].nodes)
    alone = rounds(ProbeJobCheckProvider(), pending_fleet(1)[1], cd.FakeClock(),
                   lambda p: p.create(props(one)))[0].outs["result"]["report"]
    assert "gpu-000" in alone and "gave up after 90s" in alone and "[FM" in alone
    seen = {}
    for n in (8, 80):
        intent, fake = pending_fleet(n)
        outcome, cut = rounds(ProbeJobCheckProvider(), fake, cd.FakeClock(),
                              lambda p, intent=intent: p.create(props(intent)))
        report = outcome.outs["result"]["report"]
        assert report.startswith(f"gpuplane: {n} of {n} GPU checks failed")
        assert f"\n\n{alone}\n\n" in report
        seen[n] = [len(polls(r)) for r in cut]
    assert seen[8] == seen[80] == [2] * 19        # 18 sleeps of 5 s in the 90 s budget


def test_after_the_wait_one_list_of_events_and_a_log_per_placed_pod() -> None:
    """The reads after the wait: the namespace's events once (not two LISTs per node),
    and no log of a pod no node was given (the API server has none to show)."""
    intent, fake = pending_fleet(40)
    outcome, cut = rounds(ProbeJobCheckProvider(), fake, cd.FakeClock(),
                          lambda p: p.create(props(intent)))
    final = [c for c in cut[-1] if not c.startswith(POLL_READS)]
    assert final == ["events"]
    report = outcome.outs["result"]["report"]
    assert report.count("Insufficient nvidia.com/gpu") >= 40   # each pod's reason is there


class JobController:
    """A cluster whose check Jobs follow the clock as the Job controller makes them: the
    pod stays Pending (unschedulable) until the Job's activeDeadlineSeconds has passed since
    the Job was made, then the Job is Failed (DeadlineExceeded) and its pod deleted. Making
    a Job takes `create_s` of the clock, as a thousand POSTs take seconds. `late`: GETs of a
    Job after its deadline (its pod, and why it was pending, gone)."""

    def __init__(self, clock: cd.FakeClock, create_s: float = 1.0):
        self.clock, self.create_s = clock, create_s
        self.made: dict[str, tuple[float, float]] = {}    # name -> (made at, deadline)
        self.late: list[str] = []

    def create_job(self, namespace: str, manifest: dict[str, Any]) -> None:
        self.clock.now += self.create_s
        self.made[manifest["metadata"]["name"]] = (
            self.clock.now, self.clock.now + manifest["spec"]["activeDeadlineSeconds"])

    def delete_job(self, namespace: str, name: str) -> None:
        pass

    def _over(self, name: str) -> bool:
        return self.clock.now >= self.made[name][1]

    def _job(self, name: str) -> dict[str, Any]:
        if self._over(name):
            return cd.job(name, condition="Failed", reason="DeadlineExceeded")
        return cd.job(name, condition=None)

    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        if self._over(name):
            self.late.append(name)
        return self._job(name)

    def jobs(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return [self._job(name) for name in self.made]    # a LIST has the given-up ones too

    def job_pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        if self._over(job):
            return []
        return [cd.pod(f"{job}-p", phase="Pending", unschedulable=UNSCHEDULABLE, job=job)]

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return [p for name in self.made for p in self.job_pods(namespace, name)]

    def pod_log(self, namespace: str, pod: str) -> str:
        return ""

    def events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return [cd.event(name, "FailedScheduling", UNSCHEDULABLE)] if name.endswith("-p") \
            else []

    def namespace_events(self, namespace: str) -> list[dict[str, Any]]:
        return [e for name in self.made for e in self.events(namespace, f"{name}-p")]


def test_each_jobs_wait_is_measured_from_when_it_was_made() -> None:
    """60 Jobs made one a second: the first may not wait 90 s after the last was made
    (150 s after itself, past its own 100 s deadline, when the Job controller has failed
    it and deleted its pod): each check gives up 90 s after its own Job was made, with
    its pod's reason still there."""
    intent, _ = fleet(60)
    clock = cd.FakeClock()
    cluster = JobController(clock)
    p = ProbeJobCheckProvider()
    p.cluster_factory = lambda kubeconfig, context: cluster   # type: ignore[assignment]
    p.clock, p.sleep, p.poll_seconds = clock, clock.sleep, 5.0
    report = p.create(props(intent)).outs["result"]["report"]
    assert cluster.late == []
    assert report.count("gave up after 90s") == 60
    assert report.count("Insufficient nvidia.com/gpu") >= 60


GPU_PRESENT = {"nvidia.com/gpu.present": "true"}


def gpu_node(name: str, gpus: int | None, labelled: bool = True) -> dict[str, Any]:
    """A Node as the GPU Operator leaves it: labelled `nvidia.com/gpu.present=true`."""
    obj = cd.node(name, gpus)
    if labelled:
        obj["metadata"]["labels"].update(GPU_PRESENT)
    return obj


def allocatable(intent: ClusterIntent, fake: cd.FakeKube) -> tuple[Any, list[list[str]]]:
    return rounds(AllocatableCheckProvider(), fake, cd.FakeClock(),
                  lambda p: p.create({"__provider": "opaque", "checkName": "checks-allocatable",
                                      "intent": intent.to_json(), "timeoutSeconds": 60.0}))


SELECTED = "nodes nvidia.com/gpu.present=true"


def test_the_allocatable_check_reads_a_fleet_with_one_list_a_round() -> None:
    """Ten GPU nodes not advertising their GPUs yet, in a cluster of 50 more nodes without
    GPUs: one LIST a round of the GPU nodes alone (by the label the GPU Operator puts on
    them), not a GET of each nor every node of the cluster (the single-node tests keep
    their GETs: a few nodes are read one by one)."""
    intent = ClusterIntent(nodes=tuple(NodeIntent(f"gpu-{i:03d}", 2) for i in range(10)))
    fake = cd.FakeKube(nodes={
        **{n.name: [gpu_node(n.name, None), gpu_node(n.name, 2)] for n in intent.nodes},
        **{f"cpu-{i:03d}": [cd.node(f"cpu-{i:03d}", None)] for i in range(50)}})
    outcome, cut = allocatable(intent, fake)
    assert outcome.outs["result"]["allocatable"] == {n.name: 2 for n in intent.nodes}
    assert [polls(r) for r in cut] == [[SELECTED]] * 4     # 1 early + 3 settled


def test_a_gpu_node_that_lost_its_label_is_still_read_and_judged() -> None:
    """One of ten GPU nodes lost the label (the operator's device plugin left it: no GPUs
    advertised): the LIST by label misses it, a GET reads it, and its finding stands. With
    most nodes unlabelled, one LIST of every node instead of a GET each."""
    intent = ClusterIntent(nodes=tuple(NodeIntent(f"gpu-{i:03d}", 2) for i in range(10)))
    lost = intent.nodes[3].name
    fake = cd.FakeKube(nodes={n.name: [gpu_node(n.name, None if n.name == lost else 2,
                                                labelled=n.name != lost)]
                              for n in intent.nodes})
    outcome, cut = allocatable(intent, fake)
    report = outcome.outs["result"]["report"]
    assert f"node {lost} advertises no nvidia.com/gpu" in report
    assert all(n.name not in report for n in intent.nodes if n.name != lost)
    assert all(polls(r) == [SELECTED, f"node {lost}"] for r in cut), cut

    fake = cd.FakeKube(nodes={n.name: [gpu_node(n.name, 2, labelled=i < 2)]
                              for i, n in enumerate(intent.nodes)})
    outcome, cut = allocatable(intent, fake)
    assert outcome.outs["result"]["allocatable"] == {n.name: 2 for n in intent.nodes}
    assert all(polls(r) == [SELECTED, "nodes"] for r in cut), cut


def test_events_are_in_the_same_order_from_a_list_as_from_the_client_objects() -> None:
    """A LIST's JSON writes times as the API server does (`...:00Z`, `...:00.500000Z`),
    the client's objects as Python does (`...:00+00:00`): the scheduler's event (eventTime,
    microseconds) and the Job controller's (lastTimestamp) in the same second sort the same
    way from both, by time, not by how the time is spelled."""
    older = {**cd.event("p", "Scheduled", "first"), "lastTimestamp": "2026-01-10T12:00:00Z"}
    newer = {**cd.event("p", "FailedScheduling", "then"), "lastTimestamp": None,
             "firstTimestamp": None, "eventTime": "2026-01-10T12:00:00.500000Z"}
    api = [newer, older]
    client = [cd._API.sanitize_for_serialization(cd.model(e, "CoreV1Event")) for e in api]
    assert client[0]["eventTime"].endswith("+00:00")
    assert event_texts(api) == event_texts(client) == ("Scheduled: first",
                                                       "FailedScheduling: then")
