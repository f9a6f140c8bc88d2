"""GPU stacks gpuplane did not make (#40 item 3): the GPU Operator or HAMi installed by a
plain helm.v3.Release, a helm.v4.Chart or a ClusterPolicy custom resource, judged by the
pack with cluster facts from its config; a rule that needs a fact the config does not
give is said once, as advice naming the key. Programs are planned through `gpuplane plan`'s
own machinery (a user's project under the mocks)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from gpuplane.cli.plan.project import load_project
from gpuplane.cli.plan.run import plan_stack
from gpuplane.policy.pack import policy_names

OPERATOR_REPO = '{"repo": "https://helm.ngc.nvidia.com/nvidia"}'
FACTS = {"distro": "kubeadm", "containerdVersion": "1.7", "driver": "preinstalled",
         "kubernetesVersion": "1.31.0"}


def plan(tmp_path: Path, body: str, facts: dict[str, Any] | None = None) -> dict[str, Any]:
    folder = tmp_path / "infra"
    folder.mkdir(exist_ok=True)
    (folder / "Pulumi.yaml").write_text("name: infra\nruntime: python\n")
    (folder / "__main__.py").write_text(
        "import pulumi_kubernetes as k8s\n" + textwrap.dedent(body))
    (folder / "Pulumi.dev.yaml").write_text("config: {}\n")
    # Facts on every policy, as a --policy-pack-config file gives them.
    config = {name: dict(facts) for name in policy_names()} if facts is not None else None
    return plan_stack("dev", folder, config, load_project(folder))


def ids(report: dict[str, Any], severity: str = "error") -> set[str]:
    return {f["id"] for f in report["findings"] if f["severity"] == severity}


RELEASE = """
k8s.helm.v3.Release("gpu-operator", name="gpu-operator", chart="gpu-operator",
    version="v25.10.1", repository_opts={REPO}, namespace="gpu-operator",
    values={VALUES})
"""
GOOD = '{"driver": {"enabled": False}}'


def release(values: str = GOOD) -> str:
    return RELEASE.replace("{REPO}", OPERATOR_REPO).replace("{VALUES}", values)


def test_a_correct_operator_release_passes(tmp_path: Path) -> None:
    report = plan(tmp_path, release(), FACTS)
    assert ids(report) == set() and report["verdict"] == "ok"


def test_a_plain_release_with_bad_values_is_judged(tmp_path: Path) -> None:
    """Before: no intent ConfigMap, so no rule but the workload rules ran (verdict ok)."""
    report = plan(tmp_path, release('{"driver": {"enabled": True}, "toolkit": '
                                    '{"version": "latest"}}'), FACTS)
    assert {"FM08", "FM18"} <= ids(report) and report["verdict"] == "rejected"


def test_cdi_on_containerd_16_from_the_config(tmp_path: Path) -> None:
    values = '{"driver": {"enabled": False}, "cdi": {"enabled": True}}'
    assert "FM16" in ids(plan(tmp_path, release(values),
                              {**FACTS, "containerdVersion": "1.6"}))
    assert "FM16" not in ids(plan(tmp_path, release(values), FACTS))


def test_a_fact_the_config_does_not_give_is_said_once_as_advice(tmp_path: Path) -> None:
    report = plan(tmp_path, release('{"driver": {"enabled": True}}'),
                  {k: v for k, v in FACTS.items() if k != "driver"})
    assert "FM08" not in ids(report)           # not judged against a guessed cluster
    advice = [f for f in report["findings"] if "`driver`" in f["message"]]
    assert len(advice) == 1 and advice[0]["severity"] == "warning"
    assert "held back" in advice[0]["message"] and "Set `driver`" in advice[0]["fix"]


def test_a_helm_v4_chart_is_judged(tmp_path: Path) -> None:
    body = ('k8s.helm.v4.Chart("gpu-operator", chart="gpu-operator", version="v25.10.1", '
            'repository_opts=' + OPERATOR_REPO + ', values={"driver": {"enabled": True}})\n')
    report = plan(tmp_path, body, FACTS)
    assert "FM08" in ids(report)
    assert any(f["where"].startswith("Chart gpu-operator") for f in report["findings"])


def test_a_cluster_policy_custom_resource_is_judged(tmp_path: Path) -> None:
    body = ('k8s.apiextensions.CustomResource("cp", api_version="nvidia.com/v1", '
            'kind="ClusterPolicy", metadata={"name": "cluster-policy"}, '
            'spec={"driver": {"enabled": True}, "cdi": {"enabled": True}})\n')
    report = plan(tmp_path, body, {**FACTS, "containerdVersion": "1.6"})
    assert {"FM08", "FM16"} <= ids(report)
    good = body.replace('"driver": {"enabled": True}, "cdi": {"enabled": True}',
                        '"driver": {"enabled": False}')
    assert ids(plan(tmp_path, good, FACTS)) == set()


def test_hami_beside_the_operators_plugin(tmp_path: Path) -> None:
    body = release() + ('k8s.helm.v3.Release("hami", name="hami", chart="hami", '
                        'version="2.6.0", values={})\n')
    assert "FM12" in ids(plan(tmp_path, body, FACTS))


@pytest.mark.parametrize("facts", [None, FACTS])
def test_a_stack_without_gpu_installs_gets_no_advice(tmp_path: Path,
                                                     facts: dict[str, Any] | None) -> None:
    report = plan(tmp_path, 'k8s.core.v1.Namespace("apps")\n', facts)
    assert report["findings"] == []


PLUGIN_DS = """
k8s.apps.v1.DaemonSet("nvidia-device-plugin", metadata={{"name": "nvidia-device-plugin-daemonset",
    "namespace": "kube-system"}},
    spec={{"selector": {{"matchLabels": {{"app": "dp"}}}}, "template": {{
        "metadata": {{"labels": {{"app": "dp"}}}},
        "spec": {{"containers": [{{"name": "dp",
            "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"}}]}}}}}})
"""


def test_fm12_a_device_plugin_daemonset_beside_the_operators_plugin(tmp_path: Path) -> None:
    """NVIDIA's static device plugin manifest beside the operator's own plugin is FM12; with
    the operator's plugin off, or alone, it is not."""
    body = release() + PLUGIN_DS.format()
    report = plan(tmp_path, body, FACTS)
    fm12 = [f for f in report["findings"] if f["id"] == "FM12"]
    assert fm12 and fm12[0]["where"] == "DaemonSet kube-system/nvidia-device-plugin-daemonset"
    assert "devicePlugin.enabled=false" in fm12[0]["fix"]
    off = release('{"driver": {"enabled": False}, "devicePlugin": {"enabled": False}}')
    assert "FM12" not in ids(plan(tmp_path, off + PLUGIN_DS.format(), FACTS))
    assert "FM12" not in ids(plan(tmp_path, PLUGIN_DS.format(), FACTS))


def test_fm11_a_runtime_class_whose_handler_the_operators_toolkit_never_creates(
        tmp_path: Path) -> None:
    """The operator's toolkit names its runtime after operator.runtimeClass (nvidia): a
    RuntimeClass pointing at `nvidia-container-runtime` fails every pod that names it."""
    rc = ('k8s.node.v1.RuntimeClass("gpu", metadata={"name": "gpu"}, '
          'handler="{handler}")\n')
    bad = plan(tmp_path, release() + rc.replace("{handler}", "nvidia-container-runtime"), FACTS)
    fm11 = [f for f in bad["findings"] if f["id"] == "FM11"]
    assert fm11 and fm11[0]["where"] == "RuntimeClass gpu handler", bad["findings"]
    assert "FM11" not in ids(plan(tmp_path, release() + rc.replace("{handler}", "nvidia"),
                                  FACTS))
