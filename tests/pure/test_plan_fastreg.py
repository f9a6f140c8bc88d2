"""The plan engine's short registration path (gpuplane.cli.plan.fastreg) records exactly what
the SDK's own path records, for every resource of every stack that has node commands."""

from __future__ import annotations

import dataclasses

import pytest
from test_stacks import registered

from gpuplane.cli.plan import fastreg

STACKS = ["kubeadm-prod", "microk8s-edge", "rke2-lab"]   # the stacks with node commands


def _records(stack: str) -> dict[str, dict]:
    out = {}
    for r in registered(stack):
        record = dataclasses.asdict(r)
        record["dependencies"] = sorted(record["dependencies"])
        record["property_dependencies"] = {k: sorted(v) for k, v in
                                           record["property_dependencies"].items()}
        out[r.urn] = record
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_the_short_path_records_what_the_sdk_records(stack: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    short: list[str] = []
    register = fastreg._register
    monkeypatch.setattr(fastreg, "_register",
                        lambda res, ty, name, *a: short.append(name) or register(res, ty, name, *a))
    fast = _records(stack)
    assert short and {fast[u]["name"] for u in fast
                      if fast[u]["type"] in fastreg.FAST_TYPES} == set(short), \
        "every node resource took the short path"
    monkeypatch.setattr(fastreg, "FAST_TYPES", frozenset())
    slow = _records(stack)
    assert sorted(fast) == sorted(slow), "the same resources (the order may differ)"
    for urn, record in slow.items():
        assert fast[urn] == record, urn
