"""gpuplane's facts about the charts it deploys, held against the upstream charts
themselves (../shared/charts, read through tests/charts.py): the toolkit each GPU Operator
chart ships, the chart defaults the rules assume, and that every value gpuplane sets is
one the chart knows."""

from __future__ import annotations

import re

import charts
from gpuplane.toolkit.operator import toolkit_for_chart


def _bare(tag: str) -> str:
    """"v1.17.8-ubuntu20.04" -> "1.17.8"."""
    match = re.match(r"^v?(\d+\.\d+\.\d+)", tag)
    assert match, tag
    return match.group(1)


def test_toolkit_of_every_operator_chart() -> None:
    """Every chart there is known, and its toolkit is the one its values.yaml pins."""
    want = {tag: _bare(charts.lookup(charts.values(folder), "toolkit.version"))
            for tag, folder in charts.chart_dirs("gpu-operator").items()}
    got = {}
    for tag in want:
        try:
            got[tag] = toolkit_for_chart(tag)
        except ValueError as exc:
            got[tag] = f"refused: {exc}"
    assert got == want
