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
    # The rollout's barriers too (one per batch after the canary: gpuplane.stack.barrier).
    barriers = {fast[u]["name"] for u in fast if fast[u]["type"].endswith(":RolloutBarrier")}
    assert barriers and barriers <= set(short), (barriers, short)
    monkeypatch.setattr(fastreg, "FAST_TYPES", frozenset())
    slow = _records(stack)
    assert sorted(fast) == sorted(slow), "the same resources (the order may differ)"
    for urn, record in slow.items():
        assert fast[urn] == record, urn


def test_node_dependencies_skip_the_sdk_walk_and_keep_its_answer(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node command depends on its upload and on the batch before it (a dozen resources):
    the SDK's walk (`rpc._expand_dependencies`) costs a coroutine per dependency, 110,000 at
    10,000 nodes. The short path expands resolved custom resources itself, so the walk no
    longer runs per node, and the dependencies recorded are the SDK's own."""
    import yaml
    from pulumi.runtime import rpc

    from gpuplane.cli.plan.run import plan_stack

    nodes = 40
    (tmp_path / "Pulumi.fleet.yaml").write_text(yaml.safe_dump({"config": {
        "gpuplane:cluster": {"distro": "kubeadm", "kubernetesVersion": "1.31.4",
                             "containerdVersion": "1.7", "nodeAccess": "ssh"},
        "gpuplane:ssh": {"user": "ubuntu", "sudo": True},
        "gpuplane:sshPrivateKey": {"secure": "v1:test"},
        "gpuplane:nodes": [{"name": f"gpu-{i:03d}", "host": f"10.0.0.{i + 1}", "gpus": 8}
                           for i in range(nodes)],
        "gpuplane:gpuOperator": {"chartVersion": "v25.10.1"},
        "gpuplane:runtime": {"systemdCgroup": True},
        "gpuplane:rollout": {"canary": True, "maxUnavailable": 10},
    }}))
    walks: list[None] = []
    walk = rpc._expand_dependencies

    def counted(*args, **kwargs):
        walks.append(None)
        return walk(*args, **kwargs)

    monkeypatch.setattr(rpc, "_expand_dependencies", counted)
    fast = plan_stack("fleet", tmp_path)
    fast_walks = len(walks)
    assert fast_walks < nodes, f"{fast_walks} SDK walks for {nodes} nodes: one per node or more"
    monkeypatch.setattr(fastreg, "_expanded",
                        lambda deps, res: rpc._expand_dependencies(deps, from_resource=res))
    slow = plan_stack("fleet", tmp_path)
    assert len(walks) - fast_walks >= nodes, "the SDK's walk ran for every node command"

    assert fast == slow, "the same plan, dependencies included"
