"""`gpuplane:draDriver.pools`: the DRA driver on some node pools, the GPU Operator's device
plugin on the others. The keys and their errors, the values and labels gpuplane renders,
FM32 judged per node (plan, pack and doctor), and the post-deploy checks of a split
stack: ResourceSlices on the driver's nodes, allocatable on the plugin's. Helm's engine
over both charts: tests/real/test_dra_pools_render.py."""

from __future__ import annotations

import copy
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from support.dra_cluster import gpu_slice
from support.stack_cases import config_of, write_stack

from gpuplane.checks.live import CheckFailed
from gpuplane.checks.manifests import plan_checks
from gpuplane.checks.provider import AllocatableCheckProvider, check_manifests
from gpuplane.checks.settings import ChecksSettings
from gpuplane.cli.plan.run import plan_stack
from gpuplane.config import StackConfig, StackConfigError
from gpuplane.config.helm_values import dra_labels, dra_values, operator_values
from gpuplane.config.sharing_values import node_labels
from gpuplane.core.intent import ClusterIntent, NodeIntent
from gpuplane.rules.dra import check_dra_release, served_twice

STACK = "kubeadm-dra-pools"
DRA_NODES = ["h100-01", "h100-02"]
PLUGIN_NODES = ["l40s-01", "l40s-02"]
OFF = {"gpuplane.dev/dra-driver": "true", "nvidia.com/gpu.deploy.device-plugin": "false"}


def stack(**changes: Any) -> dict[str, Any]:
    cfg = config_of(STACK)
    for key, value in changes.items():
        section, _, field = key.partition(".")
        if field:
            cfg[f"gpuplane:{section}"] = {**cfg[f"gpuplane:{section}"], field: value}
        else:
            cfg[f"gpuplane:{section}"] = value
    return cfg


def parsed(cfg: dict[str, Any]) -> StackConfig:
    return StackConfig.model_validate({k.removeprefix("gpuplane:"): v for k, v in cfg.items()})


def problems(cfg: dict[str, Any]) -> str:
    with pytest.raises((StackConfigError, ValueError)) as err:
        parsed(cfg)
    return str(err.value)


def planned(tmp_path: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    write_stack(tmp_path, "case", cfg)
    return plan_stack("case", tmp_path)


def errors(report: dict[str, Any]) -> list[str]:
    return sorted({f["id"] for f in report["findings"] if f["severity"] == "error"})


# ------------------------------------------------------------------------------ the keys

def test_an_unknown_dra_pool_is_a_stack_error_listing_the_known_pools() -> None:
    text = problems(stack(**{"draDriver.pools": ["training", "trainig"]}))
    assert "gpuplane:draDriver.pools[1]" in text and "'trainig'" in text
    assert "nodes[].pool: inference, training" in text
    assert "gpuplane:draDriver.pools[0]" not in text
    assert "names no pool" in problems(stack(**{"draDriver.pools": []}))
    assert "twice" in problems(stack(**{"draDriver.pools": ["training", "training"]}))


@pytest.mark.parametrize("sharing", [
    {"mode": "time-slicing", "replicas": 4, "gpuModel": "H100-80GB"},
    {"mode": "mps", "replicas": 2, "gpuModel": "H100-80GB"},
    {"mode": "whole", "gpuModel": "H100-80GB",
     "mig": {"strategy": "mixed", "profile": "all-1g.10gb"}},
])
def test_a_dra_pool_with_device_plugin_sharing_is_a_conflict(sharing: dict[str, Any]) -> None:
    cfg = stack()
    cfg["gpuplane:sharing"]["pools"]["training"] = sharing
    text = problems(cfg)
    assert "gpuplane:sharing.pools.training" in text and "draDriver.pools" in text
    assert "remove the pool from gpuplane:draDriver.pools" in text
    # Whole GPUs are no sharing: the entry is harmless, and the split plans as before.
    # Its key is in the ConfigMap, but its label is not put on the driver's nodes.
    cfg["gpuplane:sharing"]["pools"]["training"] = {"mode": "whole", "gpuModel": "H100-80GB"}
    whole = parsed(cfg)
    assert whole.dra_pools == ("training",)
    assert sorted(node_labels(whole)) == PLUGIN_NODES


def test_without_pools_device_plugin_sharing_is_refused_at_every_key() -> None:
    """No draDriver.pools: the driver serves every GPU node and the operator's device
    plugin is off, so its sharing (the bundled split's pool, a default, timeSlicing)
    would be a ConfigMap nothing reads. Every key is named, and the whole-GPU default is
    no sharing."""
    cfg = stack(timeSlicing={"replicas": 4})
    del cfg["gpuplane:draDriver"]["pools"]
    cfg["gpuplane:sharing"]["default"] = {"mode": "mps", "replicas": 2}
    text = problems(cfg)
    for key in ("timeSlicing.replicas", "sharing.default", "sharing.pools.inference"):
        assert f"gpuplane:{key}" in text, text
    assert "no draDriver.pools" in text and "set gpuplane:draDriver.pools" in text
    # Only whole GPUs left: the stack parses, and the device plugin stays off.
    cfg["gpuplane:sharing"] = {"default": {"mode": "whole"}}
    del cfg["gpuplane:timeSlicing"]
    assert operator_values(parsed(cfg), [])["devicePlugin"]["enabled"] is False
    # The fix it names, applied: the pools that take claims, the others keep sharing.
    fixed = stack()
    assert parsed(fixed).dra_pools == ("training",)
    # The driver for ComputeDomains only leaves the device plugin, and its sharing, alone.
    cd = stack(**{"draDriver.gpus": False, "draDriver.computeDomains": True})
    del cd["gpuplane:draDriver"]["pools"]
    assert parsed(cd).sharing is not None


def test_pools_need_the_operators_device_plugin() -> None:
    cfg = stack(devicePlugin="hami")
    del cfg["gpuplane:sharing"]
    assert "gpuplane:draDriver.pools" in problems(cfg) and "devicePlugin: gpu-operator" in \
        problems(cfg)


# ------------------------------------------------------------------ values and labels

def test_the_split_keeps_the_device_plugin_and_selects_the_dra_nodes() -> None:
    cfg = parsed(stack())
    assert operator_values(cfg, [])["devicePlugin"]["enabled"] is True
    assert dra_values(cfg)["kubeletPlugin"]["nodeSelector"] == {"gpuplane.dev/dra-driver":
                                                                "true"}
    assert dra_values(cfg)["gpuResourcesEnabledOverride"] is True
    assert dra_labels(cfg) == {n: OFF for n in DRA_NODES}
    # The sharing profile's labels go to the device plugin's nodes only.
    assert node_labels(cfg) == {n: {"nvidia.com/device-plugin.config": "inference"}
                                for n in PLUGIN_NODES}
    intent = cfg.intent()
    assert intent.dra_pools == ("training",)
    assert [n.name for n in intent.dra_nodes] == DRA_NODES
    assert [n.name for n in intent.plugin_nodes] == PLUGIN_NODES
    assert ClusterIntent.from_json(intent.to_json()) == intent
    assert dict(intent.sharing_pools) == {"inference": "inference"}
    assert {n.name: n.resources for n in intent.nodes} == {
        "h100-01": (), "h100-02": (), "l40s-01": (("nvidia.com/gpu", 16),),
        "l40s-02": (("nvidia.com/gpu", 16),)}


def test_without_pools_the_driver_serves_every_gpu_node_as_before() -> None:
    cfg = stack()
    del cfg["gpuplane:draDriver"]["pools"]
    del cfg["gpuplane:sharing"]
    config = parsed(cfg)
    assert operator_values(config, [])["devicePlugin"]["enabled"] is False
    assert "nodeSelector" not in dra_values(config)["kubeletPlugin"]
    assert dra_labels(config) == {}
    intent = config.intent()
    assert "dra_pools" not in intent.to_json() and intent.dra_pools == ()
    assert len(intent.dra_nodes) == 4 and intent.plugin_nodes == ()


def test_compute_domains_only_on_some_pools_leaves_the_device_plugin_alone() -> None:
    cfg = parsed(stack(**{"draDriver.gpus": False, "draDriver.computeDomains": True}))
    assert dra_labels(cfg) == {n: {"gpuplane.dev/dra-driver": "true"} for n in DRA_NODES}
    assert operator_values(cfg, [])["devicePlugin"]["enabled"] is True


# ------------------------------------------------------------------------------- FM32

def test_fm32_served_twice_by_the_labels_each_node_gets() -> None:
    labels = {n: OFF for n in DRA_NODES}
    nodes = DRA_NODES + PLUGIN_NODES
    ours = {"kubeletPlugin": {"nodeSelector": {"gpuplane.dev/dra-driver": "true"}}}
    assert served_twice(ours, nodes, labels) == []
    # No selector: the kubelet plugin runs on every node, beside the plugin's.
    assert served_twice({}, nodes, labels) == PLUGIN_NODES
    # A selector on a label gpuplane does not set may match anywhere.
    gpu = {"kubeletPlugin": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}}
    assert served_twice(gpu, nodes, labels) == PLUGIN_NODES
    # ... but on a live cluster the nodes' own labels decide.
    live = {n: {**OFF, "nvidia.com/gpu.present": "true"} for n in DRA_NODES}
    assert served_twice(gpu, nodes, live, live=True) == []
    # The deploy label set back to true on a DRA node: both run there.
    flipped = {**labels, "h100-01": {**OFF, "nvidia.com/gpu.deploy.device-plugin": "true"}}
    assert served_twice(ours, nodes, flipped) == ["h100-01"]


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"kubeletPlugin": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}}}


def test_fm32_a_required_node_affinity_narrows_the_kubelet_plugins_nodes() -> None:
    """A user's `kubeletPlugin.affinity` instead of the selector: the plugin's nodes are
    judged by it (FM32 named every device-plugin node before, a false error)."""
    labels = {n: OFF for n in DRA_NODES}
    nodes = DRA_NODES + PLUGIN_NODES
    on_dra = {"key": "gpuplane.dev/dra-driver", "operator": "In", "values": ["true"]}
    assert served_twice(affinity({"matchExpressions": [on_dra]}), nodes, labels) == []
    by_name = {"key": "metadata.name", "operator": "In", "values": DRA_NODES}
    assert served_twice(affinity({"matchFields": [by_name]}), nodes, labels) == []
    # Terms are ORed: a second term that takes one device-plugin node in.
    one = {"key": "metadata.name", "operator": "In", "values": ["l40s-02"]}
    assert served_twice(affinity({"matchExpressions": [on_dra]}, {"matchFields": [one]}),
                        nodes, labels) == ["l40s-02"]
    # The chart's own terms name NFD's labels, which the program does not set: may match.
    nfd = {"key": "feature.node.kubernetes.io/pci-10de.present", "operator": "In",
           "values": ["true"]}
    assert served_twice(affinity({"matchExpressions": [nfd]}), nodes, labels) == PLUGIN_NODES
    # A label the program sets, read the other way round.
    off = {"key": "nvidia.com/gpu.deploy.device-plugin", "operator": "NotIn",
           "values": ["false"]}
    assert served_twice(affinity({"matchExpressions": [off]}), nodes, labels) == PLUGIN_NODES
    gone = {"key": "gpuplane.dev/dra-driver", "operator": "DoesNotExist"}
    assert served_twice(affinity({"matchExpressions": [gone]}), nodes, labels) == PLUGIN_NODES
    # Selector and affinity both apply; an affinity without node terms leaves the selector.
    both = {**affinity({"matchFields": [one]}),}
    both["kubeletPlugin"]["nodeSelector"] = {"gpuplane.dev/dra-driver": "true"}
    assert served_twice(both, nodes, labels) == []
    anti = {"kubeletPlugin": {"affinity": {"podAntiAffinity": {}}}}
    assert served_twice(anti, nodes, labels) == PLUGIN_NODES


def test_fm32_per_node_in_the_release_check() -> None:
    intent = parsed(stack()).intent()
    values = dra_values(parsed(stack()))
    labels = {n: OFF for n in DRA_NODES}
    operator = {"devicePlugin": {"enabled": True}}
    assert [f.id for f in check_dra_release(values, intent, where="Release dra",
                                            operator=operator, node_labels=labels)] == []
    (f,) = [f for f in check_dra_release({**values, "kubeletPlugin": {}}, intent,
                                         where="Release dra", operator=operator,
                                         node_labels=labels) if f.id == "FM32"]
    assert "l40s-01, l40s-02" in f.message and "h100" not in f.message
    assert "values.kubeletPlugin.nodeSelector" in f.where
    assert "gpuplane:draDriver.values" in f.where
    # Nodes not known (a plain program): any device plugin beside the driver, as before.
    assert "FM32" in [f.id for f in check_dra_release(values, intent, where="Release dra",
                                                      operator=operator)]


def test_fm32_the_bundled_split_plans_clean_and_an_override_is_refused(
        tmp_path: Path) -> None:
    clean = plan_stack(STACK, Path(__file__).resolve().parents[2] / "stacks")
    assert clean["findings"] == [] and list(clean["helm"]) == [
        "gpu-operator", "dra-driver-nvidia-gpu"]
    types = [(r["type"], r["name"]) for r in clean["resources"]]
    assert ("pulumi-python:dynamic/gpuplane:NodeLabels", "gpu-dra-nodes") in types
    def values(selector: Any) -> dict[str, Any]:
        return stack(**{"draDriver.values": {"kubeletPlugin": {"nodeSelector": selector}}})

    # A selector of the user's own merges with gpuplane's: narrower, still clean.
    assert errors(planned(tmp_path, values({"nvidia.com/gpu.present": "true"}))) == []
    # The selector removed (null), or gpuplane's key removed for one on a label gpuplane
    # cannot see: the kubelet plugin may run on the device plugin's nodes too.
    for selector in (None, {"gpuplane.dev/dra-driver": None,
                            "nvidia.com/gpu.present": "true"}):
        report = planned(tmp_path, values(selector))
        assert errors(report) == ["FM32"]
        (f,) = [f for f in report["findings"] if f["id"] == "FM32"]
        assert "l40s-01, l40s-02" in f["message"]
    # The same override without pools is no split at all: the plugin is off everywhere.
    cfg = stack(**{"draDriver.values": {"kubeletPlugin": {"nodeSelector": None}}})
    del cfg["gpuplane:draDriver"]["pools"]
    del cfg["gpuplane:sharing"]
    assert errors(planned(tmp_path, cfg)) == []


def test_fm32_the_doctor_judges_the_live_nodes_labels(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A live cluster (the doctor's healthy snapshot) whose operator keeps its device
    plugin beside a DRA release that selects gpuplane's label: clean while the GPU nodes
    carry the DRA labels only where the plugin is off, FM32 once a node has both."""
    import json
    import shutil

    from gpuplane.cli.main import main

    def ids(node_labels: dict[str, str], selector: dict[str, str] | None) -> set[str]:
        snap = tmp_path / f"snap-{len(list(tmp_path.iterdir()))}"
        shutil.copytree(Path(__file__).resolve().parents[1] / "data/doctor/healthy", snap)
        nodes = json.loads((snap / "nodes.json").read_text())
        for node in nodes["items"]:
            node["metadata"].setdefault("labels", {}).update(node_labels)
        (snap / "nodes.json").write_text(json.dumps(nodes))
        releases = json.loads((snap / "helm-releases.json").read_text())
        releases["items"][0]["values"].update({"devicePlugin": {"enabled": True}})
        values: dict[str, Any] = {"gpuResourcesEnabledOverride": True}
        if selector is not None:
            values["kubeletPlugin"] = {"nodeSelector": selector}
        releases["items"].append({
            "chart": {"name": "dra-driver-nvidia-gpu", "version": "0.4.1"},
            "name": "dra-driver-nvidia-gpu", "namespace": "nvidia-dra-driver-gpu",
            "status": "deployed", "values": values})
        (snap / "helm-releases.json").write_text(json.dumps(releases))
        main(["doctor", "--from", str(snap), "--format", "json"])
        report = json.loads(capsys.readouterr().out)
        return {d["id"] for d in report["findings"]}

    ours = {"gpuplane.dev/dra-driver": "true"}
    assert "FM32" not in ids(OFF, ours)
    assert "FM32" not in ids(OFF, None)     # the operator's plugin is off on the node
    # The node selected without the device plugin's label off (the operator sets "true").
    assert "FM32" in ids({"gpuplane.dev/dra-driver": "true"}, ours)
    assert "FM32" in ids({}, None)


def test_fm38_fm10_the_doctor_judges_each_pool_its_own_way(tmp_path: Path) -> None:
    """A live split cluster (the doctor's healthy snapshot, a second GPU node added): the
    DRA node is judged by its ResourceSlice, the device plugin's node by its allocatable
    (time-sliced four ways), and neither by the other's measure."""
    import json
    import shutil

    from gpuplane.doctor import health
    from gpuplane.doctor.cluster import ClusterView
    from gpuplane.doctor.dra import dra_health
    from gpuplane.doctor.snapshot import load

    snap = tmp_path / "snap"
    shutil.copytree(Path(__file__).resolve().parents[1] / "data/doctor/healthy", snap)
    nodes = json.loads((snap / "nodes.json").read_text())
    (node,) = nodes["items"]
    node["metadata"]["labels"].update(OFF)
    node["status"]["allocatable"].pop("nvidia.com/gpu")
    other = copy.deepcopy(node)
    other["metadata"]["name"] = other["metadata"]["labels"]["kubernetes.io/hostname"] = "gpu-d2"
    for key in OFF:
        other["metadata"]["labels"].pop(key)
    nodes["items"].append(other)
    intent = ClusterIntent(dra=True, dra_pools=("dra",), time_slicing_replicas=4,
                           nodes=(NodeIntent("gpu-d1", 1, pool="dra"),
                                  NodeIntent("gpu-d2", 1, pool="plugin")))

    def found(shared: int, slices: list[dict[str, Any]]) -> list[tuple[str, str]]:
        other["status"]["allocatable"]["nvidia.com/gpu"] = str(shared)
        (snap / "nodes.json").write_text(json.dumps(nodes))
        (snap / "resourceslices.json").write_text(json.dumps(
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList",
             "items": slices}))
        view = ClusterView(load(snap))
        out = [(d.finding.id, d.scope) for d in dra_health(view, intent, [])]
        return sorted(out + [(s.ids[0], s.evidence.source) for s in
                             health.allocatable(view, intent, None, [])])

    assert found(4, [gpu_slice("gpu-d1", 1)]) == []
    assert found(1, []) == [("FM10", "Node gpu-d2 status.allocatable"),
                            ("FM38", "node:gpu-d1")]


# ------------------------------------------------------------------ post-deploy checks

def _props(intent: ClusterIntent) -> dict[str, Any]:
    settings = ChecksSettings()
    return {"checkName": "c-nodes-check",
            "checks": [c.key for c in plan_checks(intent, settings)],
            "intent": intent.to_json(), "namespace": "gpu-operator",
            "settings": asdict(settings), "jobPrefix": "c", "fingerprint": "0123abcd",
            "configmap": "c-probe-x", "timeoutSeconds": 300, "kubeconfig": None}


def test_probes_claim_on_the_dra_nodes_and_ask_for_the_resource_elsewhere() -> None:
    intent = parsed(stack()).intent()
    jobs = {c.node: job for c, job in check_manifests(_props(intent), 1)}
    assert sorted(jobs) == sorted(DRA_NODES + PLUGIN_NODES)
    for node, job in jobs.items():
        pod = job["spec"]["template"]["spec"]
        (ctr,) = pod["containers"]
        if node in DRA_NODES:
            assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == \
                job["metadata"]["name"]
            assert not any(k.startswith("nvidia.com/") for k in ctr["resources"]["limits"])
        else:
            assert "resourceClaims" not in pod
            assert ctr["resources"]["limits"]["nvidia.com/gpu"] == "1"


class _Cluster:
    """ResourceSlices and Node objects as recorded."""

    def __init__(self, slices: list[dict[str, Any]], allocatable: dict[str, int]):
        self.slices, self.allocatable = slices, allocatable

    def resource_slices(self) -> list[dict[str, Any]]:
        return self.slices

    def node(self, name: str) -> dict[str, Any]:
        count = self.allocatable.get(name)
        status = {} if count is None else {"allocatable": {"nvidia.com/gpu": str(count)}}
        return {"metadata": {"name": name, "labels": {}}, "status": status}


def _allocatable(cluster: _Cluster, intent: ClusterIntent) -> dict[str, Any]:
    provider = AllocatableCheckProvider()
    provider.settle_reads = 1
    provider.cluster_factory = lambda _k, _c: cluster  # type: ignore[assignment,return-value]
    return provider._outs({"checkName": "c", "intent": intent.to_json(), "timeoutSeconds": 0,
                           "hamiSplitCount": 10, "kubeconfig": None}, None)


def test_fm38_fm10_the_allocatable_check_judges_each_node_its_own_way() -> None:
    intent = parsed(stack()).intent()
    slices = [gpu_slice(n, 8) for n in DRA_NODES]
    ok = _allocatable(_Cluster(slices, {"l40s-01": 16, "l40s-02": 16}), intent)
    assert ok["passed"] is True
    assert ok["result"]["resourceSlices"] == {n: [f"gpu-{i}" for i in range(8)]
                                              for n in DRA_NODES}
    assert ok["result"]["allocatable"] == {n: {"nvidia.com/gpu": 16} for n in PLUGIN_NODES}
    # One DRA node without slices, one plugin node not time-sliced: both said at once.
    bad = _allocatable(_Cluster(slices[:1], {"l40s-01": 16, "l40s-02": 4}), intent)
    assert bad["passed"] is False and sorted(bad["result"]["findings"]) == ["FM10", "FM38"]
    report = bad["result"]["report"]
    assert "h100-02" in report and "l40s-02" in report and "h100-01" not in report


def test_a_split_check_failure_names_every_finding() -> None:
    from gpuplane.checks.live import Waiter, run_split_check

    intent = parsed(stack()).intent()
    with pytest.raises(CheckFailed) as failed:
        run_split_check(_Cluster([], {}), intent, waiter=Waiter(timeout=0), settle=1)
    assert sorted({f.id for f in failed.value.findings}) == ["FM10", "FM38"]
    assert copy.copy(failed.value.findings)
