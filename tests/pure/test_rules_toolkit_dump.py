"""FM03: a toolkit that reads containerd's config only through `containerd config dump`
(1.17.0) on a distribution whose containerd is off the toolkit container's PATH fails on
every node; judged on the release's values, with a fix that clears it."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplane.core.findings import Finding, Severity
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules.operator import check_operator_values

WHERE = "Release gpu-operator"


def fm03_dump(values: dict[str, Any], distro: str, chart: str = "v24.9.2") -> list[Finding]:
    intent = ClusterIntent(distro=distro, containerd_version="1.7.27",
                           kubernetes_version="1.32.3")
    found = check_operator_values(values, intent, chart_version=chart, where=WHERE)
    return [f for f in found if f.id == "FM03" and "config dump" in f.message]


@pytest.mark.parametrize("distro", ["k0s", "k3s", "rke2", "k8s-snap", "microk8s"])
def test_fm03_dump_only_toolkit_where_containerd_is_off_path(distro: str) -> None:
    [f] = fm03_dump({"toolkit": {"version": "v1.17.0-ubuntu20.04"}}, distro)
    assert f.severity is Severity.ERROR and "installer fails" in f.message
    assert "gpuplane:gpuOperator.toolkitImage" in f.where
    # The printed fix (toolkit 1.18+, or a chart that pins it) clears it.
    assert fm03_dump({"toolkit": {"version": "v1.18.1"}}, distro) == []
    assert fm03_dump({}, distro, chart="v25.10.1") == []


@pytest.mark.parametrize(("values", "distro"), [
    ({"toolkit": {"version": "v1.17.0"}}, "kubeadm"),     # /usr/bin/containerd is on PATH
    ({"toolkit": {"version": "v1.17.3"}}, "k0s"),         # falls back to the file
    ({"toolkit": {"version": "v1.17.0", "enabled": False}}, "k0s"),   # host toolkit
])
def test_fm03_dump_not_reported_where_the_installer_runs(values: dict[str, Any],
                                                         distro: str) -> None:
    assert fm03_dump(values, distro) == []
