"""The plan report: every resource, the Helm values, and per node the files, whether
containerd restarts and in which batch. A plain dict, so JSON is the contract and the
text and markdown renderings are views of it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from gpuplane.agent.script import agent_source
from gpuplane.cli.plan.engine import Registered
from gpuplane.cli.plan.toolkit_view import toolkit_view
from gpuplane.config import (
    HAMI_CHART,
    OPERATOR_CHART,
    GpuOperatorConfig,
    HamiConfig,
    StackConfig,
)
from gpuplane.core.findings import Finding, Severity, has_errors
from gpuplane.plan.node import NodeContainerdPlan
from gpuplane.stack.cluster import GpuCluster

PLAN_FORMAT = 1
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
SECRET_MASK = "[secret]"
AGENT_MARK = "gp_self() {"


def node_runtimes(plan: NodeContainerdPlan,
                  captured: Mapping[str, tuple[str, str | None]]) -> dict[str, Any]:
    """The runtimes of the plan made for this node: as found, after gpuplane's files, after
    the operator's toolkit (modelled), and what they were derived from (`source`:
    `captured` with each node path's local copy, or gpuplane's `model` of the distro)."""
    return {**_source(captured), **_runtimes(plan)}


def _source(captured: Mapping[str, tuple[str, str | None]]) -> dict[str, Any]:
    return {"source": {"kind": "captured" if captured else "model",
                       "files": {path: local for path, (_, local) in sorted(captured.items())}}}


def _runtimes(plan: NodeContainerdPlan) -> dict[str, Any]:
    return {
        "asFound": plan.before.to_dict(),
        "afterGpuplane": plan.written.to_dict(),
        "afterToolkit": plan.effective.to_dict(),
    }


# A plan's part of its nodes' entries: (files, effective runtimes, effective digest).
_PlanView = tuple[dict[str, str], dict[str, Any], str]


def _plan_view(plan: NodeContainerdPlan) -> _PlanView:
    runtimes = _runtimes(plan)
    return node_files(plan), runtimes, effective_sha(runtimes["afterGpuplane"])


def node_files(plan: NodeContainerdPlan) -> dict[str, str]:
    """What the node agent writes on the node: the containerd files, and Docker's
    daemon.json when it changes."""
    files = dict(plan.files)
    if plan.docker and plan.docker.changes:
        files[plan.docker.path] = plan.docker.text
    return files


def host_units(plan: NodeContainerdPlan) -> list[dict[str, str]]:
    """The host unit steps of a node's plan: each unit the node agent records, stops,
    disables and masks (`mask`); its delete puts the unit back as it was."""
    return [{"unit": unit, "action": "mask"} for unit in plan.options.mask_units]


def effective_sha(effective: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(effective, sort_keys=True).encode()).hexdigest()[:16]


def build_report(stack: str, cfg: StackConfig, cluster: GpuCluster,
                 resources: list[Registered], findings: list[Finding],
                 withheld: list[Registered] | None = None) -> dict[str, Any]:
    """`withheld`: what a rejected stack would have registered (nothing of it is created);
    its Helm releases are shown with the values they would have had."""
    withheld = withheld or []
    plan = cluster.plan
    names = {r.urn: r.name for r in resources}
    batch_of = {node: i for i, batch in enumerate(cluster.batches) for node in batch}
    managed = cluster.rollout is not None
    written = plan.written.to_dict()
    errors = sum(f.severity is Severity.ERROR for f in findings)
    # The program holds the node rollout back when the rulebook rejects the plan: the
    # files and batches it would have rolled out are kept as `withheld*`, so a diff shows
    # the rejected change instead of files that disappear.
    held = (not managed and bool(cfg.node_access) and bool(cluster.batches)
            and has_errors(cluster.plan_findings))
    nodes = []
    # What each distinct plan says, made once and shared by the nodes planned from it (a
    # fleet's nodes mostly share one): its files, restart, effective runtimes and digest.
    derived: dict[int, _PlanView] = {}
    for node in cfg.nodes:
        mine = cluster.node_plans.get(node.name, plan)
        captured = cluster.baseline_sources.get(node.name, {})
        if id(mine) not in derived:
            derived[id(mine)] = _plan_view(mine)
        written_files, runtimes, sha = derived[id(mine)]
        nodes.append({
            "name": node.name,
            "pool": node.pool,
            "gpus": node.gpus,
            "batch": batch_of.get(node.name) if managed else None,
            # Planned from these captured copies (what the cluster planned from, not what
            # the config names); empty: from gpuplane's distro model.
            "baselineFiles": {path: local for path, (_, local) in captured.items()},
            "files": written_files if managed else {},
            "withheldFiles": written_files if held else {},
            # Host systemd units the agent masks beside the files (FM35's nvidia-imex).
            "hostUnits": host_units(mine) if managed else [],
            "withheldHostUnits": host_units(mine) if held else [],
            "restart": managed and mine.restarts and node.name in batch_of,
            # Docker is restarted once, after containerd, when its daemon.json changes.
            "dockerRestart": bool(managed and mine.docker and mine.docker.changes
                                  and node.name in batch_of),
            "effectiveSha": sha if managed else None,
            "effectiveRuntimes": {**_source(captured), **runtimes},
        })
    helm = {}
    sections: dict[str, GpuOperatorConfig | HamiConfig] = {HAMI_CHART: cfg.hami}
    if cfg.gpu_operator is not None:
        sections[OPERATOR_CHART] = cfg.gpu_operator
    for r in [*resources, *withheld]:
        if r.type == HELM_RELEASE:
            release = r.inputs.get("name", r.name)
            section = sections.get(release)
            helm[release] = {
                "chart": r.inputs.get("chart"), "version": r.inputs.get("version"),
                "repo": (r.inputs.get("repositoryOpts") or {}).get("repo"),
                # Where the chart comes from (upstream, path, http, oci) and the registry
                # its images are pulled from instead of theirs (None: the chart's own).
                "source": section.chart_source.kind if section else None,
                "imageMirror": section.image_mirror if section else None,
                "namespace": r.inputs.get("namespace"), "values": r.inputs.get("values", {}),
            }
    return {
        "format": PLAN_FORMAT,
        "stack": stack,
        "verdict": verdict(findings),
        "cluster": {
            "distro": cfg.cluster.distro.value,
            # The managed platform that owns the nodes' containerd config (title), or None.
            "platform": cfg.platform.title if cfg.platform else None,
            "kubernetesVersion": cfg.cluster.kubernetes_version,
            "containerdVersion": cfg.cluster.containerd_version,
            "containerdConfig": plan.profile.config_path,
            "containerdSocket": plan.profile.socket,
            "restartCommand": plan.profile.restart_command,
            "dockerRestartCommand": plan.docker.restart_command if plan.docker else None,
            "nodeAccess": cfg.cluster.node_access,
            "nodePod": node_pod_view(cfg),
            "devicePlugin": cfg.device_plugin,
        },
        # What to feed a managed platform's node group instead of node files
        # (docs/platform-inputs.md); None on self-managed nodes.
        "platformInput": cluster.platform_input.to_output() if cluster.platform_input else None,
        "effectiveRuntimes": {"afterGpuplane": written, "afterToolkit": plan.effective.to_dict()},
        "toolkit": toolkit_view(plan),
        "resources": [{
            "type": r.type, "name": r.name, "parent": names.get(r.parent),
            "dependsOn": sorted({names.get(d, d) for d in r.dependencies}),
            "inputs": _masked(_compact(r.inputs), r.secret_paths),
        } for r in resources],
        "helm": helm,
        "withheldResources": [{"type": r.type, "name": r.name} for r in withheld],
        "batches": cluster.batches if managed else [],
        "withheldBatches": cluster.batches if held else [],
        "config": stack_settings(cfg),
        "nodes": nodes,
        "findings": [f.to_dict() for f in findings],
        "summary": {
            "resources": len(resources),
            "nodes": len(nodes),
            "restarts": sum(n["restart"] for n in nodes),
            "dockerRestarts": sum(n["dockerRestart"] for n in nodes),
            "errors": errors,
            "warnings": sum(f.severity is Severity.WARNING for f in findings),
        },
    }


def cluster_view(stack: str, cluster: GpuCluster,
                 resources: list[Registered]) -> dict[str, Any]:
    """One GpuCluster of a program that builds several: its name, cluster facts, nodes,
    batches (and those a rejection holds back), toolkit and summary, as the report gives
    them for a program's only cluster."""
    own = build_report(stack, cluster.config, cluster, resources, cluster.plan_findings)
    return {"name": cluster.pulumi_resource_name,
            **{key: own[key] for key in ("cluster", "nodes", "batches", "withheldBatches",
                                         "toolkit", "summary")}}


def program_report(stack: str, resources: list[Registered],
                   findings: list[Finding]) -> dict[str, Any]:
    """The plan of a program that builds no GpuCluster: its resources, its Helm releases
    and the policies' verdict (the pack judges GPU resources gpuplane did not make too).
    The same shape as `build_report`, with no cluster facts, nodes or rollout."""
    names = {r.urn: r.name for r in resources}
    helm = {}
    for r in resources:
        if r.type == HELM_RELEASE:
            helm[r.inputs.get("name", r.name)] = {
                "chart": r.inputs.get("chart"), "version": r.inputs.get("version"),
                "repo": (r.inputs.get("repositoryOpts") or {}).get("repo"),
                "source": None, "imageMirror": None,
                "namespace": r.inputs.get("namespace"), "values": r.inputs.get("values", {})}
    return {
        "format": PLAN_FORMAT, "stack": stack, "verdict": verdict(findings),
        "cluster": {key: None for key in (
            "distro", "platform", "kubernetesVersion", "containerdVersion",
            "containerdConfig", "containerdSocket", "restartCommand", "dockerRestartCommand",
            "nodeAccess", "nodePod", "devicePlugin")},
        "platformInput": None, "effectiveRuntimes": None, "toolkit": None,
        "resources": [{
            "type": r.type, "name": r.name, "parent": names.get(r.parent),
            "dependsOn": sorted({names.get(d, d) for d in r.dependencies}),
            "inputs": _masked(_compact(r.inputs), r.secret_paths),
        } for r in resources],
        "helm": helm, "withheldResources": [], "batches": [], "withheldBatches": [],
        "config": None, "nodes": [], "findings": [f.to_dict() for f in findings],
        "summary": {
            "resources": len(resources), "nodes": 0, "restarts": 0, "dockerRestarts": 0,
            "errors": sum(f.severity is Severity.ERROR for f in findings),
            "warnings": sum(f.severity is Severity.WARNING for f in findings),
        },
    }


def verdict(findings: list[Finding]) -> str:
    """`rejected` when an error finding (mandatory policy or the rulebook) blocks the
    update, else `ok` (advisories allowed)."""
    return "rejected" if any(f.severity is Severity.ERROR for f in findings) else "ok"


def node_pod_view(cfg: StackConfig) -> dict[str, Any] | None:
    """With `nodeAccess: pod`: the pod each node gets, where it runs and what it needs
    (RBAC, Pod Security); None otherwise."""
    if cfg.cluster.node_access != "pod":
        return None
    from gpuplane.agent.pod import agent_pod, pod_name, rbac_needs

    namespace = cfg.node_pod_namespace
    shape = agent_pod("NODE", "apply", namespace=namespace, image=cfg.node_pod.image,
                      timeout_s=cfg.node_pod.timeout_seconds)["spec"]
    return {
        "namespace": namespace,
        "namespaceCreatedByGpuplane": namespace == cfg.gpuplane_namespace,
        "image": cfg.node_pod.image,
        "timeoutSeconds": cfg.node_pod.timeout_seconds,
        # One pod per node and run: its name from the node's (a plan of 10,000 nodes
        # lists the pattern, not 20,000 names).
        "podName": "gpuplane-agent-<sha256(node)[:10]>-<apply|restore>",
        "example": pod_name(cfg.nodes[0].name, "apply") if cfg.nodes else None,
        "hostPID": shape["hostPID"],
        "privileged": shape["containers"][0]["securityContext"]["privileged"],
        "command": shape["containers"][0]["command"],
        "needs": rbac_needs(namespace),
    }


def stack_settings(cfg: StackConfig) -> dict[str, Any]:
    """The stack's `gpuplane:*` settings as validated (defaults filled in), secrets masked:
    a diff names the keys a change touched."""
    settings = cfg.model_dump(mode="json", by_alias=True)
    if settings.get("sshPrivateKey") is not None:
        settings["sshPrivateKey"] = SECRET_MASK
    return settings


def _compact(inputs: dict[str, Any]) -> dict[str, Any]:
    """The node agent embedded in every node command's stdin, replaced by its digest: the
    files are shown per node, and a plan of 1000 nodes stays small and diffable."""
    stdin = inputs.get("stdin")
    if isinstance(stdin, str) and AGENT_MARK in stdin:
        source = agent_source()
        if source in stdin:
            inputs = {**inputs, "stdin": stdin.replace(source, _agent_digest())}
    return inputs


@cache
def _agent_digest() -> str:
    digest = hashlib.sha256(agent_source().encode()).hexdigest()[:16]
    return f"[node agent {digest}]\n"


def _masked(inputs: dict[str, Any], secret_paths: list[str]) -> dict[str, Any]:
    """Inputs with every secret replaced: a plan is posted to PRs. Only the containers on
    a secret's path are copied (the rest is shared with the registration: nothing
    mutates either, and a 10,000-node plan would otherwise copy every node's stdin)."""
    out: Any = dict(inputs)
    for path in secret_paths:
        parts = path.split(".")
        target: Any = out
        for part in parts[:-1]:
            key: Any = int(part) if isinstance(target, list) else part
            if isinstance(target, list) and 0 <= key < len(target):
                target[key] = list(target[key]) if isinstance(target[key], list) \
                    else dict(target[key]) if isinstance(target[key], dict) else target[key]
            elif isinstance(target, dict) and isinstance(target.get(key), dict | list):
                child = target[key]
                target[key] = list(child) if isinstance(child, list) else dict(child)
            else:
                target = {}
                break
            target = target[key]
        last = parts[-1]
        if isinstance(target, list):
            target[int(last)] = SECRET_MASK
        elif isinstance(target, dict) and last in target:
            target[last] = SECRET_MASK
    return out


__all__ = ["PLAN_FORMAT", "build_report", "cluster_view", "effective_sha", "program_report",
           "stack_settings",
           "verdict"]
