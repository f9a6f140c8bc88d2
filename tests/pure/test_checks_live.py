"""The dynamic providers' create/update/diff against a fake kubernetes client that replays
recorded API objects (as the real client's model classes), with a fake clock."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import textwrap
from dataclasses import asdict

import pytest
from kubernetes.config.config_exception import ConfigException
from pulumi.dynamic import Config, ConfigureRequest, CreateResult
from pulumi.dynamic.dynamic import serialize_provider
from support import checkdata as cd

from gpuplane.checks.live import KubeCluster, Waiter, job_finished
from gpuplane.checks.manifests import CheckJob, job_manifest, job_name, plan_checks
from gpuplane.checks.provider import (
    AllocatableCheckProvider,
    ProbeJobCheckProvider,
    check_manifests,
    checks_of,
    wait_budget,
)
from gpuplane.checks.settings import ChecksSettings
from gpuplane.core.intent import ClusterIntent, NodeIntent

JOB = cd.JOB
INTENT = ClusterIntent(nodes=(NodeIntent("gpu-a1", 1),))
NODE_CHECK = plan_checks(INTENT, ChecksSettings())[0]


def provider(cls, fake: cd.FakeKube, clock: cd.FakeClock):
    p = cls()
    p.cluster_factory = lambda kubeconfig, context: KubeCluster(fake, fake, cd._API)
    p.clock, p.sleep, p.poll_seconds = clock, clock.sleep, 5.0
    return p


def failed(result: CreateResult) -> tuple[str, list[str]]:
    """A failed verdict: returned, not raised (the SDK's host would wrap an exception in a
    traceback); the report and the finding ids."""
    outs = result.outs
    assert outs["passed"] is False and outs["result"]["passed"] is False, outs
    return outs["result"]["report"], outs["result"]["findings"]


def floats(data: dict) -> dict:
    """What the engine hands back: numbers as floats."""
    return {k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v
            for k, v in data.items()}


def jname(key: str, run: int = 1) -> str:
    return job_name("checks", key, cd.FP, run)


def job_props(check: CheckJob = NODE_CHECK, intent: ClusterIntent = INTENT,
              timeout: float = 600.0) -> dict:
    # The inputs as the engine hands them back, plus the serialized provider.
    settings = floats(asdict(ChecksSettings(timeout_seconds=int(timeout))))
    return {"__provider": "opaque", "checkName": "checks-nodes-check",
            "checks": [check.key], "intent": intent.to_json(),
            "namespace": "gpu-operator", "settings": settings, "jobPrefix": "checks",
            "fingerprint": cd.FP, "configmap": "checks-probe-0123456789",
            "timeoutSeconds": timeout, "kubeconfig": None}


def test_create_passes_after_the_pod_completes() -> None:
    fake = cd.FakeKube(
        jobs={JOB: [cd.job(condition=None), cd.job(condition=None), cd.job()]},
        pods={JOB: [[cd.pod("p1", phase="Pending", unschedulable=None, node="gpu-a1",
                            exit_code=None, started=None, finished=None)],
                    [cd.pod("p1", phase="Running")],
                    [cd.pod("p1")]]},
        logs={"p1": cd.probe_log()})
    clock = cd.FakeClock()
    result = provider(ProbeJobCheckProvider, fake, clock).create(job_props())
    assert result.outs["passed"] is True
    summary = result.outs["result"]["checks"][NODE_CHECK.key]["summary"]
    assert summary["gpus"][0]["uuid"] == cd.UUID_A
    assert result.outs["jobNames"] == [JOB] and "__provider" not in result.outs
    assert result.id.startswith("checks-nodes-check-")
    assert clock.sleeps == [5.0, 5.0]                     # polled until Complete
    assert "log p1/probe" in fake.calls


def test_create_fails_with_finding_fix_and_pod_output() -> None:
    code, log = cd.real_no_driver_log()
    fake = cd.FakeKube(
        jobs={JOB: [cd.job(condition="Failed", reason="BackoffLimitExceeded")]},
        pods={JOB: [[cd.pod("p1", phase="Failed", exit_code=code)]]},
        logs={"p1": log})
    outcome = provider(ProbeJobCheckProvider, fake, cd.FakeClock()).create(job_props())
    text, findings = failed(outcome)
    assert text.startswith("gpuplane check failed: node check probe-gpu-a1 on node gpu-a1")
    assert "[FM01]" in text and "gpuplane:cluster.distro" in text
    assert "libcuda.so.1 not found" in text and "Test FAILED" in text
    assert findings == ["FM01"]


def test_pending_pod_times_out_with_the_scheduler_reason() -> None:
    msg = "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated " \
          "taint {node-role.kubernetes.io/control-plane: }."
    fake = cd.FakeKube(
        jobs={JOB: [cd.job(condition=None)]},
        pods={JOB: [[cd.pod("p1", phase="Pending", unschedulable=msg)]]},
        events=[cd.event("p1", "FailedScheduling", msg)])
    clock = cd.FakeClock()
    outcome = provider(ProbeJobCheckProvider, fake, clock).create(job_props(timeout=100.0))
    text, _findings = failed(outcome)
    assert "gave up after 90s" in text                      # before the Job's deadline
    assert "[FM01]" in text and "Insufficient nvidia.com/gpu" in text
    assert sum(clock.sleeps) == pytest.approx(90.0)


def test_job_rejected_before_any_pod() -> None:
    fake = cd.FakeKube(
        jobs={JOB: [cd.job(condition="Failed")]}, pods={JOB: [[]]},
        events=[cd.event(JOB, "FailedCreate", 'Error creating: pods "x" is forbidden: pod '
                         'rejected: RuntimeClass "nvidia" not found', kind="Job")])
    outcome = provider(ProbeJobCheckProvider, fake, cd.FakeClock()).create(job_props())
    assert re.search(r"\[FM11\].*RuntimeClass \"nvidia\" not found", failed(outcome)[0])


def ts_pod(i: int, start: int, end: int | None) -> dict:
    if end is None:
        return cd.pod(f"ts-{i}", phase="Running", started=f"2026-01-10T12:00:{start:02d}Z")
    return cd.pod(f"ts-{i}", started=f"2026-01-10T12:00:{start:02d}Z",
                  finished=f"2026-01-10T12:00:{end:02d}Z")


TS_INTENT = ClusterIntent(nodes=(NodeIntent("gpu-a1", 1),), time_slicing_replicas=3)
TS_CHECK = next(j for j in plan_checks(TS_INTENT, ChecksSettings()) if j.kind == "timeslicing")


def test_timeslicing_check_passes_when_all_replicas_overlap() -> None:
    name = jname("timeslicing")
    fake = cd.FakeKube(
        jobs={name: [cd.job(name, condition=None), cd.job(name)]},
        pods={name: [[ts_pod(0, 0, None), ts_pod(1, 1, None), ts_pod(2, 2, None)],
                     [ts_pod(0, 0, 31), ts_pod(1, 1, 32), ts_pod(2, 2, 33)]]},
        logs={f"ts-{i}": cd.probe_log() for i in range(3)})
    result = provider(ProbeJobCheckProvider, fake, cd.FakeClock()).create(
        job_props(TS_CHECK, TS_INTENT))
    assert result.outs["result"]["checks"]["timeslicing"]["sharing"] == {cd.UUID_A: 3}


def test_timeslicing_check_stops_early_when_pods_run_one_by_one() -> None:
    name = jname("timeslicing")
    pending = cd.pod("ts-2", phase="Pending", unschedulable="0/1 nodes are available: 1 "
                     "Insufficient nvidia.com/gpu.")
    fake = cd.FakeKube(
        jobs={name: [cd.job(name, condition=None)]},
        pods={name: [[ts_pod(0, 0, 31), ts_pod(1, 32, None), pending]]},
        logs={"ts-0": cd.probe_log(), "ts-1": cd.probe_log()})
    clock = cd.FakeClock()
    outcome = provider(ProbeJobCheckProvider, fake, clock).create(
        job_props(TS_CHECK, TS_INTENT))
    text, findings = failed(outcome)
    assert clock.sleeps == []                       # no point waiting for the deadline
    assert findings == ["FM10"]
    assert "only 1 of 3 time-sliced pods" in text


def node_props(intent: ClusterIntent, split: float | None = None) -> dict:
    props = {"__provider": "opaque", "checkName": "checks-allocatable",
             "intent": intent.to_json(), "timeoutSeconds": 60.0}
    if split is not None:
        props["hamiSplitCount"] = split
    return props


def test_allocatable_waits_until_multiplied_and_stable() -> None:
    intent = ClusterIntent(nodes=(NodeIntent("gpu-a1", 2), NodeIntent("gpu-b1", 1)),
                           time_slicing_replicas=4)
    fake = cd.FakeKube(nodes={
        "gpu-a1": [cd.node("gpu-a1", 2), cd.node("gpu-a1", 8)],
        "gpu-b1": [cd.node("gpu-b1", None), cd.node("gpu-b1", 4)]})
    clock = cd.FakeClock()
    result = provider(AllocatableCheckProvider, fake, clock).create(node_props(intent))
    assert result.outs["result"]["allocatable"] == {"gpu-a1": 8, "gpu-b1": 4}
    assert len(clock.sleeps) == 3                   # 4 reads: 1 early + 3 settled


def test_allocatable_not_multiplied_fails_fm10_after_the_timeout() -> None:
    intent = ClusterIntent(nodes=(NodeIntent("gpu-a1", 2),), time_slicing_replicas=4)
    fake = cd.FakeKube(nodes={"gpu-a1": [cd.node("gpu-a1", 2)]})
    clock = cd.FakeClock()
    outcome = provider(AllocatableCheckProvider, fake, clock).create(node_props(intent))
    _text, findings = failed(outcome)
    assert findings == ["FM10"]
    assert sum(clock.sleeps) == pytest.approx(60.0)


def test_allocatable_hami_flip_and_split() -> None:
    intent = ClusterIntent(nodes=(NodeIntent("gpu-a1", 1),), device_plugin="hami")
    flip = cd.FakeKube(nodes={"gpu-a1": [cd.node("gpu-a1", 4), cd.node("gpu-a1", 1)]})
    outcome = provider(AllocatableCheckProvider, flip, cd.FakeClock()).create(
        node_props(intent, 4.0))
    _text, findings = failed(outcome)
    assert findings == ["FM12"]
    good = cd.FakeKube(nodes={"gpu-a1": [cd.node("gpu-a1", 4)]})
    out = provider(AllocatableCheckProvider, good, cd.FakeClock()).create(
        node_props(intent, 4.0))
    assert out.outs["passed"] is True


def test_allocatable_missing_node() -> None:
    fake = cd.FakeKube(nodes={})
    outcome = provider(AllocatableCheckProvider, fake, cd.FakeClock()).create(node_props(INTENT))
    assert re.search("not in the cluster", failed(outcome)[0])


def test_create_makes_each_check_job_from_the_manifests() -> None:
    fake = cd.FakeKube(jobs={JOB: [cd.job()]}, pods={JOB: [[cd.pod("p1")]]},
                       logs={"p1": cd.probe_log()})
    result = provider(ProbeJobCheckProvider, fake, cd.FakeClock()).create(job_props())
    assert result.outs["jobNames"] == [JOB] and result.outs["run"] == 1
    want = job_manifest(NODE_CHECK, INTENT, ChecksSettings(), namespace="gpu-operator",
                        configmap="checks-probe-0123456789", name=JOB,
                        fingerprint_value=cd.FP)
    assert fake.created == {JOB: want}
    assert fake.calls[0] == f"create job {JOB}"      # created before it is waited for


def test_diff_and_update_rerun_the_check_in_new_jobs() -> None:
    second = jname("probe-gpu-a1", run=2)
    fake = cd.FakeKube(jobs={JOB: [cd.job()], second: [cd.job(second)]},
                       pods={second: [[cd.pod("p2", job=second)]]},
                       logs={"p2": cd.probe_log()})
    p = provider(ProbeJobCheckProvider, fake, cd.FakeClock())
    old = {**job_props(), "passed": True, "result": {"passed": True}, "jobNames": [JOB],
           "run": 1.0}
    assert p.diff("id", old, {**job_props(), "__provider": "other"}).changes is False
    changed = {**job_props(), "fingerprint": "fp-new"}
    assert p.diff("id", old, changed).changes is True
    updated = p.update("id", old, job_props())
    assert updated.outs["passed"] is True
    assert updated.outs["jobNames"] == [second] and updated.outs["run"] == 2
    # The last run's Job goes first (in the background), then the new one is made.
    assert fake.calls[:2] == [f"delete job {JOB} (Background)", f"create job {second}"]
    assert "log p2/probe" in fake.calls


def test_delete_removes_the_last_runs_jobs() -> None:
    fake = cd.FakeKube(jobs={JOB: [cd.job()]})
    p = provider(ProbeJobCheckProvider, fake, cd.FakeClock())
    p.delete("id", {**job_props(), "jobNames": [JOB, "gone-already"]})
    assert fake.calls == [f"delete job {JOB} (Background)",
                          "delete job gone-already (Background)"]


def test_one_verdict_waits_for_every_node_and_names_each_failure() -> None:
    intent = ClusterIntent(nodes=(NodeIntent("gpu-a1", 1), NodeIntent("gpu-b1", 1),
                                  NodeIntent("gpu-c1", 1)))
    checks = plan_checks(intent, ChecksSettings())
    names = [jname(c.key) for c in checks]
    code, log = cd.real_no_driver_log()
    fake = cd.FakeKube(
        # a1 passes at once; b1 fails after one more poll; c1 passes after two.
        jobs={names[0]: [cd.job(names[0])],
              names[1]: [cd.job(names[1], condition=None),
                         cd.job(names[1], condition="Failed", reason="BackoffLimitExceeded")],
              names[2]: [cd.job(names[2], condition=None), cd.job(names[2], condition=None),
                         cd.job(names[2])]},
        pods={names[0]: [[cd.pod("p-a", node="gpu-a1")]],
              names[1]: [[cd.pod("p-b", phase="Running", node="gpu-b1")],
                         [cd.pod("p-b", phase="Failed", exit_code=code, node="gpu-b1")]],
              names[2]: [[cd.pod("p-c", phase="Running", node="gpu-c1")],
                         [cd.pod("p-c", phase="Running", node="gpu-c1")],
                         [cd.pod("p-c", node="gpu-c1")]]},
        logs={"p-a": cd.probe_log(), "p-b": log, "p-c": cd.probe_log()})
    props = {**job_props(), "intent": intent.to_json(), "checks": [c.key for c in checks]}
    clock = cd.FakeClock()
    outcome = provider(ProbeJobCheckProvider, fake, clock).create(props)
    text, findings = failed(outcome)
    assert text.startswith("gpuplane: 1 of 3 GPU checks failed")
    assert "on node gpu-b1" in text and "on node gpu-a1" not in text
    assert "libcuda.so.1 not found" in text
    assert findings == ["FM01"]
    assert clock.sleeps == [5.0, 5.0]            # one poller for all three Jobs
    # A finished Job is not read again: a1 once, b1 twice, c1 three times.
    assert [fake.calls.count(f"job {n}") for n in names] == [1, 2, 3]


def test_state_numbers_come_back_as_ints() -> None:
    """The checks are rebuilt from the intent and the settings as the engine returns them
    (numbers as floats): the same checks, the same Job manifests."""
    props = job_props()
    assert checks_of(props) == [NODE_CHECK]
    [(_, job)] = check_manifests(props, 1)
    assert job["spec"]["activeDeadlineSeconds"] == 600
    assert isinstance(job["spec"]["activeDeadlineSeconds"], int)


def test_a_check_the_intent_does_not_have_is_refused() -> None:
    with pytest.raises(ValueError, match="no check probe-gpu-z9 in its intent"):
        checks_of({**job_props(), "checks": ["probe-gpu-z9"]})


def test_wait_budget_leaves_room_before_the_job_deadline() -> None:
    assert wait_budget(600) == 585 and wait_budget(100) == 90 and wait_budget(1) == 1


def test_waiter_never_sleeps_past_the_deadline() -> None:
    clock = cd.FakeClock()
    w = Waiter(timeout=7, poll=5, clock=clock, sleep=clock.sleep)
    w.wait()
    w.wait()
    assert clock.sleeps == [5, 2] and w.expired()


def test_job_finished() -> None:
    assert job_finished(cd.job(condition="Complete"))
    assert job_finished(cd.job(condition="Failed"))
    assert not job_finished(cd.job(condition=None)) and not job_finished(None)


def test_connect_with_kubeconfig_text_needs_no_server() -> None:
    kubeconfig = textwrap.dedent("""\
        apiVersion: v1
        kind: Config
        clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443",
                    insecure-skip-tls-verify: true}}]
        users: [{name: u, user: {token: abc}}]
        contexts: [{name: x, context: {cluster: c, user: u}}]
        current-context: x
        """)
    cluster = KubeCluster.connect(kubeconfig)
    assert cluster.api_client.configuration.host == "https://10.0.0.1:6443"


def test_configure_reads_the_kubernetes_provider_config() -> None:
    seen = []
    p = ProbeJobCheckProvider()
    p.cluster_factory = lambda kubeconfig, context: seen.append((kubeconfig, context))
    p.configure(ConfigureRequest(Config({"kubernetes:kubeconfig": "/k/config",
                                         "kubernetes:context": "gpu"}, "gpuplane")))
    p._cluster({})
    p._cluster({"kubeconfig": "apiVersion: v1\n"})
    assert seen == [("/k/config", "gpu"), ("apiVersion: v1\n", "gpu")]


def test_provider_pickles_by_reference_and_loads_in_a_fresh_process() -> None:
    """What Pulumi stores in the state must load in the dynamic-provider host without the
    program: the class is pickled by module path, and that import pulls no Pulumi
    Kubernetes SDK."""
    blob = serialize_provider(ProbeJobCheckProvider())
    code = ("import base64, sys, dill\n"
            f"p = dill.loads(base64.b64decode({blob!r}))\n"
            "print(type(p).__module__, type(p).__name__, 'pulumi_kubernetes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["gpuplane.checks.provider", "ProbeJobCheckProvider", "False"]
    assert len(base64.b64decode(blob)) < 1000


def test_a_failed_verdict_reruns_on_the_next_up() -> None:
    p = provider(ProbeJobCheckProvider, cd.FakeKube(), cd.FakeClock())
    failed_before = {**job_props(), "passed": False, "result": {"passed": False}}
    assert p.diff("id", failed_before, job_props()).changes is True


def test_a_cluster_it_cannot_read_is_a_failed_verdict_with_the_fix() -> None:
    p = ProbeJobCheckProvider()

    def refuse(kubeconfig: str | None, context: str | None) -> KubeCluster:
        raise ConfigException("Invalid kube-config file. No configuration found.")

    p.cluster_factory = refuse
    text, findings = failed(p.create(job_props()))
    assert findings == []
    assert text.startswith("gpuplane check checks-nodes-check could not use the cluster: "
                           "ConfigException: Invalid kube-config file")
    assert "fix: check the stack's kubeconfig" in text


def test_jobs_left_by_an_interrupted_run_move_the_run_on() -> None:
    """A run killed before the engine saved its state left Jobs under run 1's names: the
    check takes run 2's instead of failing on AlreadyExists (or reading the old pods)."""
    second = jname("probe-gpu-a1", run=2)
    fake = cd.FakeKube(jobs={second: [cd.job(second)]},
                       pods={second: [[cd.pod("p2", job=second)]]}, logs={"p2": cd.probe_log()})
    fake.create_errors[JOB] = 409
    result = provider(ProbeJobCheckProvider, fake, cd.FakeClock()).create(job_props())
    assert result.outs["passed"] is True
    assert result.outs["jobNames"] == [second] and result.outs["run"] == 2
    assert fake.calls[:2] == [f"create job {JOB}", f"create job {second}"]


def test_jobs_made_before_a_refusal_are_recorded_for_the_next_run() -> None:
    intent = ClusterIntent(nodes=(NodeIntent("gpu-a1", 1), NodeIntent("gpu-b1", 1)))
    checks = plan_checks(intent, ChecksSettings())
    props = {**job_props(), "intent": intent.to_json(), "checks": [c.key for c in checks]}
    fake = cd.FakeKube()
    fake.create_errors[jname("probe-gpu-b1")] = 403
    p = provider(ProbeJobCheckProvider, fake, cd.FakeClock())
    text, _ = failed(first := p.create(props))
    assert "could not use the cluster: ApiException" in text
    assert "may create and delete Jobs" in text
    assert first.outs["jobNames"] == [jname("probe-gpu-a1")] and first.outs["run"] == 1
    # The next `pulumi up` deletes what the refused run made and moves on to run 2.
    fake.create_errors.clear()
    p.update("id", first.outs, props)
    assert f"delete job {jname('probe-gpu-a1')} (Background)" in fake.calls
    assert f"create job {jname('probe-gpu-a1', run=2)}" in fake.calls
