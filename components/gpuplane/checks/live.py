"""The checks' only I/O: create the check Jobs, read Jobs, pods, logs, events and nodes,
wait, then ask verdicts.py.

`KubeCluster` wraps the official kubernetes client and hands back plain camelCase dicts
(exactly what `kubectl get -o json` shows), so the verdicts never see client classes and
tests can feed recorded objects. The runners raise `CheckFailed` with the findings and the
pods' output; the dynamic provider turns that into a failed `pulumi up`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gpuplane.checks.allocatable import gpu_node_selector
from gpuplane.checks.dra import DRIVER, gpu_devices, resourceslice_findings, slices_settled
from gpuplane.checks.manifests import APP, CONTAINER, LABEL_APP, LABEL_CHECK, CheckJob
from gpuplane.checks.verdicts import (
    HAMI_DEFAULT_SPLIT,
    AllocatableSeries,
    PodRun,
    allocatable_findings,
    allocatable_of,
    allocatable_settled,
    event_texts,
    expected_resources,
    job_findings,
    overlap_impossible,
    parse_probe_report,
    pod_run,
    render_failure,
    report_summary,
    sharing_summary,
    timeslicing_findings,
)
from gpuplane.core.findings import Finding
from gpuplane.core.intent import ClusterIntent, NodeIntent

Clock = Callable[[], float]
Sleep = Callable[[float], None]
# Up to this many objects a round reads one by one (a GET each, a LIST of one Job's pods or
# of one name's events); more with one LIST for all of them: a round's requests stay fixed
# however many nodes are checked, and a LIST (which returns the finished checks' objects
# too) is only paid for where it saves requests.
FEW = 4


class CheckFailed(Exception):
    """A check found the GPU path broken; str() is the full report for `pulumi up`."""

    def __init__(self, text: str, findings: Sequence[Finding] = ()):
        super().__init__(text)
        self.findings = list(findings)


class Cluster(Protocol):
    """The reads the checks need (dicts in API shape, None/[] when absent), and the check
    Jobs they create and delete."""

    def create_job(self, namespace: str, manifest: dict[str, Any]) -> None: ...
    def delete_job(self, namespace: str, name: str) -> None: ...
    def job(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    def job_pods(self, namespace: str, job: str) -> list[dict[str, Any]]: ...
    def pod_log(self, namespace: str, pod: str) -> str: ...
    def events(self, namespace: str, name: str) -> list[dict[str, Any]]: ...
    def node(self, name: str) -> dict[str, Any] | None: ...
    # One LIST for many checks at once (more than FEW): by label selector, the namespace's
    # events, every node.
    def jobs(self, namespace: str, selector: str) -> list[dict[str, Any]]: ...
    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]: ...
    def namespace_events(self, namespace: str) -> list[dict[str, Any]]: ...
    def nodes(self, selector: str | None = None) -> list[dict[str, Any]]: ...
    # Under DRA (checks.dra): the probes' claim templates and the driver's ResourceSlices.
    def create_claim_template(self, namespace: str, manifest: dict[str, Any]) -> None: ...
    def delete_claim_template(self, namespace: str, name: str) -> None: ...
    def resource_slices(self) -> list[dict[str, Any]] | None: ...


class KubeCluster:
    """`Cluster` over kubernetes.client; API errors other than 404 propagate."""

    def __init__(self, core: Any, batch: Any, api_client: Any):
        self.core, self.batch, self.api_client = core, batch, api_client

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> KubeCluster:
        """Like the Pulumi kubernetes provider: an explicit kubeconfig (YAML text or a
        path), else $KUBECONFIG or ~/.kube/config, else the in-cluster service account."""
        from kubernetes import client

        from gpuplane.kube.credentials import api_client

        api = api_client(kubeconfig, context)
        return cls(client.CoreV1Api(api), client.BatchV1Api(api), api)

    def _dict(self, obj: Any) -> dict[str, Any]:
        return self.api_client.sanitize_for_serialization(obj)

    def _or_none(self, call: Callable[[], Any]) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            return call()
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def create_job(self, namespace: str, manifest: dict[str, Any]) -> None:
        self.batch.create_namespaced_job(namespace, manifest)

    def delete_job(self, namespace: str, name: str) -> None:
        """Delete the Job and, in the background, its pods; a Job already gone is fine."""
        self._or_none(lambda: self.batch.delete_namespaced_job(
            name, namespace, propagation_policy="Background"))

    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        obj = self._or_none(lambda: self.batch.read_namespaced_job(name, namespace))
        return None if obj is None else self._dict(obj)

    def job_pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        pods = self.core.list_namespaced_pod(namespace, label_selector=f"job-name={job}")
        return [self._dict(p) for p in pods.items]

    def pod_log(self, namespace: str, pod: str) -> str:
        from kubernetes.client.exceptions import ApiException

        try:
            return self.core.read_namespaced_pod_log(pod, namespace, container=CONTAINER)
        except ApiException:      # not started yet, or already gone
            return ""

    def events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        found = self.core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name}")
        return [self._dict(e) for e in found.items]

    def node(self, name: str) -> dict[str, Any] | None:
        obj = self._or_none(lambda: self.core.read_node(name))
        return None if obj is None else self._dict(obj)

    @staticmethod
    def _items(call: Callable[..., Any], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """A LIST's items as the API server sent them (its JSON): building the client's
        model objects and turning them back into dicts costs ~2 ms of CPU an object (a
        round of 1,000 Jobs and their pods: seconds), json.loads a few hundredths of that."""
        response = call(*args, _preload_content=False, **kwargs)
        return list(json.loads(response.data).get("items") or [])

    def jobs(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self._items(self.batch.list_namespaced_job, namespace, label_selector=selector)

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self._items(self.core.list_namespaced_pod, namespace, label_selector=selector)

    def namespace_events(self, namespace: str) -> list[dict[str, Any]]:
        return self._items(self.core.list_namespaced_event, namespace)

    def nodes(self, selector: str | None = None) -> list[dict[str, Any]]:
        return self._items(self.core.list_node, **({"label_selector": selector}
                                                   if selector else {}))

    def _resource(self) -> Any:
        from kubernetes import client

        return client.ResourceV1Api(self.api_client)

    def create_claim_template(self, namespace: str, manifest: dict[str, Any]) -> None:
        self._resource().create_namespaced_resource_claim_template(namespace, manifest)

    def delete_claim_template(self, namespace: str, name: str) -> None:
        self._or_none(lambda: self._resource().delete_namespaced_resource_claim_template(
            name, namespace))

    def resource_slices(self) -> list[dict[str, Any]] | None:
        """Every ResourceSlice of driver gpu.nvidia.com; None when the cluster does not
        serve resource.k8s.io/v1 (Kubernetes before 1.34)."""
        found = self._or_none(lambda: self._resource().list_resource_slice(
            field_selector=f"spec.driver={DRIVER}"))
        return None if found is None else [self._dict(s) for s in found.items]


@dataclass
class Waiter:
    """Polling policy: the real clock in production, a fake one in tests.

    Rounds start `poll` seconds apart (a round's own time is not added to the interval);
    a round that took longer than half of that is followed by a pause as long as itself,
    so a slow API server is read at most half of the time, never back to back."""

    timeout: float
    poll: float = 5.0
    clock: Clock = time.monotonic
    sleep: Sleep = time.sleep

    def __post_init__(self) -> None:
        self.start = self.clock()
        self.deadline = self.start + self.timeout
        self._round = self.start        # when the current round began

    def expired(self) -> bool:
        return self.clock() >= self.deadline

    def wait(self, until: float | None = None) -> None:
        """Sleep until the next round: at `until` (the next deadline of one of the things
        waited for) when that comes first, yet no sooner than a fifth of `poll` (deadlines
        a moment apart share a round) or the last round's time from now, and never past
        the deadline."""
        now = self.clock()
        took = now - self._round
        pause = max(self.poll - took, took)
        if until is not None:
            pause = min(pause, max(until - now, self.poll / 5, took))
        self.sleep(max(0.0, min(pause, self.deadline - now)))
        self._round = self.clock()


@dataclass
class JobObservation:
    job: dict[str, Any] | None
    runs: list[PodRun]
    job_events: tuple[str, ...] = ()
    timed_out: bool = False


def job_finished(job: dict[str, Any] | None) -> bool:
    conditions = ((job or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in conditions)


def _job_done(check: CheckJob, job: dict[str, Any] | None, runs: Sequence[PodRun]) -> bool:
    """The Job is over, all its pods have finished or one failed, or (time-slicing) an
    overlap has become impossible: nothing more to wait for."""
    return (job_finished(job)
            or sum(r.finished for r in runs) >= check.pods
            or any(r.phase == "Failed" for r in runs)
            or (check.kind == "timeslicing" and overlap_impossible(runs, check.pods)))


def check_selector(checks: Iterable[CheckJob]) -> str:
    """The label selector of the check Jobs of these kinds, and of their pods (the pod
    template carries the Job's labels)."""
    kinds = ",".join(sorted({c.kind for c in checks}))
    return f"{LABEL_APP}={APP},{LABEL_CHECK} in ({kinds})"


Seen = tuple[dict[str, Any] | None, list[dict[str, Any]]]


def _read_round(cluster: Cluster, namespace: str, waiting: Mapping[str, CheckJob]
                ) -> dict[str, Seen]:
    """Each waiting Job and its pods (by their `job-name` label). At most FEW: a GET of each
    and a LIST of its pods; more: one LIST of the Jobs and one of the pods (a GET and a LIST
    per Job made a round 2 requests per node, and each LIST by label goes through every pod
    of the namespace on the API server, however narrow its selector)."""
    if len(waiting) <= FEW:
        return {name: (cluster.job(namespace, name), cluster.job_pods(namespace, name))
                for name in waiting}
    selector = check_selector(waiting.values())
    jobs = {j["metadata"]["name"]: j for j in cluster.jobs(namespace, selector)}
    pods: dict[str, list[dict[str, Any]]] = {name: [] for name in waiting}
    for pod in cluster.pods(namespace, selector):
        owner = ((pod.get("metadata") or {}).get("labels") or {}).get("job-name")
        if owner in pods:
            pods[owner].append(pod)
    return {name: (jobs.get(name), pods[name]) for name in waiting}


def observe_jobs(cluster: Cluster, namespace: str, jobs: Mapping[str, CheckJob],
                 waiter: Waiter, started: Mapping[str, float] | None = None
                 ) -> dict[str, JobObservation]:
    """Wait for every Job (by name) at once, each until it is done or `waiter.timeout` has
    passed since it was made (`started`, on the waiter's clock; else since the waiter
    began): one poller for a fleet of check Jobs, a fixed number of reads a round
    (`_read_round`), and a Job done is not judged again. Then read the pods' logs and
    events."""
    deadline = {name: (started or {}).get(name, waiter.start) + waiter.timeout
                for name in jobs}
    last: dict[str, Seen] = {}
    waiting, gave_up = dict(jobs), set()
    while True:
        for name, seen in _read_round(cluster, namespace, waiting).items():
            last[name] = seen
            if _job_done(waiting[name], seen[0], [pod_run(p) for p in seen[1]]):
                del waiting[name]
        now = waiter.clock()
        for name in [n for n in waiting if now >= deadline[n]]:
            del waiting[name]
            gave_up.add(name)
        if not waiting:
            break
        waiter.wait(until=min(deadline[n] for n in waiting))
    return _observations(cluster, namespace, jobs, last, gave_up)


def _observations(cluster: Cluster, namespace: str, jobs: Iterable[str],
                  last: Mapping[str, Seen], gave_up: set[str]) -> dict[str, JobObservation]:
    """Each Job's observation with its pods' logs and the events of it and its pods: a
    LIST of events per name for at most FEW names, one LIST of the namespace's events
    otherwise. A pod no node was given has no log to read: not asked (the API server
    would answer an empty one, `LogLocation` in pkg/registry/core/pod/strategy.go@v1.34.3
    has no kubelet to ask)."""
    names = [n for name in jobs for n in
             (name, *(p["metadata"]["name"] for p in last[name][1]))]
    events: dict[str, list[dict[str, Any]]] = {}
    if len(names) <= FEW:
        events = {n: cluster.events(namespace, n) for n in names}
    else:
        for event in cluster.namespace_events(namespace):
            about = (event.get("involvedObject") or {}).get("name")
            events.setdefault(str(about), []).append(event)
    out = {}
    for name in jobs:
        job, pods = last[name]
        runs = [pod_run(p, _log(cluster, namespace, p), events.get(p["metadata"]["name"], []))
                for p in pods]
        job_events = event_texts(events.get(name, []))
        if job is None:
            job_events = (f"Job {namespace}/{name} not found", *job_events)
        out[name] = JobObservation(job=job, runs=runs, job_events=job_events,
                                   timed_out=name in gave_up)
    return out


def _log(cluster: Cluster, namespace: str, pod: dict[str, Any]) -> str:
    if not (pod.get("spec") or {}).get("nodeName"):
        return ""
    return cluster.pod_log(namespace, pod["metadata"]["name"])


def run_job_checks(cluster: Cluster, checks: Sequence[tuple[CheckJob, str]],
                   intent: ClusterIntent, *, namespace: str, waiter: Waiter,
                   started: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Judge each (check, Job name) pair; return every check's outputs by key on success,
    raise CheckFailed naming every failing check (with its pods' output) otherwise.
    `started`: when each Job was made (`observe_jobs`)."""
    seen = observe_jobs(cluster, namespace, {name: check for check, name in checks}, waiter,
                        started)
    failures: list[str] = []
    findings: list[Finding] = []
    results: dict[str, Any] = {}
    for check, name in checks:
        obs = seen[name]
        if check.kind == "timeslicing":
            found = timeslicing_findings(check, obs.runs, intent)
        else:
            found = job_findings(check, obs.runs, intent, obs.job_events)
        if found:
            title = (f"{check.kind} check {check.key} on node {check.node} "
                     f"(Job {namespace}/{name})")
            if obs.timed_out:
                title += f", gave up after {waiter.timeout:.0f}s"
            failures.append(render_failure(title, found, obs.runs))
            findings += found
            continue
        results[check.key] = _passed(check, obs)
    if failures:
        head = [] if len(checks) == 1 else [
            f"gpuplane: {len(failures)} of {len(checks)} GPU checks failed"]
        raise CheckFailed("\n\n".join([*head, *failures]), findings)
    return {"passed": True, "checks": results}


def _passed(check: CheckJob, obs: JobObservation) -> dict[str, Any]:
    """The few facts of a passing check worth keeping as outputs."""
    outputs: dict[str, Any] = {"passed": True, "node": check.node, "pods": len(obs.runs)}
    if check.resource:
        outputs["resource"] = check.resource
    if check.kind == "timeslicing":
        outputs["sharing"] = sharing_summary(obs.runs)
    else:
        reports = [parse_probe_report(r.log) for r in obs.runs]
        if reports and reports[0]:
            outputs["summary"] = report_summary(reports[0])
    return outputs


def run_allocatable_check(cluster: Cluster, nodes: Sequence[NodeIntent],
                          intent: ClusterIntent, *, waiter: Waiter, settle: int = 3,
                          hami_split: int = HAMI_DEFAULT_SPLIT) -> dict[str, Any]:
    """Watch every resource each GPU node must advertise (`nvidia.com/gpu` x replicas,
    `nvidia.com/mig-<profile>` x instances: `expected_resources`) until each has shown its
    expected count `settle` times in a row; raise CheckFailed with FM10/FM12/... (a short
    count names node, resource, expected and seen) otherwise."""
    wanted = {n.name: expected_resources(n, intent, hami_split) for n in nodes}
    values: dict[tuple[str, str], list[int | None]] = {
        (n.name, r): [] for n in nodes for r in wanted[n.name]}
    found: dict[str, bool] = {n.name: True for n in nodes}
    labels: dict[str, dict[str, str]] = {n.name: {} for n in nodes}
    while True:
        objs = _read_nodes(cluster, [n.name for n in nodes], gpu_node_selector(intent))
        for n in nodes:
            obj = objs[n.name]
            found[n.name] = obj is not None
            labels[n.name] = dict(((obj or {}).get("metadata") or {}).get("labels") or {})
            for resource in wanted[n.name]:
                values[n.name, resource].append(allocatable_of(obj, resource))
        if all(allocatable_settled(values[key], wanted[key[0]][key[1]], settle)
               for key in values) or waiter.expired():
            break
        waiter.wait()
    findings = list(dict.fromkeys(f for n in nodes for r in wanted[n.name]
                                  for f in allocatable_findings(
                                      AllocatableSeries(n, tuple(values[n.name, r]),
                                                        found[n.name], r, labels[n.name]),
                                      intent, settle, hami_split)))
    names = sorted({r for w in wanted.values() for r in w})
    if findings:
        raise CheckFailed(render_failure(
            f"allocatable {', '.join(names)} after {waiter.timeout:.0f}s", findings),
            findings)
    return {"passed": True,
            "allocatable": {n.name: _last_counts(n, wanted[n.name], values) for n in nodes}}


def _read_nodes(cluster: Cluster, names: Sequence[str], selector: str | None
                ) -> dict[str, dict[str, Any] | None]:
    """A round's nodes: a GET each for at most FEW; else one LIST of the GPU nodes by
    `selector`, and a GET of each (at most FEW) that the LIST missed, a node that lost its
    label included; else (no selector, or more missed) one LIST of every node."""
    if len(names) <= FEW:
        return {name: cluster.node(name) for name in names}
    listed: dict[str, dict[str, Any] | None] = (
        {o["metadata"]["name"]: o for o in cluster.nodes(selector)} if selector else {})
    missed = [name for name in names if name not in listed]
    if len(missed) <= FEW and selector:
        listed.update({name: cluster.node(name) for name in missed})
    elif missed:
        listed.update({o["metadata"]["name"]: o for o in cluster.nodes()})
    return {name: listed.get(name) for name in names}


def _last_counts(node: NodeIntent, wanted: Mapping[str, int],
                 values: Mapping[tuple[str, str], list[int | None]]) -> Any:
    """The outputs' count of one node: a number, as before, when it advertises one
    resource of the cluster's name; a map by resource name for a pool of its own."""
    last = {r: values[node.name, r][-1] for r in wanted}
    return next(iter(last.values())) if not node.resources else last


def run_resourceslice_check(cluster: Cluster, nodes: Sequence[NodeIntent], *,
                            waiter: Waiter) -> dict[str, Any]:
    """Under DRA, in place of the allocatable check: wait until every GPU node has a
    ResourceSlice from gpu.nvidia.com with its GPUs; raise CheckFailed with FM38 (none)
    or FM08 (too few) otherwise."""
    while True:
        slices = cluster.resource_slices()
        if slices is None or slices_settled(nodes, slices) or waiter.expired():
            break
        waiter.wait()
    findings = resourceslice_findings(nodes, slices or [], served=slices is not None)
    if findings:
        raise CheckFailed(render_failure(
            f"ResourceSlices of {DRIVER} after {waiter.timeout:.0f}s", findings), findings)
    return {"passed": True,
            "resourceSlices": {n.name: gpu_devices(slices or [], n.name) for n in nodes}}


def run_split_check(cluster: Cluster, intent: ClusterIntent, *, waiter: Waiter,
                    settle: int = 3, hami_split: int = HAMI_DEFAULT_SPLIT) -> dict[str, Any]:
    """The DRA driver serving some pools only (`ClusterIntent.dra_pools`): its nodes by
    their ResourceSlices, the device plugin's nodes by their allocatable, within one
    deadline; raise CheckFailed with every finding of both when either falls short."""
    failed: list[CheckFailed] = []
    results: dict[str, Any] = {"passed": True}
    for run in (lambda: run_resourceslice_check(cluster, intent.dra_nodes, waiter=waiter),
                lambda: run_allocatable_check(cluster, intent.plugin_nodes, intent,
                                              waiter=waiter, settle=settle,
                                              hami_split=hami_split)):
        try:
            results.update({k: v for k, v in run().items() if k != "passed"})
        except CheckFailed as error:
            failed.append(error)
    if failed:
        raise CheckFailed("\n\n".join(str(e) for e in failed),
                          [f for e in failed for f in e.findings])
    return results


__all__ = [
    "FEW",
    "CheckFailed",
    "Cluster",
    "JobObservation",
    "KubeCluster",
    "Waiter",
    "check_selector",
    "job_finished",
    "observe_jobs",
    "run_allocatable_check",
    "run_job_checks",
    "run_resourceslice_check",
    "run_split_check",
]
