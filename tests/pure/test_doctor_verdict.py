"""The doctor's verdict does not say HEALTHY about what it could not check: a snapshot of
nodes.json alone is INCOMPLETE (exit 0: nothing found wrong), a full one HEALTHY."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplane.cli.main import main

DATA = Path(__file__).resolve().parents[1] / "data" / "doctor"


def _nodes_only(folder: Path) -> Path:
    folder.mkdir()
    node = {"metadata": {"name": "n1", "labels": {"nvidia.com/gpu.present": "true"}},
            "status": {"capacity": {"nvidia.com/gpu": "1"},
                       "allocatable": {"nvidia.com/gpu": "1"},
                       "nodeInfo": {"containerRuntimeVersion": "containerd://1.7.24",
                                    "kubeletVersion": "v1.31.4"}}}
    (folder / "nodes.json").write_text(json.dumps({"kind": "List", "items": [node]}))
    return folder


def test_nodes_only_snapshot_is_incomplete(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    snap = _nodes_only(tmp_path / "snap")
    assert main(["doctor", "--from", str(snap)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("INCOMPLETE: 0 error(s)") and "not checked" in last, last
    assert main(["doctor", "--from", str(snap), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "incomplete"


def test_full_healthy_snapshot_is_healthy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--from", str(DATA / "healthy"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "healthy"
