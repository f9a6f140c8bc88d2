"""FM18: a GPU Operator release upstream lists as broken on the stack's distribution is an
error, judged on the release's own values (foreign or gpuplane's), with a fix that clears it."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules.known_bad import KNOWN_BAD
from gpuplane.rules.operator import check_operator_values

WHERE = "Release gpu-operator"


def known_bad(values: dict[str, Any], distro: str, chart: str) -> list[Finding]:
    intent = ClusterIntent(distro=distro, containerd_version="1.7.27",
                           kubernetes_version="1.32.3")
    found = check_operator_values(values, intent, chart_version=chart, where=WHERE)
    return [f for f in found if f.id == "FM18" and "known-bad" in f.message]


@pytest.mark.parametrize("distro", ["rke2", "k3s"])
def test_fm18_known_bad_v24_9_0_on_rancher_distros(distro: str) -> None:
    [f] = known_bad({"driver": {"enabled": False}}, distro, "v24.9.0")
    assert f.id == "FM18" and f.severity is Severity.ERROR
    assert "gpuplane:gpuOperator.chartVersion" in f.where
    assert "release-notes.rst" in f.message and "v24.9.1" in f.fix


@pytest.mark.parametrize(("values", "distro", "chart"), [
    ({}, "kubeadm", "v24.9.0"),                                   # containerd on PATH
    ({}, "rke2", "v24.9.1"),                                      # the fix: next chart
    ({"toolkit": {"version": "v1.17.1-ubuntu20.04"}}, "k3s", "v24.9.0"),   # the fix: image
    ({"toolkit": {"enabled": False}}, "rke2", "v24.9.0"),         # host toolkit
])
def test_fm18_known_bad_not_reported_where_it_does_not_hold(values: dict[str, Any], distro: str,
                                                       chart: str) -> None:
    assert known_bad(values, distro, chart) == []


def test_every_entry_cites_upstream_and_names_a_pinned_toolkit() -> None:
    from gpuplane.toolkit.installer import parse_version
    from gpuplane.toolkit.operator import known_toolkit_tag

    for entry in KNOWN_BAD:
        assert "NVIDIA/" in entry.source
        tag = known_toolkit_tag(entry.chart)
        assert tag is not None and parse_version(tag) == entry.toolkit

