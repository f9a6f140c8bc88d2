"""GPU sharing per pool (issue #47): the `gpuplane:sharing` keys, what gpuplane renders
from them, what each node advertises (`NodeIntent.resources`) and the rules FM19-FM25,
offline through `gpuplane plan` on the bundled stacks and their broken variants, and on
plain installs (a Release with a ConfigMap gpuplane did not make)."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.stack_cases import config_of, write_stack

from gpuplane.cli.plan.project import load_project
from gpuplane.cli.plan.run import plan_stack
from gpuplane.config import StackConfig, StackConfigError
from gpuplane.config.helm_values import operator_values, time_slicing_data
from gpuplane.config.sharing_values import mig_parted_data, node_labels
from gpuplane.core.intent import ClusterIntent
from gpuplane.policy.pack import policy_names
from gpuplane.rules.workloads import check_workload


def stack(name: str, **changes: Any) -> dict[str, Any]:
    cfg = config_of(name)
    for key, value in changes.items():
        cfg[f"gpuplane:{key}"] = value
    return cfg


def parsed(cfg: dict[str, Any]) -> StackConfig:
    return StackConfig.model_validate({k.removeprefix("gpuplane:"): v for k, v in cfg.items()})


def planned(tmp_path: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    write_stack(tmp_path, "case", cfg)
    return plan_stack("case", tmp_path)


def errors(report: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in report["findings"]:
        if f["severity"] == "error":
            out.setdefault(f["id"], []).append(f"{f['message']} @ {f['where']}")
    return out


def h100(**mig: Any) -> dict[str, Any]:
    cfg = stack("h100-mig")
    cfg["gpuplane:sharing"]["pools"]["h100"]["mig"] = mig
    return cfg


# ----------------------------------------------------------------- what is rendered

def test_h100_mixed_renders_keys_strategy_labels_and_instances() -> None:
    cfg = parsed(config_of("h100-mig"))
    data = {k: yaml.safe_load(v) for k, v in time_slicing_data(cfg).items()}
    assert data == {"default": {"version": "v1", "flags": {"migStrategy": "mixed"}},
                    "h100": {"version": "v1", "flags": {"migStrategy": "mixed"}}}
    values = operator_values(cfg, [])
    assert values["mig"] == {"strategy": "mixed"}
    assert values["devicePlugin"]["config"] == {"create": False, "name": "device-plugin-config",
                                                "default": "default"}
    assert node_labels(cfg) == {
        n: {"nvidia.com/device-plugin.config": "h100", "nvidia.com/mig.config": "all-balanced"}
        for n in ("h100-01", "h100-02")}
    # all-balanced on an H100-80GB @v25.10.1: 2x 1g.10gb, 1x 2g.20gb, 1x 3g.40gb per GPU.
    nodes = {n.name: dict(n.resources) for n in cfg.intent().nodes}
    assert nodes["h100-01"] == {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8,
                                "nvidia.com/mig-3g.40gb": 8}
    assert nodes["l40s-01"] == {"nvidia.com/gpu": 4}
    assert mig_parted_data(cfg) is None   # a named layout: the chart's own config


def test_mps_and_two_pools_render_their_sharing_sections() -> None:
    mps = parsed(config_of("inference-mps"))
    doc = yaml.safe_load(time_slicing_data(mps)["default"])
    assert doc["sharing"] == {"mps": {"renameByDefault": False, "resources": [
        {"name": "nvidia.com/gpu", "replicas": 4}]}}
    assert {n.name: n.resources for n in mps.intent().nodes} == {
        "l4-01": (("nvidia.com/gpu", 8),), "l4-02": (("nvidia.com/gpu", 8),)}
    two = parsed(config_of("two-pools"))
    data = {k: yaml.safe_load(v) for k, v in time_slicing_data(two).items()}
    assert "sharing" not in data["default"]
    assert data["notebooks"]["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 4}]
    assert node_labels(two) == {"a10-01": {"nvidia.com/device-plugin.config": "notebooks"},
                                "a10-02": {"nvidia.com/device-plugin.config": "notebooks"}}
    assert {n.name: n.resources for n in two.intent().nodes}["a10-01"] == (
        ("nvidia.com/gpu", 4),)


def test_custom_layout_writes_gpuplanes_mig_parted_config_and_single_counts_gpus() -> None:
    cfg = parsed(h100(strategy="single", layout={"1g.20gb": 4}))
    data = yaml.safe_load(mig_parted_data(cfg)["config.yaml"])   # type: ignore[index]
    assert data["mig-configs"]["gpuplane-h100"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.20gb": 4}}]
    assert "all-disabled" in data["mig-configs"]
    values = operator_values(cfg, [])
    assert values["migManager"]["config"] == {"name": "gpuplane-mig-parted-config",
                                              "default": "all-disabled"}
    assert {n.name: n.resources for n in cfg.intent().nodes}["h100-01"] == (
        ("nvidia.com/gpu", 32),)


def test_gke_with_googles_driver_gets_with_reboot_for_mig() -> None:
    mig = {"gpuModel": "A100-40GB", "mig": {"strategy": "single", "profile": "all-1g.5gb"}}
    cos = operator_values(parsed(stack("gke-cos", sharing={"pools": {"l4": mig}})), [])
    assert cos["migManager"]["env"] == [{"name": "WITH_REBOOT", "value": "true"}]
    # The operator's driver manager on GKE Ubuntu: NVIDIA's guide asks for no reboot.
    ubuntu = operator_values(parsed(stack("gke-ubuntu", sharing={"pools": {"t4": mig}})), [])
    assert "env" not in ubuntu["migManager"]


def test_time_slicing_keys_keep_rendering_as_before() -> None:
    raw = stack("two-pools", timeSlicing={"replicas": 4, "profile": "any"})
    del raw["gpuplane:sharing"]
    cfg = parsed(raw)
    assert yaml.safe_load(time_slicing_data(cfg)["any"]) == {
        "version": "v1", "flags": {"migStrategy": "single"}, "sharing": {"timeSlicing": {
            "renameByDefault": False, "failRequestsGreaterThanOne": False,
            "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
    assert all(n.resources == () for n in cfg.intent().nodes)   # the old path


def test_intent_round_trips_the_sharing() -> None:
    intent = parsed(config_of("h100-mig")).intent()
    assert ClusterIntent.from_json(intent.to_json()) == intent


# ----------------------------------------------------------------- stack key errors

@pytest.mark.parametrize(("change", "key"), [
    ({"timeSlicing": {"replicas": 2}}, "gpuplane:timeSlicing"),
])
def test_sharing_refuses_what_it_cannot_combine_with(change: dict[str, Any], key: str) -> None:
    cfg = stack("two-pools", **change)
    with pytest.raises(StackConfigError) as err:
        parsed(cfg)
    assert key in str(err.value)


def test_sharing_key_errors_name_their_paths() -> None:
    cfg = stack("two-pools", sharing={
        "default": {"mode": "time-slicing", "replicas": 1},
        "pools": {"notebook": {"mode": "mps", "replicas": 2},
                  "training": {"gpuModel": "H99", "mig": {"profile": "all-1g.10gb"}}}})
    with pytest.raises(Exception) as err:
        parsed(cfg)
    text = str(err.value)
    assert "replicas of 2 or more" in text and "unknown GPU model 'H99'" in text, text


def test_unknown_pool_and_layout_name_are_stack_key_errors() -> None:
    cfg = stack("two-pools")
    cfg["gpuplane:sharing"]["pools"]["notebook"] = {"mode": "whole"}
    cfg["gpuplane:sharing"]["pools"]["notebooks"] = {
        "gpuModel": "A100-40GB", "mig": {"profile": "all-9g.1gb"}}
    with pytest.raises(StackConfigError) as err:
        parsed(cfg)
    text = str(err.value)
    assert "gpuplane:sharing.pools.notebook:" in text and "no node has pool" in text
    assert "gpuplane:sharing.pools.notebooks.mig.profile" in text


# ----------------------------------------------------------------- rules, offline plan

def test_fm19_mig_pools_with_different_strategies(tmp_path: Path) -> None:
    cfg = h100(strategy="mixed", profile="all-balanced")
    cfg["gpuplane:nodes"].append({"name": "a100-01", "gpus": 8, "pool": "a100"})
    cfg["gpuplane:sharing"]["pools"]["a100"] = {
        "gpuModel": "A100-80GB", "mig": {"strategy": "single", "profile": "all-1g.10gb"}}
    found = errors(planned(tmp_path, cfg))
    assert set(found) == {"FM19"}, found
    # The first MIG pool by name (a100, single) sets the operator's strategy, as under the
    # engine, which hands the program its config maps sorted: h100's mixed disagrees.
    assert "profile 'h100'" in found["FM19"][0]
    assert "gpuplane:sharing.pools.h100.mig.strategy" in found["FM19"][0]


def test_fm19_raw_mig_strategy_contradicts_the_pool(tmp_path: Path) -> None:
    cfg = stack("h100-mig")
    cfg["gpuplane:gpuOperator"]["values"] = {"mig": {"strategy": "single"}}
    assert set(errors(planned(tmp_path, cfg))) == {"FM19"}


@pytest.mark.parametrize(("pool", "said"), [
    ({"gpuModel": "L40S", "mig": {"strategy": "mixed", "profile": "all-1g.10gb"}}, "no MIG"),
    ({"gpuModel": "H100-80GB", "mig": {"strategy": "mixed", "profile": "all-1g.5gb"}},
     "1g.5gb x7"),
    ({"gpuModel": "H100-80GB", "mig": {"strategy": "mixed", "layout": {"4g.40gb": 1,
                                                                      "7g.80gb": 1}}},
     "11 of the 7 compute slices"),
])
def test_fm20_layout_the_gpu_cannot_make(tmp_path: Path, pool: dict[str, Any],
                                         said: str) -> None:
    cfg = stack("h100-mig")
    cfg["gpuplane:sharing"]["pools"]["h100"] = pool
    found = errors(planned(tmp_path, cfg))
    assert set(found) == {"FM20"}, found
    assert said in found["FM20"][0]


def test_fm21_single_strategy_over_balanced_layout(tmp_path: Path) -> None:
    found = errors(planned(tmp_path, h100(strategy="single", profile="all-balanced")))
    assert set(found) == {"FM21"}, found


def test_fm22_mps_on_mig_instances(tmp_path: Path) -> None:
    cfg = h100(strategy="single", profile="all-1g.10gb")
    cfg["gpuplane:sharing"]["pools"]["h100"].update(mode="mps", replicas=2)
    found = errors(planned(tmp_path, cfg))
    assert set(found) == {"FM22"}, found


def hami_pool(pool: str, **profile: Any) -> dict[str, Any]:
    """The hami-pools stack with pool `pool`'s profile replaced."""
    cfg = stack("hami-pools")
    cfg["gpuplane:sharing"]["pools"][pool] = profile
    return cfg


@pytest.mark.parametrize("gpu", ["L4", "T4", "A10"])
def test_fm20_hami_mig_mode_on_a_gpu_without_mig(tmp_path: Path, gpu: str) -> None:
    found = errors(planned(tmp_path, hami_pool("training", mode="mig", gpuModel=gpu)))
    assert set(found) == {"FM20"}, found
    assert f"HAMi's MIG mode on {gpu}" in found["FM20"][0]
    assert "gpuplane:sharing.pools.training.mode" in found["FM20"][0]


def test_fm22_mps_on_a_hami_pool(tmp_path: Path) -> None:
    found = errors(planned(tmp_path, hami_pool("inference", mode="mps", replicas=4)))
    assert set(found) == {"FM22"}, found
    assert "gpuplane:sharing.pools.inference.mode" in found["FM22"][0]


@pytest.mark.parametrize(("pool", "profile", "said", "key"), [
    ("inference", {"mode": "time-slicing", "replicas": 4}, "mode time-slicing", "mode"),
    ("training", {"gpuModel": "A100-80GB", "mig": {"strategy": "mixed",
                                                   "profile": "all-balanced"}},
     "mig (mixed strategy", "mig"),
    ("inference", {"renameByDefault": True}, "renameByDefault", "mode"),
])
def test_fm29_operator_sharing_on_a_hami_pool(tmp_path: Path, pool: str,
                                              profile: dict[str, Any], said: str,
                                              key: str) -> None:
    report = planned(tmp_path, hami_pool(pool, **profile))
    found = errors(report)
    assert set(found) == {"FM29"}, found
    assert said in found["FM29"][0] and f"gpuplane:sharing.pools.{pool}.{key}" in \
        found["FM29"][0]
    assert report["verdict"] != "ok" and report["summary"]["errors"] == 1


@pytest.mark.parametrize("profile", [{"mode": "hami-core", "gpuModel": "A10"},
                                     {"mode": "mig", "gpuModel": "A100-40GB"}])
def test_fm29_hami_mode_without_hami(tmp_path: Path, profile: dict[str, Any]) -> None:
    cfg = stack("two-pools")
    cfg["gpuplane:sharing"]["pools"]["notebooks"] = profile
    found = errors(planned(tmp_path, cfg))
    assert set(found) == {"FM29"}, found
    assert f"HAMi's {profile['mode']} mode" in found["FM29"][0]
    assert "gpuplane:sharing.pools.notebooks.mode" in found["FM29"][0]


def test_fm22_fm23_raw_configmap_of_a_plain_install(tmp_path: Path) -> None:
    data = {"default": "version: v1\nflags: {migStrategy: mixed}\nsharing:\n  mps:\n"
                       "    resources: [{name: nvidia.com/gpu, replicas: 2}]\n"}
    report = plain(tmp_path, data, default="other", strategy="mixed")
    assert ids(report) == {"FM22", "FM23"}, report["findings"]


# ----------------------------------------------------------------- plain installs

FACTS = {"distro": "kubeadm", "containerdVersion": "1.7", "driver": "preinstalled",
         "kubernetesVersion": "1.31.0"}


def plain(tmp_path: Path, data: dict[str, str], *, default: str, strategy: str = "single",
          label: str | None = None) -> dict[str, Any]:
    """A program with a GPU Operator Release, its device plugin ConfigMap and, with
    `label`, a NodePatch that selects a key."""
    folder = tmp_path / "infra"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    (folder / "Pulumi.dev.yaml").write_text("config: {}\n")
    patch = "" if label is None else f"""
k8s.core.v1.NodePatch("gpu-1", metadata={{"name": "gpu-1", "labels": {{
    "nvidia.com/device-plugin.config": "{label}"}}}})
"""
    (folder / "__main__.py").write_text("import pulumi_kubernetes as k8s\n" + textwrap.dedent(f"""
k8s.core.v1.ConfigMap("plugin", metadata={{"name": "plugin-config",
    "namespace": "gpu-operator"}}, data={data!r})
k8s.helm.v3.Release("gpu-operator", name="gpu-operator", chart="gpu-operator",
    version="v25.10.1", repository_opts={{"repo": "https://helm.ngc.nvidia.com/nvidia"}},
    namespace="gpu-operator", values={{"driver": {{"enabled": False}},
    "mig": {{"strategy": "{strategy}"}},
    "devicePlugin": {{"config": {{"name": "plugin-config", "default": "{default}"}}}}}})
""") + patch)
    config = {name: dict(FACTS) for name in policy_names()}
    return plan_stack("dev", folder, config, load_project(folder))


def ids(report: dict[str, Any]) -> set[str]:
    return {f["id"] for f in report["findings"] if f["severity"] == "error"}


def test_fm19_plain_install_strategy_mismatch(tmp_path: Path) -> None:
    data = {"default": "version: v1\nflags: {migStrategy: mixed}\n"}
    assert ids(plain(tmp_path, data, default="default", strategy="single")) == {"FM19"}
    assert ids(plain(tmp_path / "ok", data, default="default", strategy="mixed")) == set()


def test_fm23_plain_install_label_names_missing_key(tmp_path: Path) -> None:
    data = {"default": "version: v1\nflags: {migStrategy: single}\n"}
    report = plain(tmp_path, data, default="default", label="inference")
    assert ids(report) == {"FM23"}, report["findings"]
    assert any("node gpu-1" in f["message"] for f in report["findings"])
    assert ids(plain(tmp_path / "ok", data, default="default", label="default")) == set()


# ----------------------------------------------------------------- workloads

def pod(limits: dict[str, int], selector: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "runtimeClassName": "nvidia", "nodeSelector": selector or {},
        "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]}}


def test_fm24_two_gpus_on_an_mps_pool() -> None:
    intent = parsed(config_of("inference-mps")).intent()
    found = check_workload(pod({"nvidia.com/gpu": 2}), intent, "Pod default/p")
    assert [f.id for f in found] == ["FM24"]
    assert check_workload(pod({"nvidia.com/gpu": 1}), intent, "Pod default/p") == []


def test_fm24_time_slicing_only_with_fail_requests_greater_than_one() -> None:
    cfg = config_of("two-pools")
    sel = {"nvidia.com/device-plugin.config": "notebooks"}
    intent = parsed(cfg).intent()
    assert check_workload(pod({"nvidia.com/gpu": 2}, sel), intent, "Pod d/p") == []
    cfg = copy.deepcopy(cfg)
    cfg["gpuplane:sharing"]["pools"]["notebooks"]["failRequestsGreaterThanOne"] = True
    found = check_workload(pod({"nvidia.com/gpu": 2}, sel), parsed(cfg).intent(), "Pod d/p")
    assert [f.id for f in found] == ["FM24"]


def test_fm25_whole_gpu_asked_on_a_mixed_mig_pool() -> None:
    intent = parsed(config_of("h100-mig")).intent()
    on_h100 = {"nvidia.com/device-plugin.config": "h100"}
    found = check_workload(pod({"nvidia.com/gpu": 1}, on_h100), intent, "Pod d/p")
    assert [f.id for f in found] == ["FM25"]
    assert "nvidia.com/mig-1g.10gb" in found[0].fix
    assert check_workload(pod({"nvidia.com/mig-1g.10gb": 1}, on_h100), intent, "Pod d/p") == []
    # Unpinned, the L40S pool still has whole GPUs.
    assert check_workload(pod({"nvidia.com/gpu": 1}), intent, "Pod d/p") == []


# ----------------------------------------------------------------- the doctor

def test_fm19_fm23_doctor_reads_the_live_configmap_and_node_labels() -> None:
    from gpuplane.doctor.analyse import _sharing
    from gpuplane.doctor.cluster import ClusterView
    from gpuplane.doctor.snapshot import Snapshot

    snap = Snapshot()
    snap.nodes = [{"kind": "Node", "metadata": {"name": "h100-01", "labels": {
        "nvidia.com/device-plugin.config": "h100"}}}]
    snap.configmaps = [{"kind": "ConfigMap", "metadata": {
        "name": "device-plugin-config", "namespace": "gpu-operator"},
        "data": {"default": "version: v1\nflags: {migStrategy: mixed}\n"}}]
    values = {"mig": {"strategy": "single"}, "devicePlugin": {"config": {
        "name": "device-plugin-config", "default": "default"}}}
    intent = ClusterIntent(operator_namespace="gpu-operator")
    found = [d.finding for d in _sharing(ClusterView(snap), intent, values,
                                         "ClusterPolicy cluster-policy")]
    assert sorted(f.id for f in found) == ["FM19", "FM23"], found
    assert "node h100-01" in " ".join(f.message for f in found)


def test_a_time_slicing_stacks_intent_record_is_unchanged() -> None:
    raw = stack("two-pools", timeSlicing={"replicas": 4})
    del raw["gpuplane:sharing"]
    text = parsed(raw).intent().to_json()
    assert '"sharing' not in text and '"resources"' not in text


@pytest.mark.parametrize(("operator", "profile", "fm19"), [
    ({}, "none", False),                        # the chart's single beside a plugin's none
    ({"mig": {"strategy": "none"}}, "single", False),
    ({}, "mixed", True),
    ({"mig": {"strategy": "mixed"}}, "none", True),
])
def test_fm19_only_where_one_side_is_mixed(operator: dict[str, Any], profile: str,
                                           fm19: bool) -> None:
    """`none` and `single` both advertise nvidia.com/gpu: a plain install whose plugin
    config says `none` beside the operator's default `single` (a live cluster the doctor
    judged, tests/data/doctor/incident-3) is no FM19; a `mixed` on one side is."""
    from gpuplane.rules.sharing import check_mig_strategy

    data = {"any": f"version: v1\nflags: {{migStrategy: {profile}}}\n"}
    found = check_mig_strategy(operator, data, where="ConfigMap gpu-operator/plugin-config")
    assert [f.id for f in found] == (["FM19"] if fm19 else [])


def test_fm20_fm29_doctor_judges_the_hami_pools_of_the_stacks_intent() -> None:
    """The doctor runs the same pool rules on a HAMi stack's intent: HAMi alone (no
    operator release found) and beside the operator (its values found)."""
    from gpuplane.doctor.analyse import _rules, _sharing
    from gpuplane.doctor.cluster import ClusterView
    from gpuplane.doctor.snapshot import Snapshot

    alone = stack("hami-pools")
    del alone["gpuplane:gpuOperator"]
    alone["gpuplane:cluster"]["nodeAccess"] = "pod"
    alone["gpuplane:sharing"]["pools"]["training"]["gpuModel"] = "T4"
    intent = parsed(alone).intent()
    found = {d.finding.id for d in _rules(ClusterView(Snapshot()), intent, [])}
    assert "FM20" in found, found

    beside = stack("hami-pools")
    beside["gpuplane:sharing"]["pools"]["inference"] = {"mode": "time-slicing", "replicas": 2}
    intent = parsed(beside).intent()
    found = {d.finding.id for d in _sharing(ClusterView(Snapshot()), intent,
                                            {"devicePlugin": {"enabled": False}}, "Release")}
    assert found == {"FM29"}, found
