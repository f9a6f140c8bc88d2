"""FM37 and FM32 on workloads: ResourceClaims and ResourceClaimTemplates that ask NVIDIA's
DRA driver for what it never publishes, and pods that ask for GPUs both ways.

A claim's request names a DeviceClass and may narrow it with CEL selectors over the
devices' attributes. The scheduler allocates only devices some ResourceSlice publishes, so
a class the driver does not create, or an attribute it does not publish, leaves the claim
unallocated and its pods Pending, without an error anywhere. The driver's classes and
attributes per release are in `gpuplane.rules.dra_facts`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from gpuplane.core.findings import Finding
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules._shared import at, finding, items, mapping
from gpuplane.rules.dra_facts import attributes, device_classes, known_release

CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")
_NVIDIA_CLASS = ".nvidia.com"
# device.attributes["gpu.nvidia.com"].index, device.attributes['gpu.nvidia.com']['index']
_ATTR = re.compile(r"""device\.attributes\[\s*["']([A-Za-z0-9.\-/]+)["']\s*\]"""
                   r"""(?:\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*["']([A-Za-z0-9_.\-/]+)["']\s*\])""")


def _devices(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """The claim's `devices` and its path: a template holds the claim spec one level down."""
    spec = mapping(obj.get("spec"))
    if obj.get("kind") == "ResourceClaimTemplate":
        return mapping(mapping(spec.get("spec")).get("devices")), "spec.spec.devices"
    return mapping(spec.get("devices")), "spec.devices"


def _requests(devices: Mapping[str, Any], path: str
              ) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, request body) for each request: v1's `exactly` and `firstAvailable`
    sub-requests, v1beta1's class directly on the request."""
    for i, req in enumerate(items(devices.get("requests"))):
        req = mapping(req)
        here = f"{path}.requests[{i}]"
        if "exactly" in req:
            yield f"{here}.exactly", mapping(req.get("exactly"))
        for j, sub in enumerate(items(req.get("firstAvailable"))):
            yield f"{here}.firstAvailable[{j}]", mapping(sub)
        if "deviceClassName" in req:
            yield here, req


def check_claim(obj: Mapping[str, Any], intent: ClusterIntent, where: str) -> list[Finding]:
    """FM37 for one ResourceClaim or ResourceClaimTemplate, against the DRA driver release
    the stack installs (its intent), else the newest gpuplane knows."""
    version = intent.dra_chart_version if intent.dra else None
    release = known_release(version)
    classes = device_classes(version, gpus=intent.dra_gpus if intent.dra else True,
                             compute_domains=intent.dra_compute_domains if intent.dra
                             else True)
    devices, path = _devices(obj)
    out = []
    for here, req in _requests(devices, path):
        name = req.get("deviceClassName")
        if isinstance(name, str) and name.endswith(_NVIDIA_CLASS) and name not in classes:
            out.append(finding(
                "FM37",
                f"DeviceClass {name!r} is not one the DRA driver {release} creates here "
                f"({', '.join(classes)}): the claim is never allocated and its pods stay "
                "Pending.",
                at(where, f"{here}.deviceClassName"),
                f"Use one of {', '.join(classes)} (a MIG slice: mig.nvidia.com with a "
                "`profile` selector; ComputeDomains: the template the ComputeDomain "
                "creates)."))
        for k, sel in enumerate(items(req.get("selectors"))):
            expression = mapping(mapping(sel).get("cel")).get("expression")
            if isinstance(expression, str):
                out += _selector(expression, release, where, f"{here}.selectors[{k}].cel")
    for i, constraint in enumerate(items(devices.get("constraints"))):
        attr = mapping(constraint).get("matchAttribute")
        if isinstance(attr, str) and "/" in attr:
            domain, _, name = attr.rpartition("/")
            out += _unknown(domain, name, release, where,
                            f"{path}.constraints[{i}].matchAttribute")
    return out


def _selector(expression: str, release: str, where: str, path: str) -> list[Finding]:
    out = []
    for match in _ATTR.finditer(expression):
        out += _unknown(match[1], match[2] or match[3], release, where, f"{path}.expression")
    return out


def _unknown(domain: str, name: str, release: str, where: str, path: str) -> list[Finding]:
    """FM37 for attribute `domain`/`name` where `domain` is one of the driver's own and the
    release does not publish `name` there (another domain is not the driver's to judge)."""
    known = attributes(domain, release)
    if known is None or name in known:
        return []
    gone = " (removed before v25.8.0)" if name in ("index", "minor") else ""
    return [finding(
        "FM37",
        f"attribute {domain}/{name} is not published by the DRA driver {release}{gone}: no "
        "device matches, the claim is never allocated and its pods stay Pending.",
        at(where, path),
        f"Select on an attribute the driver publishes ({', '.join(known)}), e.g. "
        f"device.attributes['{domain}'].uuid or .productName.")]


def check_pod_claims(spec: Mapping[str, Any], spec_path: str, asked: set[str],
                     intent: ClusterIntent, where: str) -> list[Finding]:
    """FM32 on a pod: it asks for `nvidia.com/gpu` from a device plugin and for devices by
    ResourceClaim. On DRA nodes no device plugin advertises nvidia.com/gpu (the driver
    requires it off), so the pod stays Pending; where one does, the same GPUs are counted
    twice."""
    claims = items(spec.get("resourceClaims"))
    gpus = sorted(n for n in asked if n.startswith("nvidia.com/gpu") or
                  n.startswith("nvidia.com/mig-"))
    if not claims or not gpus:
        return []
    return [finding(
        "FM32",
        f"the pod asks for {', '.join(gpus)} and for devices by ResourceClaim: on the DRA "
        "driver's nodes no device plugin serves nvidia.com/gpu (it stays Pending), and "
        "where one does, the same GPUs are handed out twice.",
        at(where, f"{spec_path}.containers"),
        "Ask for GPUs one way: a claim (resourceClaims with DeviceClass gpu.nvidia.com), or "
        "nvidia.com/gpu on nodes without the DRA driver.")]


__all__ = ["CLAIM_KINDS", "check_claim", "check_pod_claims"]
