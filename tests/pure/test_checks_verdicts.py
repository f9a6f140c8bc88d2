"""Verdicts on recorded API objects and logs: each check passes on a healthy recording and
fails on a broken one with the rulebook's id and a fix naming a stack key."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import checkdata as cd

from gpuplane.checks.manifests import CheckJob
from gpuplane.checks.verdicts import (
    AllocatableSeries,
    allocatable_findings,
    allocatable_of,
    classify,
    event_texts,
    expected_allocatable,
    job_findings,
    overlap,
    overlap_impossible,
    parse_probe_report,
    pod_run,
    render_failure,
    report_summary,
    sharing_summary,
    timeslicing_findings,
)
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.rules.catalogue import RULES

NODE_JOB = CheckJob("probe-gpu-a1", "node", "gpu-a1", 8, 1, "probe", None, 0)
HAMI_JOB = CheckJob("probe-gpu-a1", "node", "gpu-a1", 1, 1, "probe", 1024, 0)
VECTORADD_JOB = CheckJob("probe-gpu-a1", "node", "gpu-a1", 8, 1, "vectoradd", None, 0)
OPERATOR = ClusterIntent(nodes=(NodeIntent("gpu-a1", 8),))
DEFAULT_NVIDIA = ClusterIntent(nodes=(NodeIntent("gpu-a1", 8),), nvidia_default=True)
HAMI = ClusterIntent(nodes=(NodeIntent("gpu-a1", 1),), device_plugin="hami")


def only(findings: list) -> object:
    assert len(findings) == 1, findings
    f = findings[0]
    assert f.id in RULES and f.severity == "error"
    assert "gpuplane" in f.fix or "`" in f.fix
    return f


# --------------------------------------------------------------------------- parsing


def test_probe_report_is_found_among_stderr_lines() -> None:
    log = cd.probe_log()
    assert log.splitlines()[0].startswith("cuda-probe:")   # stderr summary first
    report = parse_probe_report(log)
    assert report["ok"] is True and report["devices"][0]["uuid"] == cd.UUID_A
    assert parse_probe_report("Test PASSED\n{not json\n{\"probe\": \"other\"}\n") is None


def test_pod_run_reads_state_times_and_scheduling() -> None:
    run = pod_run(cd.pod("p1", exit_code=0), "log",
                  [cd.event("p1", "Pulled", "image pulled", at="2026-01-10T12:00:01Z"),
                   cd.event("p1", "Scheduled", "assigned", at="2026-01-10T12:00:00Z")])
    assert (run.phase, run.exit_code, run.node, run.finished) == ("Succeeded", 0, "gpu-a1", True)
    assert run.finished_at > run.started_at
    assert run.events == ("Scheduled: assigned", "Pulled: image pulled")
    pending = pod_run(cd.pod("p2", phase="Pending", unschedulable="0/3 nodes are available"))
    assert pending.unschedulable == "0/3 nodes are available" and not pending.finished
    assert pending.node is None and pending.started_at is None


# --------------------------------------------------------------------------- node checks


def test_passing_probe_passes() -> None:
    run = pod_run(cd.pod("p"), cd.probe_log())
    assert job_findings(NODE_JOB, [run], OPERATOR) == []
    summary = report_summary(parse_probe_report(run.log))
    assert summary["driver"] == "12.4" and summary["gpus"][0]["uuid"] == cd.UUID_A


def test_real_no_driver_output_is_fm01_with_runtime_class() -> None:
    code, log = cd.real_no_driver_log()
    assert code == 2 and "Test FAILED" in log
    run = pod_run(cd.pod("p", phase="Failed", exit_code=2), log)
    f = only(job_findings(NODE_JOB, [run], OPERATOR))
    assert f.id == "FM01"
    assert "found no GPU in its pod, no NVIDIA driver (no_driver)" in f.message
    assert "not found" in f.message
    assert "gpuplane:cluster.distro" in f.fix and "gpuplane containerd check" in f.fix
    assert "node gpu-a1" in f.where and "pod p" in f.where


def test_no_device_without_runtime_class_is_fm11() -> None:
    log = cd.probe_log(devices=[], failures=[("no_device", "no CUDA device: cuInit returned "
                                              "CUDA_ERROR_NO_DEVICE")])
    run = pod_run(cd.pod("p", phase="Failed", exit_code=2), log)
    f = only(job_findings(NODE_JOB, [run], DEFAULT_NVIDIA))
    assert f.id == "FM11" and "gpuplane:runtime.nvidiaDefault: false" in f.fix


@pytest.mark.parametrize(("error", "rule", "key"), [
    ("cuInit failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)", "FM08",
     "gpuplane:gpuOperator.driver"),
    ("device 0: cuModuleLoadDataEx failed: CUDA_ERROR_JIT_COMPILER_NOT_FOUND (221)", "FM01",
     "gpuplane:cluster.distro"),
    ("device 0: cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (218)", "FM08",
     "gpuplane:gpuOperator.driver"),
])
def test_fm08_cuda_failures_name_the_error(error: str, rule: str, key: str) -> None:
    log = cd.probe_log(devices=[cd.device(ok=False)], failures=[("cuda", error)])
    run = pod_run(cd.pod("p", phase="Failed", exit_code=1), log)
    f = only(job_findings(NODE_JOB, [run], OPERATOR))
    name = error.split(": ")[-1].split(" ")[0]
    assert f.id == rule and name in f.message and key in f.fix


def test_wrong_kernel_result_fails() -> None:
    log = cd.probe_log(devices=[cd.device(ok=False)], failures=[(
        "wrong_result", "device 0: wrong result: 1 of 1048576 elements differ; first bad "
        "index 7")])
    f = only(job_findings(NODE_JOB, [pod_run(cd.pod("p", phase="Failed", exit_code=1), log)],
                          OPERATOR))
    assert f.id == "FM08" and "first bad index 7" in f.message


def test_image_without_python() -> None:
    run = pod_run(cd.pod("p", phase="Failed", exit_code=127),
                  "/bin/sh: 1: python3: not found\n")
    f = only(job_findings(NODE_JOB, [run], OPERATOR))
    assert "gpuplane:checks.image" in f.fix and "no report" in f.message


@pytest.mark.parametrize(("texts", "intent", "rule", "key"), [
    (["FailedCreatePodSandBox: Failed to create pod sandbox: rpc error: code = Unknown desc "
      '= failed to get sandbox runtime: no runtime for "nvidia" is configured'],
     OPERATOR, "FM01", "gpuplane:cluster.distro"),
    (['FailedCreate: Error creating: pods "x" is forbidden: pod rejected: RuntimeClass '
      '"nvidia" not found'], OPERATOR, "FM11", "gpuplane:runtime.createRuntimeClass"),
    (["0/3 nodes are available: 1 Insufficient nvidia.com/gpumem. preemption: 0/3 nodes are "
      "available"], HAMI, "FM13", "gpuplane:hami.webhookFailurePolicy"),
    (["0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's "
      "node affinity/selector."], OPERATOR, "FM01", "gpuplane containerd check"),
    (["0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."],
     OPERATOR, "FM01", "gpuplane:nodes[].name"),
    (["Failed: Error: failed to create containerd task: unresolvable CDI devices "
      "nvidia.com/gpu=GPU-1"], HAMI, "FM13", "gpuplane:gpuOperator.cdi: false"),
    (["Failed: unresolvable CDI devices nvidia.com/gpu=0"],
     ClusterIntent(containerd_version="1.6"), "FM16", "gpuplane:gpuOperator.cdi: false"),
    (["BackOff: Back-off pulling image", "Failed: ErrImagePull"], OPERATOR, "FM01",
     "gpuplane:checks.image"),
    (["nvidia-container-cli: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.27' "
      "not found"], OPERATOR, "FM15", "gpuplane:nodes[].os"),
])
def test_fm16_symptoms_map_to_rules(texts: list[str], intent: ClusterIntent, rule: str,
                               key: str) -> None:
    found = classify(texts, intent, "gpu-a1")
    assert found is not None
    assert found[0] == rule and key in found[1]


def test_unknown_symptom_is_not_guessed() -> None:
    assert classify(["Scheduled: assigned"], OPERATOR, "gpu-a1") is None


def test_pending_pod_reports_scheduler_message() -> None:
    msg = "0/3 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: not helpful"
    run = pod_run(cd.pod("p", phase="Pending", unschedulable=msg))
    f = only(job_findings(NODE_JOB, [run], OPERATOR))
    assert f.id == "FM01" and "never finished" in f.message and msg in f.message


def test_container_creating_with_sandbox_error() -> None:
    p = cd.pod("p", phase="Pending", waiting="ContainerCreating")
    ev = [cd.event("p", "FailedCreatePodSandBox", 'failed to get sandbox runtime: no runtime '
                   'for "nvidia" is configured')]
    f = only(job_findings(NODE_JOB, [pod_run(p, "", ev)], OPERATOR))
    assert f.id == "FM01" and "ContainerCreating" in f.message


def test_job_without_pods_uses_job_events() -> None:
    events = event_texts([cd.event("job-x", "FailedCreate", 'Error creating: pod rejected: '
                                   'RuntimeClass "nvidia" not found', kind="Job")])
    f = only(job_findings(NODE_JOB, [], OPERATOR, events))
    assert f.id == "FM11" and "created no pod" in f.message


def test_vectoradd_sample() -> None:
    ok = pod_run(cd.pod("p"), "[Vector addition of 50000 elements]\nCopy input data from "
                 "the host memory to the CUDA device\nTest PASSED\nDone\n")
    assert job_findings(VECTORADD_JOB, [ok], OPERATOR) == []
    bad = pod_run(cd.pod("p", phase="Failed", exit_code=1),
                  "[Vector addition of 50000 elements]\nFailed to allocate device vector A "
                  "(error code no CUDA-capable device is detected)!\n")
    f = only(job_findings(VECTORADD_JOB, [bad], OPERATOR))
    assert f.id == "FM01" and "no CUDA-capable device" in f.message
    old = pod_run(cd.pod("p", phase="Failed", exit_code=1),
                  "Failed to allocate device vector A (error code CUDA driver version is "
                  "insufficient for CUDA runtime version)!\n")
    assert only(job_findings(VECTORADD_JOB, [old], OPERATOR)).id == "FM08"


# --------------------------------------------------------------------------- HAMi proof


def test_hami_memory_within_the_request_passes() -> None:
    log = cd.probe_log(devices=[cd.device(memory_mib=1024)], max_memory_mib=1024)
    run = pod_run(cd.pod("p", scheduler="hami-scheduler"), log)
    assert job_findings(HAMI_JOB, [run], HAMI) == []


def test_hami_memory_not_enforced_is_fm14() -> None:
    # The probe itself fails with memory_limit when it sees a whole card.
    log = cd.probe_log(devices=[cd.device(memory_mib=81559)], max_memory_mib=1024,
                       failures=[("memory_limit", "device 0: cuDeviceTotalMem_v2 reports "
                                  "81559 MiB total, above --max-memory-mib 1024")])
    run = pod_run(cd.pod("p", phase="Failed", exit_code=1, scheduler="hami-scheduler"), log)
    f = only(job_findings(HAMI_JOB, [run], HAMI))
    assert f.id == "FM14" and "81559 MiB" in f.message and "gpumem 1024" in f.message
    assert "gpuplane:hami.deviceMemoryScaling" in f.fix


def test_hami_memory_checked_even_if_the_probe_passed() -> None:
    # An old probe without --max-memory-mib passes; the verdict still compares.
    log = cd.probe_log(devices=[cd.device(memory_mib=4096)])
    run = pod_run(cd.pod("p", scheduler="hami-scheduler"), log)
    assert only(job_findings(HAMI_JOB, [run], HAMI)).id == "FM14"


def test_hami_pod_on_the_default_scheduler_is_fm13() -> None:
    log = cd.probe_log(devices=[cd.device(memory_mib=1024)], max_memory_mib=1024)
    run = pod_run(cd.pod("p", scheduler="default-scheduler"), log)
    f = only(job_findings(HAMI_JOB, [run], HAMI))
    assert f.id == "FM13" and "gpuplane:hami.webhookFailurePolicy: Fail" in f.fix


def test_hami_slice_too_small() -> None:
    log = cd.probe_log(devices=[cd.device(memory_mib=64, ok=False)], max_memory_mib=64,
                       failures=[("cuda", "device 0: cuMemAlloc_v2 failed: "
                                  "CUDA_ERROR_OUT_OF_MEMORY (2)")])
    run = pod_run(cd.pod("p", phase="Failed", exit_code=1, scheduler="hami-scheduler"), log)
    f = only(job_findings(replace(HAMI_JOB, max_memory_mib=64), [run], HAMI))
    assert f.id == "FM14" and "gpuplane:checks.hamiGpuMem" in f.fix


# --------------------------------------------------------------------------- time-slicing

TS = ClusterIntent(nodes=(NodeIntent("gpu-a1", 1),), time_slicing_replicas=4)
TS_JOB = CheckJob("timeslicing", "timeslicing", "gpu-a1", 1, 4, "probe", None, 30)


def ts_runs(starts: list[int], ends: list[int], uuids: list[str]) -> list:
    return [pod_run(cd.pod(f"ts-{i}", started=f"2026-01-10T12:00:{s:02d}Z",
                           finished=f"2026-01-10T12:00:{e:02d}Z"),
                    cd.probe_log(devices=[cd.device(uuid=u)]))
            for i, (s, e, u) in enumerate(zip(starts, ends, uuids, strict=True))]


def test_timeslicing_overlap_and_same_gpu_passes() -> None:
    runs = ts_runs([0, 1, 3, 4], [31, 32, 34, 35], [cd.UUID_A] * 4)
    assert overlap(runs)
    assert timeslicing_findings(TS_JOB, runs, TS) == []
    assert sharing_summary(runs) == {cd.UUID_A: 4}


def test_timeslicing_sequential_pods_fail_fm10() -> None:
    runs = ts_runs([0, 31, 2, 3], [30, 59, 32, 33], [cd.UUID_A] * 4)
    assert not overlap(runs)
    f = only(timeslicing_findings(TS_JOB, runs, TS))
    assert f.id == "FM10" and "not all run at the same time" in f.message
    assert "gpuplane:timeSlicing.replicas" in f.fix


def test_timeslicing_more_gpus_than_the_stack_says() -> None:
    runs = ts_runs([0, 1, 2, 3], [31, 32, 33, 34], [cd.UUID_A, cd.UUID_B, cd.UUID_A,
                                                    cd.UUID_A])
    f = only(timeslicing_findings(TS_JOB, runs, TS))
    assert f.id == "FM10" and "2 distinct GPUs" in f.message and "gpuplane:nodes[].gpus" in f.fix


def test_timeslicing_two_gpus_eight_pods() -> None:
    job = CheckJob("timeslicing", "timeslicing", "gpu-a1", 2, 8, "probe", None, 30)
    intent = ClusterIntent(nodes=(NodeIntent("gpu-a1", 2),), time_slicing_replicas=4)
    runs = ts_runs(list(range(8)), list(range(31, 39)), [cd.UUID_A, cd.UUID_B] * 4)
    assert timeslicing_findings(job, runs, intent) == []


def test_timeslicing_pending_replicas_fail_fm10() -> None:
    runs = ts_runs([0], [31], [cd.UUID_A])
    pending = [pod_run(cd.pod(f"ts-p{i}", phase="Pending",
                              unschedulable="0/1 nodes are available: 1 Insufficient "
                              "nvidia.com/gpu.")) for i in range(3)]
    f = only(timeslicing_findings(TS_JOB, runs + pending, TS))
    assert f.id == "FM10" and "only 1 of 4" in f.message and "Insufficient" in f.message
    assert "gpuplane:timeSlicing.configMap" in f.fix


def test_timeslicing_failed_probe_is_reported() -> None:
    runs = ts_runs([0, 1, 2], [31, 32, 33], [cd.UUID_A] * 3)
    code, log = cd.real_no_driver_log()
    runs.append(pod_run(cd.pod("ts-x", phase="Failed", exit_code=code), log))
    assert only(timeslicing_findings(TS_JOB, runs, TS)).id == "FM01"


def test_overlap_impossible_detects_early() -> None:
    running = [pod_run(cd.pod("a", phase="Running"))]
    assert not overlap_impossible(running, 4)
    done_one = ts_runs([0], [30], [cd.UUID_A])
    assert overlap_impossible(done_one, 4)           # one ended, three never started
    assert not overlap_impossible(ts_runs([0, 1], [30, 31], [cd.UUID_A] * 2), 2)
    assert overlap_impossible(ts_runs([0, 30], [30, 59], [cd.UUID_A] * 2), 2)


# --------------------------------------------------------------------------- allocatable


def test_allocatable_parsing() -> None:
    assert allocatable_of(cd.node("a", 4)) == 4
    assert allocatable_of(cd.node("a", None)) is None
    assert allocatable_of(None) is None


def test_expected_allocatable() -> None:
    assert expected_allocatable(8, OPERATOR) == 8
    assert expected_allocatable(2, ClusterIntent(time_slicing_replicas=4)) == 8
    assert expected_allocatable(2, ClusterIntent(time_slicing_replicas=1)) == 2
    assert expected_allocatable(2, ClusterIntent(device_plugin="hami")) == 20
    assert expected_allocatable(2, ClusterIntent(device_plugin="hami"), hami_split=4) == 8


def series(gpus: int, *values: int | None, found: bool = True) -> AllocatableSeries:
    return AllocatableSeries(NodeIntent("gpu-a1", gpus), tuple(values), found)


def test_allocatable_multiplied_passes() -> None:
    assert allocatable_findings(series(2, 2, 8, 8, 8), ClusterIntent(time_slicing_replicas=4),
                                settle=3) == []
    assert allocatable_findings(series(8, 8), OPERATOR) == []


def test_allocatable_not_multiplied_is_fm10() -> None:
    f = only(allocatable_findings(series(2, 2, 2, 2), ClusterIntent(time_slicing_replicas=4),
                                  settle=3))
    assert f.id == "FM10" and "physical count" in f.message and "2 -> 2 -> 2" in f.message
    assert "gpuplane:timeSlicing.configMap" in f.fix


def test_allocatable_not_settled_yet_fails() -> None:
    f = only(allocatable_findings(series(2, 2, 8), ClusterIntent(time_slicing_replicas=4),
                                  settle=3))
    assert f.id == "FM10"


def test_hami_flip_back_to_physical_is_fm12() -> None:
    f = only(allocatable_findings(series(1, 10, 10, 1, 10), HAMI, settle=3))
    assert f.id == "FM12" and "flips back" in f.message
    assert "gpuplane:gpuOperator.values" in f.fix
    f = only(allocatable_findings(series(1, 1, 1, 1), HAMI, settle=3))
    assert f.id == "FM12"


def test_hami_wrong_split_is_fm13() -> None:
    f = only(allocatable_findings(series(1, 5, 5, 5), HAMI, settle=3))
    assert f.id == "FM13" and "gpuplane:hami.deviceSplitCount" in f.fix
    assert allocatable_findings(series(1, 5, 5, 5), HAMI, settle=3, hami_split=5) == []


def test_allocatable_missing_resource_or_node() -> None:
    f = only(allocatable_findings(series(8, None, None), OPERATOR))
    assert f.id == "FM01" and "advertises no nvidia.com/gpu" in f.message
    f = only(allocatable_findings(series(1, None, found=False), HAMI))
    assert f.id == "FM13" and "gpuplane:nodes[].name" in f.fix


def test_fm08_allocatable_wrong_physical_count() -> None:
    f = only(allocatable_findings(series(8, 7), OPERATOR))
    assert f.id == "FM08" and "gpuplane:nodes[].gpus" in f.fix


# --------------------------------------------------------------------------- rendering


def test_render_failure_shows_findings_fix_and_pod_output() -> None:
    code, log = cd.real_no_driver_log()
    run = pod_run(cd.pod("p", phase="Failed", exit_code=code), log)
    findings = job_findings(NODE_JOB, [run], OPERATOR)
    text = render_failure("node check", findings, [run])
    assert text.startswith("gpuplane check failed: node check")
    assert "[FM01]" in text and "fix: " in text
    assert "--- pod p on gpu-a1 (Failed, exit 2)" in text
    assert "Test FAILED" in text
