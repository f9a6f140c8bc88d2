"""gpuplane's own parts agree with the chart and the device plugin they configure: the
operator's CDI default per chart, the sharing config's `flags.migStrategy`, and the
resource name the checks read and ask for (`nvidia.com/gpu.shared` under renameByDefault).
Chart facts come from the charts themselves (tests/support/charts), through Helm's engine
where the rendered ClusterPolicy is what matters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from support import charts
from support.stack_cases import write_stack

from gpuplane.checks.allocatable import AllocatableSeries, allocatable_findings
from gpuplane.checks.live import CheckFailed, Waiter, run_allocatable_check
from gpuplane.checks.manifests import gpu_limits
from gpuplane.checks.settings import ChecksSettings
from gpuplane.cli.plan.run import plan_stack
from gpuplane.config import StackConfig, parse_stack_config
from gpuplane.config.helm_values import operator_values, time_slicing_data
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.toolkit.operator import toolkit_for_chart

_ENV = [{"name": "CONTAINERD_CONFIG", "value": "/etc/containerd/config.toml"}]


def _stack(chart: str, op: dict[str, Any] | None = None, **extra: Any) -> StackConfig:
    return parse_stack_config({
        "cluster": {"kubernetesVersion": "1.31.4", "containerdVersion": "1.7",
                    "nodeAccess": "none"},
        "gpuOperator": {"chartVersion": chart, **(op or {})},
        **extra,
    })


def _supported() -> dict[str, Any]:
    out = {}
    for tag, folder in charts.chart_dirs("gpu-operator").items():
        try:
            toolkit_for_chart(tag)
        except ValueError:
            continue
        out[tag] = folder
    return out


def _cluster_policy(folder: Any, values: dict[str, Any]) -> dict[str, Any]:
    docs = charts.render(folder, values)
    return next(d for d in docs if d.get("kind") == "ClusterPolicy")


# ---------------------------------------------------------------- CDI follows the chart

def test_unset_cdi_is_each_charts_own_default() -> None:
    folders = _supported()
    want = {tag: charts.lookup(charts.values(f), "cdi.enabled") for tag, f in folders.items()}
    got = {tag: operator_values(_stack(tag), _ENV)["cdi"]["enabled"] for tag in folders}
    assert got == want
    assert set(want.values()) == {False, True}    # both defaults are among the charts


@pytest.mark.parametrize("tag", ["v25.3.4", "v25.10.1"])
def test_unset_cdi_renders_the_charts_cdi_through_helm(tag: str) -> None:
    folder = _supported()[tag]
    default = _cluster_policy(folder, {})["spec"]["cdi"]["enabled"]
    ours = _cluster_policy(folder, operator_values(_stack(tag), _ENV))["spec"]["cdi"]
    assert ours["enabled"] == default


def test_cdi_the_stack_sets_wins_over_the_chart() -> None:
    assert operator_values(_stack("v25.10.1", {"cdi": False}), _ENV)["cdi"]["enabled"] is False
    assert operator_values(_stack("v25.3.4", {"cdi": True}), _ENV)["cdi"]["enabled"] is True


def _errors(tmp_path: Path, op: dict[str, Any]) -> list[dict[str, Any]]:
    write_stack(tmp_path, "case", {
        "gpuplane:cluster": {"kubernetesVersion": "1.31.4", "containerdVersion": "1.7",
                             "nodeAccess": "none"},
        "gpuplane:nodes": [{"name": "gpu-1", "gpus": 1, "os": "ubuntu22.04", "pool": "gpu"}],
        "gpuplane:runtime": {"nvidiaDefault": True},
        "gpuplane:gpuOperator": {"chartVersion": "v25.10.1", **op}})
    report = plan_stack("case", tmp_path)
    return [f for f in report["findings"] if f["severity"] == "error"]


def test_nvidia_default_under_the_charts_cdi_default_is_refused_with_the_fix(
        tmp_path: Path) -> None:
    """The plan judges what the chart will run: v25.10's CDI default keeps nvidia from
    becoming the default runtime (FM11), and the printed fix, applied, plans clean."""
    errors = _errors(tmp_path / "unset", {})
    assert [f["id"] for f in errors] == ["FM11"]
    assert "gpuplane:gpuOperator.cdi: false" in errors[0]["fix"]
    assert _errors(tmp_path / "fixed", {"cdi": False}) == []


# ---------------------------------------------------------------- migStrategy agrees

def _flags(cfg: StackConfig) -> dict[str, Any]:
    (text,) = time_slicing_data(cfg).values()
    return dict(yaml.safe_load(text)["flags"])


@pytest.mark.parametrize("strategy", [None, "single", "mixed"])
def test_sharing_config_mig_strategy_is_the_operators(strategy: str | None) -> None:
    """The ClusterPolicy Helm renders and the plugin's sharing config say the same
    strategy, set or left to the chart."""
    tag = "v25.10.1"
    op: dict[str, Any] = {"values": {"mig": {"strategy": strategy}}} if strategy else {}
    cfg = _stack(tag, op, timeSlicing={"replicas": 4})
    policy = _cluster_policy(_supported()[tag], operator_values(cfg, _ENV))
    assert _flags(cfg)["migStrategy"] == policy["spec"]["mig"]["strategy"]


# ---------------------------------------------------------------- the resource name

_NODE = NodeIntent("gpu-1", gpus=2)
_RENAMED = ClusterIntent(nodes=(_NODE,), time_slicing_replicas=4, time_slicing_rename=True)


def test_renamed_time_slicing_probe_asks_for_the_shared_resource() -> None:
    assert gpu_limits(_RENAMED, ChecksSettings()) == {"nvidia.com/gpu.shared": "1"}
    plain = ClusterIntent(nodes=(_NODE,), time_slicing_replicas=4)
    assert gpu_limits(plain, ChecksSettings()) == {"nvidia.com/gpu": "1"}


class _Cluster:
    def __init__(self, allocatable: dict[str, str]) -> None:
        self.allocatable = allocatable

    def node(self, name: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "status": {"allocatable": self.allocatable}}


def _check(allocatable: dict[str, str]) -> dict[str, Any]:
    return run_allocatable_check(_Cluster(allocatable), [_NODE], _RENAMED,  # type: ignore[arg-type]
                                 waiter=Waiter(0.0, sleep=lambda _: None), settle=1)


def test_renamed_time_slicing_allocatable_is_read_from_the_shared_resource() -> None:
    """renameByDefault: the plugin advertises 2 x 4 nvidia.com/gpu.shared and no
    nvidia.com/gpu; the check passes on that and fails naming it when short."""
    assert _check({"nvidia.com/gpu.shared": "8"})["allocatable"] == {"gpu-1": 8}
    with pytest.raises(CheckFailed) as err:
        _check({"nvidia.com/gpu.shared": "2"})
    assert "nvidia.com/gpu.shared" in str(err.value)
    (finding,) = allocatable_findings(AllocatableSeries(_NODE, (2,)), _RENAMED)
    assert finding.id == "FM10" and "nvidia.com/gpu.shared" in finding.where
