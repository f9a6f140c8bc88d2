"""What the doctor does when a fact was not collected: it says so, and never lets a
default stand in for it.

- containerd outside the model (<= 1.5, >= 3, or not reported): the rules run as if the
  nodes ran each modelled line, and only findings that come out the same whatever the line
  are kept: they do not depend on containerd's merge model.
- the default runtime not known (no node's containerd said, no gpuplane-intent record):
  a finding that assumes runc is the default becomes a warning that says what it depends
  on; one that compares the cluster with a made-up `nvidiaDefault` is not checked.
- the API server's version not known: HAMi's kube-scheduler tag is not judged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from gpuplane.containerd import ContainerdVersion
from gpuplane.core.findings import Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.doctor.diagnosis import Diagnosis
from gpuplane.doctor.infer import UNKNOWN

# The lines the rules are run against when the nodes run one gpuplane does not model: its
# oldest, the last 1.x and the deep-merging 2.x.
MODEL_LINES = ("1.6", "1.7", "2.1")

Rules = Callable[[ClusterIntent, list[str]], list[Diagnosis]]


def outside_model(version: str) -> str | None:
    """Why gpuplane cannot model containerd `version` (<= 1.5, >= 3, unknown), or None."""
    try:
        ContainerdVersion.parse(version)
    except ValueError as exc:
        return str(exc)
    return None


def line_independent(rules: Rules, intent: ClusterIntent, notes: list[str], why: str
                     ) -> list[Diagnosis]:
    """The rules on a containerd gpuplane does not model: each is run as if the nodes ran
    every modelled line, and only findings that come out the same whatever the line are
    kept. Those do not depend on containerd's merge model; the others are not checked."""
    runs = []
    for line in MODEL_LINES:
        scratch: list[str] = []
        runs.append(rules(replace(intent, containerd_version=line), scratch))
    first = runs[0]
    notes += scratch
    kept = [d for d in first if all(any(d.finding == o.finding and d.scope == o.scope
                                         for o in run) for run in runs[1:])]
    dropped = sorted({d.finding.id for run in runs for d in run
                      if not any(d.finding == k.finding and d.scope == k.scope for k in kept)})
    what = ("the nodes' containerd version is not known" if intent.containerd_version ==
            UNKNOWN else f"containerd {intent.containerd_version} on the nodes: {why}")
    notes.append(
        f"{what}. The rules that do not depend on containerd's line still ran; its config "
        "files, CDI support and the toolkit's containerd paths were not judged"
        + (f" (not checked: {', '.join(dropped)})" if dropped else ""))
    return kept


# Findings whose claim rests on runc being containerd's default runtime.
_ASSUMES_RUNC_DEFAULT = re.compile(r"runc is (containerd's )?(the )?default|nvidia is not "
                                   r"containerd's default runtime")


def default_runtime_unknown(diagnoses: list[Diagnosis], notes: list[str]) -> list[Diagnosis]:
    """No node's containerd said which runtime is the default and no stack record did: a
    finding that compares the cluster with a made-up `nvidiaDefault` (FM09) is dropped, and
    one that assumes runc is the default becomes a warning that says so."""
    out = []
    for diagnosis in diagnoses:
        finding = diagnosis.finding
        if finding.id == "FM09" and "nvidiaDefault is false" in finding.message:
            notes.append(f"not checked: whether nvidia should be the default runtime "
                         f"({finding.where}): no node was inspected")
            continue
        out.append(_hedged(diagnosis))
    return out


def _hedged(diagnosis: Diagnosis) -> Diagnosis:
    """A finding that assumes runc is the default runtime, when no node's containerd said
    which one is: a warning that says what it depends on, not an error from missing data."""
    finding = diagnosis.finding
    if finding.severity is not Severity.ERROR or not _ASSUMES_RUNC_DEFAULT.search(
            finding.message):
        return diagnosis
    message = ("not known whether nvidia is containerd's default runtime (no node was "
               "inspected and no gpuplane-intent record says): if it is not, "
               + finding.message)
    return replace(diagnosis, finding=replace(finding, severity=Severity.WARNING,
                                              message=message))


def kubernetes_unknown(diagnoses: list[Diagnosis], notes: list[str]) -> list[Diagnosis]:
    """The API server's version was not collected and no control-plane node was seen: the
    kube-scheduler tag rule compared against a default, so it is not checked."""
    out = []
    for diagnosis in diagnoses:
        if "kubeScheduler" in diagnosis.finding.where:
            notes.append(f"not checked: {diagnosis.finding.where} against the API server "
                         "(its version was not collected and no control-plane node was seen)")
            continue
        out.append(diagnosis)
    return out


__all__ = ["MODEL_LINES", "default_runtime_unknown", "kubernetes_unknown", "line_independent",
           "outside_model"]
