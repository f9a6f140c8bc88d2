"""One's own program (docs/own-program.md's, as written) under the real Pulumi CLI (#50):
the captured files `GpuCluster` reads itself are read the same way there, and one that is
missing fails the preview naming its stack key and the fix, with no Python traceback and
nothing created, as the bundled program does."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import yaml
from support import control_plane, pulumi_engine
from test_pulumi_engine import cluster, engine_stack_file  # noqa: F401 (fixture)

pytestmark = [pytest.mark.real, pytest.mark.engine]
REPO = Path(__file__).resolve().parents[2]


def docs_program() -> str:
    text = (REPO / "docs" / "own-program.md").read_text(encoding="utf-8")
    return next(b for b in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
                if "GpuCluster(" in b)


def test_a_missing_captured_file_fails_the_preview_naming_its_key(
        cluster: control_plane.ControlPlane, tmp_path: Path) -> None:  # noqa: F811
    engine = pulumi_engine.Engine(tmp_path / "engine", kubeconfig=cluster.kubeconfig)
    project = tmp_path / "infra"
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    (project / "__main__.py").write_text(textwrap.dedent(docs_program()))
    cfg = yaml.safe_load((REPO / "stacks" / "Pulumi.kind-smoke.yaml").read_text())["config"]
    cfg["gpuplane:cluster"].update(
        nodeAccess="pod", baselineFiles={"/etc/containerd/config.toml": "captured/x.toml"})
    cfg["gpuplane:nodes"] = [{"name": "kind-worker", "gpus": 1}]
    engine_stack_file(project, "dev", cfg)
    res = engine.run_project("preview", project, "dev")
    text = res.stdout + res.stderr
    assert not res.ok, text[-3000:]
    assert "the stack config is invalid (nothing was changed)" in text, text[-3000:]
    assert "gpuplane:cluster.baselineFiles" in text and "cannot read captured/x.toml" in text
    assert "Traceback" not in text, text[-3000:]
