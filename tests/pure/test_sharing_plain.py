"""FM24/FM25 over a program that installs the GPU Operator itself (no gpuplane stack):
the device plugin's profiles and MIG layouts read from the release's values, its
ConfigMap and the node labels the program sets, judged against its own workloads.

The pack-level cases run the program offline (`gpuplane plan` over a plain Pulumi
program), as the policy pack sees it; the rule-level cases call the rule directly."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from gpuplane.cli.plan.project import load_project
from gpuplane.cli.plan.run import plan_stack
from gpuplane.policy.pack import policy_names
from gpuplane.rules.sharing_plain import plain_sharing
from gpuplane.rules.workloads import check_workload

FACTS = {"distro": "kubeadm", "containerdVersion": "1.7", "driver": "preinstalled",
         "kubernetesVersion": "1.31.0"}
KEY = "nvidia.com/device-plugin.config"
MIG = "nvidia.com/mig.config"


def ts(replicas: int, *, fail: bool = False, rename: bool = False,
       strategy: str = "none", resource: str = "nvidia.com/gpu") -> str:
    flags = (f"    failRequestsGreaterThanOne: {str(fail).lower()}\n"
             f"    renameByDefault: {str(rename).lower()}\n")
    return (f"version: v1\nflags: {{migStrategy: {strategy}}}\nsharing:\n  timeSlicing:\n"
            f"{flags}    resources: [{{name: {resource}, replicas: {replicas}}}]\n")


def mps(replicas: int) -> str:
    return ("version: v1\nsharing:\n  mps:\n"
            f"    resources: [{{name: nvidia.com/gpu, replicas: {replicas}}}]\n")


WHOLE = "version: v1\nflags: {migStrategy: none}\n"


def pod(limits: dict[str, int], selector: dict[str, str] | None = None,
        affinity: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeSelector": selector or {}, "containers": [
        {"name": "c", "image": "x", "resources": {"limits": limits}}]}
    if affinity is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": affinity}]}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def judged(values: dict[str, Any], data: dict[str, str] | None, obj: dict[str, Any],
           mig_labels: tuple[str, ...] = (), layouts: dict[str, bool] | None = None
           ) -> list[tuple[str, str]]:
    """(rule, severity) of FM24/FM25 for `obj` against one plain install."""
    import yaml

    from gpuplane.policy.collect import intent_from_config

    docs = None if data is None else {k: yaml.safe_load(v) for k, v in data.items()}
    plain = plain_sharing(values, docs, mig_labels, where="Release gpu-operator",
                          named_layouts=layouts if layouts is not None else
                          {"all-disabled": False, "all-1g.10gb": True, "all-balanced": True})
    found = check_workload(obj, intent_from_config(FACTS), "Pod default/p", plain)
    return [(f.id, str(f.severity)) for f in found if f.id in ("FM24", "FM25")]


def values(default: str = "", strategy: str = "single", **extra: Any) -> dict[str, Any]:
    return {"mig": {"strategy": strategy},
            "devicePlugin": {"config": {"name": "plugin-config", "default": default}}, **extra}


# ---------------------------------------------------------------- FM24, rule level

def test_fm24_one_cluster_wide_profile_that_refuses_is_an_error() -> None:
    data = {"ts": ts(4, fail=True)}
    assert judged(values("ts"), data, pod({"nvidia.com/gpu": 2})) == [("FM24", "error")]
    assert judged(values("ts"), data, pod({"nvidia.com/gpu": 1})) == []
    # Without failRequestsGreaterThanOne time-slicing hands out two replicas: no finding.
    assert judged(values("ts"), {"ts": ts(4)}, pod({"nvidia.com/gpu": 2})) == []
    # MPS always refuses (the plugin forces failRequestsGreaterThanOne).
    assert judged(values("m"), {"m": mps(4)}, pod({"nvidia.com/gpu": 2})) == [("FM24", "error")]


def test_fm24_some_profiles_refuse_is_a_warning_naming_them() -> None:
    data = {"default": WHOLE, "ts": ts(4, fail=True)}
    import yaml

    plain = plain_sharing(values("default"), {k: yaml.safe_load(v) for k, v in data.items()},
                          (), where="Release gpu-operator", named_layouts={})
    [f] = [f for f in check_workload(pod({"nvidia.com/gpu": 2}), _intent(), "Pod default/p",
                                     plain) if f.id == "FM24"]
    assert (f.id, str(f.severity)) == ("FM24", "warning")
    assert f"'ts' ({KEY}=ts)" in f.message and "'default'" not in f.message
    # Pinned to the refusing profile: every node it can reach refuses.
    assert judged(values("default"), data, pod({"nvidia.com/gpu": 2}, {KEY: "ts"})) == [
        ("FM24", "error")]
    # Pinned away from it, by label or by a NotIn affinity: nothing.
    assert judged(values("default"), data, pod({"nvidia.com/gpu": 2}, {KEY: "default"})) == []
    away = [{"key": KEY, "operator": "NotIn", "values": ["ts"]}]
    assert judged(values("default"), data, pod({"nvidia.com/gpu": 2}, affinity=away)) == []
    into = [{"key": KEY, "operator": "In", "values": ["ts"]}]
    assert judged(values("default"), data, pod({"nvidia.com/gpu": 2}, affinity=into)) == [
        ("FM24", "error")]


def test_fm24_default_profile_refusing_only_unlabelled_nodes() -> None:
    """The default key refuses; a labelled key of whole GPUs exists: a warning naming the
    default, an error where the pod keeps off the labelled nodes."""
    data = {"ts": ts(2, fail=True), "whole": WHOLE}
    assert judged(values("ts"), data, pod({"nvidia.com/gpu": 2})) == [("FM24", "warning")]
    unlabelled = [{"key": KEY, "operator": "DoesNotExist"}]
    assert judged(values("ts"), data, pod({"nvidia.com/gpu": 2}, affinity=unlabelled)) == [
        ("FM24", "error")]


def test_fm24_not_known_says_nothing() -> None:
    # The ConfigMap is named but not in the program.
    assert judged(values("ts"), None, pod({"nvidia.com/gpu": 2})) == []
    # No ConfigMap at all: the plugin's defaults share nothing.
    assert judged({}, {}, pod({"nvidia.com/gpu": 8})) == []


def test_fm24_rename_by_default_is_the_shared_name() -> None:
    data = {"ts": ts(4, fail=True, rename=True)}
    assert judged(values("ts"), data, pod({"nvidia.com/gpu.shared": 2})) == [("FM24", "error")]
    # nvidia.com/gpu is not advertised there at all (another failure, not FM24's).
    assert judged(values("ts"), data, pod({"nvidia.com/gpu": 2})) == []


def test_fm24_only_the_shared_resource_is_refused() -> None:
    data = {"ts": ts(4, fail=True, strategy="mixed", resource="nvidia.com/mig-1g.10gb")}
    assert judged(values("ts", "mixed"), data, pod({"nvidia.com/gpu": 2})) == []
    assert judged(values("ts", "mixed"), data, pod({"nvidia.com/mig-1g.10gb": 2})) == [
        ("FM24", "error")]


# ---------------------------------------------------------------- FM25, rule level

def test_fm25_pod_pinned_to_a_mig_layout_under_mixed() -> None:
    on_mig = {MIG: "all-1g.10gb"}
    assert judged(values(strategy="mixed"), {}, pod({"nvidia.com/gpu": 1}, on_mig)) == [
        ("FM25", "error")]
    assert judged(values(strategy="mixed"), {}, pod({"nvidia.com/mig-1g.10gb": 1}, on_mig)) == []
    # Single strategy: the instances are nvidia.com/gpu.
    assert judged(values(strategy="single"), {}, pod({"nvidia.com/gpu": 1}, on_mig)) == []
    # A profile key that runs single overrides the operator's mixed.
    data = {"default": "version: v1\nflags: {migStrategy: single}\n"}
    assert judged(values("default", "mixed"), data, pod({"nvidia.com/gpu": 1}, on_mig)) == []


def test_fm25_nodes_the_program_partitions_are_not_every_node() -> None:
    """The program labels some nodes with a MIG layout: an unpinned pod can still land on
    the others (GPUs without MIG, all-disabled), and the scheduler sends it there."""
    assert judged(values(strategy="mixed"), {}, pod({"nvidia.com/gpu": 1}),
                  mig_labels=("all-1g.10gb",)) == []
    # MIG Manager's default other than all-disabled partitions nothing by itself.
    v = values(strategy="mixed", migManager={"config": {"default": "all-1g.10gb"}})
    assert judged(v, {}, pod({"nvidia.com/gpu": 1})) == []


def test_fm25_custom_mig_parted_config_is_not_known() -> None:
    on_mine = {MIG: "my-layout"}
    assert judged(values(strategy="mixed"), {}, pod({"nvidia.com/gpu": 1}, on_mine)) == []
    assert judged(values(strategy="mixed"), {}, pod({"nvidia.com/gpu": 1}, {MIG: "all-1g.10gb"}),
                  layouts={}) == []


def _intent() -> Any:
    from gpuplane.policy.collect import intent_from_config

    return intent_from_config(FACTS)


# ---------------------------------------------------------------- the pack, offline

def program(tmp_path: Path, body: str) -> dict[str, Any]:
    folder = tmp_path / "infra"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    (folder / "Pulumi.dev.yaml").write_text("config: {}\n")
    (folder / "__main__.py").write_text("import pulumi_kubernetes as k8s\n"
                                        + textwrap.dedent(body))
    config = {name: dict(FACTS) for name in policy_names()}
    return plan_stack("dev", folder, config, load_project(folder))


def found(report: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((f["id"], f["severity"]) for f in report["findings"]
                  if f["id"] in ("FM24", "FM25"))


def deployment(limits: dict[str, int], selector: dict[str, str] | None = None) -> str:
    return f"""
k8s.apps.v1.Deployment("infer", metadata={{"name": "infer"}}, spec={{
    "selector": {{"matchLabels": {{"app": "i"}}}},
    "template": {{"metadata": {{"labels": {{"app": "i"}}}}, "spec": {{
        "nodeSelector": {selector or {}!r},
        "containers": [{{"name": "c", "image": "cuda",
                         "resources": {{"limits": {limits!r}}}}}]}}}}}})
"""


def release(plugin: dict[str, Any], strategy: str = "single") -> str:
    return f"""
k8s.helm.v3.Release("gpu-operator", name="gpu-operator", chart="gpu-operator",
    version="v25.10.1", repository_opts={{"repo": "https://helm.ngc.nvidia.com/nvidia"}},
    namespace="gpu-operator", values={{"driver": {{"enabled": False}},
    "mig": {{"strategy": "{strategy}"}}, "devicePlugin": {{"config": {plugin!r}}}}})
"""


def test_fm24_pack_release_with_its_own_configmap_refuses_two_gpus(tmp_path: Path) -> None:
    plugin = {"create": True, "name": "plugin-config", "default": "ts",
              "data": {"ts": ts(4, fail=True)}}
    report = program(tmp_path, release(plugin) + deployment({"nvidia.com/gpu": 2}))
    assert found(report) == [("FM24", "error")] and report["verdict"] == "rejected"
    [f] = [f for f in report["findings"] if f["id"] == "FM24"]
    assert f["where"].startswith("Deployment default/infer spec.template.spec.containers[0]")
    assert found(program(tmp_path / "one", release(plugin)
                         + deployment({"nvidia.com/gpu": 1}))) == []


def test_fm24_pack_configmap_by_name_and_node_patch(tmp_path: Path) -> None:
    """The ConfigMap a program declares beside the release; a NodePatch labels a node with
    the refusing key: a warning for an unpinned Deployment."""
    data = {"default": WHOLE, "ts": ts(4, fail=True)}
    body = f"""
k8s.core.v1.ConfigMap("plugin", metadata={{"name": "plugin-config",
    "namespace": "gpu-operator"}}, data={data!r})
k8s.core.v1.NodePatch("gpu-1", metadata={{"name": "gpu-1", "labels": {{"{KEY}": "ts"}}}})
""" + release({"name": "plugin-config", "default": "default"})
    assert found(program(tmp_path, body + deployment({"nvidia.com/gpu": 2}))) == [
        ("FM24", "warning")]
    assert found(program(tmp_path / "pin", body + deployment({"nvidia.com/gpu": 2},
                                                             {KEY: "ts"}))) == [("FM24", "error")]
    # Named but not declared: not known, nothing said.
    unknown = release({"name": "elsewhere", "default": "ts"})
    assert found(program(tmp_path / "unk", unknown + deployment({"nvidia.com/gpu": 2}))) == []


def test_fm25_pack_cluster_policy_mixed_mig(tmp_path: Path) -> None:
    """A ClusterPolicy on its own (no chart): mixed strategy, a Job pinned to a MIG layout."""
    body = f"""
k8s.apiextensions.CustomResource("cp", api_version="nvidia.com/v1", kind="ClusterPolicy",
    metadata={{"name": "cluster-policy"}}, spec={{"mig": {{"strategy": "mixed"}},
    "devicePlugin": {{"enabled": True}}}})
k8s.batch.v1.Job("train", metadata={{"name": "train"}}, spec={{"template": {{"spec": {{
    "restartPolicy": "Never", "nodeSelector": {{"{MIG}": "all-balanced"}},
    "containers": [{{"name": "c", "image": "cuda",
                     "resources": {{"limits": {{"nvidia.com/gpu": 1}}}}}}]}}}}}})
"""
    assert found(program(tmp_path, body)) == [("FM25", "error")]
    single = body.replace('"strategy": "mixed"', '"strategy": "single"')
    assert found(program(tmp_path / "single", single)) == []


@pytest.mark.parametrize("kind", ["StatefulSet", "DaemonSet"])
def test_fm24_pack_every_workload_kind(tmp_path: Path, kind: str) -> None:
    plugin = {"create": True, "name": "plugin-config", "default": "m", "data": {"m": mps(2)}}
    body = release(plugin) + deployment({"nvidia.com/gpu": 2}).replace(
        "k8s.apps.v1.Deployment", f"k8s.apps.v1.{kind}").replace(
        '"selector"', '"serviceName": "s", "selector"' if kind == "StatefulSet" else '"selector"')
    assert found(program(tmp_path, body)) == [("FM24", "error")]


# ---------------------------------------------------------------- the doctor

def _cluster(node_labels: list[dict[str, str]], limits: dict[str, int],
             selector: dict[str, str] | None = None) -> Any:
    """A snapshot of a cluster no gpuplane stack made: a ClusterPolicy naming a device
    plugin ConfigMap, GPU nodes with their labels, one GPU Deployment."""
    from gpuplane.doctor.snapshot import Snapshot

    snap = Snapshot()
    snap.nodes = [{"kind": "Node", "metadata": {"name": f"gpu-{i}", "labels": {
        "nvidia.com/gpu.present": "true", **lbl}},
        "status": {"capacity": {"nvidia.com/gpu": "4"}, "allocatable": {"nvidia.com/gpu": "4"}}}
        for i, lbl in enumerate(node_labels)]
    snap.configmaps = [{"kind": "ConfigMap", "metadata": {
        "name": "plugin-config", "namespace": "gpu-operator"},
        "data": {"default": WHOLE, "ts": ts(4, fail=True)}}]
    snap.clusterpolicies = [{"kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
                             "spec": {"devicePlugin": {"config": {
                                 "name": "plugin-config", "default": "default"}}}}]
    snap.deployments = [{"kind": "Deployment", "metadata": {"name": "infer",
                                                            "namespace": "ml"},
                         "spec": {"template": {"spec": {"nodeSelector": selector or {},
                                  "containers": [{"name": "c", "image": "cuda",
                                                  "resources": {"limits": limits}}]}}}}]
    return snap


def _doctor(snap: Any) -> list[tuple[str, str]]:
    from gpuplane.doctor.analyse import analyse

    return sorted((d.finding.id, str(d.finding.severity)) for d in analyse(snap).diagnoses
                  if d.finding.id in ("FM24", "FM25"))


def test_fm24_doctor_live_nodes_decide_error_or_warning() -> None:
    """On a live cluster the GPU nodes and their labels are known: every GPU node on the
    refusing key is an error, some a warning, none nothing."""
    two = {"nvidia.com/gpu": 2}
    assert _doctor(_cluster([{KEY: "ts"}, {KEY: "ts"}], two)) == [("FM24", "error")]
    assert _doctor(_cluster([{KEY: "ts"}, {}], two)) == [("FM24", "warning")]
    assert _doctor(_cluster([{}, {}], two)) == []
    assert _doctor(_cluster([{KEY: "ts"}, {}], {"nvidia.com/gpu": 1})) == []
