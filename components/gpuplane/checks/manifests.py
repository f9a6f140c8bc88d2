"""Kubernetes manifests for the post-deploy GPU checks, as plain dicts in API shape.

Pure functions: the same intent and settings always give the same objects, so tests can
validate them against the Kubernetes schema and the component only wraps them in
resources. Three kinds of Job come out of `plan_checks`:

* ``node``: one per GPU node, pinned with ``kubernetes.io/hostname``, running the CUDA
  probe (or NVIDIA's vectoradd sample) on one GPU of that node;
* ``timeslicing``: every replica of the smallest GPU node at once (parallelism =
  completions = GPUs x replicas), each pod keeping its GPU for a while after the probe so
  all of them must be running at the same time, which only works if the GPUs are shared;
* ``hami``: one probe pod asking HAMi for a slice (gpumem, gpucores) that must see no more
  memory than it asked for (only when the node Jobs run the vectoradd sample; otherwise
  every node Job already carries this proof).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

from gpuplane.checks.settings import ChecksSettings, Sample
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.rules.advertised import expected_resources, probe_resource

CheckKind = Literal["node", "timeslicing", "hami"]

VECTORADD_IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"
PROBE_FILE = "cuda_probe.py"
PROBE_DIR = "/probe"
CONTAINER = "probe"
GPU = "nvidia.com/gpu"
GPUMEM = "nvidia.com/gpumem"
GPUCORES = "nvidia.com/gpucores"
GPU_TAINT_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
HOSTNAME_LABEL = "kubernetes.io/hostname"
LABEL_APP = "app.kubernetes.io/name"
LABEL_CHECK = "gpuplane.dev/check"
LABEL_NODE = "gpuplane.dev/node"
FINGERPRINT_ANNOTATION = "gpuplane.dev/checks-fingerprint"
APP = "gpuplane-checks"
# Time-sliced pods keep their GPU this long after the probe, so that every replica is
# running at one moment even when pods start a few seconds apart.
HOLD_SECONDS = 30
TTL_SECONDS = 3600          # finished Jobs stay an hour for `kubectl logs`
MAX_NAME = 54               # "-" and 8 hex characters follow; Job names stay <= 63


@dataclass(frozen=True)
class CheckJob:
    """One Job of the plan and what its verdict needs to know about it."""

    key: str                 # unique, DNS-safe suffix for resource names
    kind: CheckKind
    node: str
    gpus: int                # physical GPUs of that node, as the stack says
    pods: int                # pods that must all succeed
    sample: Sample
    max_memory_mib: int | None   # HAMi: the gpumem each pod asked for
    hold_seconds: int
    # The extended resource each pod asks one of: what the node's pool advertises
    # (`nvidia.com/mig-1g.10gb` on a mixed-MIG pool); "": the cluster's `gpu_resource`.
    resource: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def short_name(text: str, limit: int = MAX_NAME) -> str:
    """A lowercase DNS label of at most `limit` characters; long ones keep a hash."""
    name = "".join(c if c.isalnum() or c == "-" else "-" for c in text.lower()).strip("-")
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-')}-{digest}"


def job_name(prefix: str, key: str, fingerprint_value: str, run: int) -> str:
    """The name of check `key`'s Job in its `run`: `<prefix>-<key>` (cut to MAX_NAME), then
    8 hex digits of the fingerprint and the run, so every run of a check is a new Job (the
    pods of the last one may still be terminating) and names stay DNS labels (<= 63, the
    `job-name` label on its pods)."""
    digest = hashlib.sha256(f"{fingerprint_value}/{run}".encode()).hexdigest()[:8]
    return f"{short_name(f'{prefix}-{key}')}-{digest}"


def fingerprint(intent: ClusterIntent, settings: ChecksSettings, probe_source: str) -> str:
    """Changes whenever the deployment's decisions, the settings or the probe change.

    Put on the pod templates, so any such change replaces the Jobs and the checks run again.
    """
    blob = json.dumps([intent.to_json(), asdict(settings), probe_source], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def runtime_class_for(intent: ClusterIntent) -> str | None:
    """The pods' runtimeClassName: none when nvidia is containerd's default (FM11)."""
    return None if intent.nvidia_default else intent.runtime_class


def gpu_limits(intent: ClusterIntent, settings: ChecksSettings,
               resource: str = "") -> dict[str, str]:
    """One GPU, by the name the device plugin advertises it: `resource`, the node pool's
    (a MIG instance `nvidia.com/mig-<profile>` on a mixed-MIG pool), else the cluster's
    (`nvidia.com/gpu.shared` under time-slicing with renameByDefault); under HAMi a slice
    of it (memory in MiB, cores in percent)."""
    limits = {resource or intent.gpu_resource: "1"}
    if intent.device_plugin == "hami":
        limits[GPUMEM] = str(settings.hami_gpumem)
        limits[GPUCORES] = str(settings.hami_gpucores)
    return limits


def labels(kind: CheckKind, node: str) -> dict[str, str]:
    return {LABEL_APP: APP, LABEL_CHECK: kind, LABEL_NODE: node}


def probe_configmap(namespace: str, source: str, name: str | None = None) -> dict[str, Any]:
    """The ConfigMap holding the probe script, mounted read-only at /probe."""
    metadata: dict[str, Any] = {"namespace": namespace,
                                "labels": {LABEL_APP: APP, LABEL_CHECK: "probe-source"}}
    if name:
        metadata["name"] = name
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            "data": {PROBE_FILE: source}}


def probe_configmap_name(component: str, source: str) -> str:
    """The probe ConfigMap's name: the component's, then the script's sha256 (10 hex), so
    that Jobs name it as plain text and a changed script is a new ConfigMap."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:10]
    return f"{short_name(f'{component}-probe', MAX_NAME - 11)}-{digest}"


def probe_args(max_memory_mib: int | None = None) -> list[str]:
    """The probe's flags: under HAMi it fails by itself when it sees more than it asked."""
    return [] if max_memory_mib is None else ["--max-memory-mib", str(max_memory_mib)]


def container_command(sample: Sample, max_memory_mib: int | None,
                      hold_seconds: int) -> list[str]:
    """The probe (its JSON report is the pod's log), or the vectoradd sample's default.

    With a hold, a shell keeps the pod (and so its GPU) for `hold_seconds` after the probe
    and exits with the probe's code.
    """
    if sample == "vectoradd":
        return []
    script = f"{PROBE_DIR}/{PROBE_FILE}"
    if hold_seconds <= 0:
        return ["python3", script, *probe_args(max_memory_mib)]
    return ["sh", "-c", f'python3 {script} "$@"; rc=$?; sleep {int(hold_seconds)}; exit $rc',
            "gpuplane-probe", *probe_args(max_memory_mib)]


def job_manifest(
    job: CheckJob,
    intent: ClusterIntent,
    settings: ChecksSettings,
    *,
    namespace: str,
    configmap: str | None,
    name: str | None = None,
    fingerprint_value: str = "",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Job running `job` on its node: backoffLimit 0, deadline = timeoutSeconds."""
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": VECTORADD_IMAGE if job.sample == "vectoradd" else settings.image,
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"memory": "1Gi", **gpu_limits(intent, settings, job.resource)},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    volumes: list[dict[str, Any]] = []
    if job.sample == "probe":
        if not configmap:
            raise ValueError("a probe Job needs the probe ConfigMap's name")
        container["command"] = container_command(job.sample, job.max_memory_mib,
                                                 job.hold_seconds)
        container["env"] = [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                            {"name": "PYTHONUNBUFFERED", "value": "1"}]
        container["volumeMounts"] = [{"name": "probe", "mountPath": PROBE_DIR,
                                      "readOnly": True}]
        volumes.append({"name": "probe",
                        "configMap": {"name": configmap, "defaultMode": 0o444}})
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "nodeSelector": {HOSTNAME_LABEL: job.node},
        "tolerations": [dict(GPU_TAINT_TOLERATION)],
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 5,
        "containers": [container],
    }
    runtime_class = runtime_class_for(intent)
    if runtime_class:
        pod_spec["runtimeClassName"] = runtime_class
    if volumes:
        pod_spec["volumes"] = volumes
    template_meta: dict[str, Any] = {"labels": labels(job.kind, job.node)}
    if fingerprint_value:
        template_meta["annotations"] = {FINGERPRINT_ANNOTATION: fingerprint_value}
    metadata: dict[str, Any] = {"namespace": namespace, "labels": labels(job.kind, job.node)}
    if name:
        metadata["name"] = name
    if annotations:
        metadata["annotations"] = dict(annotations)
    spec: dict[str, Any] = {
        "backoffLimit": 0,
        "activeDeadlineSeconds": settings.timeout_seconds,
        "ttlSecondsAfterFinished": TTL_SECONDS,
        "template": {"metadata": template_meta, "spec": pod_spec},
    }
    if job.pods > 1:
        spec["parallelism"] = job.pods
        spec["completions"] = job.pods
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def timeslicing_node(intent: ClusterIntent) -> NodeIntent | None:
    """Where to prove time-slicing: the GPU node with the fewest GPUs (fewest pods)."""
    nodes = intent.plugin_nodes   # the DRA driver's nodes run no device plugin
    if intent.time_slicing_replicas < 2 or not nodes or intent.device_plugin != "gpu-operator":
        return None
    return min(nodes, key=lambda n: n.gpus)   # min keeps the first of equals


def plan_checks(intent: ClusterIntent, settings: ChecksSettings) -> tuple[CheckJob, ...]:
    """Every Job the checks run for this stack, in a stable order."""
    if not settings.enabled:
        return ()
    if intent.dra and not intent.plugin_nodes:
        # Under DRA the GPU comes through a ResourceClaim (checks.dra): one probe per
        # node, which is the driver's pool; no device-plugin sharing proofs.
        return tuple(_dra_probe(n, settings) for n in intent.gpu_nodes)
    hami = intent.device_plugin == "hami"
    # The DRA driver's pools (draDriver.pools) by claim, the others by device plugin.
    jobs = [
        _dra_probe(n, settings) if intent.dra_serves(n) else
        CheckJob(key=short_name(f"probe-{n.name}"), kind="node", node=n.name, gpus=n.gpus,
                 pods=1, sample=settings.sample,
                 max_memory_mib=settings.hami_gpumem if hami and settings.sample == "probe"
                 else None,
                 hold_seconds=0, resource=_resource(n, intent))
        for n in intent.gpu_nodes
    ]
    shared = timeslicing_node(intent)
    if shared is not None:
        resource = _resource(shared, intent)
        jobs.append(CheckJob(key="timeslicing", kind="timeslicing", node=shared.name,
                             gpus=shared.gpus,
                             pods=expected_resources(shared, intent)[
                                 resource or intent.gpu_resource],
                             sample="probe", max_memory_mib=None,
                             hold_seconds=HOLD_SECONDS, resource=resource))
    if hami and settings.sample == "vectoradd" and intent.gpu_nodes:
        first = intent.gpu_nodes[0]
        jobs.append(CheckJob(key="hami", kind="hami", node=first.name, gpus=first.gpus,
                             pods=1, sample="probe", max_memory_mib=settings.hami_gpumem,
                             hold_seconds=0))
    return tuple(jobs)


def _dra_probe(node: NodeIntent, settings: ChecksSettings) -> CheckJob:
    """A node's probe when the DRA driver serves it: its GPU by claim (checks.dra)."""
    return CheckJob(key=short_name(f"probe-{node.name}"), kind="node", node=node.name,
                    gpus=node.gpus, pods=1, sample=settings.sample, max_memory_mib=None,
                    hold_seconds=0)


def _resource(node: NodeIntent, intent: ClusterIntent) -> str:
    """What a check pod on `node` asks for: the first resource its pool advertises
    (`gpuplane.rules.advertised.probe_resource`); "" when that is the cluster's own
    `gpu_resource`, so Jobs of stacks without pool sharing stay as they were."""
    resource = probe_resource(node, intent)
    return "" if resource == intent.gpu_resource else resource


def needs_probe_configmap(jobs: tuple[CheckJob, ...]) -> bool:
    return any(j.sample == "probe" for j in jobs)


__all__ = [
    "CONTAINER",
    "FINGERPRINT_ANNOTATION",
    "GPU",
    "GPUCORES",
    "GPUMEM",
    "HOLD_SECONDS",
    "LABEL_CHECK",
    "LABEL_NODE",
    "TTL_SECONDS",
    "VECTORADD_IMAGE",
    "CheckJob",
    "CheckKind",
    "container_command",
    "fingerprint",
    "gpu_limits",
    "job_manifest",
    "job_name",
    "needs_probe_configmap",
    "plan_checks",
    "probe_configmap",
    "probe_configmap_name",
    "runtime_class_for",
    "short_name",
    "timeslicing_node",
]
