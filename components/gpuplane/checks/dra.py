"""The post-deploy checks when GPUs come from NVIDIA's DRA driver (`ClusterIntent.dra`).

Pure builders and verdicts, used by the checks (checks.live, checks.provider) and by the
doctor (gpuplane.doctor.dra):

* `probe_claim_template`: one ResourceClaimTemplate per probe Job (`resource.k8s.io/v1`,
  one request for DeviceClass `gpu.nvidia.com`, the shape of
  demo/specs/quickstart/v1/gpu-test1.yaml@v0.4.1 in kubernetes-sigs/dra-driver-nvidia-gpu);
* `dra_job`: today's probe Job with its GPU taken through that claim
  (`spec.resourceClaims` + `containers[].resources.claims`) instead of an
  `nvidia.com/gpu` limit, still pinned to its node. Each node is its own DRA pool (the
  driver names the pool after the node, docs/install.md@v0.4.0), so a probe per GPU node
  is a probe per pool. No runtimeClassName: the driver injects the GPU by CDI, without
  nvidia-container-runtime, and the probe proves exactly that path;
* `resourceslice_findings`: FM38 for a GPU node with no ResourceSlice from driver
  `gpu.nvidia.com` (the driver's health signal: its kubelet plugin publishes one per node,
  cmd/gpu-kubelet-plugin/main.go@v0.4.1), FM08 for one that publishes fewer GPUs than the
  stack says;
* `dra_cause`: FM38 for a probe pod the scheduler cannot give a GPU claim.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from gpuplane.checks.manifests import APP, CONTAINER, LABEL_APP, LABEL_CHECK, LABEL_NODE
from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import NodeIntent

DRIVER = "gpu.nvidia.com"            # DriverName, cmd/gpu-kubelet-plugin/main.go@v0.4.1
DEVICE_CLASS = "gpu.nvidia.com"      # templates/deviceclass-gpu.yaml@v0.4.1
RESOURCE_API = "resource.k8s.io/v1"
CLAIM = "gpu"                        # the pod's claim and the template's request name

_SLICES_CMD = "kubectl get resourceslices --field-selector spec.nodeName={node},spec.driver=" \
    + DRIVER
_DRIVER_FIX = (
    "the DRA driver's kubelet plugin is not publishing {node}'s GPUs: check its pod on "
    "{node} (`kubectl get pods -A -o wide | grep kubelet-plugin`) and its logs; a wrong "
    "`nvidiaDriverRoot` (`/` for a host driver, `/run/nvidia/driver` with the GPU "
    "Operator's driver container) is the usual cause; the plugin only runs on nodes with "
    "the NFD or GPU Operator GPU labels. See what it publishes: `" + _SLICES_CMD + "`")


def probe_claim_template(namespace: str, name: str, node: str) -> dict[str, Any]:
    """The ResourceClaimTemplate a probe pod claims its GPU through: exactly one device of
    class `gpu.nvidia.com` (a full GPU, `type == 'gpu'` by the class's own selector)."""
    return {
        "apiVersion": RESOURCE_API, "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {LABEL_APP: APP, LABEL_CHECK: "dra-claim", LABEL_NODE: node}},
        "spec": {"spec": {"devices": {"requests": [
            {"name": CLAIM, "exactly": {"deviceClassName": DEVICE_CLASS}}]}}},
    }


def dra_job(job: dict[str, Any], template: str) -> dict[str, Any]:
    """`job` (a probe Job from checks.manifests.job_manifest) with its GPU claimed through
    ResourceClaimTemplate `template`: no extended GPU resource in the limits, the
    container naming the pod's claim, no runtimeClassName."""
    pod = job["spec"]["template"]["spec"]
    pod = {k: v for k, v in pod.items() if k != "runtimeClassName"}
    containers = []
    for container in pod["containers"]:
        resources = dict(container.get("resources") or {})
        if container.get("name") == CONTAINER:
            resources["limits"] = {k: v for k, v in (resources.get("limits") or {}).items()
                                   if not k.startswith("nvidia.com/")}
            resources["claims"] = [{"name": CLAIM}]
        containers.append({**container, "resources": resources})
    pod["containers"] = containers
    pod["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": template}]
    template_spec = {**job["spec"]["template"], "spec": pod}
    return {**job, "spec": {**job["spec"], "template": template_spec}}


# ----------------------------------------------------------------------------- ResourceSlices


def _attribute(device: dict[str, Any], key: str) -> Any:
    """The value of a device attribute (`{"string": "gpu"}` -> "gpu"); the driver's own
    attributes are stored without its domain, so `gpu.nvidia.com/type` is `type`."""
    attrs = device.get("attributes") or {}
    value = attrs.get(key)
    if value is None and key.startswith(f"{DRIVER}/"):
        value = attrs.get(key.removeprefix(f"{DRIVER}/"))
    if isinstance(value, dict):
        for kind in ("string", "int", "bool", "version"):
            if kind in value:
                return value[kind]
    return None


def node_slices(slices: Iterable[dict[str, Any]], node: str,
                driver: str = DRIVER) -> list[dict[str, Any]]:
    """The ResourceSlices `driver` publishes for `node` (`spec.nodeName`)."""
    return [s for s in slices if (s.get("spec") or {}).get("driver") == driver
            and (s.get("spec") or {}).get("nodeName") == node]


def gpu_devices(slices: Iterable[dict[str, Any]], node: str) -> list[str]:
    """Names of the full GPUs (`type: gpu`) gpu.nvidia.com publishes for `node`."""
    return sorted({str(d.get("name")) for s in node_slices(slices, node)
                   for d in (s.get("spec") or {}).get("devices") or []
                   if _attribute(d, "type") == "gpu"})


def resourceslice_findings(nodes: Sequence[NodeIntent], slices: Sequence[dict[str, Any]],
                           *, served: bool = True) -> list[Finding]:
    """FM38 for each GPU node without a gpu.nvidia.com ResourceSlice (or none with a full
    GPU), FM08 for one publishing fewer GPUs than `gpuplane:nodes[].gpus`."""
    out: list[Finding] = []
    for node in nodes:
        where = f"node {node.name} (ResourceSlices of driver {DRIVER})"
        if not served:
            out.append(Finding(
                "FM38", Severity.ERROR,
                f"node {node.name}: the cluster does not serve {RESOURCE_API} ResourceSlices, "
                "so no GPU can be claimed", where,
                "Dynamic Resource Allocation needs Kubernetes 1.34 or later (resource.k8s.io/v1, "
                "on by default); upgrade the cluster or leave `gpuplane:draDriver` out"))
            continue
        mine = node_slices(slices, node.name)
        gpus = gpu_devices(slices, node.name)
        if not mine or not gpus:
            what = ("no ResourceSlice" if not mine else
                    f"{len(mine)} ResourceSlice(s) without a full GPU (type gpu)")
            out.append(Finding(
                "FM38", Severity.ERROR,
                f"no ResourceSlice from {DRIVER} on node {node.name}: {what}, so no pod can "
                "claim a GPU there", where, _DRIVER_FIX.format(node=node.name)))
        elif len(gpus) < node.gpus:
            out.append(Finding(
                "FM08", Severity.ERROR,
                f"node {node.name}: {DRIVER} publishes {len(gpus)} GPU(s) ({', '.join(gpus)}), "
                f"the stack says {node.gpus}", where,
                "set `gpuplane:nodes[].gpus` to the node's GPU count; if it is right, a GPU "
                "has fallen off (check `nvidia-smi` and Xid errors on the node)"))
    return out


def slices_settled(nodes: Sequence[NodeIntent], slices: Sequence[dict[str, Any]]) -> bool:
    """Every node publishes at least the GPUs the stack says."""
    return all(len(gpu_devices(slices, n.name)) >= n.gpus for n in nodes)


# ----------------------------------------------------------------------------- probe pods

# The scheduler's and the resourceclaim controller's words for a claim that cannot be
# satisfied (pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go@v1.34.3:
# "cannot allocate all claims"; a missing class: `device class ... does not exist`).
_DRA_TEXT = re.compile(r"cannot allocate all claims|resourceclaim|device ?class|"
                       r"resourceslice|claim .* not (?:found|allocated)", re.IGNORECASE)


def dra_cause(texts: Sequence[str], node: str) -> tuple[str, str] | None:
    """(FM38, fix) when a probe pod's events or conditions say its GPU claim could not be
    satisfied on `node`, else None."""
    said = [t for t in texts if t and _DRA_TEXT.search(t)]
    if not said:
        return None
    if any(re.search(r"device ?class", t, re.IGNORECASE) and "not" in t for t in said):
        return ("FM38", f"DeviceClass {DEVICE_CLASS} does not exist: install the DRA driver "
                "with GPUs enabled (`resources.gpus.enabled: true` in its chart values)")
    return ("FM38", _DRIVER_FIX.format(node=node))


__all__ = [
    "CLAIM",
    "DEVICE_CLASS",
    "DRIVER",
    "RESOURCE_API",
    "dra_cause",
    "dra_job",
    "gpu_devices",
    "node_slices",
    "probe_claim_template",
    "resourceslice_findings",
    "slices_settled",
]
