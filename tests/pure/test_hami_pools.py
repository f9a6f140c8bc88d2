"""`gpuplane:sharing` under HAMi (issue #47): a pool's HAMi mode (`hami-core` with its own
split and scaling, or `mig`) becomes HAMi's per-node `nodeconfig` in the chart's values,
and what each of its nodes advertises in the intent, which the allocatable check reads.
The same values through Helm's engine on every HAMi chart: tests/real/test_hami_nodeconfig.py;
the rules FM20/FM22/FM29 on HAMi pools: tests/pure/test_rules_sharing.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.stack_cases import config_of

from gpuplane.config import StackConfig, StackConfigError
from gpuplane.config.helm_values import hami_values, operator_values
from gpuplane.core.intent import ClusterIntent
from gpuplane.rules.advertised import expected_resources


def parsed(stack: str, **pools: dict[str, Any]) -> StackConfig:
    cfg = {k.removeprefix("gpuplane:"): v for k, v in config_of(stack).items()}
    if pools:
        cfg.setdefault("sharing", {}).setdefault("pools", {}).update(pools)
    return StackConfig.model_validate(cfg)


def node_config(cfg: StackConfig) -> dict[str, Any] | None:
    text = hami_values(cfg)["devicePlugin"].get("nodeConfiguration", {}).get("config")
    return None if text is None else json.loads(text)


def test_each_listed_node_of_a_hami_pool_gets_its_nodeconfig_entry() -> None:
    cfg = parsed("hami-pools")
    assert node_config(cfg) == {"nodeconfig": [
        {"name": "a100-01", "operatingmode": "mig"},
        {"name": "l4-01", "operatingmode": "hami-core", "devicesplitcount": 20},
        {"name": "l4-02", "operatingmode": "hami-core", "devicesplitcount": 20}]}
    # The cluster's own values stay the chart-wide ones; stacks without HAMi pools leave
    # the chart's own (example) nodeconfig alone.
    assert hami_values(cfg)["devicePlugin"]["deviceSplitCount"] == 10
    for stack in ("hami-shared", "hami-host"):
        assert "nodeConfiguration" not in hami_values(parsed(stack))["devicePlugin"]


def test_mig_manager_off_beside_hamis_mig_mode() -> None:
    """The operator labels MIG-capable nodes all-disabled where MIG Manager runs with the
    chart's default config; under HAMi's MIG mode gpuplane turns MIG Manager off."""
    assert operator_values(parsed("hami-pools"), [])["migManager"] == {"enabled": False}
    core = parsed("hami-pools", training={"mode": "hami-core"})
    assert "migManager" not in operator_values(core, [])
    assert "migManager" not in operator_values(parsed("hami-shared"), [])


def test_memory_scaling_only_where_the_pool_sets_it() -> None:
    cfg = parsed("hami-pools", inference={"mode": "hami-core", "deviceMemoryScaling": 1.5})
    entries = {e["name"]: e for e in node_config(cfg)["nodeconfig"]}   # type: ignore[index]
    assert entries["l4-01"] == {"name": "l4-01", "operatingmode": "hami-core",
                                "devicememoryscaling": 1.5}


@pytest.mark.parametrize(("key", "value"), [("config", '{"nodeconfig": []}'),
                                            ("externalConfigName", "my-node-config")])
def test_raw_values_that_would_drop_the_pools_modes_are_refused(key: str, value: str) -> None:
    """`hami.values` replacing the nodeconfig (or mounting another ConfigMap instead) would
    drop every pool's mode without a word: refused at that key, unless no pool has one."""
    raw = {k.removeprefix("gpuplane:"): v for k, v in config_of("hami-pools").items()}
    raw["hami"]["values"] = {"devicePlugin": {"nodeConfiguration": {key: value}}}
    with pytest.raises(StackConfigError) as err:
        StackConfig.model_validate(raw)
    assert f"gpuplane:hami.values.devicePlugin.nodeConfiguration.{key}" in str(err.value)
    raw["sharing"]["pools"] = {"inference": {"mode": "whole"}}
    cfg = StackConfig.model_validate(raw)
    assert hami_values(cfg)["devicePlugin"]["nodeConfiguration"] == {key: value}


def test_a_hami_pool_advertises_its_own_split_and_the_check_expects_it() -> None:
    intent = parsed("hami-pools").intent()
    nodes = {n.name: n for n in intent.nodes}
    # 8 GPUs x the cluster's 10 (MIG mode keeps the split); 4 GPUs x the pool's 20.
    assert dict(nodes["a100-01"].resources) == {"nvidia.com/gpu": 80}
    assert dict(nodes["l4-01"].resources) == {"nvidia.com/gpu": 80}
    assert expected_resources(nodes["l4-02"], intent) == {"nvidia.com/gpu": 80}
    assert ClusterIntent.from_json(intent.to_json()) == intent
    record = json.loads(intent.to_json())
    assert {p["key"]: p.get("hami_split") for p in record["sharing"]} == {
        "default": None, "training": 10, "inference": 20}
    # Stacks without HAMi pools keep their record as it was.
    operator = json.loads(parsed("two-pools").intent().to_json())
    assert all("hami_split" not in p and "hami_memory_scaling" not in p
               for p in operator["sharing"])


def test_a_pool_without_a_hami_mode_keeps_the_clusters_split() -> None:
    cfg = parsed("hami-pools", inference={"mode": "whole"})
    intent = cfg.intent()
    node = next(n for n in intent.nodes if n.name == "l4-01")
    assert node.resources == ()
    assert expected_resources(node, intent) == {"nvidia.com/gpu": 40}


@pytest.mark.parametrize(("pool", "said"), [
    ({"mode": "mig", "gpuModel": "A100-80GB",
      "mig": {"strategy": "mixed", "profile": "all-balanced"}}, "remove one"),
    ({"mode": "mig"}, "mode mig needs gpuModel"),
    ({"mode": "mig", "gpuModel": "A100-80GB", "deviceMemoryScaling": 2},
     "never scales memory"),
    ({"mode": "hami-core", "replicas": 4}, "HAMi splits a GPU deviceSplitCount ways"),
    ({"mode": "time-slicing", "replicas": 4, "deviceSplitCount": 4},
     "are HAMi's, for mode hami-core or mig"),
])
def test_hami_profile_keys_that_cannot_work_are_refused(pool: dict[str, Any],
                                                        said: str) -> None:
    with pytest.raises(Exception) as err:
        parsed("hami-pools", training=pool)
    text = str(err.value)
    assert said in text and "training" in text, text


def test_the_default_profile_does_not_carry_the_clusters_split_twice() -> None:
    """Nor is the operator plugin's ConfigMap name kept where HAMi replaces it."""
    raw = {k.removeprefix("gpuplane:"): v for k, v in config_of("hami-pools").items()}
    raw["sharing"]["default"] = {"mode": "hami-core", "deviceSplitCount": 4,
                                 "deviceMemoryScaling": 2}
    raw["sharing"]["configMap"] = "plugin-config"
    with pytest.raises(StackConfigError) as err:
        StackConfig.model_validate(raw)
    text = str(err.value)
    assert "gpuplane:sharing.default.deviceSplitCount" in text
    assert "gpuplane:sharing.default.deviceMemoryScaling" in text
    assert "gpuplane:hami.deviceSplitCount" in text
    assert "gpuplane:sharing.configMap" in text and "remove sharing.configMap" in text


def test_sharing_still_needs_a_plugin_that_shares() -> None:
    raw = {k.removeprefix("gpuplane:"): v for k, v in config_of("bottlerocket-nvidia").items()}
    raw["devicePlugin"] = "platform"
    raw["sharing"] = {"pools": {}}
    with pytest.raises(StackConfigError) as err:
        StackConfig.model_validate(raw)
    text = str(err.value)
    assert "gpuplane:sharing" in text and "needs the GPU Operator's device plugin or HAMi" in text


def test_the_intent_does_not_depend_on_the_order_pools_are_written_in() -> None:
    """The Pulumi engine hands the program its config maps with sorted keys, the offline
    plan reads the file as written: both must record the same intent (a two-pool stack's
    preview under the real engine, tests/engine/test_pulumi_engine.py, compares them)."""
    raw = {k.removeprefix("gpuplane:"): v for k, v in config_of("hami-pools").items()}
    assert list(raw["sharing"]["pools"]) == ["training", "inference"]
    written = StackConfig.model_validate(raw).intent().to_json()
    raw["sharing"]["pools"] = dict(sorted(raw["sharing"]["pools"].items()))
    assert StackConfig.model_validate(raw).intent().to_json() == written
