"""Rendering of a doctor report: the stable JSON contract and the human text view.

JSON (`gpuplane doctor --format json`, formatVersion 1): `verdict` (healthy | problems),
`summary` (counts per severity), `cluster` (server version, collection time, GPU nodes and
pods seen, nodes inspected, what was collected), `intent` (`source`, the `inferred` fields
with where each came from, and the intent's `values`), `findings` (errors first: id,
severity, title, message, where, fix, scope, evidence [{source, detail}]), `nodes` (per
inspected node: containerd line, daemons, the kubelet's containerd and its effective
runtimes) and `notes` (what could not be collected, checked or explained). Keys are only ever added.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.console import Console
from rich.text import Text

from gpuplane.core.console import print_table
from gpuplane.core.findings import Severity
from gpuplane.doctor.analyse import DoctorReport
from gpuplane.rules import RULES

FORMAT = "gpuplane-doctor-report"
FORMAT_VERSION = 1
_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_HEADING = {Severity.ERROR: "Errors", Severity.WARNING: "Warnings", Severity.INFO: "Info"}


def counts(report: DoctorReport) -> dict[str, int]:
    return {str(s): sum(d.finding.severity is s for d in report.diagnoses) for s in Severity}


def report_to_json(report: DoctorReport) -> dict[str, Any]:
    findings = []
    for diagnosis in report.diagnoses:
        item = diagnosis.to_dict()
        rule = RULES.get(diagnosis.finding.id)
        item["title"] = rule.title if rule else ""
        findings.append(item)
    return {
        "format": FORMAT,
        "formatVersion": FORMAT_VERSION,
        "verdict": report.verdict,
        "summary": counts(report),
        "cluster": report.snapshot,
        "intent": {"source": report.intent_source, "inferred": report.inferred,
                   "values": dataclasses.asdict(report.intent)},
        "findings": findings,
        "nodes": report.nodes,
        "notes": report.notes,
    }


def render_report(report: DoctorReport, console: Console) -> None:
    """Header, findings grouped by severity with evidence and fix, nodes, notes, verdict."""
    snap = report.snapshot
    console.print(Text.assemble(
        ("gpuplane doctor", "bold"), f"  Kubernetes {snap.get('serverVersion') or '?'}",
        f"  GPU nodes: {', '.join(snap.get('gpuNodes') or []) or 'none'}",
        f"  GPU pods: {snap.get('gpuPods', 0)}",
        f"  collected {snap.get('collectedAt') or '?'}"), soft_wrap=True)
    intent = report.intent
    what = "stack intent from " + report.intent_source if report.intent_source != "inferred" \
        else "intent inferred from the cluster (no gpuplane-intent ConfigMap)"
    default = str(intent.nvidia_default).lower()
    if report.intent_source == "inferred" and "nvidia_default" not in report.inferred:
        default = "unknown"      # no node's containerd said: the rules assumed nothing
    on = f" on {intent.platform}" if intent.platform else ""
    console.print(Text(f"{what}: distro {intent.distro}{on}, containerd "
                       f"{intent.containerd_version}, device plugin {intent.device_plugin}, "
                       f"toolkit {intent.toolkit}, runtime class {intent.runtime_class}, "
                       f"nvidia default {default}, CDI "
                       f"{str(intent.cdi).lower()}"), soft_wrap=True)
    if report.inferred:
        for key, why in report.inferred.items():
            console.print(Text(f"  inferred {key}: {why}", style="dim"), soft_wrap=True)
    for severity in Severity:
        group = [d for d in report.diagnoses if d.finding.severity is severity]
        if not group:
            continue
        console.print()
        console.print(Text(f"{_HEADING[severity]} ({len(group)})", style=_STYLE[severity]))
        for diagnosis in group:
            f = diagnosis.finding
            rule = RULES.get(f.id)
            console.print(Text.assemble(
                (f"{f.severity.upper():7}", _STYLE[f.severity]), " ", (f.id, "bold"),
                f"  {rule.title if rule else ''}"), soft_wrap=True)
            console.print(Text(f"  where: {f.where}"), soft_wrap=True)
            console.print(Text(f"  {f.message}"), soft_wrap=True)
            for evidence in diagnosis.evidence:
                console.print(Text.assemble(("  seen: ", "dim"), f"{evidence.source}: ",
                                            evidence.detail), soft_wrap=True)
            console.print(Text.assemble(("  fix: ", "green"), f.fix), soft_wrap=True)
    if report.nodes:
        console.print()
        rows = []
        for node, facts in report.nodes.items():
            kubelet = facts.get("kubelet_containerd") or {}
            effective = facts.get("effective") or {}
            rows.append((node, str(facts.get("containerd", "?")), str(facts.get("daemons", "?")),
                         f"{kubelet.get('config', '?')} ({kubelet.get('socket', '?')})",
                         str(effective.get("default_runtime", "?")),
                         ", ".join(sorted(effective.get("runtimes") or {}))))
        print_table(console, "Inspected nodes", ("node", "containerd", "daemons",
                                                 "kubelet's containerd", "default runtime",
                                                 "runtimes"), rows)
    if report.notes:
        console.print()
        console.print(Text("Notes", style="bold"))
        for note in report.notes:
            console.print(Text(f"  - {note}"), soft_wrap=True)
    console.print()
    n = counts(report)
    style = {"problems": "bold red", "incomplete": "bold yellow", "healthy": "bold green"}
    unchecked = (f"; {len(report.unchecked)} not checked (see Notes): not proof of health"
                 if report.verdict == "incomplete" else "")
    console.print(Text.assemble(
        (report.verdict.upper(), style[report.verdict]),
        f": {n['error']} error(s), {n['warning']} warning(s), {n['info']} info{unchecked}"),
        soft_wrap=True)


__all__ = ["FORMAT", "FORMAT_VERSION", "render_report", "report_to_json"]
