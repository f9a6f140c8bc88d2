"""Dynamic-provider resources that make a failing GPU check fail `pulumi up`.

`GpuJobCheck` creates its check Jobs itself, with the official client, from the same pure
manifests (checks.manifests), waits for them, reads the pods' logs and events and applies
verdicts.py. No Job is a Pulumi resource: the state keeps each check's few fields, not a
Job object per GPU node (about 11.6 KB each under the Kubernetes provider: its inputs and
the live object), and one resource's diff shows which node checks change.

A failed check is not raised here: the SDK's dynamic-provider host would print any
exception under its own traceback (gpuplane.kube.gate). The verdict comes back as the `result`
output (`passed: false`, the report with the finding, its fix and the pod's output);
`verdict()` logs the report on the resource and `gate()` stops the program cleanly. The
resources re-run (new Jobs) whenever an input changes (the checks, the intent, the
settings, the probe's fingerprint) and after a failed verdict.

Pulumi pickles the provider object (dill) into the state and runs it in the Python
dynamic-provider host, where this module is imported by name: the gpuplane package must be
installed in the project's virtualenv (it is a dependency of the program anyway).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

import pulumi
import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from pulumi.dynamic import CreateResult, DiffResult, UpdateResult

from gpuplane.checks.create import JobsFailed, create_jobs, delete_jobs
from gpuplane.checks.dra import dra_job, probe_claim_template
from gpuplane.checks.live import (
    CheckFailed,
    Cluster,
    KubeCluster,
    Waiter,
    run_allocatable_check,
    run_job_checks,
    run_resourceslice_check,
    run_split_check,
)
from gpuplane.checks.manifests import CheckJob, job_manifest, job_name, plan_checks
from gpuplane.checks.settings import ChecksSettings
from gpuplane.checks.verdicts import HAMI_DEFAULT_SPLIT
from gpuplane.core.intent import ClusterIntent
from gpuplane.kube.gate import gate as generic_gate
from gpuplane.kube.gate import judged
from gpuplane.kube.provider import KubeResourceProvider

PROVIDER_KEY = "__provider"
# Outputs: results and the Jobs of the last run, never compared by diff.
_OUTPUT_KEYS = frozenset({"passed", "result", "jobNames", "run"})
SETTLE_READS = 3
MAX_RUN_TRIES = 5       # run numbers tried when Jobs of an interrupted run hold the names


def wait_budget(timeout_seconds: float) -> float:
    """Stop waiting a little before the Job's activeDeadlineSeconds, so that pending pods
    and their events are still there to explain themselves."""
    timeout = float(timeout_seconds)
    return max(1.0, timeout - min(15.0, timeout / 10))


def checks_of(props: Mapping[str, Any]) -> list[CheckJob]:
    """The checks a `GpuJobCheck` names by key, as `plan_checks` makes them from its intent
    and settings (the state keeps a key per check, not the check: at a check per GPU node
    the inputs stay small and the SDK serializes a string per node, not a table)."""
    intent = ClusterIntent.from_json(str(props["intent"]))
    planned = {c.key: c for c in plan_checks(intent, settings_from(props["settings"]))}
    missing = [str(k) for k in props["checks"] if str(k) not in planned]
    if missing:
        raise ValueError(f"GpuJobCheck: no check {', '.join(missing)} in its intent")
    return [planned[str(k)] for k in props["checks"]]


class _CheckProvider(KubeResourceProvider):
    """Shared lifecycle: create and update run the check; delete has nothing to undo."""

    # Test seams; None means the real thing. Kept as plain attributes so dill can pickle.
    cluster_factory: Callable[[str | None, str | None], Cluster] | None = None
    clock: Callable[[], float] | None = None
    sleep: Callable[[float], None] | None = None
    poll_seconds: float = 5.0

    def _cluster(self, props: dict[str, Any]) -> Cluster:
        factory = self.cluster_factory or KubeCluster.connect
        return factory(self.kubeconfig(props), self.stack_context)

    def _waiter(self, timeout: float) -> Waiter:
        return Waiter(timeout=timeout, poll=self.poll_seconds,
                      clock=self.clock or time.monotonic, sleep=self.sleep or time.sleep)

    def _now(self) -> float:
        return (self.clock or time.monotonic)()

    def run(self, props: dict[str, Any],
            started: Mapping[str, float] | None = None) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def prepare(self, props: dict[str, Any], olds: dict[str, Any] | None,
                made: dict[str, Any], started: dict[str, float] | None = None) -> None:
        """Set up what the check runs (its Jobs), recording it in `made` as it goes: those
        outputs are kept even when a later step fails, so the next run can undo them.
        `props` merged with `made` is what `run` gets, with `started`: when each Job was
        made, on the provider's clock (not kept in the state)."""

    def _outs(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        inputs = {k: v for k, v in props.items() if k != PROVIDER_KEY and k not in _OUTPUT_KEYS}
        made: dict[str, Any] = {}
        started: dict[str, float] = {}
        try:
            self.prepare(props, olds, made, started)
            result = self.run({**props, **made}, started)
        except CheckFailed as failed:
            result = {"passed": False, "report": str(failed),
                      "findings": [f.id for f in failed.findings]}
        except (ApiException, ConfigException, urllib3.exceptions.HTTPError,
                JobsFailed) as error:
            # The cluster could not be used: a failed check too, with what went wrong.
            result = {"passed": False, "findings": [], "report": (
                f"gpuplane check {props.get('checkName', 'check')} could not use the "
                f"cluster: {_what(error)}\n  fix: check the stack's "
                "kubeconfig (`kubernetes:kubeconfig`) and that it may create and delete "
                "Jobs in the checks' namespace and get and list Jobs, pods, events and nodes "
                "(under DRA also create and delete resourceclaimtemplates there and list "
                "resourceslices)")}
        return {**inputs, **made, "passed": bool(result.get("passed")), "result": result}

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Changed inputs re-run the check; so does a failed verdict, whose cause the user
        has presumably fixed on the nodes, outside this stack's inputs."""
        keys = {k for k in {*olds, *news} if k != PROVIDER_KEY and k not in _OUTPUT_KEYS}
        changed = sorted(k for k in keys if olds.get(k) != news.get(k))
        return DiffResult(changes=bool(changed) or olds.get("passed") is False)

    def create(self, props: dict[str, Any]) -> CreateResult:
        outs = self._outs(props, None)
        digest = hashlib.sha256(repr(sorted((k, str(v)) for k, v in outs.items()
                                            if k != "kubeconfig")).encode()).hexdigest()
        return CreateResult(id_=f"{props.get('checkName', 'check')}-{digest[:12]}", outs=outs)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self._outs(news, olds))


class ProbeJobCheckProvider(_CheckProvider):
    """Creates the check Jobs (node, time-slicing or HAMi checks), waits for them and
    judges their pods. Each run is new Jobs (`run` counts); the last run's Jobs stay for
    `kubectl logs` until their TTL, or until the next run or `pulumi destroy` deletes
    them."""

    def prepare(self, props: dict[str, Any], olds: dict[str, Any] | None,
                made: dict[str, Any], started: dict[str, float] | None = None) -> None:
        """Delete the last run's Jobs, then create this run's, noting when each was made
        (its wait is measured from then: at a thousand nodes the last Job is made many
        seconds after the first). A run interrupted before the engine saved its state
        leaves Jobs under the next run's names: such a name that exists already moves this
        run on to the next number."""
        cluster = self._cluster(props)
        namespace = str(props["namespace"])
        dra = ClusterIntent.from_json(str(props["intent"])).dra
        delete_jobs([str(n) for n in (olds or {}).get("jobNames") or []],
                    lambda name: _delete(cluster, namespace, name, dra))
        run = int((olds or {}).get("run") or 0)
        for attempt in range(1, MAX_RUN_TRIES + 1):
            run += 1
            manifests = {m["metadata"]["name"]: (check, m)
                         for check, m in check_manifests(props, run)}
            # A few at a time (gpuplane.checks.create): each is a round trip.
            created = create_jobs(list(manifests), _creator(cluster, namespace, manifests),
                                  self._now)
            made.update(jobNames=created.made, run=run)
            if started is not None:
                started.update(created.started)
            if not created.errors:
                return
            if not created.conflicts_only or attempt == MAX_RUN_TRIES:
                raise JobsFailed(created.errors, len(manifests))
            delete_jobs(created.made, lambda name: _delete(cluster, namespace, name, dra))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        cluster = self._cluster(props)
        dra = ClusterIntent.from_json(str(props["intent"])).dra
        delete_jobs([str(n) for n in props.get("jobNames") or []],
                    lambda name: _delete(cluster, str(props["namespace"]), name, dra))

    def run(self, props: dict[str, Any],
            started: Mapping[str, float] | None = None) -> dict[str, Any]:
        checks = [(check, str(name))
                  for check, name in zip(checks_of(props), props["jobNames"], strict=True)]
        intent = ClusterIntent.from_json(props["intent"])
        return run_job_checks(self._cluster(props), checks, intent,
                              namespace=props["namespace"],
                              waiter=self._waiter(wait_budget(props["timeoutSeconds"])),
                              started=started)


def _creator(cluster: Cluster, namespace: str,
             manifests: Mapping[str, tuple[CheckJob, dict[str, Any]]]
             ) -> Callable[[str, Callable[[], None]], None]:
    """Creates one check's objects by its Job's name: under DRA its claim template first
    (named like the Job), then the Job."""

    def create(name: str, exists: Callable[[], None]) -> None:
        check, manifest = manifests[name]
        if _claims(manifest):
            cluster.create_claim_template(namespace, probe_claim_template(
                namespace, name, check.node))
            exists()
        cluster.create_job(namespace, manifest)
        exists()

    return create


def _what(error: Exception) -> str:
    """What went wrong: the error, or each Job's when several were refused."""
    return str(error) if isinstance(error, JobsFailed) else f"{type(error).__name__}: {error}"


def _claims(manifest: Mapping[str, Any]) -> bool:
    """Whether a probe Job's pod takes its GPU by ResourceClaim (a DRA driver's node)."""
    return bool(manifest["spec"]["template"]["spec"].get("resourceClaims"))


def _delete(cluster: Cluster, namespace: str, name: str, dra: bool) -> None:
    """A probe Job and, under DRA, its claim template (same name)."""
    cluster.delete_job(namespace, name)
    if dra:
        cluster.delete_claim_template(namespace, name)


class AllocatableCheckProvider(_CheckProvider):
    """Watches every resource each GPU node must advertise (FM10, FM12, FM13); under DRA
    the GPU nodes' ResourceSlices from gpu.nvidia.com instead (FM38)."""

    settle_reads: int = SETTLE_READS

    def run(self, props: dict[str, Any],
            started: Mapping[str, float] | None = None) -> dict[str, Any]:
        intent = ClusterIntent.from_json(props["intent"])
        if intent.dra and not intent.plugin_nodes:
            return run_resourceslice_check(
                self._cluster(props), intent.gpu_nodes,
                waiter=self._waiter(float(props["timeoutSeconds"])))
        if not intent.dra_nodes:
            return run_allocatable_check(self._cluster(props), intent.gpu_nodes, intent,
                                         waiter=self._waiter(float(props["timeoutSeconds"])),
                                         settle=self.settle_reads,
                                         hami_split=int(props.get("hamiSplitCount")
                                                        or HAMI_DEFAULT_SPLIT))
        return run_split_check(self._cluster(props), intent,
                               waiter=self._waiter(float(props["timeoutSeconds"])),
                               settle=self.settle_reads,
                               hami_split=int(props.get("hamiSplitCount")
                                              or HAMI_DEFAULT_SPLIT))


def check_manifests(props: Mapping[str, Any], run: int) -> list[tuple[CheckJob, dict[str, Any]]]:
    """Each check of a `GpuJobCheck` and the Job manifest of its `run` (pure: the plan's
    tests validate exactly what the provider creates)."""
    intent = ClusterIntent.from_json(str(props["intent"]))
    settings = settings_from(props["settings"])
    nodes = {n.name: n for n in intent.nodes}
    out = []
    for check in checks_of(props):
        name = job_name(str(props["jobPrefix"]), check.key, str(props["fingerprint"]), run)
        manifest = job_manifest(
            check, intent, settings, namespace=str(props["namespace"]),
            configmap=props.get("configmap") if check.sample == "probe" else None,
            name=name, fingerprint_value=str(props["fingerprint"]))
        by_claim = intent.dra_serves(nodes[check.node]) if check.node in nodes else intent.dra
        out.append((check, dra_job(manifest, name) if by_claim else manifest))
    return out


def settings_from(data: Mapping[str, Any]) -> ChecksSettings:
    """ChecksSettings from state: numbers come back from the engine as floats."""
    values: dict[str, Any] = {k: int(v) if isinstance(v, float) else v for k, v in data.items()}
    return ChecksSettings(**values)


class GpuJobCheck(pulumi.dynamic.Resource, module="gpuplane", name="GpuJobCheck"):
    """Fails `pulumi up` unless every check in `checks` proves its GPU claim, each in a Job
    this resource creates (`<job_prefix>-<key>-<8 hex>`).

    One resource runs and waits for all of a wave's Jobs (every node's probe, say): one
    poller against the API server instead of one per node, one pickled provider in the
    state, and one failure that lists every failing node."""

    passed: pulumi.Output[bool]
    result: pulumi.Output[dict]
    jobNames: pulumi.Output[list[str]]

    def __init__(self, name: str, *, checks: Sequence[CheckJob], intent: ClusterIntent,
                 settings: ChecksSettings, namespace: str, job_prefix: str,
                 fingerprint: str, configmap: str | None,
                 kubeconfig: pulumi.Input[str] | None = None,
                 opts: pulumi.ResourceOptions | None = None,
                 provider: ProbeJobCheckProvider | None = None):
        if not checks:
            raise ValueError("GpuJobCheck: at least one check")
        # Only the checks' nodes: the state stays linear in nodes.
        nodes = {c.node for c in checks}
        kept = tuple(n for n in intent.nodes if n.name in nodes)
        # Every node's probe: the stack's own record (its JSON is already made).
        mine = intent if kept == intent.nodes else replace(intent, nodes=kept)
        props = {"checkName": name, "checks": [c.key for c in checks],
                 "intent": mine.to_json(), "namespace": namespace,
                 "settings": asdict(settings), "jobPrefix": job_prefix,
                 "fingerprint": fingerprint, "configmap": configmap,
                 "timeoutSeconds": settings.timeout_seconds, "kubeconfig": kubeconfig,
                 "passed": None, "result": None, "jobNames": None, "run": None}
        super().__init__(provider or ProbeJobCheckProvider(), name, props, _secret(opts))


class GpuAllocatableCheck(pulumi.dynamic.Resource, module="gpuplane",
                          name="GpuAllocatableCheck"):
    """Fails `pulumi up` unless every GPU node advertises what its pool should
    (`nvidia.com/gpu` x replicas, each `nvidia.com/mig-<profile>` x instances; under DRA:
    publishes its GPUs in a gpu.nvidia.com ResourceSlice)."""

    passed: pulumi.Output[bool]
    result: pulumi.Output[dict]

    def __init__(self, name: str, *, intent: ClusterIntent, timeout_seconds: int,
                 hami_split_count: int = HAMI_DEFAULT_SPLIT,
                 kubeconfig: pulumi.Input[str] | None = None,
                 opts: pulumi.ResourceOptions | None = None,
                 provider: AllocatableCheckProvider | None = None):
        props = {"checkName": name, "intent": intent.to_json(),
                 "timeoutSeconds": timeout_seconds, "hamiSplitCount": hami_split_count,
                 "kubeconfig": kubeconfig, "passed": None, "result": None}
        super().__init__(provider or AllocatableCheckProvider(), name, props, _secret(opts))


Check = GpuJobCheck | GpuAllocatableCheck


def verdict(check: Check) -> pulumi.Output[bool]:
    """Whether `check` passed; a failed verdict's report (finding, fix, pod output) is
    logged as an error on `check`, where the CLI shows it. Unknown in preview."""

    def failure(result: Any) -> str | None:
        if isinstance(result, dict) and result.get("passed") is False:
            return str(result.get("report") or "failed")
        return None

    return judged(check, check.result, failure)


def gate(checks: Sequence[Check],
         verdicts: Sequence[pulumi.Output[bool]]) -> pulumi.Output[pulumi.Resource]:
    """gpuplane.kube.gate.gate for checks: the program stops once every verdict is in when any
    check failed."""

    def message(failed: list[str]) -> str:
        return (f"gpuplane: the post-deploy check{'s' if len(failed) > 1 else ''} "
                f"{', '.join(failed)} failed; the report is above. Fix what it says and "
                "run `pulumi up` again: a failed check always re-runs.")

    return generic_gate(checks, verdicts, message)


def _secret(opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """The kubeconfig stays a secret in the state."""
    return pulumi.ResourceOptions.merge(
        opts or pulumi.ResourceOptions(),
        pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"]))


__all__ = [
    "AllocatableCheckProvider",
    "GpuAllocatableCheck",
    "GpuJobCheck",
    "ProbeJobCheckProvider",
    "check_manifests",
    "checks_of",
    "gate",
    "settings_from",
    "verdict",
    "wait_budget",
]
