"""`gpuplane doctor`: diagnose a live GPU cluster or a saved snapshot with the rulebook.

collect (client → Snapshot, with a record of what was collected) → snapshot (save/load a
directory of JSON files, each checked against `schema`) → inspect
(a short-lived pod per GPU node runs the packaged inspection program) → analyse (the
rules plus symptom → cause mapping) → report (text and stable JSON).
"""

from gpuplane.doctor.analyse import DoctorReport, analyse
from gpuplane.doctor.collect import collect
from gpuplane.doctor.diagnosis import Diagnosis, Evidence
from gpuplane.doctor.report import render_report, report_to_json
from gpuplane.doctor.snapshot import Snapshot, SnapshotError, load, save
from gpuplane.kube.client import ApiError, ClusterClient, CollectError, KubeClient

__all__ = [
    "ApiError",
    "ClusterClient",
    "CollectError",
    "Diagnosis",
    "DoctorReport",
    "Evidence",
    "KubeClient",
    "Snapshot",
    "SnapshotError",
    "analyse",
    "collect",
    "load",
    "render_report",
    "report_to_json",
    "save",
]
