"""The one event-text table (`gpuplane.rules.events`): the post-deploy checks and the
doctor read a text the same way, and the table's order puts specific texts first."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplane.checks.verdicts import classify as verdict
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.doctor.cluster import ClusterView
from gpuplane.doctor.snapshot import Snapshot
from gpuplane.doctor.symptoms import classify as doctor_symptom

OPERATOR = ClusterIntent(nodes=(NodeIntent("gpu-a1", 8),))
HAMI = ClusterIntent(nodes=(NodeIntent("gpu-a1", 1),), device_plugin="hami")
SLICED = ClusterIntent(nodes=(NodeIntent("gpu-a1", 1),), time_slicing_replicas=4)
DEFAULT = ClusterIntent(nodes=(NodeIntent("gpu-a1", 1),), nvidia_default=True)
ON_16 = ClusterIntent(nodes=(NodeIntent("gpu-a1", 1),), containerd_version="1.6")
INTENTS = (OPERATOR, HAMI, SLICED, DEFAULT, ON_16)

# A NotReady GPU node, so that the doctor's node-not-ready cause has a node to point at.
_DOWN = {"metadata": {"name": "gpu-a1"},
         "status": {"capacity": {"nvidia.com/gpu": "1"},
                    "conditions": [{"type": "Ready", "status": "False"}]}}


def _doctor_ids(reason: str, message: str, intent: ClusterIntent) -> tuple[str, ...] | None:
    event: dict[str, Any] = {"type": "Warning", "reason": reason, "message": message,
                             "involvedObject": {"kind": "Pod", "namespace": "ml",
                                                "name": "p"}}
    view = ClusterView(Snapshot(nodes=[_DOWN]))
    symptom = doctor_symptom(event, view, intent, "pod:ml/p", "gpu-a1")
    return None if symptom is None else symptom.ids


# Texts that the two old tables read differently (the checks' table tried the RuntimeClass,
# CDI and glibc texts before the scheduler's `Insufficient`, the doctor's after it; the
# checks had no row for the kubelet's admission error).
TWO_TABLES_DISAGREED = [
    pytest.param("FailedCreate", 'Error creating: pods "check-" is forbidden: pod rejected: '
                 'RuntimeClass "nvidia" not found (0/3 nodes are available: 3 Insufficient '
                 "nvidia.com/gpu)", OPERATOR, "FM11", id="runtimeclass-and-insufficient"),
    pytest.param("Failed", "nvidia-container-cli: /lib64/libc.so.6: version `GLIBC_2.34' not "
                 "found; earlier: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu",
                 OPERATOR, "FM15", id="glibc-and-insufficient"),
    pytest.param("UnexpectedAdmissionError", "Allocate failed due to requested number of "
                 "devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0",
                 HAMI, "FM12", id="admission"),
]


@pytest.mark.parametrize(("reason", "message", "intent", "rule"), TWO_TABLES_DISAGREED)
def test_a_text_points_checks_and_doctor_at_the_same_rule(
        reason: str, message: str, intent: ClusterIntent, rule: str) -> None:
    """The checks report one rule; the doctor looks for several, most likely first. The
    checks' rule must be the doctor's first candidate that the intent allows, i.e. both
    read the text as the same cause."""
    found = verdict([f"{reason}: {message}"], intent, "gpu-a1")
    ids = _doctor_ids(reason, message, intent)
    assert found is not None and ids is not None, (found, ids)
    assert found[0] == rule and ids[0] == rule, (found[0], ids)


# One real text per row of the table (as the kubelet, the scheduler or the API server
# prints it).
SAMPLES = {
    "no-runtime": "FailedCreatePodSandBox: failed to get sandbox runtime: no runtime for "
                  '"nvidia" is configured',
    "no-runtimeclass": 'FailedCreate: pod rejected: RuntimeClass "nvidia" not found',
    "cdi": "Failed: failed to create containerd task: unresolvable CDI devices "
           "nvidia.com/gpu=all",
    "glibc": "Failed: nvidia-container-cli: /lib/x86_64-linux-gnu/libc.so.6: version "
             "`GLIBC_2.27' not found",
    "admission": "UnexpectedAdmissionError: Allocate failed due to requested number of "
                 "devices unavailable for nvidia.com/gpu",
    "insufficient-shares": "FailedScheduling: 0/3 nodes are available: 1 Insufficient "
                           "nvidia.com/gpu, 1 Insufficient nvidia.com/gpumem.",
    "insufficient": "FailedScheduling: 0/3 nodes are available: 1 Insufficient "
                    "nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector.",
    "node-not-ready": "FailedScheduling: 0/3 nodes are available: 1 node(s) had untolerated "
                      "taint {node.kubernetes.io/not-ready: }, 2 node(s) didn't match "
                      "Pod's node affinity/selector.",
    "node-affinity": "FailedScheduling: 0/3 nodes are available: 3 node(s) didn't match "
                     "Pod's node affinity/selector.",
    "untolerated-taint": "FailedScheduling: 0/1 nodes are available: 1 node(s) had "
                         "untolerated taint {dedicated: ml}.",
    "image-pull": "Failed: Error: ErrImagePull",
    "oom": "OOMKilled",
}


def test_every_row_has_a_sample_that_it_matches_first() -> None:
    """Each sample shows its own row before any other: the order is specific-first (a
    scheduler summary that also names a less telling reason does not win)."""
    from gpuplane.rules.events import EVENT_CAUSES, first_cause

    assert set(SAMPLES) == {c.key for c in EVENT_CAUSES}
    for key, text in SAMPLES.items():
        found = first_cause([text])
        assert found is not None and found[0].key == key, (key, found)


@pytest.mark.parametrize("intent", INTENTS, ids=lambda i: f"{i.device_plugin}-"
                         f"{i.time_slicing_replicas}-{i.nvidia_default}-"
                         f"{i.containerd_version}")
def test_both_users_pick_only_among_the_rows_rules(intent: ClusterIntent) -> None:
    """The checks' one rule and the doctor's candidates come from the row's `ids`, so the
    table is where a text's possible rules are looked up (and `causes_of` is complete)."""
    from gpuplane.rules.events import CAUSES, causes_of

    for key, text in SAMPLES.items():
        cause = CAUSES[key]
        found = verdict([text], intent, "gpu-a1")
        assert found is not None and found[0] in cause.ids, (key, found)
        assert cause in causes_of(found[0])
        reason, _, message = text.partition(": ")
        ids = _doctor_ids(reason, message, intent)
        if cause.gpu:
            assert ids is not None and set(ids) <= set(cause.ids), (key, ids)
        else:
            assert ids is None, (key, ids)


def test_the_table_is_in_the_pure_rules_layer() -> None:
    """The checks and the doctor import the table; the table imports neither."""
    import ast
    from pathlib import Path

    import gpuplane.rules.events as events

    tree = ast.parse(Path(events.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert all(m == "__future__" or not m.startswith("gpuplane.") or
               m.startswith("gpuplane.rules.") for m in imported if m), imported
