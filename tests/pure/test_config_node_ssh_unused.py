"""A node's SSH `user`/`port` under `cluster.nodeAccess: pod` or `none` is read by nothing:
refused like `gpuplane:ssh` there, naming `gpuplane:nodes[i].<key>` and the fix, every
such key at once; the printed fix (remove it) gives a stack that parses."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplane.config import StackConfigError, parse_stack_config


def _stack(access: str, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"cluster": {"kubernetesVersion": "1.31.4", "containerdVersion": "1.7",
                        "nodeAccess": access},
            "gpuOperator": {"chartVersion": "v25.10.1"}, "nodes": nodes}


@pytest.mark.parametrize("access", ["pod", "none"])
def test_node_user_and_port_without_ssh_access_are_refused(access: str) -> None:
    nodes = [{"name": "gpu-0", "user": "ubuntu"}, {"name": "gpu-1", "port": 2222},
             {"name": "gpu-2", "host": "10.0.0.3"}]
    with pytest.raises(StackConfigError) as exc:
        parse_stack_config(_stack(access, nodes))
    found = dict(exc.value.problems)
    assert sorted(k for k in found if k.startswith("gpuplane:nodes")) == [
        "gpuplane:nodes[0].user", "gpuplane:nodes[1].port"]
    assert f"cluster.nodeAccess is {access}" in found["gpuplane:nodes[0].user"]
    assert "remove user from node gpu-0" in found["gpuplane:nodes[0].user"]
    # The fix applied: without them the stack parses.
    fixed = [{"name": "gpu-0"}, {"name": "gpu-1"}, {"name": "gpu-2", "host": "10.0.0.3"}]
    assert parse_stack_config(_stack(access, fixed)).cluster.node_access == access


def test_node_user_and_port_with_ssh_access_are_used() -> None:
    values = _stack("ssh", [{"name": "gpu-0", "host": "10.0.0.1", "user": "ubuntu",
                             "port": 2222}])
    values["sshPrivateKey"] = "key"
    cfg = parse_stack_config(values)
    assert (cfg.nodes[0].user, cfg.nodes[0].port) == ("ubuntu", 2222)
