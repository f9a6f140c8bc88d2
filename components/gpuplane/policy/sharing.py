"""FM19-FM23 over a stack's resources: the operator's sharing values against the device
plugin's ConfigMap and the labels that select its keys, for gpuplane's own stacks and
for plain installs alike (gpuplane.rules.sharing decides; this finds the inputs).

A ConfigMap is the one the operator's `devicePlugin.config.name` names, or the chart's
own (`devicePlugin.config.create` with `data`); labels come from gpuplane's `NodeLabels`,
`kubernetes:core/v1:NodePatch` resources and, in a gpuplane stack, the intent's pools.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuplane.core.findings import Finding
from gpuplane.core.intent import ClusterIntent
from gpuplane.core.sharing import PLUGIN_CONFIG_LABEL
from gpuplane.policy.views import View
from gpuplane.rules._shared import at, flag, lookup, mapping
from gpuplane.rules.sharing import (
    check_mig_strategy,
    check_mps_profiles,
    check_pools,
    check_profile_keys,
)
from gpuplane.rules.sharing_plain import PlainSharing

CONFIGMAP = "kubernetes:core/v1:ConfigMap"
NODE_LABELS = "pulumi-python:dynamic/gpuplane:NodeLabels"
NODE_PATCH = "kubernetes:core/v1:NodePatch"


def _labels(views: Iterable[View]) -> list[tuple[str, str]]:
    """(node, key) for every plugin-config label the stack sets."""
    out = []
    for v in views:
        if v.type == NODE_LABELS:
            key = mapping(v.props.get("labels")).get(PLUGIN_CONFIG_LABEL)
            out += [(f"node {n}", str(key)) for n in v.props.get("nodes") or [] if key]
        elif v.type == NODE_PATCH:
            meta = mapping(v.props.get("metadata"))
            key = mapping(meta.get("labels")).get(PLUGIN_CONFIG_LABEL)
            if key:
                out.append((f"node {meta.get('name', v.name)}", str(key)))
    return out


def node_labels_of(views: Iterable[View]) -> dict[str, dict[str, str]]:
    """node -> every label the stack sets on it (gpuplane's `NodeLabels`, a program's
    `NodePatch`), for the rules that judge where a DaemonSet runs (FM32)."""
    out: dict[str, dict[str, str]] = {}
    for v in views:
        if v.type == NODE_LABELS:
            labels = {str(k): str(x) for k, x in mapping(v.props.get("labels")).items()}
            for node in v.props.get("nodes") or []:
                out.setdefault(str(node), {}).update(labels)
        elif v.type == NODE_PATCH:
            meta = mapping(v.props.get("metadata"))
            out.setdefault(str(meta.get("name", v.name)), {}).update(
                {str(k): str(x) for k, x in mapping(meta.get("labels")).items()})
    return out


def sharing_findings(views: list[View], operators: Iterable[tuple[Mapping[str, Any], str, str]],
                     intent: ClusterIntent | None) -> list[tuple[Finding, str]]:
    """`operators`: (values, where, urn) of each GPU Operator install; `intent`: the
    stack's, or None for a stack gpuplane did not make."""
    out: list[tuple[Finding, str]] = []
    labels = _labels(views)
    for values, where, urn in operators:
        if not flag(values, "devicePlugin.enabled", True):
            continue
        cfg = mapping(lookup(values, "devicePlugin.config"))
        name, default = str(cfg.get("name") or ""), str(cfg.get("default") or "")
        data: Mapping[str, Any] | None = None
        cm_where, cm_urn = f"{where} values.devicePlugin.config", urn
        if flag(values, "devicePlugin.config.create", False) and mapping(cfg.get("data")):
            data = mapping(cfg.get("data"))
        elif name:
            for v in views:
                meta = mapping(v.props.get("metadata"))
                if v.type == CONFIGMAP and meta.get("name") == name:
                    data = mapping(v.props.get("data"))
                    cm_where = f"ConfigMap {meta.get('namespace', 'default')}/{name}"
                    cm_urn = v.urn
        if data is None:
            continue
        mine = list(labels)
        if intent is not None:
            mine += [(f"pool {pool}'s nodes", key) for pool, key in intent.sharing_pools
                     if key != default]
        found = check_mig_strategy(values, data, where=cm_where) \
            + check_mps_profiles(data, where=cm_where) \
            + check_profile_keys(data, default, mine, where=cm_where, default_where=at(
                where, "values.devicePlugin.config.default", "gpuplane:sharing"))
        out += [(f, cm_urn) for f in found]
    if intent is not None and intent.sharing:
        holder = next((v.urn for v in views if v.type == CONFIGMAP), "")
        out += [(f, holder) for f in check_pools(intent, where="stack")]
    return out


def _plugin_data(values: Mapping[str, Any], views: Iterable[View]
                 ) -> Mapping[str, Any] | None:
    """The device plugin ConfigMap's data an install reads: the chart's own
    (`devicePlugin.config.create` with `data`), the program's ConfigMap by
    `devicePlugin.config.name`, {} where it names none, None where it names one the
    program does not declare."""
    cfg = mapping(lookup(values, "devicePlugin.config"))
    if flag(values, "devicePlugin.config.create", False) and mapping(cfg.get("data")):
        return mapping(cfg.get("data"))
    name = str(cfg.get("name") or "")
    if not name:
        return {}
    for v in views:
        if v.type == CONFIGMAP and mapping(v.props.get("metadata")).get("name") == name:
            return mapping(v.props.get("data"))
    return None


def plain_sharing_of(views: list[View], operators: Iterable[tuple[Mapping[str, Any], str,
                                                                   str | None]]
                     ) -> PlainSharing | None:
    """What the nodes of a program's own GPU Operator may advertise (the first install
    whose device plugin runs; a Chart and the ClusterPolicy it renders say the same), for
    FM24/FM25 over the program's workloads. `operators`: (values, where, chart version)."""
    from gpuplane.core.sharing import MIG_CONFIG_LABEL
    from gpuplane.rules.sharing import profile_docs
    from gpuplane.rules.sharing_plain import chart_layouts, plain_sharing

    for values, where, chart in operators:
        if not flag(values, "devicePlugin.enabled", True):
            continue
        data = _plugin_data(values, views)
        labels = [m for node in node_labels_of(views).values()
                  if (m := node.get(MIG_CONFIG_LABEL))]
        return plain_sharing(values, None if data is None else profile_docs(data), labels,
                             where=where, named_layouts=chart_layouts(values, chart))
    return None


__all__ = ["node_labels_of", "plain_sharing_of", "sharing_findings"]
