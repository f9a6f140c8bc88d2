"""A cluster snapshot: what `gpuplane doctor` collected, as plain JSON files in a directory.

Users attach the directory to a ticket (`gpuplane doctor --save DIR`) and anyone can
re-run the diagnosis offline (`gpuplane doctor --from DIR`). Every list file holds the
shape the Kubernetes API returns for a list (`{"apiVersion", "kind", "items": [...]}`), so
`kubectl get -o json` output can be dropped in by hand; `helm-releases.json` and
`logs.json` are gpuplane's own small shapes, documented in docs/doctor.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuplane.doctor import schema

FORMAT = "gpuplane-doctor-snapshot"
FORMAT_VERSION = 1
META_FILE = "snapshot.json"
VERSION_FILE = "version.json"
INSPECTION_FILE = "inspection.json"

# file name -> (attribute, kind of the list object)
LISTS: dict[str, tuple[str, str]] = {
    "nodes.json": ("nodes", "NodeList"),
    "namespaces.json": ("namespaces", "NamespaceList"),
    "pods.json": ("pods", "PodList"),
    "events.json": ("events", "EventList"),
    "daemonsets.json": ("daemonsets", "DaemonSetList"),
    "deployments.json": ("deployments", "DeploymentList"),
    "replicasets.json": ("replicasets", "ReplicaSetList"),
    "runtimeclasses.json": ("runtimeclasses", "RuntimeClassList"),
    "configmaps.json": ("configmaps", "ConfigMapList"),
    "mutatingwebhookconfigurations.json": ("webhooks", "MutatingWebhookConfigurationList"),
    "clusterpolicies.json": ("clusterpolicies", "ClusterPolicyList"),
    "helm-releases.json": ("helm_releases", "HelmReleaseList"),
    "logs.json": ("logs", "PodLogList"),
    "resourceslices.json": ("resourceslices", "ResourceSliceList"),
    "resourceclaims.json": ("resourceclaims", "ResourceClaimList"),
    "deviceclasses.json": ("deviceclasses", "DeviceClassList"),
}
_API_VERSION = {
    "NodeList": "v1", "NamespaceList": "v1", "PodList": "v1", "EventList": "v1",
    "ConfigMapList": "v1",
    "DaemonSetList": "apps/v1", "DeploymentList": "apps/v1", "ReplicaSetList": "apps/v1",
    "RuntimeClassList": "node.k8s.io/v1",
    "MutatingWebhookConfigurationList": "admissionregistration.k8s.io/v1",
    "ClusterPolicyList": "nvidia.com/v1",
    "HelmReleaseList": "gpuplane.dev/v1", "PodLogList": "gpuplane.dev/v1",
    "ResourceSliceList": "resource.k8s.io/v1", "ResourceClaimList": "resource.k8s.io/v1",
    "DeviceClassList": "resource.k8s.io/v1",
}
_NODE_DIR = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


# What a snapshot can hold: the server version and each list, named like their files.
KINDS = ("version", *(name.removesuffix(".json") for name in LISTS))
ALL_NAMESPACES = "all"


class SnapshotError(Exception):
    """A snapshot directory that cannot be read; the message names the file and the fix."""


@dataclass
class Collected:
    """What a snapshot holds, so a rule never mistakes "not collected" for "absent".

    `kinds` are the lists that were read (None: all of them, as for a snapshot built in
    memory); `denied` and `failed` say why a kind is missing (the RBAC permission, the
    API error); `namespaces` is `all` when the namespaced lists were read cluster-wide, a
    list when only some namespaces were read, None when unknown (a hand-made snapshot)."""

    kinds: frozenset[str] | None = None
    denied: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    namespaces: str | list[str] | None = ALL_NAMESPACES

    def has(self, kind: str) -> bool:
        return kind not in self.denied and kind not in self.failed and (
            self.kinds is None or kind in self.kinds)

    def missing(self, kind: str) -> str | None:
        """`<kind> not collected (why)`, or None when it was collected."""
        if self.has(kind):
            return None
        why = (f"forbidden: needs permission to {self.denied[kind]}" if kind in self.denied
               else self.failed.get(kind))
        return f"{kind} not collected" + (f" ({why})" if why else "")

    def to_dict(self) -> dict[str, Any]:
        kinds = KINDS if self.kinds is None else sorted(self.kinds)
        return {"kinds": [k for k in kinds if self.has(k)], "denied": dict(self.denied),
                "failed": dict(self.failed), "namespaces": self.namespaces}


@dataclass
class Snapshot:
    """Everything the analysis reads; lists hold API objects as plain dicts."""

    version: dict[str, Any] = field(default_factory=dict)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    namespaces: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    deployments: list[dict[str, Any]] = field(default_factory=list)
    replicasets: list[dict[str, Any]] = field(default_factory=list)
    runtimeclasses: list[dict[str, Any]] = field(default_factory=list)
    configmaps: list[dict[str, Any]] = field(default_factory=list)
    webhooks: list[dict[str, Any]] = field(default_factory=list)
    clusterpolicies: list[dict[str, Any]] = field(default_factory=list)
    helm_releases: list[dict[str, Any]] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)
    # Dynamic Resource Allocation (doctor.dra): NVIDIA's slices, GPU claims, DeviceClasses.
    resourceslices: list[dict[str, Any]] = field(default_factory=list)
    resourceclaims: list[dict[str, Any]] = field(default_factory=list)
    deviceclasses: list[dict[str, Any]] = field(default_factory=list)
    inspections: dict[str, dict[str, Any]] = field(default_factory=dict)
    collected_at: str = ""
    source: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)   # what could not be collected, and why
    collected: Collected = field(default_factory=Collected)

    def missing(self, kind: str) -> str | None:
        """`<kind> not collected (why)` when the snapshot lacks that list, else None."""
        return self.collected.missing(kind)

    def meta(self) -> dict[str, Any]:
        lists = [name for name in LISTS if self.collected.has(name.removesuffix(".json"))]
        version = [VERSION_FILE] if self.collected.has("version") else []
        return {
            "format": FORMAT,
            "formatVersion": FORMAT_VERSION,
            "collectedAt": self.collected_at or now(),
            "source": self.source,
            "notes": self.notes,
            "collected": self.collected.to_dict(),
            "files": sorted([META_FILE, *version, *lists,
                             *(f"nodes/{n}/{INSPECTION_FILE}" for n in self.inspections)]),
        }


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def save(snapshot: Snapshot, directory: Path | str) -> Path:
    """Write the snapshot as JSON files (sorted keys, so two snapshots diff well)."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    _write(root / META_FILE, snapshot.meta())
    if snapshot.collected.has("version"):
        _write(root / VERSION_FILE, snapshot.version)
    for name, (attr, kind) in LISTS.items():
        if not snapshot.collected.has(name.removesuffix(".json")):
            continue   # not collected: no file, so a reader cannot take it for "none"
        _write(root / name, {"apiVersion": _API_VERSION[kind], "kind": kind,
                             "items": getattr(snapshot, attr)})
    for node, inspection in snapshot.inspections.items():
        if not _NODE_DIR.match(node):
            raise SnapshotError(f"node name {node!r} cannot be a directory name")
        _write(root / "nodes" / node / INSPECTION_FILE, inspection)
    return root


def load(directory: Path | str) -> Snapshot:
    """Read a snapshot directory. Missing list files are empty lists (a hand-made snapshot
    may hold only `nodes.json` and `pods.json`), unless `snapshot.json` lists them; bad
    JSON, a wrong shape or a listed file that is missing is an error naming the file."""
    root = Path(directory)
    if not root.is_dir():
        raise SnapshotError(f"{root}: not a directory; pass the folder `gpuplane doctor "
                            "--save DIR` wrote")
    meta = _read(root / META_FILE, required=False)
    if meta is None:
        meta = {}
    else:
        _check(root / META_FILE, schema.Meta, meta, "the snapshot's metadata object "
               '{"format": "gpuplane-doctor-snapshot", "formatVersion": 1, ...}')
        if meta.get("format") != FORMAT:
            raise SnapshotError(f"{root / META_FILE}: `format` is {meta.get('format')!r}, "
                                f"expected {FORMAT!r}")
        if meta.get("formatVersion") != FORMAT_VERSION:
            raise SnapshotError(
                f"{root / META_FILE}: formatVersion {meta.get('formatVersion')!r} is not "
                f"supported (this gpuplane reads {FORMAT_VERSION}); use the gpuplane version "
                "that wrote it")
        for listed in meta.get("files") or []:
            if isinstance(listed, str) and not (root / listed).is_file():
                raise SnapshotError(
                    f"{root / listed}: missing, but {META_FILE} lists it: the snapshot is "
                    "incomplete; copy the whole folder again (or remove the name from "
                    f"`files` in {META_FILE} if it was left out on purpose)")
    snap = Snapshot(collected_at=str(meta.get("collectedAt") or ""),
                    source=dict(meta.get("source") or {}),
                    notes=[str(n) for n in meta.get("notes") or []])
    record = meta.get("collected") or {}
    present = {kind for kind in KINDS if (root / f"{kind}.json").is_file()}
    snap.collected = Collected(
        kinds=frozenset(present), denied=dict(record.get("denied") or {}),
        failed=dict(record.get("failed") or {}),
        # a hand-made snapshot does not say how its lists were read
        namespaces=record.get("namespaces") if meta else None)
    version = _read(root / VERSION_FILE, required=False)
    if version is not None:
        _check(root / VERSION_FILE, schema.Version, version,
               'the API server\'s version object {"gitVersion": "v1.31.4", ...} as '
               "`kubectl get --raw /version` prints it")
        snap.version = version
    for name, (attr, kind) in LISTS.items():
        data = _read(root / name, required=False)
        if data is None:
            continue
        items = data.get("items") if isinstance(data, dict) else None
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise SnapshotError(f"{root / name}: expected a list object "
                                '{"kind": ..., "items": [objects]} as `kubectl get -o json` '
                                "prints it")
        model = schema.ITEM_MODELS[kind]
        for index, item in enumerate(items):
            found = schema.problem(model, item, f"items[{index}].")
            if found is not None:
                raise SnapshotError(f"{root / name}: {found} (a {kind} item as the API "
                                    "returns it)")
        setattr(snap, attr, items)
    nodes_dir = root / "nodes"
    if nodes_dir.is_dir():
        for sub in sorted(nodes_dir.iterdir()):
            data = _read(sub / INSPECTION_FILE, required=False)
            if data is not None:
                _check(sub / INSPECTION_FILE, schema.Inspection, data,
                       "the JSON object the node inspection program prints")
                snap.inspections[sub.name] = data
    return snap


def validate(snapshot: Snapshot) -> None:
    """The same shape check `load` makes, for a snapshot collected live (an API server or
    CRD may return what the doctor does not expect: exit 2 naming it, not a traceback)."""
    for name, (attr, kind) in LISTS.items():
        for index, item in enumerate(getattr(snapshot, attr)):
            found = schema.problem(schema.ITEM_MODELS[kind], item, f"items[{index}].")
            if found is not None:
                raise SnapshotError(f"{name.removesuffix('.json')} as the API returned them: "
                                    f"{found}")
    for node, inspection in snapshot.inspections.items():
        found = schema.problem(schema.Inspection, inspection)
        if found is not None:
            raise SnapshotError(f"node {node}'s inspection: {found}")


def _check(path: Path, model: type, data: Any, what: str) -> None:
    if not isinstance(data, dict):
        raise SnapshotError(f"{path}: expected {what}, got {schema.json_type(data)}")
    found = schema.problem(model, data)
    if found is not None:
        raise SnapshotError(f"{path}: {found}")


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _read(path: Path, *, required: bool) -> Any:
    if not path.is_file():
        if required:
            raise SnapshotError(f"{path}: missing")
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"{path}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise SnapshotError(f"{path}: not JSON the doctor can read ({exc})") from None


__all__ = ["FORMAT", "FORMAT_VERSION", "LISTS", "Collected", "Snapshot", "SnapshotError",
           "load", "save", "validate"]
