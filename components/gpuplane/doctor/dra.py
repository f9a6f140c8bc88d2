"""The doctor under Dynamic Resource Allocation: ResourceSlices and ResourceClaims.

NVIDIA's DRA driver publishes each GPU node's devices as a ResourceSlice of driver
`gpu.nvidia.com` in a pool named after the node (kubernetes-sigs/dra-driver-nvidia-gpu
docs/install.md@v0.4.0); the scheduler allocates claims only from published devices. So a
GPU node without such a slice is the driver's health signal (FM38, checks.dra), and a
claim that stays unallocated is explained from what the cluster holds: a DeviceClass that
does not exist, a CEL selector on an attribute no device publishes (`index`, gone since
v25.8.0), or no device left.

Run only where DRA is in play: the stack's record says so (`ClusterIntent.dra`), or the
cluster has the driver's DeviceClass or slices. Pure, on the snapshot's lists.
"""

from __future__ import annotations

import re
from typing import Any

from gpuplane.checks.dra import DEVICE_CLASS, DRIVER, gpu_devices, resourceslice_findings
from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.doctor.cluster import ClusterView, name, namespace
from gpuplane.doctor.diagnosis import Diagnosis, Evidence

# device.attributes['gpu.nvidia.com'].index, device.attributes["gpu.nvidia.com"]["index"]
_ATTRIBUTE = re.compile(
    r"""device\.attributes\[\s*['"]([^'"]+)['"]\s*\]\s*(?:\.\s*([A-Za-z_][\w]*)"""
    r"""|\[\s*['"]([^'"]+)['"]\s*\])""")


def expected(view: ClusterView, intent: ClusterIntent) -> bool:
    """Whether the cluster hands out GPUs through the DRA driver."""
    snap = view.snap
    return intent.dra or any(name(c) == DEVICE_CLASS for c in snap.deviceclasses) or any(
        (s.get("spec") or {}).get("driver") == DRIVER for s in snap.resourceslices)


def dra_health(view: ClusterView, intent: ClusterIntent,
               notes: list[str]) -> list[Diagnosis]:
    """FM38 for each GPU node without a gpu.nvidia.com ResourceSlice and for each GPU
    claim that is not allocated, with its reason; "not checked" notes for what was not
    collected."""
    if not expected(view, intent):
        return []
    out: list[Diagnosis] = []
    if (unseen := view.missing("resourceslices")) is not None:
        notes.append(f"not checked: {unseen}: the DRA driver's ResourceSlices (FM38)")
    else:
        out += _nodes(view, intent)
    if (unseen := view.missing("resourceclaims")) is not None:
        notes.append(f"not checked: {unseen}: pending GPU ResourceClaims (FM38)")
    else:
        classes = None if view.missing("deviceclasses") else {
            name(c) for c in view.snap.deviceclasses}
        for claim in view.snap.resourceclaims:
            finding = claim_finding(claim, classes, view.snap.resourceslices,
                                    view.snap.resourceclaims)
            if finding is not None:
                scope = f"claim:{namespace(claim)}/{name(claim)}"
                out.append(Diagnosis(finding, scope, [Evidence(
                    f"ResourceClaim {namespace(claim)}/{name(claim)}",
                    "status.allocation is not set")]))
    return out


def _nodes(view: ClusterView, intent: ClusterIntent) -> list[Diagnosis]:
    """The GPU nodes (the stack's, the labelled ones, the GPU pods') without a slice;
    where the driver serves some pools only (`draDriver.pools`), those pools' nodes."""
    declared = {n.name: n for n in intent.gpu_nodes}
    nodes = [declared.get(name(n)) or NodeIntent(name(n), gpus=1)
             for n in view.gpu_nodes(declared)]
    if intent.dra_pools:
        nodes = [n for n in nodes if n.name in declared and intent.dra_serves(n)]
    slices = view.snap.resourceslices
    return [Diagnosis(finding, f"node:{node.name}", [Evidence(
                f"ResourceSlices of node {node.name}",
                f"{len(gpu_devices(slices, node.name))} GPU device(s) from {DRIVER}")])
            for node in nodes for finding in resourceslice_findings([node], slices)]


def requests_of(claim: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(request name, DeviceClass, CEL expressions) of each request of a claim: v1
    (`exactly` / `firstAvailable`) and v1beta1 (class directly in the request)."""
    out = []
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        alternatives = [request.get("exactly") or request,
                        *(request.get("firstAvailable") or [])]
        for alt in alternatives:
            if not isinstance(alt, dict) or not alt.get("deviceClassName"):
                continue
            cel = [str((s.get("cel") or {}).get("expression") or "")
                   for s in alt.get("selectors") or [] if isinstance(s, dict)]
            out.append((str(request.get("name") or alt.get("name")),
                        str(alt["deviceClassName"]), cel))
    return out


def published_attributes(slices: list[dict[str, Any]], driver: str) -> set[str]:
    """Every attribute name the devices of `driver` carry (own ones without the domain)."""
    return {str(key).removeprefix(f"{driver}/")
            for s in slices if (s.get("spec") or {}).get("driver") == driver
            for d in (s.get("spec") or {}).get("devices") or []
            for key in (d.get("attributes") or {})}


def unpublished(expressions: list[str], slices: list[dict[str, Any]]) -> list[str]:
    """`<domain>.<attribute>` names the selectors read that no published device carries,
    for the NVIDIA drivers' domains that publish anything at all."""
    missing = []
    for text in expressions:
        for domain, dotted, indexed in _ATTRIBUTE.findall(text):
            attribute = dotted or indexed
            if not domain.endswith("nvidia.com"):
                continue
            have = published_attributes(slices, domain)
            if have and attribute not in have:
                missing.append(f"{domain}.{attribute}")
    return list(dict.fromkeys(missing))


def claim_finding(claim: dict[str, Any], classes: set[str] | None,
                  slices: list[dict[str, Any]],
                  claims: list[dict[str, Any]]) -> Finding | None:
    """FM38 for an unallocated claim, with the reason its requests cannot be met; None
    for an allocated one, one that asks for no NVIDIA device, or one no pod waits for
    and nothing is provably wrong with."""
    if (claim.get("status") or {}).get("allocation"):
        return None
    requests = requests_of(claim)
    nvidia = [r for r in requests if (r[1].endswith("nvidia.com") or
                                               (classes is not None and r[1] not in classes))]
    if not nvidia:
        return None
    where = f"ResourceClaim {namespace(claim)}/{name(claim)}"
    reasons, fixes = [], []
    for request, device_class, cel in nvidia:
        if classes is not None and device_class not in classes:
            have = ", ".join(sorted(c for c in classes if c.endswith("nvidia.com"))) or "none"
            reasons.append(f"request {request}: DeviceClass {device_class} does not exist "
                           f"(NVIDIA classes here: {have})")
            fixes.append(f"use a DeviceClass the driver creates ({DEVICE_CLASS} for a full "
                         "GPU, mig.nvidia.com for a MIG slice) instead of "
                         f"{device_class}")
        for attribute in unpublished(cel, slices):
            reasons.append(f"request {request}: its selector reads {attribute}, which no "
                           "published device has")
            fixes.append(f"select on attributes the driver publishes (`kubectl get "
                         f"resourceslices -o yaml`); {attribute} is not one of them "
                         "(`index` and `minor` are gone since driver v25.8.0: use `uuid` or "
                         "`pciBusID`)")
    owned = any(o.get("kind") == "Pod" for o in
                (claim.get("metadata") or {}).get("ownerReferences") or [])
    if not reasons and not owned:
        return None
    if not reasons:
        free = len(_all_gpus(slices)) - _allocated(claims)
        reasons.append(f"no published device satisfies it ({len(_all_gpus(slices))} GPU "
                       f"device(s) from {DRIVER}, {max(free, 0)} not allocated)")
        fixes.append("check the pod's events (`kubectl describe pod`), that every GPU node "
                     f"has a ResourceSlice from {DRIVER}, and that the claim's selectors match "
                     "a free device")
    return Finding("FM38", Severity.ERROR,
                   f"{where} is not allocated, so its pod cannot start: " + "; ".join(reasons),
                   where, "; ".join(dict.fromkeys(fixes)))


def _all_gpus(slices: list[dict[str, Any]]) -> list[tuple[str, str]]:
    nodes = {str((s.get("spec") or {}).get("nodeName")) for s in slices}
    return [(n, d) for n in sorted(nodes) for d in gpu_devices(slices, n)]


def _allocated(claims: list[dict[str, Any]]) -> int:
    return sum(1 for c in claims
               for r in (((c.get("status") or {}).get("allocation") or {}).get("devices")
                         or {}).get("results") or []
               if r.get("driver") == DRIVER)


__all__ = ["claim_finding", "dra_health", "expected", "requests_of", "unpublished"]
