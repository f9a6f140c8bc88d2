"""A plain program's GPU Operator release through Helm's own engine on every supported
chart: what the pack reads from the release's values for FM24/FM25 (the device plugin's
profiles and default key, the MIG strategy, MIG Manager's default) is what the chart
hands the operator: the ClusterPolicy and the ConfigMap it renders, which is also what
the pack sees of a `helm.v4.Chart` (its rendered children)."""

from __future__ import annotations

from typing import Any

import pytest
from support import charts

from gpuplane.policy.collect import View
from gpuplane.policy.sharing import plain_sharing_of

VERSIONS = list(charts.chart_dirs("gpu-operator"))
PROFILES = {
    "ts": "version: v1\nsharing:\n  timeSlicing:\n    failRequestsGreaterThanOne: true\n"
          "    resources: [{name: nvidia.com/gpu, replicas: 4}]\n",
    "whole": "version: v1\nflags: {migStrategy: none}\n",
}


def _views(chart: str, values: dict[str, Any]) -> list[View]:
    docs = charts.render(charts.chart_dirs("gpu-operator")[chart], values,
                         namespace="gpu-operator")
    out = []
    for i, d in enumerate(docs):
        if d.get("kind") in ("ClusterPolicy", "ConfigMap"):
            kind = "kubernetes:nvidia.com/v1:ClusterPolicy" if d["kind"] == "ClusterPolicy" \
                else "kubernetes:core/v1:ConfigMap"
            out.append(View(kind, f"r{i}", f"urn:r{i}", d))
    return out


@pytest.mark.parametrize("chart", VERSIONS)
def test_fm24_fm25_plain_release_values_match_what_the_chart_renders(chart: str) -> None:
    values = {"devicePlugin": {"config": {"create": True, "name": "plugin-config",
                                          "default": "ts", "data": PROFILES}}}
    views = _views(chart, values)
    [policy] = [v for v in views if v.type.endswith("ClusterPolicy")]
    rendered = plain_sharing_of(views, [(policy.props["spec"], "here", chart)])
    from_values = plain_sharing_of([], [(values, "here", chart)])
    assert rendered is not None and from_values is not None
    assert rendered == from_values
    # The chart's defaults the pack assumes where the values leave them out.
    assert policy.props["spec"]["mig"]["strategy"] == "single"
    assert policy.props["spec"]["migManager"]["config"]["default"] == "all-disabled"
    assert {(p.key, p.label, p.strategy, p.fail_over_one) for p in rendered.profiles or ()} == {
        ("ts", "ts", "single", True), ("whole", "whole", "none", False),
        ("ts", None, "single", True)}


@pytest.mark.parametrize("chart", [VERSIONS[0], VERSIONS[-1]])
def test_fm25_plain_release_mixed_strategy_and_mig_manager(chart: str) -> None:
    values = {"mig": {"strategy": "mixed"}, "migManager": {"enabled": True}}
    views = _views(chart, values)
    [policy] = [v for v in views if v.type.endswith("ClusterPolicy")]
    assert plain_sharing_of(views, [(policy.props["spec"], "here", chart)]) == \
        plain_sharing_of([], [(values, "here", chart)])
