"""Causes and symptoms: how the doctor ties what it sees to the rule that explains it.

Rules (the rulebook, shared with plan and deploy time) report causes: a Finding about a
config, a values file, a node's containerd files. What a live cluster adds is symptoms:
an event on a pending pod, a failed CRI probe, a crash-looping toolkit. A symptom names
the rule ids that can cause it and where to look (scopes such as `node:gpu-a1`,
`operator`, `hami`); it becomes evidence of a matching cause, or, when no rule found
one, a finding of its own (its `fallback`), so one cause gives one finding and each
finding carries the evidence that led to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuplane.core.findings import Finding, Severity

_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True)
class Evidence:
    """What was seen and where: `source` names the object, event, file:line or probe."""

    source: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "detail": self.detail}


@dataclass
class Diagnosis:
    """One finding with the evidence gathered for it."""

    finding: Finding
    scope: str
    evidence: list[Evidence] = field(default_factory=list)

    def add(self, evidence: Evidence) -> None:
        if evidence not in self.evidence:
            self.evidence.append(evidence)

    def to_dict(self) -> dict[str, Any]:
        return {**self.finding.to_dict(), "scope": self.scope,
                "evidence": [e.to_dict() for e in self.evidence]}


@dataclass(frozen=True)
class Symptom:
    """An observation that some rule ids can explain, looked for in `scopes` in order."""

    ids: tuple[str, ...]
    scopes: tuple[str, ...]
    evidence: Evidence
    fallback: Finding | None = None   # reported when no cause is found; None: dropped
    about: tuple[str, ...] = ()       # a match must mention one of these words
    serious: bool = False             # attach only to errors (a failure, not a hint)


def causes(findings: list[Finding], scope: str) -> list[Diagnosis]:
    return [Diagnosis(f, scope) for f in findings]


def combine(diagnoses: list[Diagnosis], symptoms: list[Symptom]) -> list[Diagnosis]:
    """Attach each symptom to the first diagnosis with one of its ids in one of its
    scopes (ids in order of likelihood, then scopes in order); otherwise report its
    fallback, which later symptoms can then attach to."""
    out = list(diagnoses)
    for symptom in symptoms:
        target = _match(out, symptom)
        if target is not None:
            target.add(symptom.evidence)
        elif symptom.fallback is not None:
            out.append(Diagnosis(symptom.fallback, symptom.scopes[0], [symptom.evidence]))
    return sort(dedupe(out))


def _match(diagnoses: list[Diagnosis], symptom: Symptom) -> Diagnosis | None:
    """The first diagnosis by id, then scope; with `about`, only one whose where or message
    names what the symptom is about (the scheduler's image, the webhook's failurePolicy);
    never one milder than the symptom's own fallback."""
    floor = _RANK[symptom.fallback.severity] if symptom.fallback else _RANK[Severity.INFO]
    if symptom.serious:
        floor = _RANK[Severity.ERROR]
    for rule in symptom.ids:
        for scope in symptom.scopes:
            for diagnosis in diagnoses:
                if diagnosis.finding.id != rule or diagnosis.scope != scope:
                    continue
                if _RANK[diagnosis.finding.severity] > floor:
                    continue  # a broken thing is not filed under a milder finding
                text = f"{diagnosis.finding.where} {diagnosis.finding.message}"
                if not symptom.about or any(word in text for word in symptom.about):
                    return diagnosis
    return None


def dedupe(diagnoses: list[Diagnosis]) -> list[Diagnosis]:
    """One diagnosis per finding: the same finding from two sources merges its evidence."""
    seen: dict[Finding, Diagnosis] = {}
    for diagnosis in diagnoses:
        kept = seen.setdefault(diagnosis.finding, diagnosis)
        if kept is not diagnosis:
            for evidence in diagnosis.evidence:
                kept.add(evidence)
    return list(seen.values())


def sort(diagnoses: list[Diagnosis]) -> list[Diagnosis]:
    return sorted(diagnoses, key=lambda d: (_RANK[d.finding.severity], d.finding.id,
                                            d.scope, d.finding.where))


__all__ = ["Diagnosis", "Evidence", "Symptom", "causes", "combine"]
