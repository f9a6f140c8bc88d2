"""FM30 against real containerd: the DRA driver needs CDI on in the node's merged config.
What gpuplane's node plan writes for a DRA stack is merged by containerd 1.7 and 2.x
themselves (`containerd config dump`), and the planner's prediction of `enable_cdi` (the
input of `check_dra_node_cdi`) must be what containerd makes of the files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import oracle
from support.layouts import host_path, write_layout

from gpuplane.config import StackConfig
from gpuplane.plan.node import plan_node
from gpuplane.rules.dra import check_dra_node_cdi

pytestmark = pytest.mark.real


def _stack(line: str, toolkit: str, cdi: bool) -> StackConfig:
    return StackConfig.model_validate({
        "cluster": {"kubernetesVersion": "1.34.3", "containerdVersion": line,
                    "nodeAccess": "pod"},
        "nodes": [{"name": "gpu-1"}],
        "gpuOperator": {"chartVersion": "v25.10.1", "toolkit": toolkit, "cdi": cdi},
        "draDriver": {"chartVersion": "v0.4.1"}})


def _merged_cdi(line: str, layout: dict[str, str], top: str, root: Path) -> Any:
    write_layout(layout, root)
    result = oracle.dump(line, host_path(root, top))
    assert result.ok, result.error
    assert result.config is not None
    return oracle.effective_from_dump(line, result.config)["cdi"]


@pytest.mark.parametrize("line", ["1.7", "2.0", "2.2"])
def test_fm30_the_dra_node_plan_turns_cdi_on_in_the_merged_config(
        line: str, tmp_path: Path) -> None:
    """Host toolkit with gpuOperator.cdi: false: on 1.7 gpuplane's drop-in adds
    enable_cdi = true for the DRA driver; 2.x has it on by default. Real containerd
    agrees with the plan, and the plan has no FM30."""
    oracle.require_line(line)
    cfg = _stack(line, "host", cdi=False)
    plan = plan_node(cfg.profile, cfg.containerd, cfg.plan_options())
    top = cfg.profile.config_path
    assert _merged_cdi(line, plan.layout, top, tmp_path) is True
    assert plan.effective.cdi is True
    assert check_dra_node_cdi(plan.effective.cdi, cfg.intent(), where="n") == []


@pytest.mark.parametrize("line", ["2.0", "2.2"])
def test_fm30_a_captured_config_with_cdi_off_is_refused(line: str, tmp_path: Path) -> None:
    """A node whose own containerd 2.x config sets enable_cdi = false, with the operator's
    toolkit and its CDI off: containerd keeps CDI off, the plan predicts it, FM30."""
    oracle.require_line(line)
    cfg = _stack(line, "operator", cdi=False)
    top = cfg.profile.config_path
    baseline = {top: 'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\n'
                     "  enable_cdi = false\n"}
    plan = plan_node(cfg.profile, cfg.containerd, cfg.plan_options(), current=baseline)
    assert _merged_cdi(line, plan.layout, top, tmp_path) is False
    assert plan.effective.cdi is False
    found = check_dra_node_cdi(plan.effective.cdi, cfg.intent(), where="node plan")
    assert [f.id for f in found] == ["FM30"]
