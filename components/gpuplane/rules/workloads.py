"""FM11, FM14 and FM26: GPU workloads whose pod spec cannot get what it asks for.

FM11: a pod asking for NVIDIA GPUs gets them only through the nvidia runtime, unless
nvidia is containerd's default, CDI injects the devices (GPU Operator >= v25.10 with
`gpuOperator.cdi`), or HAMi's webhook adds the runtime class for it.
FM14: requests HAMi refuses, caps or can never place (HAMi v2.10 admission and
scheduler behaviour).
FM26: a pod naming one of the operator's RuntimeClasses, which its NRI plugin mode deletes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules._shared import at, finding, items, mapping, quantity
from gpuplane.rules.device_plugins import gpu_runtime_classes, node_runtime_handlers
from gpuplane.rules.dra_workloads import check_pod_claims
from gpuplane.rules.sharing import check_workload_sharing
from gpuplane.rules.sharing_plain import PlainSharing, check_plain_workload_sharing

GPU = "nvidia.com/gpu"
GPUMEM = "nvidia.com/gpumem"
GPUMEM_PCT = "nvidia.com/gpumem-percentage"
GPUCORES = "nvidia.com/gpucores"
PRIORITY = "nvidia.com/priority"
HAMI_ONLY = (GPUMEM, GPUMEM_PCT, GPUCORES, PRIORITY)
HAMI_SCHEDULERS = ("", "default-scheduler", "hami-scheduler")
HOSTNAME = "kubernetes.io/hostname"
# The operator's RuntimeClasses beside the one `operator.runtimeClass` names (default
# nvidia; assets/pre-requisites/02*_runtime_class*.yaml@v26.3.0), all deleted in NRI
# plugin mode (controllers/object_controls.go@v26.3.0 `RuntimeClasses`/`clearRuntimeClasses`).
NRI_DELETED_CLASSES = ("nvidia-cdi", "nvidia-legacy")

# Where each kind keeps its pod spec.
_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Job": ("spec", "template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def _spec_and_path(obj: Any) -> tuple[dict[str, Any] | None, str]:
    keys = _SPEC_PATHS.get(mapping(obj).get("kind", ""))
    if keys is None:
        return None, ""
    node: Any = obj
    for key in keys:
        node = mapping(node).get(key)
    return (node if isinstance(node, dict) else None), ".".join(keys)


def pod_spec_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The pod spec of a Pod or a workload object (CronJob: its jobTemplate), or None."""
    return _spec_and_path(obj)[0]


def _nvidia(name: Any) -> bool:
    return isinstance(name, str) and name.startswith("nvidia.com/")


def _wants_gpu(name: str) -> bool:
    """Resources that put NVIDIA devices into the container."""
    return name.startswith((GPU, "nvidia.com/mig-"))


@dataclass(frozen=True)
class _Container:
    path: str                         # e.g. spec.template.spec.containers[0]
    spec: Mapping[str, Any]
    init: bool
    sidecar: bool                     # init container with restartPolicy Always
    resources: dict[str, Any]         # nvidia.com/* raw quantity per resource

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or self.path)


def _containers(spec: Mapping[str, Any], spec_path: str) -> Iterator[_Container]:
    for field, init in (("initContainers", True), ("containers", False)):
        for i, ctr in enumerate(items(spec.get(field))):
            if not isinstance(ctr, Mapping):
                continue
            res = mapping(ctr.get("resources"))
            raw = {**{k: v for k, v in mapping(res.get("requests")).items() if _nvidia(k)},
                   **{k: v for k, v in mapping(res.get("limits")).items() if _nvidia(k)}}
            yield _Container(f"{spec_path}.{field}[{i}]", ctr, init,
                             init and ctr.get("restartPolicy") == "Always", raw)


def _amounts(ctr: _Container, strict: bool) -> dict[str, float]:
    out = {}
    for name, raw in ctr.resources.items():
        try:
            out[name] = quantity(raw)
        except ValueError as exc:
            if strict:
                raise ValueError(f"{ctr.path}.resources ({name}): {exc}") from None
    return out


def _effective(ctrs: list[_Container], strict: bool) -> dict[str, float]:
    """The pod's request as the scheduler counts it: app containers and sidecars add up;
    a regular init container runs alone (beside the sidecars started before it)."""
    total: dict[str, float] = {}
    sidecars: dict[str, float] = {}
    peak: dict[str, float] = {}
    for ctr in ctrs:
        amounts = _amounts(ctr, strict)
        if ctr.init and not ctr.sidecar:
            for name, value in amounts.items():
                peak[name] = max(peak.get(name, 0.0), value + sidecars.get(name, 0.0))
            continue
        for name, value in amounts.items():
            total[name] = total.get(name, 0.0) + value
            if ctr.sidecar:
                sidecars[name] = sidecars.get(name, 0.0) + value
    return {name: max(total.get(name, 0.0), peak.get(name, 0.0))
            for name in sorted({*total, *peak})}


def gpu_requests(pod_spec: dict[str, Any]) -> dict[str, float]:
    """`nvidia.com/*` the pod requests (limits, else requests, per container), summed over
    containers and restartable init containers, and at least each regular init container's
    own request, as the scheduler counts them. Raises ValueError for a bad quantity."""
    ctrs = list(_containers(mapping(pod_spec), "spec"))
    return _effective(ctrs, strict=True)


def check_workload(obj: dict[str, Any], intent: ClusterIntent, where: str,
                   plain: PlainSharing | None = None) -> list[Finding]:
    """FM11 and FM14 for one Pod or workload object; `where` names it (kind ns/name).
    `plain`: what the nodes of a GPU Operator the program installs itself may advertise
    (FM24/FM25 then judge against it, not against the intent's pools). Malformed
    quantities are left to the API server, which rejects them itself."""
    spec, spec_path = _spec_and_path(obj)
    if spec is None:
        return []
    ctrs = list(_containers(spec, spec_path))
    amounts = {c.path: _amounts(c, strict=False) for c in ctrs}
    asked = {n for a in amounts.values() for n, v in a.items() if v > 0}
    out = _runtime_class(spec, spec_path, asked, intent, where)
    per_container = [(c.path, amounts[c.path]) for c in ctrs]
    out += check_workload_sharing(spec, per_container, intent, where) if plain is None \
        else check_plain_workload_sharing(spec, per_container, plain, where)
    out += check_pod_claims(spec, spec_path, asked, intent, where)   # FM32 (DRA)
    hami_used = sorted(n for n in asked if n in HAMI_ONLY)
    if intent.device_plugin == "hami":
        out += _hami(spec, spec_path, ctrs, amounts, asked, intent, where)
    elif hami_used:
        out.append(finding(
            "FM14",
            f"the pod asks for {', '.join(hami_used)}, which only HAMi provides, but the "
            "stack's device plugin is the GPU Operator's: no node advertises it and the pod "
            "stays Pending.",
            at(where, f"{spec_path}.containers", "gpuplane:devicePlugin"),
            "Set `gpuplane:devicePlugin: hami` to share GPUs by memory and cores, or request "
            f"whole GPUs with {GPU} only.",
        ))
    return out


def _runtime_class(spec: Mapping[str, Any], spec_path: str, asked: set[str],
                   intent: ClusterIntent, where: str) -> list[Finding]:
    rc = spec.get("runtimeClassName")
    if intent.nri and rc in (intent.runtime_class, *NRI_DELETED_CLASSES):
        return [_fm26(rc, spec_path, where)]
    gpus = sorted(n for n in asked if _wants_gpu(n))
    if not gpus or intent.cdi or intent.nri:
        # With CDI (operator >= v25.10) containerd injects the devices whatever the runtime.
        return []
    here = at(where, f"{spec_path}.runtimeClassName", "gpuplane:runtime.name")
    nvidia = intent.runtime_class
    if rc:
        classes = gpu_runtime_classes(intent)
        if rc in classes:
            return []
        return [finding(
            "FM11",
            f"the pod asks for {', '.join(gpus)} but runs with runtimeClassName {rc!r}, "
            f"which is not a RuntimeClass of the nvidia runtime ({', '.join(classes)}, "
            f"from {node_runtime_handlers(intent)[1]}): no GPU is injected into it, or no "
            "such RuntimeClass admits it.",
            here,
            f"Set `runtimeClassName: {nvidia}` in the pod spec (the RuntimeClass gpuplane "
            "creates is named by `gpuplane:runtime.name`).",
        )]
    if intent.nvidia_default:
        return []
    if intent.device_plugin == "hami" and spec.get("schedulerName", "") in HAMI_SCHEDULERS:
        return []  # HAMi's webhook sets devicePlugin.runtimeClassName (checked on its values)
    return [finding(
        "FM11",
        f"the pod asks for {', '.join(gpus)} without runtimeClassName while runc is "
        "containerd's default runtime (gpuplane:runtime.nvidiaDefault is false): it starts, "
        "but sees no GPU.",
        here,
        f"Add `runtimeClassName: {nvidia}` to the pod spec, or make nvidia the default "
        "runtime deliberately with `gpuplane:runtime.nvidiaDefault: true` (raw: toolkit.env "
        "CONTAINERD_SET_AS_DEFAULT=true).",
    )]


def _fm26(rc: str, spec_path: str, where: str) -> Finding:
    """FM26: the operator's NRI plugin mode deletes the RuntimeClass the pod names."""
    return finding(
        "FM26",
        f"the pod names runtimeClassName {rc!r}, but the GPU Operator runs its NRI plugin "
        "(gpuplane:gpuOperator.nri), which deletes the operator's RuntimeClasses (the one "
        "operator.runtimeClass names, nvidia-cdi, nvidia-legacy) and writes no nvidia "
        "runtime: the API server refuses the pod (RuntimeClass not found).",
        at(where, f"{spec_path}.runtimeClassName", "gpuplane:gpuOperator.nri"),
        "Remove runtimeClassName from the pod spec (under NRI the GPUs come through CDI "
        "whatever the runtime), or leave NRI off (`gpuplane:gpuOperator.nri: false`; raw "
        "Helm: --set cdi.nriPluginEnabled=false).")


def _pinned_node(spec: Mapping[str, Any], intent: ClusterIntent) -> tuple[str, int] | None:
    node = spec.get("nodeName") or mapping(spec.get("nodeSelector")).get(HOSTNAME)
    if not node:
        return None
    known = {n.name: n.gpus for n in intent.nodes}
    return (str(node), known[node]) if node in known else None


def _hami(spec: Mapping[str, Any], spec_path: str, ctrs: list[_Container],
          amounts: dict[str, dict[str, float]], asked: set[str], intent: ClusterIntent,
          where: str) -> list[Finding]:
    out: list[Finding] = []
    fix_tail = ("HAMi enforces this at admission and scheduling, so the workload's own "
                "spec must change; gpuplane's probe pods take theirs from "
                "`gpuplane:checks.hamiGpuMem` and `gpuplane:checks.hamiGpuCores`.")
    pinned = _pinned_node(spec, intent)
    cap = pinned[1] if pinned else max((n.gpus for n in intent.gpu_nodes), default=None)
    for ctr in ctrs:
        got = amounts[ctr.path]
        limits = f"{ctr.path}.resources.limits"
        if got.get(GPUMEM, 0) > 0 and GPUMEM_PCT in got:
            out.append(finding(
                "FM14",
                f"container {ctr.name} asks for both {GPUMEM} ({got[GPUMEM]:g} MiB) and "
                f"{GPUMEM_PCT} ({got[GPUMEM_PCT]:g}): HAMi uses {GPUMEM} and silently "
                "ignores the percentage.",
                at(where, f"{limits}['{GPUMEM_PCT}']"),
                f"Keep one of {GPUMEM} and {GPUMEM_PCT}. {fix_tail}"))
        if got.get(GPUCORES, 0) > 100:
            out.append(finding(
                "FM14",
                f"container {ctr.name} asks for {GPUCORES} {got[GPUCORES]:g}: cores are a "
                "percentage of one GPU and HAMi caps them at 100, so the limit is not what "
                "was asked.",
                at(where, f"{limits}['{GPUCORES}']"),
                f"Set {GPUCORES} between 1 and 100 (100 = a whole card). {fix_tail}"))
        pct = got.get(GPUMEM_PCT)
        if pct is not None and not 0 <= pct <= 100:
            out.append(finding(
                "FM14",
                f"container {ctr.name} asks for {GPUMEM_PCT} {pct:g}: HAMi (2.10) rejects "
                "values outside 0-100 at admission.",
                at(where, f"{limits}['{GPUMEM_PCT}']"),
                f"Set {GPUMEM_PCT} between 0 and 100. {fix_tail}"))
        count = got.get(GPU, 0)
        if cap is not None and count > cap:
            scope = (f"node {pinned[0]}, where the pod is pinned, has {cap}" if pinned
                     else f"the largest GPU node in gpuplane:nodes has {cap}")
            out.append(finding(
                "FM14",
                f"container {ctr.name} asks for {count:g} {GPU} but {scope}: each HAMi vGPU "
                "sits on a different card, so the pod never fits and stays Pending.",
                at(where, f"{limits}['{GPU}']", "gpuplane:nodes"),
                f"Ask for at most {cap} {GPU} per container, or add a node with more GPUs "
                "to `gpuplane:nodes` (gpus: N)."))
        for j, env in enumerate(items(ctr.spec.get("env"))):
            env = mapping(env)
            if env.get("name") == "CUDA_DISABLE_CONTROL" and \
                    str(env.get("value", "")).strip().lower() == "true":
                out.append(finding(
                    "FM14",
                    f"container {ctr.name} sets CUDA_DISABLE_CONTROL=true: HAMi's in-container "
                    "limits are off, so its GPU memory and core limits are not enforced.",
                    at(where, f"{ctr.path}.env[{j}]"),
                    f"Remove CUDA_DISABLE_CONTROL from the container. {fix_tail}",
                    severity=Severity.WARNING))
    if not any(n == GPU or n in HAMI_ONLY for n in asked):
        return out
    privileged = [c for c in ctrs
                  if mapping(c.spec.get("securityContext")).get("privileged") is True]
    if privileged:
        out.append(finding(
            "FM14",
            f"the pod asks for GPU resources and container {privileged[0].name} is "
            "privileged: HAMi's webhook denies it, since a privileged container sees every "
            "GPU and bypasses its limits.",
            at(where, f"{privileged[0].path}.securityContext.privileged"),
            f"Drop `privileged: true` (grant only the capabilities needed). {fix_tail}"))
    if spec.get("nodeName"):
        out.append(finding(
            "FM14",
            f"the pod sets spec.nodeName {spec['nodeName']!r}: HAMi's webhook denies GPU pods "
            "that bypass its scheduler.",
            at(where, f"{spec_path}.nodeName"),
            f"Use nodeSelector `{HOSTNAME}: {spec['nodeName']}` instead of nodeName. "
            f"{fix_tail}"))
    return out


__all__ = ["GPU", "GPUCORES", "GPUMEM", "GPUMEM_PCT", "check_workload", "gpu_requests",
           "pod_spec_of"]
