"""The checks' only I/O: create the check Jobs, read Jobs, pods, logs, events and nodes,
wait, then ask verdicts.py.

`KubeCluster` wraps the official kubernetes client and hands back plain camelCase dicts
(exactly what `kubectl get -o json` shows), so the verdicts never see client classes and
tests can feed recorded objects. The runners raise `CheckFailed` with the findings and the
pods' output; the dynamic provider turns that into a failed `pulumi up`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gpuplane.checks.dra import DRIVER, gpu_devices, resourceslice_findings, slices_settled
from gpuplane.checks.manifests import CONTAINER, CheckJob
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
    """Polling policy: the real clock in production, a fake one in tests."""

    timeout: float
    poll: float = 5.0
    clock: Clock = time.monotonic
    sleep: Sleep = time.sleep

    def __post_init__(self) -> None:
        self.deadline = self.clock() + self.timeout

    def expired(self) -> bool:
        return self.clock() >= self.deadline

    def wait(self) -> None:
        self.sleep(max(0.0, min(self.poll, self.deadline - self.clock())))


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


def observe_jobs(cluster: Cluster, namespace: str, jobs: Mapping[str, CheckJob],
                 waiter: Waiter) -> dict[str, JobObservation]:
    """Wait for every Job (by name) at once: each round reads each unfinished Job and its
    pods once, so a fleet of check Jobs costs one poller, not one per node. Then read the
    pods' logs and events."""
    last: dict[str, tuple[dict[str, Any] | None, list[dict[str, Any]]]] = {}
    waiting = dict(jobs)
    while True:
        for name, check in list(waiting.items()):
            job, pods = cluster.job(namespace, name), cluster.job_pods(namespace, name)
            last[name] = (job, pods)
            if _job_done(check, job, [pod_run(p) for p in pods]):
                del waiting[name]
        if not waiting or waiter.expired():
            break
        waiter.wait()
    return {name: _observation(cluster, namespace, name, *last[name], timed_out=name in waiting)
            for name in jobs}


def _observation(cluster: Cluster, namespace: str, name: str, job: dict[str, Any] | None,
                 pods: list[dict[str, Any]], *, timed_out: bool) -> JobObservation:
    runs = [
        pod_run(p, cluster.pod_log(namespace, p["metadata"]["name"]),
                cluster.events(namespace, p["metadata"]["name"]))
        for p in pods
    ]
    job_events = event_texts(cluster.events(namespace, name))
    if job is None:
        job_events = (f"Job {namespace}/{name} not found", *job_events)
    return JobObservation(job=job, runs=runs, job_events=job_events, timed_out=timed_out)


def run_job_checks(cluster: Cluster, checks: Sequence[tuple[CheckJob, str]],
                   intent: ClusterIntent, *, namespace: str,
                   waiter: Waiter) -> dict[str, Any]:
    """Judge each (check, Job name) pair; return every check's outputs by key on success,
    raise CheckFailed naming every failing check (with its pods' output) otherwise."""
    seen = observe_jobs(cluster, namespace, {name: check for check, name in checks}, waiter)
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
        for n in nodes:
            obj = cluster.node(n.name)
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
    "CheckFailed",
    "Cluster",
    "JobObservation",
    "KubeCluster",
    "Waiter",
    "job_finished",
    "observe_jobs",
    "run_allocatable_check",
    "run_job_checks",
    "run_resourceslice_check",
    "run_split_check",
]
