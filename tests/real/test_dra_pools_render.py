"""`gpuplane:draDriver.pools` through Helm's own engine (issue #48): on every supported GPU
Operator chart the ClusterPolicy keeps its device plugin (with the sharing config) where
the driver serves some pools only, and turns it off where it serves every GPU node; on
every DRA driver chart the kubelet plugin DaemonSet selects gpuplane's label, beside the
chart's own GPU-node affinity."""

from __future__ import annotations

from typing import Any

import pytest
from support import charts
from support.stack_cases import config_of

from gpuplane.config import StackConfig
from gpuplane.config.helm_values import dra_values, operator_values
from gpuplane.rules.dra_facts import DRA_KNOWN, dra_chart_of

OPERATORS = list(charts.chart_dirs("gpu-operator"))


def _stack(*, pools: bool = True, operator: str = "v25.10.1",
           dra: str = "v0.4.1") -> StackConfig:
    cfg = {k.removeprefix("gpuplane:"): v for k, v in config_of("kubeadm-dra-pools").items()}
    cfg["gpuOperator"]["chartVersion"] = operator
    cfg["draDriver"]["chartVersion"] = dra
    if not pools:
        del cfg["draDriver"]["pools"], cfg["sharing"]
    return StackConfig.model_validate(cfg)


def _cluster_policy(chart: str, values: dict[str, Any]) -> dict[str, Any]:
    docs = charts.render(charts.chart_dirs("gpu-operator")[chart], values,
                         namespace="gpu-operator")
    (policy,) = [d for d in docs if d.get("kind") == "ClusterPolicy"]
    return dict(policy["spec"])


def _kubelet_plugin(tag: str, values: dict[str, Any]) -> dict[str, Any]:
    docs = charts.render(charts.chart_dirs(dra_chart_of(tag))[tag], values,
                         namespace="nvidia-dra-driver-gpu")
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"
             and d["metadata"]["name"].endswith("kubelet-plugin")]
    return dict(ds["spec"]["template"]["spec"])


@pytest.mark.parametrize("chart", OPERATORS)
def test_the_operator_keeps_its_device_plugin_only_with_pools(chart: str) -> None:
    split = _cluster_policy(chart, operator_values(_stack(operator=chart), []))
    assert split["devicePlugin"]["enabled"] is True
    assert split["devicePlugin"]["config"] == {"name": "device-plugin-config",
                                               "default": "default"}
    whole = _cluster_policy(chart, operator_values(_stack(pools=False, operator=chart), []))
    assert whole["devicePlugin"]["enabled"] is False


@pytest.mark.parametrize("tag", DRA_KNOWN)
def test_fm32_the_split_reaches_both_charts_at_every_tag(tag: str) -> None:
    """The kubelet plugin runs only on gpuplane's DRA nodes (nodeSelector), still within
    the chart's GPU-node affinity; without pools it has no selector, as before."""
    pod = _kubelet_plugin(tag, dra_values(_stack(dra=tag)))
    assert pod["nodeSelector"] == {"gpuplane.dev/dra-driver": "true"}
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    keys = {e["key"] for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"]}
    assert "nvidia.com/gpu.present" in keys
    assert "nodeSelector" not in _kubelet_plugin(tag, dra_values(_stack(pools=False, dra=tag)))
