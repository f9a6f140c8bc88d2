"""The GPU Operator's NRI plugin mode and CDI default as node states and rules: FM26 (pods
naming the RuntimeClasses NRI mode deletes), FM27 (NRI on a containerd without it: its
version, its merged config), FM28 (CDI off on a chart that turns it on); the stack key
`gpuOperator.nri`, the plan's NRI drop-in, and plain installs judged the same way. The
chart facts go through Helm's engine (tests/support/charts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import charts
from support.stack_cases import write_stack
from test_foreign_stacks import FACTS, ids, plan, release

from gpuplane.cli.plan.run import plan_stack
from gpuplane.config import parse_stack_config
from gpuplane.config.errors import StackConfigError
from gpuplane.config.helm_values import operator_values
from gpuplane.containerd.effective import effective_config
from gpuplane.containerd.files import MemoryFiles
from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.intent import ClusterIntent
from gpuplane.distros.profiles import profile
from gpuplane.plan.node import plan_node
from gpuplane.rules import ContainerdFacts
from gpuplane.rules.containerd import check_containerd
from gpuplane.rules.operator import check_operator_values
from gpuplane.rules.workloads import check_workload
from gpuplane.toolkit.options import PlanOptions

NRI = {"driver": {"enabled": False}, "cdi": {"nriPluginEnabled": True}}
TOP = "/etc/containerd/config.toml"


def _ids(findings: list[Any]) -> set[str]:
    return {f.id for f in findings}


def _op(values: dict[str, Any], chart: str, containerd: str = "2.1") -> list[Any]:
    return check_operator_values(values, ClusterIntent(containerd_version=containerd),
                                 chart_version=chart, where="Release gpu-operator")


def _pod(rc: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "cuda",
                                            "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    if rc:
        spec["runtimeClassName"] = rc
    return {"kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


# ---------------------------------------------------------------- FM26

def test_fm26_pod_naming_a_deleted_runtime_class() -> None:
    nri = ClusterIntent(cdi=True, nri=True)
    for rc in ("nvidia", "nvidia-cdi", "nvidia-legacy"):
        [f] = check_workload(_pod(rc), nri, "Pod default/p")
        assert f.id == "FM26" and "gpuplane:gpuOperator.nri" in f.where and rc in f.message
    assert check_workload(_pod(None), nri, "Pod default/p") == []    # CDI gives the GPU
    # The operator's own class is the one operator.runtimeClass (gpuplane:runtime.name) names.
    renamed = ClusterIntent(cdi=True, nri=True, runtime_class="gpu")
    assert _ids(check_workload(_pod("gpu"), renamed, "Pod default/p")) == {"FM26"}
    assert check_workload(_pod("kata-qemu"), nri, "Pod default/p") == []
    assert "FM26" not in _ids(check_workload(_pod("nvidia"), ClusterIntent(cdi=True),
                                             "Pod default/p"))


def test_fm26_foreign_program_with_nri_release(tmp_path: Path) -> None:
    """A plain Release with cdi.nriPluginEnabled beside a Pod naming nvidia: the pack's
    verdict on a program gpuplane did not make."""
    pod = ('k8s.core.v1.Pod("p", metadata={"name": "p"}, spec={"runtimeClassName": '
           '"nvidia", "containers": [{"name": "c", "image": "cuda", "resources": '
           '{"limits": {"nvidia.com/gpu": 1}}}]})\n')
    values = '{"driver": {"enabled": False}, "cdi": {"nriPluginEnabled": True}}'
    body = release(values).replace('version="v25.10.1"', 'version="v26.3.0"') + pod
    report = plan(tmp_path, body, {**FACTS, "containerdVersion": "2.1", "nri": True})
    assert "FM26" in ids(report) and report["verdict"] == "rejected"
    # The release alone says NRI: the pack's `nri` fact is not needed.
    report = plan(tmp_path, body, {**FACTS, "containerdVersion": "2.1"})
    assert "FM26" in ids(report) and report["verdict"] == "rejected"
    # Without NRI the same pod is fine (CDI on, the RuntimeClass exists).
    report = plan(tmp_path, release().replace('version="v25.10.1"', 'version="v26.3.0"')
                  + pod, {**FACTS, "containerdVersion": "2.1", "cdi": True})
    assert "FM26" not in ids(report)


# ---------------------------------------------------------------- FM27

@pytest.mark.parametrize(("containerd", "severity"), [
    ("1.6", "error"), ("1.7.24", "error"), ("1.7", "warning"), ("2.0", "error"),
    ("1.7.30", None), ("2.1", None), ("2.2.7", None)])
def test_fm27_containerd_versions(containerd: str, severity: str | None) -> None:
    found = [f for f in _op(NRI, "v26.3.0", containerd) if f.id == "FM27"]
    assert [str(f.severity) for f in found] == ([severity] if severity else [])
    if found:
        assert "gpuplane:gpuOperator.nri" in found[0].where
        assert "1.7.30" in found[0].fix


def test_fm27_nri_key_on_a_chart_without_nri_mode() -> None:
    [f] = [f for f in _op(NRI, "v25.10.1") if f.id == "FM27"]
    assert str(f.severity) == "warning" and "v26.3.0" in f.message


def test_fm27_foreign_release_needs_the_containerd_fact(tmp_path: Path) -> None:
    values = '{"driver": {"enabled": False}, "cdi": {"nriPluginEnabled": True}}'
    body = release(values).replace('version="v25.10.1"', 'version="v26.3.0"')
    assert "FM27" in ids(plan(tmp_path, body, {**FACTS, "containerdVersion": "1.7.24"}))
    assert "FM27" not in ids(plan(tmp_path, body, {**FACTS, "containerdVersion": "2.1"}))


def _facts(files: dict[str, str], line: str) -> ContainerdFacts:
    eff = effective_config(TOP, MemoryFiles(files), ContainerdVersion.parse(line))
    return ContainerdFacts(eff, nri_requested=True)


def test_fm27_nri_off_in_the_merged_config() -> None:
    v2 = 'version = 2\n'
    assert "FM27" in _ids(check_containerd(_facts({TOP: v2}, "1.7")))   # 1.7's default
    on = v2 + '[plugins."io.containerd.nri.v1.nri"]\n  disable = false\n'
    assert "FM27" not in _ids(check_containerd(_facts({TOP: on}, "1.7")))
    assert "FM27" not in _ids(check_containerd(_facts({TOP: "version = 3\n"}, "2.1")))
    off = 'version = 3\n[plugins."io.containerd.nri.v1.nri"]\n  disable = true\n'
    [f] = [f for f in check_containerd(_facts({TOP: off}, "2.1")) if f.id == "FM27"]
    assert f.where == f"{TOP}:3"
    # Not asked for: no finding.
    eff = effective_config(TOP, MemoryFiles({TOP: v2}), ContainerdVersion.parse("1.7"))
    assert "FM27" not in _ids(check_containerd(ContainerdFacts(eff)))


def test_fm27_containerd_check_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpuplane.cli.main import main

    top = tmp_path / "config.toml"
    top.write_text("version = 2\n")
    assert main(["containerd", "check", "--config", str(top), "--containerd-version", "1.7",
                 "--nri"]) == 1
    assert "FM27" in capsys.readouterr().out
    top.write_text('version = 2\n[plugins."io.containerd.nri.v1.nri"]\n  disable = false\n')
    assert main(["containerd", "check", "--config", str(top), "--containerd-version", "1.7",
                 "--nri"]) == 0


def test_fm27_plan_enables_nri_on_1_7() -> None:
    """NRI mode: the toolkit writes nothing, no nvidia runtime is expected (no FM01), and
    gpuplane's drop-in turns NRI on where 1.7 has it off; 2.x needs no file."""
    kubeadm = profile("kubeadm")
    for line, dropin in (("1.7", True), ("2.1", False)):
        version = ContainerdVersion.parse(line)
        p = plan_node(kubeadm, version, PlanOptions(cdi=True, nri=True,
                                                    operator_chart="v26.3.0",
                                                    toolkit_version="1.19.0"))
        assert p.toolkit_files == {} and "nvidia" not in p.effective.runtimes
        assert not [f for f in p.findings if f.severity.value == "error"], p.findings
        nri_files = [f for f in p.files if f.endswith("40-gpuplane-nri.toml")]
        assert bool(nri_files) is dropin and p.restarts is dropin
    # Without gpuplane's files (nodeAccess none) 1.7 is FM27.
    p = plan_node(kubeadm, ContainerdVersion.parse("1.7"),
                  PlanOptions(cdi=True, nri=True, writes_files=False,
                              operator_chart="v26.3.0", toolkit_version="1.19.0"))
    assert "FM27" in _ids(p.findings)


# ---------------------------------------------------------------- FM28

def test_fm28_cdi_off_on_a_chart_that_turns_it_on() -> None:
    off = {"driver": {"enabled": False}, "cdi": {"enabled": False}}
    [f] = [f for f in _op(off, "v25.10.1") if f.id == "FM28"]
    assert str(f.severity) == "warning" and "nvidia-cdi" in f.message
    assert "gpuplane:gpuOperator.cdi" in f.where
    assert "FM28" not in _ids(_op(off, "v25.3.4"))                       # chart default off
    assert "FM28" not in _ids(_op({"driver": {"enabled": False}}, "v25.10.1"))   # unset
    hami = check_operator_values(off, ClusterIntent(device_plugin="hami"),
                                 chart_version="v25.10.1", where="Release gpu-operator")
    assert "FM28" not in _ids(hami)                                      # FM13's fix


# ---------------------------------------------------------------- the stack key

def _stack(chart: str, **op: Any) -> Any:
    return parse_stack_config({
        "cluster": {"kubernetesVersion": "1.31.4", "containerdVersion": "2.1",
                    "nodeAccess": "none"},
        "gpuOperator": {"chartVersion": chart, **op}})


def test_fm27_nri_stack_key_refused_before_v26_3_and_without_cdi() -> None:
    with pytest.raises(StackConfigError,
                       match=r"gpuOperator: nri: true needs chartVersion v26\.3\.0"):
        _stack("v25.10.1", nri=True)
    with pytest.raises(StackConfigError, match="nri: true needs CDI"):
        _stack("v26.3.0", nri=True, cdi=False)
    values = operator_values(_stack("v26.3.0", nri=True), [])
    assert values["cdi"] == {"enabled": True, "nriPluginEnabled": True}
    assert "nriPluginEnabled" not in operator_values(_stack("v26.3.0"), [])["cdi"]


def test_fm26_gpuplane_runtime_class_refused_under_nri(tmp_path: Path) -> None:
    """`runtime.createRuntimeClass: true` with `gpuOperator.nri`: the RuntimeClass would name
    a handler no node has (the toolkit writes none under NRI, tests/real/test_nri_toolkit.py),
    so the stack is refused at the key; with NRI off gpuplane creates it, and in the auto
    case under NRI nothing is created."""
    with pytest.raises(StackConfigError) as err:
        parse_stack_config({
            "cluster": {"kubernetesVersion": "1.31.4", "containerdVersion": "2.1",
                        "nodeAccess": "none"},
            "runtime": {"createRuntimeClass": True},
            "gpuOperator": {"chartVersion": "v26.3.0", "nri": True}})
    text = str(err.value)
    assert "gpuplane:runtime.createRuntimeClass" in text and "gpuOperator.nri" in text, text
    assert "remove createRuntimeClass" in text

    def classes(runtime: dict[str, Any], nri: bool) -> list[str]:
        write_stack(tmp_path, "rc", {
            "gpuplane:cluster": {"kubernetesVersion": "1.31.4", "containerdVersion": "1.7.30",
                                 "nodeAccess": "pod"},
            "gpuplane:nodes": [{"name": "gpu-1", "gpus": 1, "os": "ubuntu22.04",
                                "pool": "gpu"}],
            "gpuplane:runtime": runtime,
            "gpuplane:gpuOperator": {"chartVersion": "v26.3.0", "nri": nri}})
        report = plan_stack("rc", tmp_path)
        assert report["verdict"] == "ok", report["findings"]
        return [r["type"] for r in report["resources"]
                if r["type"] == "kubernetes:node.k8s.io/v1:RuntimeClass"]

    assert classes({"createRuntimeClass": True}, nri=False) == [
        "kubernetes:node.k8s.io/v1:RuntimeClass"]
    assert classes({}, nri=True) == []


def _nri_charts() -> dict[str, Path]:
    return {t: f for t, f in charts.chart_dirs("gpu-operator").items()
            if charts.has(charts.values(f), "cdi.nriPluginEnabled")}


def test_fm26_fm27_nri_values_through_helm_on_every_chart_that_has_it() -> None:
    """Helm's engine on each chart with the key (v26.3.0+): gpuplane's values render
    spec.cdi.nriPluginEnabled, the chart renders no RuntimeClass (the operator owns them),
    and the key is first in v26.3.0."""
    found = _nri_charts()
    assert min(found, key=charts._version_key) == "v26.3.0"
    for tag, folder in found.items():
        docs = charts.render(folder, operator_values(_stack(tag, nri=True), []))
        [policy] = [d for d in docs if d.get("kind") == "ClusterPolicy"]
        assert policy["spec"]["cdi"] == {"enabled": True, "nriPluginEnabled": True}, tag
        assert not [d for d in docs if d.get("kind") == "RuntimeClass"], tag
        plain = charts.render(folder, operator_values(_stack(tag), []))
        [policy] = [d for d in plain if d.get("kind") == "ClusterPolicy"]
        assert "nriPluginEnabled" not in policy["spec"]["cdi"], tag


def test_fm27_offline_plan_of_a_stack_with_nri(tmp_path: Path) -> None:
    """`gpuplane plan` on a stack with gpuOperator.nri: the NRI drop-in on 1.7.30, no
    nvidia runtime after the toolkit, the values carry the NRI key; on 1.7.24 FM27."""
    def run(containerd: str) -> dict[str, Any]:
        write_stack(tmp_path, "nri", {
            "gpuplane:cluster": {"kubernetesVersion": "1.31.4",
                                 "containerdVersion": containerd, "nodeAccess": "pod"},
            "gpuplane:nodes": [{"name": "gpu-1", "gpus": 1, "os": "ubuntu22.04",
                                "pool": "gpu"}],
            "gpuplane:gpuOperator": {"chartVersion": "v26.3.0", "nri": True}})
        return plan_stack("nri", tmp_path)

    report = run("1.7.30")
    assert report["verdict"] == "ok" and report["findings"] == []
    [node] = report["nodes"]
    assert "/etc/containerd/conf.d/40-gpuplane-nri.toml" in node["files"] and node["restart"]
    assert "nvidia" not in node["effectiveRuntimes"]["afterToolkit"]["runtimes"]
    values = report["helm"]["gpu-operator"]["values"]
    assert values["cdi"]["nriPluginEnabled"] is True
    assert "FM27" in {f["id"] for f in run("1.7.24")["findings"]}


def test_fm27_doctor_judges_the_nodes_merged_config_under_nri() -> None:
    """The doctor on a cluster whose intent says NRI: a node without an nvidia runtime is
    healthy where NRI is on, FM27 (not FM01) where its 1.7 config leaves NRI off."""
    from gpuplane.doctor.nodes import NodeContext, analyse_node

    v2 = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
          'default_runtime_name = "runc"\n')
    intent = ClusterIntent(distro="kubeadm", containerd_version="1.7.30", cdi=True, nri=True)

    def errors(config: str) -> set[str]:
        inspection = {"daemons": [{"pid": 100, "config": TOP,
                                   "version": "containerd github.com/containerd/containerd "
                                              "v1.7.30 abc"}],
                      "kubelet_daemon": 100, "files": {TOP: config}}
        ctx = NodeContext("gpu-1", intent, "containerd://1.7.30", None, ())
        return {d.finding.id for d in analyse_node(inspection, ctx).diagnoses
                if d.finding.severity.value == "error"}

    assert errors(v2) == {"FM27"}
    assert errors(v2 + '[plugins."io.containerd.nri.v1.nri"]\n  disable = false\n') == set()


def test_fm26_fm11_runtime_class_handlers_under_nri() -> None:
    """Under NRI the nodes get no nvidia runtime: a RuntimeClass whose handler is nvidia
    names no runtime they have (FM11 on the class; FM26 on the pods that use it)."""
    from gpuplane.rules.device_plugins import check_runtime_class_handlers, node_runtime_handlers

    handlers, source = node_runtime_handlers(ClusterIntent(cdi=True, nri=True))
    assert handlers == ("runc",) and "NRI" in source
    [f] = check_runtime_class_handlers([("RuntimeClass nvidia", {"handler": "nvidia"})],
                                       handlers, source=source)
    assert f.id == "FM11" and str(f.severity) == "error"
    assert "nvidia" in node_runtime_handlers(ClusterIntent(cdi=True))[0]


def test_fm26_foreign_runtime_class_beside_an_nri_release(tmp_path: Path) -> None:
    """A program that keeps declaring RuntimeClass nvidia beside a release in NRI mode: its
    handler names a runtime the nodes no longer get (FM11, read from the release itself)."""
    rc = ('k8s.node.v1.RuntimeClass("rc", metadata={"name": "nvidia"}, '
          'handler="nvidia")\n')
    values = '{"driver": {"enabled": False}, "cdi": {"nriPluginEnabled": True}}'
    nri = release(values).replace('version="v25.10.1"', 'version="v26.3.0"') + rc
    assert "FM11" in ids(plan(tmp_path, nri, {**FACTS, "containerdVersion": "2.1"}))
    plain = release().replace('version="v25.10.1"', 'version="v26.3.0"') + rc
    assert "FM11" not in ids(plan(tmp_path, plain, {**FACTS, "containerdVersion": "2.1"}))
