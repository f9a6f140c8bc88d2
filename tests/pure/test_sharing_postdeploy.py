"""The post-deploy checks and the doctor on pools that share GPUs their own way (issue #47,
item 4): what each node must advertise per resource name, the probe Job asking for the
resource its pool advertises and saying whether it ran on a MIG instance or under MPS, and
a node MIG Manager is still reconfiguring reported as that, not as a broken GPU.

The checks against a real kubelet's allocatable: tests/engine/test_device_plugin_node.py."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from support import checkdata as cd
from support.doctor_support import DATA
from test_checks_live import failed, node_props, provider

from gpuplane.checks.manifests import job_manifest, plan_checks
from gpuplane.checks.provider import AllocatableCheckProvider
from gpuplane.checks.settings import ChecksSettings
from gpuplane.checks.verdicts import (
    AllocatableSeries,
    allocatable_findings,
    job_findings,
    parse_probe_report,
    pod_run,
    report_summary,
)
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.doctor import analyse, load
from gpuplane.rules.advertised import expected_resources, mig_manager_state

MIG_1G, MIG_3G = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"
MIXED = NodeIntent("gpu-h1", 8, pool="mig", resources=((MIG_1G, 14), (MIG_3G, 2)))
MIG_INTENT = ClusterIntent(nodes=(MIXED,))
PAUSED_LABELS = {"nvidia.com/mig.config": "all-1g.10gb",
                 "nvidia.com/mig.config.state": "pending",
                 "nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change",
                 "nvidia.com/gpu.deploy.gpu-feature-discovery": "paused-for-mig-change"}


def mig_node(name: str, counts: dict[str, int], labels: dict[str, str] | None = None
             ) -> dict[str, Any]:
    """A Node object as the API shows it, advertising `counts`."""
    node = cd.node(name, None)
    node["status"]["allocatable"].update({r: str(c) for r, c in counts.items()})
    node["metadata"]["labels"].update(labels or {})
    return node


# ------------------------------------------------------------------ expected per resource


def test_expected_resources_per_node_and_resource_name() -> None:
    assert expected_resources(MIXED, MIG_INTENT) == {MIG_1G: 14, MIG_3G: 2}
    plain = NodeIntent("gpu-a1", 2)
    assert expected_resources(plain, ClusterIntent()) == {"nvidia.com/gpu": 2}
    assert expected_resources(plain, ClusterIntent(time_slicing_replicas=4)) == {
        "nvidia.com/gpu": 8}
    assert expected_resources(plain, ClusterIntent(time_slicing_replicas=4,
                                                   time_slicing_rename=True)) == {
        "nvidia.com/gpu.shared": 8}
    assert expected_resources(plain, ClusterIntent(device_plugin="hami")) == {
        "nvidia.com/gpu": 20}
    assert expected_resources(plain, ClusterIntent(device_plugin="hami"), 4) == {
        "nvidia.com/gpu": 8}


def test_mig_manager_state_from_labels() -> None:
    assert mig_manager_state({"nvidia.com/gpu.present": "true"}) is None
    state = mig_manager_state(PAUSED_LABELS)
    assert state is not None and state.reconfiguring and state.plugin_paused
    assert state.paused == ("nvidia.com/gpu.deploy.device-plugin",
                            "nvidia.com/gpu.deploy.gpu-feature-discovery")
    done = mig_manager_state({"nvidia.com/mig.config.state": "success"})
    assert done is not None and not done.reconfiguring and not done.failed


# ------------------------------------------------------------------ the allocatable check


def test_fm10_allocatable_check_passes_when_every_mig_count_matches() -> None:
    fake = cd.FakeKube(nodes={"gpu-h1": [mig_node("gpu-h1", {MIG_1G: 14, MIG_3G: 2})]})
    out = provider(AllocatableCheckProvider, fake, cd.FakeClock()).create(
        node_props(MIG_INTENT))
    assert out.outs["passed"] is True, out.outs
    assert out.outs["result"]["allocatable"] == {"gpu-h1": {MIG_1G: 14, MIG_3G: 2}}


def test_fm10_allocatable_check_names_node_resource_expected_and_got() -> None:
    fake = cd.FakeKube(nodes={"gpu-h1": [mig_node("gpu-h1", {MIG_1G: 14, MIG_3G: 1})]})
    text, ids = failed(provider(AllocatableCheckProvider, fake, cd.FakeClock()).create(
        node_props(MIG_INTENT)))
    assert ids == ["FM10"], text
    assert f"node gpu-h1 (pool mig): {MIG_3G} is 1, expected 2 MIG instances" in text
    assert MIG_1G + " is" not in text           # the count that matches is not blamed
    # A node advertising whole GPUs where the pool wants MIG instances: each one named.
    whole = cd.FakeKube(nodes={"gpu-h1": [cd.node("gpu-h1", 8)]})
    text, ids = failed(provider(AllocatableCheckProvider, whole, cd.FakeClock()).create(
        node_props(MIG_INTENT)))
    assert ids == ["FM10", "FM10"], text
    assert f"{MIG_1G} is none, expected 14" in text and f"{MIG_3G} is none, expected 2" in text


def test_fm10_a_node_mig_manager_is_reconfiguring_is_reported_as_that() -> None:
    fake = cd.FakeKube(nodes={"gpu-h1": [mig_node("gpu-h1", {}, PAUSED_LABELS)]})
    text, ids = failed(provider(AllocatableCheckProvider, fake, cd.FakeClock()).create(
        node_props(MIG_INTENT)))
    assert ids == ["FM10"], text                # one finding for the node, not per resource
    assert "node gpu-h1 is still being reconfigured by MIG Manager" in text
    assert "nvidia.com/mig.config.state=pending" in text and "not a broken GPU" in text
    assert "NVIDIA/gpu-operator#2833" in text   # pending with the plugin paused
    assert "advertises no" not in text


def test_fm10_mig_manager_failed_names_its_state_not_the_gpu() -> None:
    labels = {"nvidia.com/mig.config": "all-3g.40gb", "nvidia.com/mig.config.state": "failed"}
    series = AllocatableSeries(MIXED, (None, None), True, MIG_1G, labels)
    (finding,) = allocatable_findings(series, MIG_INTENT)
    assert finding.id == "FM10"
    assert "MIG Manager failed to apply its MIG layout" in finding.message
    assert "nvidia.com/mig.config=all-3g.40gb" in finding.message
    assert "nvidia-mig-manager" in finding.fix
    # Settled counts pass even while the labels say `pending` (the last read is final).
    ok = AllocatableSeries(MIXED, (14,), True, MIG_1G, PAUSED_LABELS)
    assert allocatable_findings(ok, MIG_INTENT) == []


# ------------------------------------------------------------------ the probe Job


def test_the_probe_job_asks_for_the_resource_its_pool_advertises() -> None:
    settings = ChecksSettings()
    intent = ClusterIntent(nodes=(MIXED, NodeIntent("gpu-a1", 1)))
    mig_job, whole_job = plan_checks(intent, settings)
    assert (mig_job.resource, whole_job.resource) == (MIG_1G, "")
    limits = job_manifest(mig_job, intent, settings, namespace="gpu-operator",
                          configmap="probe")["spec"]["template"]["spec"]["containers"][0][
        "resources"]["limits"]
    assert limits == {"memory": "1Gi", MIG_1G: "1"}
    whole = job_manifest(whole_job, intent, settings, namespace="gpu-operator",
                         configmap="probe")["spec"]["template"]["spec"]["containers"][0]
    assert whole["resources"]["limits"] == {"memory": "1Gi", "nvidia.com/gpu": "1"}


def _mig_device() -> dict[str, Any]:
    device = cd.device(uuid="MIG-0f6d1c2e-1a2b-4c3d-9e8f-0123456789ab", memory_mib=9728,
                       name="NVIDIA H100 80GB HBM3 MIG 1g.10gb")
    device.update(mig=True, parent_uuid=cd.UUID_A)
    return device


def test_the_probe_reports_a_mig_instance_mps_or_a_whole_gpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert report_summary(parse_probe_report(cd.probe_log([_mig_device()])))["sharing"] == "mig"
    assert report_summary(parse_probe_report(cd.probe_log()))["sharing"] == "gpu"
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", "/mps/nvidia.com/gpu/pipe")
    mps = report_summary(parse_probe_report(cd.probe_log()))
    assert (mps["sharing"], mps["mpsPipeDirectory"]) == ("mps", "/mps/nvidia.com/gpu/pipe")


def test_fm10_a_pod_that_asked_for_a_mig_instance_and_got_a_whole_gpu() -> None:
    job = plan_checks(MIG_INTENT, ChecksSettings())[0]
    whole = pod_run(cd.pod("p1", exit_code=0), cd.probe_log())
    (finding,) = job_findings(job, [whole], MIG_INTENT)
    assert finding.id == "FM10"
    assert f"asked for one {MIG_1G} but ran on a whole GPU ({cd.UUID_A})" in finding.message
    on_mig = pod_run(cd.pod("p1", exit_code=0), cd.probe_log([_mig_device()]))
    assert job_findings(job, [on_mig], MIG_INTENT) == []


# ------------------------------------------------------------------ the doctor


def _snapshot(node_intent: NodeIntent, allocatable: dict[str, str],
              labels: dict[str, str]) -> Any:
    """The recorded healthy cluster with its one GPU node as the stack now describes it
    (its gpuplane-intent record), advertising `allocatable` under `labels`."""
    snap = load(DATA / "healthy")
    snap.inspections = {}
    for cm in snap.configmaps:
        if cm["metadata"]["name"] == "gpuplane-intent":
            data = json.loads(cm["data"]["intent.json"])
            data["nodes"] = [{"name": "gpu-d1", "gpus": node_intent.gpus,
                              "pool": node_intent.pool,
                              "resources": [list(r) for r in node_intent.resources]}]
            cm["data"]["intent.json"] = json.dumps(data)
    node = snap.nodes[0]
    node["status"]["allocatable"] = {k: v for k, v in node["status"]["allocatable"].items()
                                     if not k.startswith("nvidia.com/")} | allocatable
    node["metadata"]["labels"].update(labels)
    return snap


POOL = NodeIntent("gpu-d1", 1, pool="mig", resources=((MIG_1G, 7),))


def test_fm10_doctor_a_mig_pool_advertising_its_instances_is_healthy() -> None:
    report = analyse(_snapshot(POOL, {MIG_1G: "7"}, {"nvidia.com/mig.config.state": "success"}))
    assert not [d for d in report.diagnoses if d.finding.id == "FM10"], report.diagnoses


def test_fm10_doctor_names_a_short_mig_count() -> None:
    report = analyse(_snapshot(POOL, {MIG_1G: "3"}, {}))
    (fm10,) = [d for d in report.diagnoses if d.finding.id == "FM10"]
    assert fm10.finding.severity == "error"
    assert f"node gpu-d1 (pool mig) advertises 3 {MIG_1G}, the stack expects 7" in \
        fm10.finding.message


def test_fm10_doctor_mig_manager_failed_and_the_paused_wedge() -> None:
    failed_labels = {"nvidia.com/mig.config": "all-1g.10gb",
                     "nvidia.com/mig.config.state": "failed"}
    (fm10,) = [d for d in analyse(_snapshot(POOL, {}, failed_labels)).diagnoses
               if d.finding.id == "FM10"]
    assert fm10.finding.severity == "error"
    assert re.search(r"MIG Manager failed to apply MIG layout 'all-1g.10gb' on node gpu-d1",
                     fm10.finding.message)
    assert "not known to be broken" in fm10.finding.message
    wedge = analyse(_snapshot(POOL, {"nvidia.com/gpu": "0"}, copy.deepcopy(PAUSED_LABELS)))
    (fm10,) = [d for d in wedge.diagnoses if d.finding.id == "FM10"]
    assert fm10.finding.severity == "warning"
    assert "being reconfigured by MIG Manager" in fm10.finding.message
    assert "nvidia.com/mig.config.state=pending" in fm10.finding.message
    assert "NVIDIA/gpu-operator#2833" in fm10.finding.message
    assert "nvidia.com/gpu.deploy.device-plugin=paused-for-mig-change" in \
        fm10.evidence[0].detail
    # A node the stack does not share with MIG is judged by its labels all the same.
    plain = analyse(_snapshot(NodeIntent("gpu-d1", 1), {"nvidia.com/gpu": "0"}, failed_labels))
    assert [d.finding.id for d in plain.diagnoses if d.finding.id == "FM10"] == ["FM10"]
