"""Issue #46 items 1, 2, 6, 7 and the foreign matrix: plain programs that install the GPU
Operator (helm.v3.Release, helm.v4.Chart, ClusterPolicy) on every distribution and managed
platform are judged like gpuplane's own stacks. Each cell of the matrix
(tests/support/foreign_matrix.py) is planned twice through `gpuplane plan`'s machinery:
the plain program with the cluster's facts in the pack config, and a GpuCluster stack of
the same cluster whose operator values were written by hand the same way; the
toolkit-path verdicts (FM01/FM04/FM05/FM17) must be equal, and no fact a rule needs may be
missing silently."""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.foreign_matrix import (
    CHART,
    CLUSTERS,
    FORMS,
    SNAP_BASE,
    VALUES,
    facts,
    gpu_cluster,
    program,
    verdict,
)
from support.stack_cases import write_stack

from gpuplane.cli.main import main as gpuplane
from gpuplane.cli.plan.project import load_project
from gpuplane.cli.plan.run import plan_stack
from gpuplane.core.intent import ClusterIntent
from gpuplane.platforms.profiles import DRIVER, PLATFORMS
from gpuplane.policy.collect import intent_from_config
from gpuplane.policy.foreign import FACTS, Install, foreign_intent
from gpuplane.policy.pack import policy_names
from gpuplane.rules.operator import check_operator_values

SEED = {"distro": "k8s-snap", "containerdVersion": "1.7.27", "kubernetesVersion": "1.32.3",
        "driver": "preinstalled"}


def plan(tmp_path: Path, body: str, config: dict[str, Any]) -> dict[str, Any]:
    folder = tmp_path / "infra"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    (folder / "__main__.py").write_text(
        "import pulumi_kubernetes as k8s\n" + textwrap.dedent(body))
    (folder / "Pulumi.dev.yaml").write_text("config: {}\n")
    return plan_stack("dev", folder, {name: dict(config) for name in policy_names()},
                      load_project(folder))


def advice(report: dict[str, Any]) -> list[str]:
    return [f["message"] for f in report["findings"] if f["message"].startswith("not judged")]


@pytest.mark.parametrize("values", sorted(VALUES))
@pytest.mark.parametrize("cluster", CLUSTERS)
def test_every_cell_is_judged_as_a_gpucluster_of_the_same_cluster(
        cluster: str, values: str, tmp_path: Path) -> None:
    write_stack(tmp_path / "own", "case", gpu_cluster(cluster, VALUES[values]))
    want = verdict(plan_stack("case", tmp_path / "own")["findings"])
    for form in FORMS:
        report = plan(tmp_path / form, program(form, VALUES[values]), facts(cluster))
        assert verdict(report["findings"]) == want, (form, report["findings"])
        assert advice(report) == [], (form, advice(report))   # every fact given or implied


@pytest.mark.parametrize("form", FORMS)
def test_item1_the_seed_trap_on_k8s_snap_is_an_error(form: str, tmp_path: Path) -> None:
    """k8s-snap beside another containerd (containerd base dir): the toolkit at its defaults
    configures /etc/containerd, which the kubelet's containerd never reads: FM17 error.
    Before: the config could not say the base dir, and nothing was judged or said."""
    body = program(form, VALUES["defaults"])
    bad = plan(tmp_path / "bad", body, {**SEED, "containerdBaseDir": SNAP_BASE})
    fm17 = [f for f in bad["findings"] if f["id"] == "FM17" and f["severity"] == "error"]
    assert fm17 and f"{SNAP_BASE}/k8s-containerd/run/containerd/containerd.sock" \
        in fm17[0]["message"], bad["findings"]
    assert bad["verdict"] == "rejected"
    # The default layout (`/`) is what the toolkit's defaults configure.
    good = plan(tmp_path / "good", body, {**SEED, "containerdBaseDir": "/"})
    assert verdict(good["findings"]) == {} and advice(good) == []


@pytest.mark.parametrize("form", FORMS)
def test_item1_without_the_base_dir_k8s_snap_is_not_skipped_silently(
        form: str, tmp_path: Path) -> None:
    report = plan(tmp_path, program(form, VALUES["defaults"]), SEED)
    said = [m for m in advice(report) if "`containerdBaseDir`" in m]
    assert len(said) == 1, report["findings"]
    assert verdict(report["findings"]) == {}   # held back, never judged against a guess


def test_item1_check_operator_values_with_the_foreign_intent() -> None:
    config = {**SEED, "containerdBaseDir": SNAP_BASE}
    values = {"driver": {"enabled": False}}
    intent = foreign_intent(config, [Install("gpu-operator", values, CHART, "Release x", "u")],
                            intent_from_config(config))
    found = check_operator_values(values, intent, chart_version=CHART, where="Release x")
    assert "FM17" in {f.id for f in found if f.severity.value == "error"}, found


@pytest.mark.parametrize("form", FORMS)
def test_item2_a_platform_fact_decides_driver_and_distribution(form: str,
                                                               tmp_path: Path) -> None:
    """EKS's NVIDIA AMI ships the driver: the chart's default driver.enabled=true is FM08,
    with no advice asking for `driver` or `distro`."""
    body = program(form, {})
    report = plan(tmp_path, body, {"platform": "eks-al2023-nvidia",
                                   "containerdVersion": "2.2.1"})
    fm08 = [f for f in report["findings"] if f["id"] == "FM08" and f["severity"] == "error"
            and "driver.enabled" in f["message"]]
    assert fm08, report["findings"]
    assert advice(report) == [], advice(report)


@pytest.mark.parametrize("name", sorted(PLATFORMS))
def test_item2_every_platform_implies_what_it_decides(name: str, tmp_path: Path) -> None:
    report = plan(tmp_path, program("release", VALUES["defaults"]),
                  {"platform": name.value if hasattr(name, "value") else name,
                   "containerdVersion": PLATFORMS[name].containerd_lines[-1],
                   "kubernetesVersion": "1.33.4"})
    asked = " ".join(advice(report))
    assert "`distro`" not in asked
    plat = PLATFORMS[name]
    decides = DRIVER in plat.preinstalled or bool(plat.operator_driver_unsupported)
    assert ("`driver`" in asked) is not decides, asked


@pytest.mark.parametrize("form", FORMS)
def test_every_rule_either_judges_or_advises(form: str, tmp_path: Path) -> None:
    """With no fact at all, every fact the operator's rules need is named once; with all of
    them, none is."""
    body = program(form, VALUES["defaults"])
    report = plan(tmp_path / "none", body, {"kubernetesVersion": "1.32.3"})
    asked = advice(report)
    for fact in FACTS:
        if fact.chart == "gpu-operator" and fact.applies({}):
            assert sum(f"`{fact.key}`" in m for m in asked) == 1, (fact.key, asked)
    full = plan(tmp_path / "all", body, {**SEED, "containerdBaseDir": "/"})
    assert advice(full) == []


def _rke2(**kw: Any) -> ClusterIntent:
    return replace(ClusterIntent(), distro="rke2", containerd_version="2.0",
                   kubernetes_version="1.31.6", toolkit="operator", nvidia_default=False,
                   runtime_setup="detected", **kw)


def test_item6_every_error_at_once() -> None:
    """A hand-written env replacing the socket gpuplane renders (FM17) and asking for nvidia
    as the default runtime against the stack's `nvidiaDefault: false` (FM09): both."""
    values = {"cdi": {"enabled": False}, "toolkit": {"env": [
        {"name": "CONTAINERD_SET_AS_DEFAULT", "value": "true"}]}}
    found = check_operator_values(values, _rke2(), chart_version=CHART, where="Release x")
    assert {"FM17", "FM09"} <= {f.id for f in found}, found


def test_item6_in_a_gpucluster_stack(tmp_path: Path) -> None:
    cfg = gpu_cluster("rke2", {"cdi": {"enabled": False}, "toolkit": {"env": [
        {"name": "CONTAINERD_SET_AS_DEFAULT", "value": "true"}]}})
    write_stack(tmp_path, "case", cfg)
    found = {f["id"] for f in plan_stack("case", tmp_path)["findings"]}
    assert {"FM17", "FM09"} <= found, found


def test_item7_the_generated_file_is_lost_at_the_next_start() -> None:
    generated = "/var/lib/rancher/rke2/agent/etc/containerd/config.toml"
    values = {"toolkit": {"env": [{"name": "CONTAINERD_CONFIG", "value": generated},
                                  {"name": "CONTAINERD_SOCKET",
                                   "value": "/run/k3s/containerd/containerd.sock"}]}}
    found = check_operator_values(values, _rke2(), chart_version=CHART, where="Release x")
    about = [f for f in found if generated in f.message]
    assert len(about) == 1 and about[0].id == "FM04", found
    assert "template of its own" not in about[0].message
    assert "generates from its template at every start" in about[0].message
    assert "lost" in about[0].message


def test_policy_pack_config_writes_the_base_dir(tmp_path: Path) -> None:
    out = tmp_path / "facts.json"
    assert gpuplane(["policy-pack", "config", "--distro", "k8s-snap", "--containerd-base-dir",
                     SNAP_BASE, "--output", str(out)]) == 0
    config = json.loads(out.read_text())
    assert all(entry["containerdBaseDir"] == SNAP_BASE for entry in config.values()
               if isinstance(entry, dict))
    assert gpuplane(["policy-pack", "config", "--containerd-base-dir", "relative",
                     "--output", str(out)]) != 0


@pytest.mark.parametrize("distro", ["rke2", "k3s"])
def test_rke2_k3s_without_the_kubernetes_version_say_so(distro: str, tmp_path: Path) -> None:
    """Whether RKE2/K3s detect the operator's runtimes depends on their release: without
    `kubernetesVersion` the toolkit path is held back and the key named once."""
    report = plan(tmp_path, program("release", VALUES["defaults"]),
                  {"distro": distro, "containerdVersion": "2.0", "driver": "preinstalled"})
    said = [m for m in advice(report) if "`kubernetesVersion`" in m]
    assert len(said) == 1 and "held back" in said[0], report["findings"]
    assert verdict(report["findings"]) == {}


@pytest.mark.parametrize("cluster", ["gke-cos", "gke-ubuntu", "aks-ubuntu"])
def test_a_wrong_config_source_is_not_called_another_containerd(cluster: str) -> None:
    """Item 7's kind of slip in FM17: where the paths are the kubelet's and only the config
    source is wrong (the platform's `config dump`), the message tells that mechanism and
    the fix names the source, not the distribution."""
    f = facts(cluster)
    intent = replace(ClusterIntent(), platform=f["platform"],
                     containerd_version=f["containerdVersion"],
                     kubernetes_version=f["kubernetesVersion"], toolkit="operator")
    found = [x for x in check_operator_values(VALUES["defaults"], intent, chart_version=CHART,
                                              where="Release x") if x.id == "FM17"]
    assert len(found) == 1, found
    assert "daemon the kubelet does not use" not in found[0].message
    assert "the kubelet's containerd" in found[0].message
    assert "RUNTIME_CONFIG_SOURCE" in found[0].fix
    assert "gpuplane:cluster.distro: kubeadm` to what the nodes run" not in found[0].fix
    # The printed raw-Helm entry, applied, leaves nothing of FM17.
    entry = found[0].fix.rsplit("\n", 1)[-1].removeprefix("- {name: ").removesuffix("}")
    name, _, value = entry.partition(", value: ")
    fixed = {**VALUES["defaults"], "toolkit": {"env": [{"name": name, "value": value}]}}
    again = check_operator_values(fixed, intent, chart_version=CHART, where="Release x")
    assert "FM17" not in {x.id for x in again}, again
