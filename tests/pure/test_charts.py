"""gpuplane's facts about the charts it deploys, held against the upstream charts
themselves (../shared/charts, read through tests/support/charts.py): the toolkit each GPU Operator
chart ships, the chart defaults the rules assume, and that every value gpuplane sets is
one the chart knows."""

from __future__ import annotations

import re
from typing import Any

import pytest
from support import charts

from gpuplane.config import StackConfig, parse_stack_config
from gpuplane.config.helm_values import hami_values, operator_values
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.rules.glibc import flavour_of, glibc_of
from gpuplane.rules.hami import HAMI_DEFAULTS
from gpuplane.rules.opvalues import OPERATOR_DEFAULTS, OperatorValues, cdi_enabled
from gpuplane.rules.toolkit import check_toolkit
from gpuplane.toolkit.operator import (
    CHART_TOOLKITS,
    NEWEST_CHART,
    OLDEST_CHART,
    chart_tuple,
    default_toolkit_tag,
    toolkit_for_chart,
)


def _bare(tag: str) -> str:
    """"v1.17.8-ubuntu20.04" -> "1.17.8"."""
    match = re.match(r"^v?(\d+\.\d+\.\d+)", tag)
    assert match, tag
    return match.group(1)


def _operator_charts() -> dict[str, dict[str, Any]]:
    return {tag: charts.values(folder)
            for tag, folder in charts.chart_dirs("gpu-operator").items()}


# ---------------------------------------------------------------- chart -> toolkit

def test_toolkit_of_every_operator_chart() -> None:
    """Every chart there is known, and its toolkit is the one its values.yaml pins."""
    want = {tag: _bare(charts.lookup(values, "toolkit.version"))
            for tag, values in _operator_charts().items()}
    got = {}
    for tag in want:
        try:
            got[tag] = toolkit_for_chart(tag)
        except ValueError as exc:
            got[tag] = f"refused: {exc}"
    assert got == want


def test_toolkit_image_tag_of_every_operator_chart() -> None:
    """The whole default tag, flavour suffix included, for exactly the charts there."""
    want = {tag: charts.lookup(values, "toolkit.version")
            for tag, values in _operator_charts().items()}
    assert want == CHART_TOOLKITS
    assert (min(want, key=chart_tuple), max(want, key=chart_tuple)) == (OLDEST_CHART, NEWEST_CHART)
    assert {tag: default_toolkit_tag(tag) for tag in want} == want


@pytest.mark.parametrize("os", ["amzn2", "ubuntu22.04"])
def test_default_toolkit_flavour_against_node_glibc(os: str) -> None:
    """FM15 on a chart's default toolkit image exactly when its values.yaml tag carries a
    flavour built on a newer glibc than the node's (ubuntu20.04 up to v25.3.x)."""
    intent = ClusterIntent(nodes=(NodeIntent("gpu-1", os=os),))
    want: dict[str, bool] = {}
    got: dict[str, bool] = {}
    for tag, values in _operator_charts().items():
        flavour = flavour_of(charts.lookup(values, "toolkit.version"))
        need, have = (glibc_of(flavour) if flavour else None), glibc_of(os)
        want[tag] = bool(need and have and have < need)
        ctx = OperatorValues({}, intent, chart_tuple(tag), "Release gpu-operator")
        got[tag] = any(f.id == "FM15" for f in check_toolkit(ctx))
    assert got == want
    assert any(want.values()) == (os == "amzn2")


# ---------------------------------------------------------------- chart defaults

def test_cdi_default_of_every_operator_chart() -> None:
    want = {tag: charts.lookup(values, "cdi.enabled")
            for tag, values in _operator_charts().items()}
    got = {tag: cdi_enabled({}, chart_tuple(tag))[0] for tag in want}
    assert got == want


@pytest.mark.parametrize("path", sorted(OPERATOR_DEFAULTS))
def test_operator_defaults_the_rules_assume(path: str) -> None:
    got = {tag: charts.lookup(values, path, "<absent>")
           for tag, values in _operator_charts().items()}
    assert got == dict.fromkeys(got, OPERATOR_DEFAULTS[path])


@pytest.mark.parametrize("path", sorted(HAMI_DEFAULTS))
def test_hami_defaults_the_rules_assume(path: str) -> None:
    got = {version: charts.lookup(charts.values(folder), path, "<absent>")
           for version, folder in charts.chart_dirs("hami").items()}
    assert got == dict.fromkeys(got, HAMI_DEFAULTS[path])


# ---------------------------------------------------------------- values gpuplane sets

def _stack(chart: str, **extra: Any) -> StackConfig:
    """A stack that makes gpuplane set every value it can (toolkit image, time-slicing)."""
    return parse_stack_config({
        "cluster": {"kubernetesVersion": "1.31.4", "containerdVersion": "1.7",
                    "nodeAccess": "none"},
        "gpuOperator": {"chartVersion": chart, "cdi": True, "toolkitImage": {
            "repository": "nvcr.io/nvidia/k8s/container-toolkit", "tag": "v1.18.1"}},
        **extra,
    })


_TOOLKIT_ENV = [{"name": "CONTAINERD_CONFIG", "value": "/etc/containerd/config.toml"}]


def _unknown(folder: Any, values: dict[str, Any]) -> list[str]:
    return [p for p in charts.leaf_paths(values) if not charts.consumed(folder, p)]


def test_every_operator_value_gpuplane_sets_is_in_every_chart() -> None:
    configs = [_stack("v25.10.1", timeSlicing={"replicas": 4}),
               _stack("v25.10.1", devicePlugin="hami")]
    sets = [operator_values(cfg, _TOOLKIT_ENV) for cfg in configs]
    paths = sorted({p for values in sets for p in charts.leaf_paths(values)})
    assert "devicePlugin.config.name" in paths and "toolkit.version" in paths
    unknown = {tag: [p for p in paths if not charts.consumed(folder, p)]
               for tag, folder in charts.chart_dirs("gpu-operator").items()}
    assert unknown == {key: [] for key in unknown}


def test_every_hami_value_gpuplane_sets_is_in_every_chart() -> None:
    values = hami_values(_stack("v25.10.1", devicePlugin="hami"))
    unknown = {version: _unknown(folder, values)
               for version, folder in charts.chart_dirs("hami").items()}
    assert unknown == {key: [] for key in unknown}


def test_the_consumed_check_can_fail() -> None:
    """A path no chart knows is reported (the check above is not vacuous)."""
    folder = next(iter(charts.chart_dirs("hami").values()))
    assert _unknown(folder, {"scheduler": {"kubeScheduler": {"imageTagz": "x"}}}) == [
        "scheduler.kubeScheduler.imageTagz"]


def test_hami_scheduler_tag_key_the_rules_read_is_the_charts() -> None:
    """The rules read `scheduler.kubeScheduler.image.tag` from chart 2.7 on
    (`imageTag` before): every HAMi chart there must read that key and not the old one."""
    from gpuplane.rules import hami as hami_rules
    from gpuplane.rules._shared import version_tuple

    got = {}
    for version, folder in charts.chart_dirs("hami").items():
        chart = version_tuple(version)
        assert chart is not None
        key = hami_rules._KUBE_TAG if chart >= hami_rules.IMAGE_TAG_FROM \
            else hami_rules._OLD_KUBE_TAG
        refs = charts.template_refs(folder)
        got[version] = (key in refs, hami_rules._OLD_KUBE_TAG in refs)
    assert got == dict.fromkeys(got, (True, False))


def test_default_hami_chart_is_one_there() -> None:
    from gpuplane.config import HamiConfig

    assert HamiConfig().chart_version in charts.chart_dirs("hami")
