"""Operator rules that depend on which GPU Operator chart runs: the chart's toolkit (its
flavour, its version, whether it writes a drop-in and reads RUNTIME_CONFIG_SOURCE) and
what the chart's operator adds to the toolkit's env (gpuplane.toolkit.operator)."""

from __future__ import annotations

import pytest

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.findings import Finding
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.distros.profiles import profile
from gpuplane.rules.opvalues import OperatorValues
from gpuplane.rules.toolkit import check_toolkit
from gpuplane.rules.toolkit_version import toolkit_version
from gpuplane.toolkit.env import toolkit_env_for
from gpuplane.toolkit.operator import (
    FIRST_DROPIN_CHART,
    chart_tuple,
    chart_writes_dropin,
    known_toolkit_tag,
    toolkit_for_chart,
)
from gpuplane.toolkit.options import PlanOptions


def _check(values: dict, chart: str, **intent: object) -> list[Finding]:
    ctx = OperatorValues(values, ClusterIntent(**intent),  # type: ignore[arg-type]
                         chart_tuple(chart), "Release gpu-operator")
    return check_toolkit(ctx)


@pytest.mark.parametrize(("chart", "fm09"), [
    ("v24.9.2", True), ("v25.3.4", True), ("v25.10.0", False), ("v26.7.0", False)])
def test_fm09_cdi_makes_nvidia_not_default_only_from_v25_10(chart: str, fm09: bool) -> None:
    """Up to v25.3 the operator's CDI settings leave NVIDIA_RUNTIME_SET_AS_DEFAULT alone
    (object_controls.go@v25.3.4 TransformToolkit), so the toolkit's default (true) makes
    nvidia the default runtime; from v25.10 `transformToolkitCtrForCDI` sets it false."""
    found = _check({"cdi": {"enabled": True}, "toolkit": {"env": []}}, chart,
                   nvidia_default=False)
    assert any(f.id == "FM09" for f in found) == fm09
    if fm09:
        assert "no toolkit.env entry sets it" in next(f for f in found if f.id == "FM09").message


@pytest.mark.parametrize(("chart", "judged"), [("v25.3.4", False), ("v25.10.1", True)])
def test_config_source_is_judged_only_where_the_toolkit_reads_it(chart: str,
                                                                 judged: bool) -> None:
    """k0s: without RUNTIME_CONFIG_SOURCE a 1.18+ toolkit dumps /etc/containerd/config.toml
    (`command`); 1.17 (charts up to v25.3) reads CONTAINERD_CONFIG and no config source."""
    prof = profile("k0s")
    env = [e for e in toolkit_env_for(prof, ContainerdVersion.parse("1.7"),
                                      PlanOptions(toolkit_version=toolkit_for_chart(chart)))
           if e["name"] != "RUNTIME_CONFIG_SOURCE"]
    found = [f for f in _check({"toolkit": {"env": env}, "cdi": {"enabled": False}}, chart,
                               distro="k0s") if f.id == "FM17"]
    assert bool(found) == judged, found
    if judged:
        assert "RUNTIME_CONFIG_SOURCE is not set" in found[0].message


@pytest.mark.parametrize(("chart", "dropin"), [
    ("v24.3.0", False), ("v25.3.4", False), ("v25.3.x", False), ("v25.10.0", True),
    ("v26.7.0", True), ("v27.1.0", True), (None, True), ("", True), ("latest", True)])
def test_which_charts_write_a_drop_in(chart: str | None, dropin: bool) -> None:
    assert chart_writes_dropin(chart) == dropin
    assert FIRST_DROPIN_CHART == "v25.10.0" and toolkit_for_chart(FIRST_DROPIN_CHART) == "1.18.0"


def test_fm03_diagnosed_only_charts_are_known_to_the_rules_but_not_deployable() -> None:
    """`gpuplane doctor` may find v23.9.2 running: its pin (1.14.6, ubuntu20.04) is known
    for FM03/FM15, while the stack config refuses it."""
    assert known_toolkit_tag("v23.9.2") == "v1.14.6-ubuntu20.04"
    assert toolkit_version({}, "v23.9.2") == ((1, 14, 6), "gpuplane:gpuOperator.chartVersion")
    assert known_toolkit_tag("v22.9.0") is None and toolkit_version({}, "v22.9.0") is None
    with pytest.raises(ValueError, match=r"older than v24\.3\.0"):
        toolkit_for_chart("v23.9.2")
    found = _check({}, "v23.9.2", nodes=(NodeIntent("gpu-1", os="amzn2"),))
    [fm15] = [f for f in found if f.id == "FM15"]
    assert "v1.14.6-ubuntu20.04" in fm15.message


@pytest.mark.parametrize(("chart", "wrong"), [("v25.3.4", True), ("v25.10.1", False)])
def test_runtime_config_names_the_host_config_only_from_v25_10(chart: str, wrong: bool) -> None:
    """toolkit.env RUNTIME_CONFIG without CONTAINERD_CONFIG: from v25.10 the operator takes
    the host config from it (`getRuntimeConfigFiles`); before, only CONTAINERD_CONFIG
    counts (`getRuntimeConfigFile`), so the toolkit edits /etc/containerd/config.toml."""
    prof = profile("k0s")
    env = [{"name": "RUNTIME_CONFIG" if e["name"] == "CONTAINERD_CONFIG" else e["name"],
            "value": e["value"]}
           for e in toolkit_env_for(prof, ContainerdVersion.parse("1.7"),
                                    PlanOptions(toolkit_version=toolkit_for_chart(chart)))]
    found = [f for f in _check({"toolkit": {"env": env}, "cdi": {"enabled": False}}, chart,
                               distro="k0s") if f.id == "FM17"]
    assert any("CONTAINERD_CONFIG is not set" in f.message for f in found) == wrong, found


@pytest.mark.parametrize(("chart", "tag", "dropin"), [
    ("v25.10.1", None, True), ("v25.10.1", "v1.17.8-ubuntu20.04", False),
    ("v25.3.4", None, False), ("v26.7.0", "latest", True), ("v24.9.2", "sha256:abc", False)])
def test_a_toolkit_image_override_decides_the_drop_in(chart: str, tag: str | None,
                                                      dropin: bool) -> None:
    """gpuplane renders `toolkitImage.tag` as toolkit.version: that toolkit runs, so the
    plan (config), the rules and the policies all judge its behaviour, not the pin's."""
    from gpuplane.config import parse_stack_config
    from gpuplane.toolkit.operator import writes_dropin

    assert writes_dropin(chart, tag) == dropin
    operator: dict[str, object] = {"chartVersion": chart}
    if tag:
        operator["toolkitImage"] = {"repository": "nvcr.io/nvidia/k8s/container-toolkit",
                                    "tag": tag}
    cfg = parse_stack_config({"cluster": {"kubernetesVersion": "1.31.4",
                                          "containerdVersion": "1.7", "nodeAccess": "none"},
                              "gpuOperator": operator})
    assert cfg.plan_options().toolkit_dropin == dropin


def test_toolkit_1_18_under_an_operator_older_than_v25_10_is_refused() -> None:
    from gpuplane.config import StackConfigError, parse_stack_config

    with pytest.raises(StackConfigError) as exc:
        parse_stack_config({
            "cluster": {"kubernetesVersion": "1.31.4", "containerdVersion": "1.7",
                        "nodeAccess": "none"},
            "gpuOperator": {"chartVersion": "v25.3.4", "toolkitImage": {
                "repository": "nvcr.io/nvidia/k8s/container-toolkit", "tag": "v1.18.1"}}})
    [(key, message)] = exc.value.problems
    assert key == "gpuplane:gpuOperator"
    assert "toolkitImage.tag v1.18.1" in message and "v25.10.0 or later" in message
    assert "v1.17.8-ubuntu20.04" in message
