"""AKS Ubuntu 24.04 (AgentBaker's `version = 2` config with the version-3 plugin names)
with the GPU Operator's toolkit and RUNTIME_CONFIG_SOURCE=file, the workaround of
NVIDIA/aicr#1688 and NVIDIA/gpu-operator#2646 for containerd 2.3's refusal of the
version-4 drop-in a `config dump` source writes (issue #46 item 8b).

Measured with the real installers (1.18.1, 1.19.1) and real containerd 2.0/2.2: the
file source gives a version-2 drop-in whose runtimes sit under the version-2 CRI name,
and containerd 2.x's migration keeps the root's version-3 runtime table instead, so the
operator's runtimes never reach containerd; GPU pods keep running only through AKS's
own `nvidia-container-runtime`. The plan says so (FM03, the runtimes it names are the
ones real containerd drops) rather than passing a toolkit that configures nothing; the
configuration that works, the image's toolkit (`gpuOperator.toolkit: host`), plans
clean on containerd 2.3."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import oracle, toolkit_oracle
from support.layouts import host_path, write_layout
from support.operator_env import operator_env

from gpuplane.cli.plan.run import plan_stack

ROOT = Path(__file__).resolve().parents[2]
TOP = "/etc/containerd/config.toml"
AKS_NODE = {TOP: (ROOT / "components/gpuplane/data/baselines/aks-ubuntu" / TOP.lstrip("/"))
            .read_text()}
RUNTIME = "io.containerd.cri.v1.runtime"
FILE_SOURCE = [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}]


def _aks_plan(tmp_path: Path, line: str, toolkit: str,
              env: list[dict[str, str]] | None) -> dict[str, Any]:
    cfg = copy.deepcopy(yaml.safe_load((ROOT / "stacks/Pulumi.aks-ubuntu.yaml").read_text())
                        ["config"])
    cfg["gpuplane:cluster"]["containerdVersion"] = line
    cfg["gpuplane:gpuOperator"]["toolkit"] = toolkit
    if env is not None:
        cfg["gpuplane:gpuOperator"]["values"] = {"toolkit": {"env": env}}
    (tmp_path / "Pulumi.aks.yaml").write_text(yaml.safe_dump({"config": cfg}))
    return plan_stack("aks", tmp_path)


@pytest.mark.real
@pytest.mark.parametrize("toolkit", ["1.18.1", "1.19.1"])
@pytest.mark.parametrize("line", ["2.0", "2.2"])
def test_fm03_file_source_on_aks_drops_the_operators_runtimes_in_real_containerd(
        line: str, toolkit: str, tmp_path: Path) -> None:
    oracle.require_line(line)
    env = operator_env(toolkit_oracle.chart_of(toolkit), FILE_SOURCE, cdi=True,
                       runtime_class="nvidia-container-runtime")
    run = toolkit_oracle.run_toolkit(toolkit, dict(AKS_NODE), env, tmp_path / "tk",
                                     containerd=(line, "/usr/bin/containerd"))
    write_layout({**AKS_NODE, **run.written}, tmp_path / "node")
    dumped = oracle.dump(line, host_path(tmp_path / "node", TOP))
    assert dumped.ok and dumped.config is not None, dumped.error
    runtimes = dumped.config["plugins"][RUNTIME]["containerd"]["runtimes"]
    assert not {"nvidia-cdi", "nvidia-legacy"} & set(runtimes)
    assert runtimes["nvidia-container-runtime"]["options"]["BinaryName"] == \
        "/usr/bin/nvidia-container-runtime"   # AKS's own, not the operator's
    report = _aks_plan(tmp_path, line, "operator", FILE_SOURCE)
    [fm03] = [f for f in report["findings"] if f["id"] == "FM03" and "dropped in the "
              "migration" in f["message"]]
    assert fm03["severity"] == "error"
    assert "runtime nvidia-cdi, runtime nvidia-legacy" in fm03["message"]


@pytest.mark.parametrize("line", ["2.2", "2.3.0"])
def test_fm03_aks_with_the_images_toolkit_plans_clean(line: str, tmp_path: Path) -> None:
    report = _aks_plan(tmp_path, line, "host", None)
    assert [f for f in report["findings"] if f["severity"] == "error"] == []
