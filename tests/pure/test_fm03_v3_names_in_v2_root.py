"""FM03 on a `version = 2` root spelt with the version-3 plugin names (AKS's AgentBaker
config on containerd 2.x) beside a version-2 drop-in, what the GPU Operator's toolkit
writes when it reads that root from the file (RUNTIME_CONFIG_SOURCE=file, the workaround
of NVIDIA/aicr#1688 and NVIDIA/gpu-operator#2646). The migration keeps the root's
version-3 table and drops the drop-in's runtimes (real containerd 2.0/2.2:
tests/real/test_aks_toolkit_file_source.py). The finding names that cause, and its fix
(the runtimes under the version-3 name; on the AKS image, its own toolkit) plans clean;
before, it said to make an already version-2 drop-in version 2."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from gpuplane.cli.plan.run import plan_stack
from gpuplane.containerd import ContainerdVersion, MemoryFiles, effective_config
from gpuplane.rules import ContainerdFacts, check_containerd

ROOT = Path(__file__).resolve().parents[2]
TOP = "/etc/containerd/config.toml"
DROP = "/etc/containerd/conf.d/99-nvidia.toml"
V3 = "io.containerd.cri.v1.runtime"
AKS_ROOT = (ROOT / "components/gpuplane/data/baselines/aks-ubuntu" / TOP.lstrip("/")) \
    .read_text().replace("version = 2\n", 'version = 2\nimports = ["/etc/containerd/conf.d/'
                         '*.toml"]\n', 1)


def _drop_in(key: str) -> str:
    return (f'version = 2\n[plugins."{key}".containerd.runtimes.nvidia]\n'
            'runtime_type = "io.containerd.runc.v2"\n'
            f'[plugins."{key}".containerd.runtimes.nvidia.options]\n'
            'BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"\n')


def _fm03(drop_in: str, line: str = "2.2") -> list[Any]:
    eff = effective_config(TOP, MemoryFiles({TOP: AKS_ROOT, DROP: drop_in}),
                           ContainerdVersion.parse(line))
    return [f for f in check_containerd(ContainerdFacts(eff)) if f.id == "FM03"]


def test_fm03_v2_drop_in_under_a_v2_root_with_v3_names_names_the_cause() -> None:
    [f] = _fm03(_drop_in("io.containerd.grpc.v1.cri"))
    assert "dropped in the migration" in f.message
    assert f"keeping what {TOP} already sets there under the version-3 names" in f.message
    assert f'{TOP} is version 2 but sets the CRI runtimes under the version-3 name' in f.fix
    assert "make /etc/containerd/conf.d/99-nvidia.toml version 2" not in f.fix
    # The fix applied: the drop-in's runtimes under the version-3 name are kept.
    assert _fm03(_drop_in(V3)) == []


def _aks(tmp_path: Path, toolkit: str, values: dict[str, Any] | None) -> list[dict]:
    cfg = copy.deepcopy(yaml.safe_load((ROOT / "stacks/Pulumi.aks-ubuntu.yaml").read_text())
                        ["config"])
    cfg["gpuplane:cluster"]["containerdVersion"] = "2.3.0"
    cfg["gpuplane:gpuOperator"]["toolkit"] = toolkit
    if values is not None:
        cfg["gpuplane:gpuOperator"]["values"] = values
    (tmp_path / "Pulumi.aks.yaml").write_text(yaml.safe_dump({"config": cfg}))
    return [f for f in plan_stack("aks", tmp_path)["findings"] if f["severity"] == "error"]


def test_fm03_aks_file_source_workaround_points_at_the_images_toolkit(tmp_path: Path) -> None:
    env = {"toolkit": {"env": [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}]}}
    [fm03] = [f for f in _aks(tmp_path, "operator", env) if f["id"] == "FM03"]
    assert "`gpuplane:gpuOperator.toolkit: host`" in fm03["fix"]
    assert "under the version-3 name" in fm03["fix"]
    assert _aks(tmp_path, "host", None) == []   # the fix applied
