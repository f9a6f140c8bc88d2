"""A program with several `GpuCluster`s (#40): every cluster is judged by its own intent
(its distro, nodes, device plugin, toolkit), every finding names the cluster it belongs
to, and the verdict (exit code) reflects all of them; one cluster's resources never leak
into another's judgement."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.stack_cases import as_pod, broken_config, config_of, write_stack

from gpuplane.cli.main import main
from gpuplane.cli.plan.engine import Registered
from gpuplane.cli.plan.policies import run_policies
from gpuplane.core.intent import INTENT_CONFIGMAP, INTENT_KEY, ClusterIntent

PREFIX = "urn:pulumi:dev::infra::"
CLUSTER = "gpuplane:index:GpuCluster"


def _keys(cfg: dict[str, Any]) -> dict[str, Any]:
    """Stack keys (`gpuplane:cluster`) as `parse_stack_config` takes them (`cluster`)."""
    return {k.removeprefix("gpuplane:"): v for k, v in cfg.items()}


TWO_CLUSTERS = """
import pulumi
import pulumi_kubernetes as k8s
from gpuplane import GpuCluster, GpuClusterArgs
from gpuplane.config import parse_stack_config

for name, cfg in (("{first}", {a!r}), ("{second}", {b!r})):
    provider = k8s.Provider(name, kubeconfig=name)
    GpuCluster(name, GpuClusterArgs(config=parse_stack_config(cfg)),
               opts=pulumi.ResourceOptions(provider=provider))
"""


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "infra"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    write_stack(folder, "dev", {})
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield folder
    finally:
        os.chdir(before)


def plan_two(project: Path, capsys: pytest.CaptureFixture[str], a: dict[str, Any],
             b: dict[str, Any], names: tuple[str, str] = ("east", "west"),
             extra: str = "") -> tuple[int, dict[str, Any]]:
    (project / "__main__.py").write_text(textwrap.dedent(TWO_CLUSTERS).format(
        first=names[0], second=names[1], a=_keys(a), b=_keys(b)) + textwrap.dedent(extra))
    code = main(["plan", "--stack", "dev", "--format", "json"])
    out = capsys.readouterr()
    assert out.out.strip(), out.err
    return code, json.loads(out.out)


def errors(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["severity"] == "error"]


def test_two_clean_clusters_of_two_distros_are_each_judged_by_their_own_intent(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the first intent judged every cluster's releases, node files and rollout:
    RKE2's files against kubeadm's layout (FM01), HAMi's release against an operator stack
    (FM12), one rollout across both fleets (FM06)."""
    code, report = plan_two(project, capsys, as_pod(config_of("hami-host")),
                            as_pod(config_of("rke2-lab")))
    assert errors(report) == [] and report["verdict"] == "ok" and code == 0, \
        [(f["id"], f["where"]) for f in errors(report)]


def test_every_cluster_of_a_program_is_judged_and_its_findings_name_it(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A broken second cluster: its findings are reported under its name, the first
    cluster's under none of them, and the plan is rejected (exit 1)."""
    broken = as_pod(broken_config("kubeadm-prod/FM07-cgroupfs-kubelet", tmp_path))
    code, report = plan_two(project, capsys, config_of("kind-smoke"), broken)
    fm07 = [f for f in errors(report) if f["id"] == "FM07"]
    assert code == 1 and report["verdict"] == "rejected" and fm07
    assert all(f["where"].startswith("GpuCluster west: ") for f in fm07), fm07
    assert not any(f["where"].startswith("GpuCluster east: ") for f in errors(report))


def test_a_broken_first_cluster_does_not_hide_the_second(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The first cluster refuses (the program stops there, as under `pulumi up`); the
    second, broken differently, is still judged and named."""
    first = as_pod(broken_config("kubeadm-prod/FM07-cgroupfs-kubelet", tmp_path))
    second = config_of("kind-smoke")
    second["gpuplane:gpuOperator"]["driver"] = "preinstalled"
    second["gpuplane:gpuOperator"]["values"] = {"driver": {"enabled": True}}
    code, report = plan_two(project, capsys, first, second)
    by_id = {(f["id"], f["where"].split(": ", 1)[0]) for f in errors(report)}
    assert code == 1 and report["verdict"] == "rejected"
    assert {("FM07", "GpuCluster east"), ("FM08", "GpuCluster west")} <= by_id, by_id


def _registered(kind: str, name: str, parent: str, inputs: dict[str, Any]) -> Registered:
    parent_type = f"{CLUSTER}$" if parent else ""
    return Registered(urn=f"{PREFIX}{parent_type}{kind}::{name}", type=kind, name=name,
                      custom=kind != CLUSTER, parent=parent, inputs=inputs,
                      dependencies=[], property_dependencies={})


def _cluster(name: str, intent: ClusterIntent, driver_enabled: bool) -> list[Registered]:
    """A GpuCluster component, its intent ConfigMap and its operator release."""
    cluster = _registered(CLUSTER, name, "", {})
    return [cluster,
            _registered("kubernetes:core/v1:ConfigMap", f"{name}-intent", cluster.urn, {
                "metadata": {"name": INTENT_CONFIGMAP, "namespace": "gpu-operator"},
                "data": {INTENT_KEY: intent.to_json()}}),
            _registered("kubernetes:helm.sh/v3:Release", f"{name}-gpu-operator", cluster.urn,
                        {"name": "gpu-operator", "chart": "gpu-operator",
                         "version": "v25.10.1", "namespace": "gpu-operator",
                         "values": {"driver": {"enabled": driver_enabled}}})]


@pytest.mark.parametrize("order", ["managed-first", "preinstalled-first"])
def test_fm08_is_judged_by_each_clusters_own_intent(order: str) -> None:
    """East's nodes ship the driver, west's do not: the operator's driver is FM08 on east
    only, whichever intent comes first (before: both, or neither)."""
    east = _cluster("east", ClusterIntent(driver_preinstalled=True), driver_enabled=True)
    west = _cluster("west", ClusterIntent(driver_preinstalled=False), driver_enabled=True)
    found = run_policies(west + east if order == "managed-first" else east + west)
    fm08 = [f for f in found if f.id == "FM08"]
    assert [f.where.split(": ", 1)[0] for f in fm08] == ["GpuCluster east"], fm08


def test_a_single_cluster_keeps_its_findings_unnamed() -> None:
    """One GpuCluster: findings read as they always did (no cluster prefix)."""
    found = run_policies(_cluster("east", ClusterIntent(driver_preinstalled=True), True))
    fm08 = [f for f in found if f.id == "FM08"]
    assert fm08 and not fm08[0].where.startswith("GpuCluster ")


POD = """
k8s.core.v1.Pod("trainer", metadata={{"name": "trainer"}}, spec={{"runtimeClassName": "gpu",
    "containers": [{{"name": "t", "image": "cuda:12",
                    "resources": {{"limits": {{"nvidia.com/gpu": 1}}}}}}]}}{opts})
"""


def test_fm11_a_workload_goes_with_the_cluster_of_its_provider(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """West names its nvidia runtime `gpu`, east `nvidia`: a pod asking for `gpu` on west's
    provider is judged by west alone; one on no cluster's provider must suit each."""
    # CDI off on both (chart v25.10 turns it on): under CDI any runtime gets the devices
    def legacy() -> dict[str, Any]:
        cfg = config_of("kind-smoke")
        cfg["gpuplane:gpuOperator"] = {**cfg["gpuplane:gpuOperator"], "cdi": False}
        return cfg

    west = legacy()
    west["gpuplane:runtime"] = {"name": "gpu"}
    on_west = POD.format(opts=", opts=pulumi.ResourceOptions(provider=provider)")
    code, report = plan_two(project, capsys, legacy(), west, extra=on_west)
    assert code == 0 and errors(report) == [], errors(report)
    code, report = plan_two(project, capsys, legacy(), west, extra=POD.format(opts=""))
    assert code == 1
    assert [f["where"].split(": ", 1)[0] for f in errors(report)] == ["GpuCluster east"]


def test_the_report_lists_every_cluster_with_its_own_facts_and_nodes(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`clusters`: each GpuCluster's facts, nodes and batches (the top-level `cluster` and
    `nodes` stay the first's); the text and the PR comment show one row per cluster."""
    from gpuplane.cli.plan.render import render_markdown

    code, report = plan_two(project, capsys, as_pod(config_of("hami-host")),
                            as_pod(config_of("rke2-lab")))
    assert code == 0
    clusters = {c["name"]: c for c in report["clusters"]}
    assert list(clusters) == ["east", "west"]
    assert clusters["east"]["cluster"] == report["cluster"]
    assert clusters["east"]["cluster"]["distro"] == config_of("hami-host")[
        "gpuplane:cluster"]["distro"]
    assert clusters["west"]["cluster"]["distro"] == "rke2"
    west_nodes = {n["name"] for n in clusters["west"]["nodes"]}
    assert west_nodes == {n["name"] for n in config_of("rke2-lab")["gpuplane:nodes"]}
    assert clusters["west"]["summary"]["nodes"] == len(west_nodes)
    comment = render_markdown(report)
    assert "#### GpuClusters" in comment and "| west | rke2 |" in comment
    assert main(["plan", "--stack", "dev"]) == 0
    text = capsys.readouterr().out
    assert "GpuClusters" in text and "west" in text and "rke2" in text


def test_a_program_with_one_cluster_has_no_clusters_section(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "__main__.py").write_text(textwrap.dedent("""
        from gpuplane import GpuCluster, GpuClusterArgs
        from gpuplane.config import parse_stack_config
        GpuCluster("only", GpuClusterArgs(config=parse_stack_config({cfg!r})))
    """).format(cfg=_keys(config_of("kind-smoke"))))
    assert main(["plan", "--stack", "dev", "--format", "json"]) == 0
    assert "clusters" not in json.loads(capsys.readouterr().out)


def test_the_base_diff_shows_every_clusters_nodes(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`plan --base`: a change to the second cluster's nodes shows as its node files and
    restarts, each node named with its cluster (before: only the first cluster's nodes
    were diffed, and the change showed only inside the node command's inputs)."""
    first, second = as_pod(config_of("rke2-lab")), as_pod(config_of("hami-host"))
    _, base = plan_two(project, capsys, first, second)
    (tmp_path / "base.json").write_text(json.dumps(base))
    second["gpuplane:runtime"] = {"nvidiaDefault": True}
    (project / "__main__.py").write_text(textwrap.dedent(TWO_CLUSTERS).format(
        first="east", second="west", a=_keys(first), b=_keys(second)))
    assert main(["plan", "--stack", "dev", "--format", "json", "--base",
                 str(tmp_path / "base.json")]) == 0
    diff = json.loads(capsys.readouterr().out)["diff"]
    assert sorted(diff["files"]) == ["west/share-01", "west/share-02"], sorted(diff["files"])
    assert [d["node"] for d in diff["disrupted"]] == ["west/share-01", "west/share-02"]
    assert diff["rollout"]["changed"] is False
    main(["plan", "--stack", "dev", "--base", str(tmp_path / "base.json")])
    text = capsys.readouterr().out
    assert "west/share-01" in text, text


def test_the_text_and_the_comment_show_every_clusters_rollout(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each GpuCluster's batches, restarts and node files under its own heading (before:
    the first cluster's rollout only)."""
    (project / "__main__.py").write_text(textwrap.dedent(TWO_CLUSTERS).format(
        first="east", second="west", a=_keys(as_pod(config_of("rke2-lab"))),
        b=_keys(as_pod(config_of("hami-host")))))
    assert main(["plan", "--stack", "dev"]) == 0
    text = capsys.readouterr().out
    assert "Node rollout of GpuCluster east" in text and \
        "Node rollout of GpuCluster west" in text, text
    west = text[text.index("Node rollout of GpuCluster west"):]
    assert "share-01" in west and "lab-gpu-1" not in west.split("Findings")[0]
    assert main(["plan", "--stack", "dev", "--format", "markdown"]) == 0
    comment = capsys.readouterr().out
    assert "#### Rollout of GpuCluster east" in comment and \
        "#### Rollout of GpuCluster west" in comment, comment
