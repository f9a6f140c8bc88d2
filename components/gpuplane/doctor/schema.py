"""The shape of every snapshot file, checked when a snapshot is loaded.

The analysis reads API objects as plain dicts; a snapshot written by hand (`kubectl get
-o json`), edited or truncated may hold any JSON. Rather than guard every read, each file
is checked once against the fields the doctor reads (everything else is allowed and
ignored), so a malformed file is refused with its name, the item and field, and what was
expected, and the analysis can rely on the types. The models are validation only: the
dicts themselves are kept as the API returned them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr, ValidationError

Quantity = StrictStr | StrictInt | float
Strings = dict[StrictStr, StrictStr]


class _Open(BaseModel):
    """Unknown keys are allowed (the API has many more than the doctor reads)."""

    model_config = ConfigDict(extra="allow")


class OwnerReference(_Open):
    kind: StrictStr = ""
    name: StrictStr = ""
    controller: StrictBool | None = None


class ObjectMeta(_Open):
    name: StrictStr | None = None
    namespace: StrictStr | None = None
    labels: Strings | None = None
    annotations: Strings | None = None
    ownerReferences: list[OwnerReference] | None = None


class _ApiObject(_Open):
    """What every API object has: `kind` is read too (pod_spec_of picks the spec by it)."""

    apiVersion: StrictStr | None = None
    kind: StrictStr | None = None
    metadata: ObjectMeta | None = None


class EnvVar(_Open):
    name: StrictStr | None = None
    value: StrictStr | None = None


class Resources(_Open):
    limits: dict[StrictStr, Quantity | None] | None = None
    requests: dict[StrictStr, Quantity | None] | None = None


class SecurityContext(_Open):
    privileged: StrictBool | None = None


class Container(_Open):
    name: StrictStr | None = None
    image: StrictStr | None = None
    env: list[EnvVar] | None = None
    resources: Resources | None = None
    restartPolicy: StrictStr | None = None
    securityContext: SecurityContext | None = None


class PodSpec(_Open):
    containers: list[Container] | None = None
    initContainers: list[Container] | None = None
    nodeName: StrictStr | None = None
    nodeSelector: Strings | None = None
    runtimeClassName: StrictStr | None = None
    schedulerName: StrictStr | None = None


class ContainerStateWaiting(_Open):
    reason: StrictStr | None = None
    message: StrictStr | None = None


class ContainerStateTerminated(_Open):
    exitCode: StrictInt | None = None
    reason: StrictStr | None = None
    message: StrictStr | None = None


class ContainerState(_Open):
    waiting: ContainerStateWaiting | None = None
    terminated: ContainerStateTerminated | None = None
    running: dict[str, Any] | None = None


class ContainerStatus(_Open):
    name: StrictStr | None = None
    restartCount: StrictInt | None = None
    state: ContainerState | None = None
    lastState: ContainerState | None = None


class PodStatus(_Open):
    phase: StrictStr | None = None
    containerStatuses: list[ContainerStatus] | None = None
    initContainerStatuses: list[ContainerStatus] | None = None


class Pod(_ApiObject):
    spec: PodSpec | None = None
    status: PodStatus | None = None


class NodeCondition(_Open):
    type: StrictStr | None = None
    status: StrictStr | None = None
    reason: StrictStr | None = None
    message: StrictStr | None = None


class NodeSystemInfo(_Open):
    """Only the strings read; newer servers add objects here (`swap` from 1.30)."""

    kubeletVersion: StrictStr | None = None
    containerRuntimeVersion: StrictStr | None = None
    osImage: StrictStr | None = None


class NodeStatus(_Open):
    capacity: dict[StrictStr, Quantity] | None = None
    allocatable: dict[StrictStr, Quantity] | None = None
    conditions: list[NodeCondition] | None = None
    nodeInfo: NodeSystemInfo | None = None


class Node(_ApiObject):
    status: NodeStatus | None = None


class Namespace(_ApiObject):
    """Only its metadata (labels) is read."""


class ObjectReference(_Open):
    kind: StrictStr | None = None
    namespace: StrictStr | None = None
    name: StrictStr | None = None


class EventSeries(_Open):
    count: StrictInt | None = None


class Event(_ApiObject):
    involvedObject: ObjectReference | None = None
    reason: StrictStr | None = None
    message: StrictStr | None = None
    type: StrictStr | None = None
    count: StrictInt | None = None
    series: EventSeries | None = None
    lastTimestamp: StrictStr | None = None
    eventTime: StrictStr | None = None


class LabelSelectorRequirement(_Open):
    key: StrictStr | None = None
    operator: StrictStr | None = None
    values: list[StrictStr] | None = None


class LabelSelector(_Open):
    matchLabels: Strings | None = None
    matchExpressions: list[LabelSelectorRequirement] | None = None


class PodTemplate(_Open):
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None


class WorkloadSpec(_Open):
    replicas: StrictInt | None = None
    selector: LabelSelector | None = None
    template: PodTemplate | None = None


class WorkloadStatus(_Open):
    desiredNumberScheduled: StrictInt | None = None
    numberReady: StrictInt | None = None
    numberAvailable: StrictInt | None = None
    readyReplicas: StrictInt | None = None
    replicas: StrictInt | None = None


class Workload(_ApiObject):
    """DaemonSet, Deployment, ReplicaSet."""

    spec: WorkloadSpec | None = None
    status: WorkloadStatus | None = None


class RuntimeClass(_ApiObject):
    handler: StrictStr | None = None


class ConfigMap(_ApiObject):
    data: Strings | None = None


class ServiceReference(_Open):
    name: StrictStr | None = None
    namespace: StrictStr | None = None


class WebhookClientConfig(_Open):
    service: ServiceReference | None = None


class Webhook(_Open):
    name: StrictStr | None = None
    failurePolicy: StrictStr | None = None
    clientConfig: WebhookClientConfig | None = None
    namespaceSelector: LabelSelector | None = None
    objectSelector: LabelSelector | None = None


class WebhookConfiguration(_ApiObject):
    webhooks: list[Webhook] | None = None


class ClusterPolicy(_ApiObject):
    spec: dict[str, Any] | None = None


class Chart(_Open):
    name: StrictStr | None = None
    version: StrictStr | None = None
    appVersion: StrictStr | None = None


class HelmRelease(_Open):
    name: StrictStr | None = None
    namespace: StrictStr | None = None
    chart: Chart | None = None
    values: dict[str, Any] | None = None
    chartValues: dict[str, Any] | None = None


class PodLog(_Open):
    namespace: StrictStr | None = None
    pod: StrictStr | None = None
    container: StrictStr | None = None
    text: StrictStr | None = None


class Version(_Open):
    gitVersion: StrictStr | None = None


class Collected(_Open):
    kinds: list[StrictStr] | None = None
    namespaces: StrictStr | list[StrictStr] | None = None
    denied: Strings | None = None
    failed: Strings | None = None


class Meta(_Open):
    format: Any = None
    formatVersion: Any = None
    collectedAt: StrictStr | None = None
    source: dict[str, Any] | None = None
    notes: list[StrictStr] | None = None
    files: list[StrictStr] | None = None
    collected: Collected | None = None


# ------------------------------------------------------------------ node inspection


class Daemon(_Open):
    pid: StrictInt | None = None
    config: StrictStr | None = None
    binary: StrictStr | None = None
    address: StrictStr | None = None
    version: StrictStr | None = None


class Kubelet(_Open):
    cgroup_driver: StrictStr | None = None


class ConfigDump(_Open):
    ok: StrictBool | None = None
    pid: StrictInt | None = None
    stdout: StrictStr | None = None


class CriProbe(_Open):
    status: StrictStr | None = None
    error: StrictStr | None = None
    method: StrictStr | None = None
    handler: StrictStr | None = None


class Glibc(_Open):
    version: StrictStr | None = None


class Binary(_Open):
    path: StrictStr | None = None
    present: StrictBool | None = None
    glibc_required: StrictStr | None = None


class Inspection(_Open):
    daemons: list[Daemon] | None = None
    kubelet_daemon: StrictInt | None = None
    files: Strings | None = None
    errors: list[StrictStr] | None = None
    kubelet: Kubelet | None = None
    config_dump: ConfigDump | None = None
    cri_probe: CriProbe | None = None
    glibc: Glibc | None = None
    binaries: list[Binary] | None = None
    os_release: Strings | None = None


class _DraSpec(_Open):
    driver: StrictStr | None = None
    nodeName: StrictStr | None = None
    devices: list[dict[StrictStr, Any]] | dict[StrictStr, Any] | None = None


class DraObject(_ApiObject):
    """A ResourceSlice, ResourceClaim or DeviceClass (resource.k8s.io): doctor.dra reads
    `spec.driver`, `spec.nodeName`, `spec.devices` and `status.allocation`."""

    spec: _DraSpec | None = None
    status: dict[StrictStr, Any] | None = None


ITEM_MODELS: dict[str, type[BaseModel]] = {
    "NodeList": Node, "NamespaceList": Namespace, "PodList": Pod, "EventList": Event,
    "DaemonSetList": Workload, "DeploymentList": Workload, "ReplicaSetList": Workload,
    "RuntimeClassList": RuntimeClass, "ConfigMapList": ConfigMap,
    "MutatingWebhookConfigurationList": WebhookConfiguration,
    "ClusterPolicyList": ClusterPolicy, "HelmReleaseList": HelmRelease, "PodLogList": PodLog,
    "ResourceSliceList": DraObject, "ResourceClaimList": DraObject, "DeviceClassList": DraObject,
}
_TYPE_NAMES = {"dict_type": "an object", "list_type": "a list", "string_type": "a string",
               "int_type": "an integer", "bool_type": "true or false",
               "model_type": "an object", "float_type": "a number",
               "int_from_float": "an integer"}


def problem(model: type[BaseModel], data: Any, prefix: str = "") -> str | None:
    """None when `data` fits `model`, else `<path>: expected <what> (got <json type>)`
    for the first field that does not."""
    try:
        model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        first = _path(errors[0]["loc"])
        # a union (a quantity: string or number) fails once per branch at the same field
        expected = " or ".join(dict.fromkeys(_expected(e) for e in errors
                                             if _path(e["loc"]) == first))
        return (f"{prefix + first or 'the file'}: expected {expected}, got "
                f"{json_type(errors[0]['input'])}")
    return None


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "int", "float", "bool", "list", "dict") or "[" in str(part):
            continue   # union branch names pydantic adds, not fields
        else:
            out += f".{part}" if out else str(part)
    return out


def _expected(error: Any) -> str:
    kind = str(error.get("type", ""))
    if kind in _TYPE_NAMES:
        return _TYPE_NAMES[kind]
    return str(error.get("msg", "another value")).lower()


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


__all__ = ["ITEM_MODELS", "Inspection", "Meta", "Version", "json_type", "problem"]
