"""What the plan's speed-ups must not change: masking copies only what it masks."""

from __future__ import annotations

import copy

from gpuplane.cli.plan.report import SECRET_MASK, _masked


def test_masking_replaces_every_secret_and_leaves_the_registration_alone() -> None:
    inputs = {"connection": {"host": "h", "privateKey": "k"}, "stdin": "plan",
              "env": [{"name": "A", "value": "s"}, {"name": "B", "value": "t"}],
              "nested": {"deep": {"token": "x", "keep": 1}}}
    before = copy.deepcopy(inputs)
    out = _masked(inputs, ["connection.privateKey", "env.1.value", "nested.deep.token",
                           "missing.path", "stdin"])
    assert out == {"connection": {"host": "h", "privateKey": SECRET_MASK},
                   "stdin": SECRET_MASK,
                   "env": [{"name": "A", "value": "s"}, {"name": "B", "value": SECRET_MASK}],
                   "nested": {"deep": {"token": SECRET_MASK, "keep": 1}}}
    assert inputs == before, "the registration's inputs are not modified"
    assert _masked(inputs, ["connection"])["connection"] == SECRET_MASK
