"""`gpuplane:sharing` through Helm's own engine on every supported GPU Operator chart
(issue #47): the device plugin's ConfigMap name and default key, the MIG strategy, MIG
Manager's config and env reach the rendered ClusterPolicy; nothing gpuplane sets is
dropped by a chart's templates."""

from __future__ import annotations

from typing import Any

import pytest
from support import charts
from support.stack_cases import config_of

from gpuplane.config import StackConfig
from gpuplane.config.helm_values import operator_values

VERSIONS = list(charts.chart_dirs("gpu-operator"))


def _stack(chart: str, **pool: Any) -> StackConfig:
    cfg = {k.removeprefix("gpuplane:"): v for k, v in config_of("h100-mig").items()}
    cfg["gpuOperator"]["chartVersion"] = chart
    cfg["sharing"]["pools"]["h100"].update(pool)
    cfg["cluster"] = {**cfg["cluster"], "platform": "gke-ubuntu", "distro": "kubeadm",
                      "kubernetesVersion": "1.33.5", "containerdVersion": "2.0"} \
        if pool.get("gke") else cfg["cluster"]
    cfg["sharing"]["pools"]["h100"].pop("gke", None)
    return StackConfig.model_validate(cfg)


def _cluster_policy(chart: str, values: dict[str, Any]) -> dict[str, Any]:
    docs = charts.render(charts.chart_dirs("gpu-operator")[chart], values,
                         namespace="gpu-operator")
    found = [d for d in docs if d.get("kind") == "ClusterPolicy"]
    assert len(found) == 1, [d.get("kind") for d in docs]
    return dict(found[0]["spec"])


@pytest.mark.parametrize("chart", VERSIONS)
def test_sharing_values_reach_the_cluster_policy(chart: str) -> None:
    spec = _cluster_policy(chart, operator_values(_stack(chart), []))
    assert spec["mig"]["strategy"] == "mixed"
    assert spec["devicePlugin"]["config"] == {"name": "device-plugin-config",
                                              "default": "default"}
    assert spec["migManager"]["enabled"] is True


@pytest.mark.parametrize("chart", [VERSIONS[0], VERSIONS[-1]])
def test_custom_layout_and_gke_reboot_reach_mig_manager(chart: str) -> None:
    cfg = _stack(chart, gke=True, mig={"strategy": "single", "layout": {"1g.20gb": 4}})
    spec = _cluster_policy(chart, operator_values(cfg, []))
    assert spec["mig"]["strategy"] == "single"
    assert spec["migManager"]["config"] == {"name": "gpuplane-mig-parted-config",
                                            "default": "all-disabled"}
    assert {"name": "WITH_REBOOT", "value": "true"} in spec["migManager"]["env"]
