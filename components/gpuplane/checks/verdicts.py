"""Verdicts of the post-deploy GPU checks: pure decisions on recorded API objects and logs.

Everything here takes what the Kubernetes API returned (objects as JSON dicts, camelCase,
as `kubectl get -o json` prints them) and pod logs, and returns findings with the
rulebook's ids and fixes that name stack keys. No I/O, so every decision is tested on
recorded objects; components/gpuplane/checks/live.py fetches the objects and calls these.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpuplane.checks.allocatable import (
    HAMI_DEFAULT_SPLIT,
    AllocatableSeries,
    allocatable_findings,
    allocatable_of,
    allocatable_settled,
    expected_allocatable,
    expected_resources,
)
from gpuplane.checks.causes import classify, gpu_path_id, no_gpu_fix
from gpuplane.checks.manifests import CONTAINER, CheckJob
from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.probe.cuda_probe import PROBE_NAME
from gpuplane.rules.advertised import MPS_PIPE_ENV, is_mig_resource

HAMI_SCHEDULER = "hami-scheduler"
LOG_TAIL_LINES = 40
_CUDA_ERROR = re.compile(r"CUDA_ERROR_[A-Z0-9_]+")
_E = Severity.ERROR
_DRIVER_ERRORS = frozenset({
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    "CUDA_ERROR_INSUFFICIENT_DRIVER",
})
_INJECTION_ERRORS = frozenset({"CUDA_ERROR_JIT_COMPILER_NOT_FOUND"})


# --------------------------------------------------------------------------- recorded pods


@dataclass(frozen=True)
class PodRun:
    """What one check pod did, read from its API object, its events and its log."""

    name: str
    node: str | None
    phase: str
    scheduler: str | None = None
    exit_code: int | None = None
    reason: str | None = None            # container waiting/terminated reason
    message: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    unschedulable: str | None = None     # PodScheduled=False message
    events: tuple[str, ...] = ()
    log: str = ""

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def symptoms(self) -> list[str]:
        """Every text that can explain why the pod did not run."""
        texts = [self.unschedulable, self.reason, self.message, *self.events]
        return [t for t in texts if t]


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _event_time(event: dict[str, Any]) -> tuple[int, datetime]:
    """When an event last happened, however the time is written (the API's `...Z`, the
    client's `+00:00`, with microseconds or without: one LIST's JSON or one GET's client
    objects give the same order); undated ones first."""
    text = event.get("lastTimestamp") or event.get("eventTime")
    try:
        when = datetime.fromisoformat(text) if text else None
    except ValueError:
        when = None
    if when is None:
        return (0, datetime.min.replace(tzinfo=UTC))
    return (1, when if when.tzinfo else when.replace(tzinfo=UTC))


def event_texts(events: Iterable[dict[str, Any]]) -> tuple[str, ...]:
    """`Reason: message` of events, oldest first, duplicates once."""
    ordered = sorted(events, key=_event_time)
    texts = [f"{e.get('reason', '')}: {e.get('message', '')}".strip(": ") for e in ordered]
    return tuple(dict.fromkeys(t for t in texts if t))


def pod_run(pod: dict[str, Any], log: str = "",
            events: Iterable[dict[str, Any]] = ()) -> PodRun:
    """A PodRun from a Pod object (camelCase dict), its log and its events."""
    meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status", {})
    containers = status.get("containerStatuses") or []
    mine = next((c for c in containers if c.get("name") == CONTAINER),
                containers[0] if containers else {})
    state = mine.get("state") or {}
    terminated, running, waiting = (state.get(k) or {} for k in
                                    ("terminated", "running", "waiting"))
    unschedulable = next((c.get("message") or c.get("reason")
                          for c in status.get("conditions") or []
                          if c.get("type") == "PodScheduled" and c.get("status") == "False"),
                         None)
    return PodRun(
        name=meta.get("name", "?"),
        node=spec.get("nodeName"),
        phase=status.get("phase", "Unknown"),
        scheduler=spec.get("schedulerName"),
        exit_code=terminated.get("exitCode"),
        reason=terminated.get("reason") or waiting.get("reason"),
        message=terminated.get("message") or waiting.get("message"),
        started_at=_time(terminated.get("startedAt") or running.get("startedAt")),
        finished_at=_time(terminated.get("finishedAt")),
        unschedulable=unschedulable,
        events=event_texts(events),
        log=log,
    )


def parse_probe_report(log: str) -> dict[str, Any] | None:
    """The probe's JSON report in a pod log (the last one, if several), else None."""
    found = None
    for line in log.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("probe") == PROBE_NAME:
            found = data
    return found


def log_tail(log: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(log.rstrip("\n").splitlines()[-lines:])


# --------------------------------------------------------------------------- per-pod verdicts


def _where(job: CheckJob, run: PodRun | None = None) -> str:
    pod = f", pod {run.name}" if run else ""
    return f"node {job.node} (check {job.key}{pod})"


def _finding(rule: str, message: str, where: str, fix: str) -> Finding:
    return Finding(rule, _E, message, where, fix)


def _cuda_errors(report: dict[str, Any]) -> list[str]:
    texts = [f.get("message", "") for f in report.get("failures") or []]
    return list(dict.fromkeys(m for t in texts for m in _CUDA_ERROR.findall(t)))


def probe_findings(job: CheckJob, run: PodRun, report: dict[str, Any],
                   intent: ClusterIntent) -> list[Finding]:
    """Findings from one probe report (empty when it passed and, under HAMi, stayed
    within its memory)."""
    where, node = _where(job, run), job.node
    kinds = {f.get("kind") for f in report.get("failures") or []}
    error = report.get("error") or "no error message"
    if report.get("status") in ("no_driver", "no_device"):
        what = "no NVIDIA driver" if report["status"] == "no_driver" else "no NVIDIA GPU"
        return [_finding(gpu_path_id(intent),
                         f"node {node}: the CUDA probe found no GPU in its pod, {what} "
                         f"({report['status']}): {error}", where, no_gpu_fix(intent, node))]
    out: list[Finding] = []
    if job.max_memory_mib is not None:
        out += hami_memory_findings(job, run, report)
    if report.get("ok") and report.get("exit_code") == 0:
        return out
    names = _cuda_errors(report)
    named = f" ({', '.join(names)})" if names else ""
    message = f"node {node}: the CUDA probe failed{named}: {error}"
    if "memory_limit" in kinds and out:
        return out                     # already told as the HAMi memory finding
    if set(names) & _DRIVER_ERRORS:
        fix = ("the CUDA library in the pod does not match the node's kernel driver: with a "
               "driver on the host set `gpuplane:gpuOperator.driver: preinstalled`; after a "
               f"driver upgrade reboot {node}")
        return [*out, _finding("FM08", message, where, fix)]
    if set(names) & _INJECTION_ERRORS or "missing_symbol" in kinds:
        return [*out, _finding("FM01", message, where, no_gpu_fix(intent, node))]
    if intent.device_plugin == "hami" and "CUDA_ERROR_OUT_OF_MEMORY" in names:
        fix = ("the HAMi slice is too small for the probe: raise `gpuplane:checks.hamiGpuMem` "
               "(MiB) or check `gpuplane:hami.deviceMemoryScaling`")
        return [*out, _finding("FM14", message, where, fix)]
    fix = (f"the GPU or driver on {node} is not healthy (a kernel ran wrong or a CUDA call "
           "failed): check `nvidia-smi -q` and the kernel log (Xid errors) on the node; with a "
           "host driver keep `gpuplane:gpuOperator.driver: preinstalled`")
    return [*out, _finding("FM08", message, where, fix)]


def hami_memory_findings(job: CheckJob, run: PodRun, report: dict[str, Any]) -> list[Finding]:
    """HAMi proof: no device in the pod may show more memory than the pod's gpumem."""
    limit = job.max_memory_mib
    if limit is None:
        return []
    out = []
    where = _where(job, run)
    for device in report.get("devices") or []:
        seen = max(device.get("memory_total_mib") or 0, device.get("memory_info_total_mib") or 0)
        if seen > limit:
            out.append(_finding(
                "FM14",
                f"node {job.node}: HAMi did not enforce the GPU memory limit: device "
                f"{device.get('index')} ({device.get('uuid')}) shows {seen} MiB, the pod asked "
                f"for nvidia.com/gpumem {limit}",
                where,
                "make sure HAMi's in-container control is active: the pod must be scheduled by "
                "hami-scheduler (`gpuplane:hami.webhookFailurePolicy: Fail`), must not set "
                "CUDA_DISABLE_CONTROL, and `gpuplane:hami.deviceMemoryScaling` should be 1"))
    if run.scheduler and run.scheduler != HAMI_SCHEDULER:
        out.append(_finding(
            "FM13",
            f"node {job.node}: the HAMi check pod was scheduled by {run.scheduler!r}, not "
            f"{HAMI_SCHEDULER}: HAMi's webhook did not mutate it",
            where,
            "set `gpuplane:hami.webhookFailurePolicy: Fail` and check `gpuplane:hami.namespace`"))
    return out


def vectoradd_findings(job: CheckJob, run: PodRun, intent: ClusterIntent) -> list[Finding]:
    """NVIDIA's sample passes with exit 0 and `Test PASSED` in its log."""
    if run.exit_code == 0 and "Test PASSED" in run.log:
        return []
    where, node = _where(job, run), job.node
    text = log_tail(run.log, 5).replace("\n", " | ") or "no output"
    message = f"node {node}: the CUDA vectoradd sample failed (exit {run.exit_code}): {text}"
    low = run.log.lower()
    if "no cuda-capable device" in low or "cuda driver is a stub" in low:
        return [_finding(gpu_path_id(intent), message, where, no_gpu_fix(intent, node))]
    if "driver version is insufficient" in low:
        return [_finding("FM08", message, where,
                         "the node's driver is older than CUDA 12.5 that the sample needs: "
                         "upgrade the driver, or set `gpuplane:checks.sample: probe`")]
    return [_finding(gpu_path_id(intent), message, where, no_gpu_fix(intent, node))]


def run_findings(job: CheckJob, run: PodRun, intent: ClusterIntent) -> list[Finding]:
    """One pod's verdict once it has finished (or given up waiting)."""
    where, node = _where(job, run), job.node
    if not run.finished:
        known = classify(run.symptoms(), intent, node)
        state = run.reason or run.phase
        detail = "; ".join(run.symptoms()) or "no events"
        rule, fix = known or (gpu_path_id(intent), no_gpu_fix(intent, node))
        return [_finding(rule, f"node {node}: check pod never finished ({state}): {detail}",
                         where, fix)]
    if job.sample == "vectoradd":
        return vectoradd_findings(job, run, intent)
    report = parse_probe_report(run.log)
    if report is None:
        known = classify([*run.symptoms(), run.log], intent, node)
        if run.exit_code == 127 or "python3: not found" in run.log:
            known = (gpu_path_id(intent), "the check image has no python3: set "
                     "`gpuplane:checks.image` to one that has (e.g. python:3.12-slim)")
        rule, fix = known or (gpu_path_id(intent), no_gpu_fix(intent, node))
        return [_finding(rule, f"node {node}: the probe printed no report (exit "
                         f"{run.exit_code}, {run.reason or run.phase})", where, fix)]
    return probe_findings(job, run, report, intent)


def job_findings(job: CheckJob, runs: Sequence[PodRun], intent: ClusterIntent,
                 job_events: Sequence[str] = ()) -> list[Finding]:
    """Verdict of a node or HAMi check Job from its pods (and the Job's own events)."""
    if not runs:
        known = classify(list(job_events), intent, job.node)
        detail = "; ".join(job_events) or "no events on the Job"
        rule, fix = known or (gpu_path_id(intent), no_gpu_fix(intent, job.node))
        return [_finding(rule, f"node {job.node}: the check Job created no pod: {detail}",
                         _where(job), fix)]
    out: list[Finding] = []
    for run in runs:
        out += run_findings(job, run, intent)
    if not out:
        out += mig_findings(job, runs)
    return list(dict.fromkeys(out))


def mig_findings(job: CheckJob, runs: Sequence[PodRun]) -> list[Finding]:
    """FM10: a pod that asked for a MIG instance (`nvidia.com/mig-<profile>`) and whose
    probe passed on a whole GPU: the pool's MIG layout is not what the device plugin
    hands out (the probe tells a MIG instance by its `MIG-` UUID)."""
    if not is_mig_resource(job.resource):
        return []
    out = []
    for run in runs:
        report = parse_probe_report(run.log) or {}
        devices = report.get("devices") or []
        if report.get("ok") and devices and not any(d.get("mig") for d in devices):
            out.append(_finding(
                "FM10", f"node {job.node}: the pod asked for one {job.resource} but ran on a "
                f"whole GPU ({', '.join(uuids(report)) or 'no UUID'}), not a MIG instance",
                _where(job, run),
                "the device plugin must run with MIG strategy `mixed` on the pool "
                "(`mig.strategy`, the plugin config's `flags.migStrategy`) and the GPUs must "
                "be in MIG mode with the pool's layout (`nvidia-smi -L` lists `MIG` devices)"))
    return out


# --------------------------------------------------------------------------- time-slicing


def overlap(runs: Sequence[PodRun]) -> bool:
    """True when one instant exists at which every pod was running."""
    starts = [r.started_at for r in runs if r.started_at is not None]
    ends = [r.finished_at for r in runs if r.finished_at is not None]
    if not runs or len(starts) < len(runs) or len(ends) < len(runs):
        return False
    return max(starts) < min(ends)


def overlap_impossible(runs: Sequence[PodRun], expected: int) -> bool:
    """True as soon as a pod has ended while another has not started: waiting is pointless."""
    ended = [r.finished_at for r in runs if r.finished_at is not None]
    if not ended:
        return False
    starts = [r.started_at for r in runs if r.started_at is not None]
    return len(starts) < expected or max(starts) >= min(ended)


def uuids(report: dict[str, Any]) -> list[str]:
    return [d.get("uuid") for d in report.get("devices") or [] if d.get("uuid")]


def timeslicing_findings(job: CheckJob, runs: Sequence[PodRun],
                         intent: ClusterIntent) -> list[Finding]:
    """Time-slicing proof: all GPUs x replicas pods ran at once on `job.node`, each passed
    the probe, and together they saw no more distinct GPUs than the node has."""
    where = _where(job)
    replicas = intent.time_slicing_replicas
    fix_ts = ("make the time-slicing config reach the device plugin: "
              f"`gpuplane:timeSlicing.replicas: {replicas}` under `sharing.timeSlicing` (not "
              "`flags`), the ConfigMap `gpuplane:timeSlicing.configMap` in "
              "`gpuplane:gpuOperator.namespace` with key `gpuplane:timeSlicing.profile`, and "
              "restart the device plugin after changing it")
    finished = [r for r in runs if r.finished]
    if len(finished) < job.pods:
        blockers = [t for r in runs if not r.finished for t in r.symptoms()]
        known = classify(blockers, intent, job.node)
        rule, fix = ("FM10", fix_ts) if known is None or known[0] == "FM10" else known
        detail = "; ".join(dict.fromkeys(blockers)) or "no events"
        return [_finding(rule, f"node {job.node}: only {len(finished)} of {job.pods} "
                         f"time-sliced pods ({job.gpus} GPU(s) x {replicas} replicas) ran: "
                         f"{detail}", where, fix)]
    out: list[Finding] = []
    seen: Counter[str] = Counter()
    for run in runs:
        failures = run_findings(job, run, intent)
        out += failures
        report = parse_probe_report(run.log)
        if failures or report is None:
            continue
        ids = uuids(report)
        if len(ids) != 1:
            out.append(_finding("FM10", f"node {job.node}: pod {run.name} saw {len(ids)} GPUs "
                                "while asking for one", _where(job, run),
                                "GPU pods must not see every GPU: do not run them privileged "
                                "or with NVIDIA_VISIBLE_DEVICES=all in the image"))
        seen.update(ids)
    if out:
        return list(dict.fromkeys(out))
    if not overlap(runs):
        starts = ", ".join(f"{r.name} {r.started_at:%H:%M:%S}-{r.finished_at:%H:%M:%S}"
                           for r in runs if r.started_at and r.finished_at)
        out.append(_finding("FM10", f"node {job.node}: the {job.pods} time-sliced pods did "
                            f"not all run at the same time, so the GPUs were not shared "
                            f"({starts})", where, fix_ts))
    if len(seen) > job.gpus:
        out.append(_finding("FM10", f"node {job.node}: the {job.pods} pods saw {len(seen)} "
                            f"distinct GPUs but the stack says the node has {job.gpus}; "
                            "sharing is not proven", where,
                            "set `gpuplane:nodes[].gpus` to the node's physical GPU count"))
    return out


def sharing_summary(runs: Sequence[PodRun]) -> dict[str, int]:
    """How many pods each GPU UUID carried."""
    seen: Counter[str] = Counter()
    for run in runs:
        report = parse_probe_report(run.log)
        if report:
            seen.update(uuids(report))
    return dict(sorted(seen.items()))


# --------------------------------------------------------------------------- reporting


def render_failure(title: str, findings: Sequence[Finding],
                   runs: Sequence[PodRun] = ()) -> str:
    """The text `pulumi up` shows: each finding with its fix, then the pods' output."""
    lines = [f"gpuplane check failed: {title}"]
    for f in findings:
        lines += [f"[{f.id}] {f.message}", f"    where: {f.where}", f"    fix: {f.fix}"]
    for run in runs:
        if not run.log:
            continue
        lines.append(f"--- pod {run.name} on {run.node or '?'} ({run.phase}, exit "
                     f"{run.exit_code}); last lines of its output:")
        lines.append(log_tail(run.log))
    return "\n".join(lines)


def report_summary(report: dict[str, Any] | None) -> dict[str, Any]:
    """The few facts of a passing probe worth keeping as outputs."""
    if not report:
        return {}
    devices = report.get("devices") or []
    environment = report.get("environment") or {}
    return {
        "driver": report.get("driver_version"),
        "gpus": [{"name": d.get("name"), "uuid": d.get("uuid"),
                  "memoryMib": d.get("memory_total_mib"), "mig": bool(d.get("mig")),
                  "kernelMs": (d.get("kernel") or {}).get("kernel_ms")} for d in devices],
        # Where the pod ran: on a MIG instance (a `MIG-` UUID), under MPS (the device
        # plugin's Allocate set the MPS pipe directory), or on a whole or time-sliced GPU.
        "sharing": sharing_mode(report),
        **({"mpsPipeDirectory": environment[MPS_PIPE_ENV]}
           if environment.get(MPS_PIPE_ENV) else {}),
    }


def sharing_mode(report: dict[str, Any]) -> str:
    """`mig`, `mps` or `gpu`: how the probe's pod was handed its GPU, from its report."""
    if any(d.get("mig") for d in report.get("devices") or []):
        return "mig"
    if (report.get("environment") or {}).get(MPS_PIPE_ENV):
        return "mps"
    return "gpu"


__all__ = [
    "HAMI_DEFAULT_SPLIT",
    "AllocatableSeries",
    "PodRun",
    "allocatable_findings",
    "allocatable_of",
    "allocatable_settled",
    "classify",
    "event_texts",
    "expected_allocatable",
    "expected_resources",
    "hami_memory_findings",
    "job_findings",
    "log_tail",
    "mig_findings",
    "overlap",
    "overlap_impossible",
    "parse_probe_report",
    "pod_run",
    "probe_findings",
    "render_failure",
    "report_summary",
    "run_findings",
    "sharing_mode",
    "sharing_summary",
    "timeslicing_findings",
    "uuids",
    "vectoradd_findings",
]
