"""`GpuChecks` under Pulumi mocks (preview=False): which resources it registers, with which
inputs, under which parent and after what."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi.runtime.mocks import MockMonitor

from gpuplane.checks.component import TYPE, GpuChecks, GpuChecksArgs
from gpuplane.checks.manifests import job_manifest, job_name, plan_checks
from gpuplane.checks.provider import check_manifests, checks_of
from gpuplane.checks.settings import ChecksSettings
from gpuplane.core.intent import ClusterIntent, NodeIntent

SUFFIX = "-1a2b3c4d"
NODES = (NodeIntent("gpu-a1", 2), NodeIntent("gpu-b1", 1), NodeIntent("cpu-1", 0))


class Recorder(pulumi.runtime.Mocks):
    """Echo inputs as state; Kubernetes objects get an auto-name like the provider's."""

    def __init__(self) -> None:
        self.inputs: dict[str, dict[str, Any]] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        state = dict(args.inputs)
        if args.typ.startswith("kubernetes:"):
            state["metadata"] = {**(state.get("metadata") or {}), "name": args.name + SUFFIX}
        self.inputs[args.name] = args.inputs
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
        return {}


class RecordingMonitor(MockMonitor):
    """Keeps what mocks do not show: each registration's type, parent and dependencies."""

    def __init__(self, mocks: Recorder) -> None:
        super().__init__(mocks)
        self.registered: dict[str, dict[str, Any]] = {}

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            return response
        self.registered[request.name] = {"type": request.type, "parent": request.parent,
                                         "deps": set(request.dependencies),
                                         "urn": response.urn}
        return response


@pytest.fixture
def world() -> tuple[Recorder, RecordingMonitor]:
    mocks = Recorder()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="gpuplane", stack="test", preview=False,
                             monitor=monitor)
    return mocks, monitor


def ints(value: Any) -> Any:
    """Numbers cross the mock boundary as floats."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [ints(v) for v in value]
    return value


def build(intent: ClusterIntent, settings: ChecksSettings | None = None):
    deploy = k8s.core.v1.ConfigMap("gpuplane-intent", metadata={"namespace": "gpu-operator"},
                                   data={"intent.json": intent.to_json()})
    checks = GpuChecks("checks", GpuChecksArgs(intent=intent,
                                               settings=settings or ChecksSettings()),
                       opts=pulumi.ResourceOptions(depends_on=[deploy]))
    return deploy, checks


def settled(checks: GpuChecks) -> pulumi.Output:
    """Resolves once every child has been registered."""
    outs = [c.passed for c in checks.checks.values()]
    if checks.allocatable is not None:
        outs.append(checks.allocatable.id)
    return pulumi.Output.all(*outs)


@pulumi.runtime.test
def test_registers_configmap_and_verdicts_that_make_the_jobs(world) -> None:
    mocks, monitor = world
    intent = ClusterIntent(nodes=NODES)
    _, checks = build(intent)

    def verify(_: Any) -> None:
        reg = monitor.registered
        assert reg["checks"]["type"] == TYPE
        children = {n: r for n, r in reg.items() if n not in ("checks", "gpuplane-intent")}
        assert {n: r["type"] for n, r in children.items()} == {
            "checks-probe": "kubernetes:core/v1:ConfigMap",
            "checks-allocatable": "pulumi-python:dynamic/gpuplane:GpuAllocatableCheck",
            "checks-nodes-check": "pulumi-python:dynamic/gpuplane:GpuJobCheck",
        }
        deploy_urn, parent_urn = reg["gpuplane-intent"]["urn"], reg["checks"]["urn"]
        for name, r in children.items():
            assert r["parent"] == parent_urn, name
            assert deploy_urn in r["deps"], name          # after the rest of the deployment
        assert reg["checks-probe"]["urn"] in reg["checks-nodes-check"]["deps"]

        cm = mocks.inputs["checks-probe"]
        assert set(cm["data"]) == {"cuda_probe.py"}
        assert cm["metadata"]["namespace"] == "gpu-operator"
        # Named by the script's content: the Jobs name it as plain text.
        digest = hashlib.sha256(cm["data"]["cuda_probe.py"].encode()).hexdigest()[:10]
        assert cm["metadata"]["name"] == f"checks-probe-{digest}"
        planned = list(plan_checks(intent, ChecksSettings()))
        # One verdict makes every node's Job and waits for them all; the checks and the
        # settings survive the engine, and the Jobs are the manifests' (first run).
        verdict = mocks.inputs["checks-nodes-check"]
        assert verdict["checks"] == [c.key for c in planned]
        assert checks_of(ints(verdict)) == planned
        assert verdict["configmap"] == cm["metadata"]["name"]
        assert verdict["jobPrefix"] == "checks" and verdict.get("jobNames") is None
        made = check_manifests(ints(verdict), 1)
        for (check, job), want in zip(made, planned, strict=True):
            assert check == want
            assert job == job_manifest(
                want, intent, ChecksSettings(), namespace="gpu-operator",
                configmap=cm["metadata"]["name"],
                name=job_name("checks", want.key, verdict["fingerprint"], 1),
                fingerprint_value=verdict["fingerprint"])
        # Only the checked (GPU) nodes travel with it: the state stays linear in them.
        assert [n["name"] for n in json.loads(verdict["intent"])["nodes"]] == [
            c.node for c in planned]
        assert verdict["namespace"] == "gpu-operator"
        assert verdict["timeoutSeconds"] == 600
        assert "__provider" in verdict
        assert mocks.inputs["checks-allocatable"]["hamiSplitCount"] == 10

    return settled(checks).apply(verify)


@pulumi.runtime.test
def test_timeslicing_proof_runs_after_allocatable_and_the_node_checks(world) -> None:
    mocks, monitor = world
    intent = ClusterIntent(nodes=NODES, time_slicing_replicas=4)
    _, checks = build(intent)

    def verify(_: Any) -> None:
        reg = monitor.registered
        deps = reg["checks-timeslicing-check"]["deps"]
        assert reg["checks-allocatable"]["urn"] in deps
        assert reg["checks-nodes-check"]["urn"] in deps
        verdict = mocks.inputs["checks-timeslicing-check"]
        [(_, job)] = check_manifests(ints(verdict), 1)
        spec = job["spec"]
        assert spec["parallelism"] == spec["completions"] == 4
        assert spec["template"]["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "gpu-b1"}
        assert verdict["checks"] == ["timeslicing"]
        # Only the node it runs on (gpu-b1 has fewest GPUs): the state stays small.
        assert [n["name"] for n in json.loads(verdict["intent"])["nodes"]] == ["gpu-b1"]

    return settled(checks).apply(verify)


@pulumi.runtime.test
def test_hami_with_vectoradd_adds_the_memory_proof(world) -> None:
    mocks, monitor = world
    intent = ClusterIntent(nodes=NODES, device_plugin="hami")
    _, checks = build(intent, ChecksSettings(sample="vectoradd", hami_gpumem=512))

    def verify(_: Any) -> None:
        node_jobs = check_manifests(ints(mocks.inputs["checks-nodes-check"]), 1)
        pod = node_jobs[0][1]["spec"]["template"]["spec"]
        assert pod["containers"][0]["image"].startswith("nvcr.io/nvidia/k8s/cuda-sample:")
        assert "volumes" not in pod
        [(_, hami_job)] = check_manifests(ints(mocks.inputs["checks-hami-check"]), 1)
        hami = hami_job["spec"]["template"]["spec"]
        assert hami["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] == "512"
        assert hami["volumes"][0]["configMap"]["name"] == mocks.inputs["checks-probe"][
            "metadata"]["name"]
        assert monitor.registered["checks-probe"]["urn"] in monitor.registered[
            "checks-hami-check"]["deps"]

    return settled(checks).apply(verify)


@pulumi.runtime.test
def test_vectoradd_only_needs_no_configmap(world) -> None:
    _, monitor = world
    _, checks = build(ClusterIntent(nodes=NODES), ChecksSettings(sample="vectoradd"))

    def verify(_: Any) -> None:
        assert checks.configmap is None and "checks-probe" not in monitor.registered
        assert set(checks.checks) == {"nodes"}
        assert monitor.registered["checks-nodes-check"]

    return settled(checks).apply(verify)


@pulumi.runtime.test
def test_disabled_checks_register_nothing_but_the_component(world) -> None:
    _, monitor = world
    deploy, checks = build(ClusterIntent(nodes=NODES), ChecksSettings(enabled=False))

    def verify(_: Any) -> None:
        assert set(monitor.registered) == {"gpuplane-intent", "checks"}
        assert checks.checks == {} and checks.allocatable is None

    # Both registrations, not only the component's: the ConfigMap's may land later (a
    # race seen under load when only `checks.urn` was awaited).
    return pulumi.Output.all(checks.urn, deploy.id).apply(verify)


class FailingAllocatable(Recorder):
    """The allocatable verdict comes back failed, as the provider returns it."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        rid, state = super().new_resource(args)
        if args.typ.endswith(":GpuAllocatableCheck"):
            report = "gpuplane check failed: [FM10] gpu-a1 advertises 2 nvidia.com/gpu\n  fix: x"
            state = {**state, "passed": False,
                     "result": {"passed": False, "report": report, "findings": ["FM10"]}}
        return rid, state


def test_a_failed_verdict_fails_the_program_cleanly_and_stops_later_checks() -> None:
    """The report reaches the user as an error on the check, the program stops with a
    `RunError` (no traceback) and the time-slicing proof after it is never registered."""
    mocks = FailingAllocatable()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="gpuplane", stack="test", preview=False,
                             monitor=monitor)
    logged: list[tuple[str, Any]] = []
    program = pulumi.runtime.test(
        lambda: build(ClusterIntent(nodes=NODES, time_slicing_replicas=4))[1].urn)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pulumi.log, "error",
                      lambda msg, resource=None, **_: logged.append((msg, resource)))
        with pytest.raises(pulumi.RunError, match="checks-allocatable failed"):
            program()
    assert [(m.splitlines()[0], r.pulumi_resource_name) for m, r in logged] == [
        ("gpuplane check failed: [FM10] gpu-a1 advertises 2 nvidia.com/gpu",
         "checks-allocatable")]
    assert "checks-nodes-check" in monitor.registered
    assert "checks-timeslicing" not in monitor.registered
    assert "checks-timeslicing-check" not in monitor.registered


@pulumi.runtime.test
def test_fm38_under_dra_the_slices_check_and_claiming_probes_replace_the_others(world) -> None:
    mocks, monitor = world
    intent = ClusterIntent(nodes=NODES, dra=True, time_slicing_replicas=4,
                           kubernetes_version="1.34.3", containerd_version="2.1")
    _, checks = build(intent)

    def verify(_: Any) -> None:
        reg = monitor.registered
        children = {n: r["type"] for n, r in reg.items()
                    if n not in ("checks", "gpuplane-intent")}
        assert children == {
            "checks-probe": "kubernetes:core/v1:ConfigMap",
            "checks-resourceslices": "pulumi-python:dynamic/gpuplane:GpuAllocatableCheck",
            "checks-nodes-check": "pulumi-python:dynamic/gpuplane:GpuJobCheck",
        }                                  # no time-slicing proof under DRA
        made = check_manifests(ints(mocks.inputs["checks-nodes-check"]), 1)
        for _check, job in made:
            pod = job["spec"]["template"]["spec"]
            assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == \
                job["metadata"]["name"]

    return settled(checks).apply(verify)
