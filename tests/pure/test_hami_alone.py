"""HAMi alone (#40 item 4): `devicePlugin: hami` without `gpuplane:gpuOperator`, on nodes
that carry the driver and nvidia-container-toolkit themselves. The config, the component
(no operator release), HAMi's values, the rules and the pack on such a stack."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pulumi
import pytest
from support.stack_cases import config_of, write_stack

from gpuplane.cli.plan.engine import Registered, run_program
from gpuplane.cli.plan.policies import run_policies
from gpuplane.cli.plan.run import plan_stack
from gpuplane.config import StackConfigError, parse_stack_config
from gpuplane.config.helm_values import hami_values
from gpuplane.config.stackfile import load_stack_file
from gpuplane.core.intent import INTENT_CONFIGMAP, ClusterIntent
from gpuplane.rules.hami import check_hami_values
from gpuplane.toolkit.options import ToolkitMode

STACKS = Path(__file__).resolve().parents[2] / "stacks"
RELEASE = "kubernetes:helm.sh/v3:Release"


def _keys(stack: str = "hami-host") -> dict[str, Any]:
    """The stack's `gpuplane:*` keys without the prefix, as parse_stack_config takes them."""
    return {k.removeprefix("gpuplane:"): v for k, v in config_of(stack).items()}


def _problems(values: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(StackConfigError) as err:
        parse_stack_config(values)
    return dict(err.value.problems)


def _registered(name: str = "hami-host", stacks: Path = STACKS,
                exports: dict[str, Any] | None = None) -> list[Registered]:
    from gpuplane.stack import program

    stack = load_stack_file(name, stacks)
    stack.config()
    mp = pytest.MonkeyPatch()
    if exports is not None:
        mp.setattr(pulumi, "export", lambda key, value: exports.__setitem__(key, value))
    try:
        _, resources = run_program(program.run, project="gpuplane", stack=name,
                                   config=stack.pulumi_config(),
                                   secret_keys=stack.secret_keys)
    finally:
        mp.undo()
    return resources


# -- config ------------------------------------------------------------------------------

def test_hami_needs_no_operator_block_and_means_the_hosts_toolkit() -> None:
    cfg = parse_stack_config(_keys())
    assert cfg.gpu_operator is None and cfg.hami_alone
    intent = cfg.intent()
    assert (intent.device_plugin, intent.toolkit, intent.driver_preinstalled) == \
        ("hami", "host", True)
    assert intent.cdi is False
    assert cfg.plan_options().toolkit is ToolkitMode.HOST
    assert cfg.plan_options().operator_chart is None
    # gpuplane's own privileged namespace: the intent, the checks, the node agent's pods.
    assert intent.operator_namespace == cfg.node_pod_namespace == "gpuplane"
    assert cfg.creates_runtime_class
    assert ClusterIntent.from_json(intent.to_json()) == intent


def test_without_operator_block_or_hami_the_error_names_the_key_and_the_fix() -> None:
    keys = _keys()
    keys["devicePlugin"] = "gpu-operator"
    del keys["hami"]
    problems = _problems(keys)
    assert list(problems) == ["gpuplane:gpuOperator"]
    assert "chartVersion" in problems["gpuplane:gpuOperator"]
    assert "devicePlugin: hami" in problems["gpuplane:gpuOperator"]
    keys.pop("devicePlugin")   # the default is gpu-operator too
    assert list(_problems(keys)) == ["gpuplane:gpuOperator"]


def test_hami_alone_writes_the_runtime_so_it_needs_node_access() -> None:
    keys = _keys()
    keys["cluster"] = {**keys["cluster"], "nodeAccess": "none"}
    problems = _problems(keys)
    assert "gpuplane:cluster.nodeAccess" in problems
    assert "gpuOperator" in problems["gpuplane:cluster.nodeAccess"]


def test_hami_alone_refuses_a_runtime_class_nobody_creates() -> None:
    keys = _keys()
    keys["runtime"] = {"createRuntimeClass": False}
    assert "gpuplane:runtime.createRuntimeClass" in _problems(keys)
    keys["runtime"] = {"createRuntimeClass": False, "nvidiaDefault": True}
    assert not parse_stack_config(keys).creates_runtime_class


def test_every_existing_key_keeps_its_meaning_with_the_operator_block() -> None:
    cfg = parse_stack_config(_keys("hami-shared"))
    assert cfg.gpu_operator is not None and not cfg.hami_alone
    assert cfg.toolkit == "operator" and cfg.gpuplane_namespace == "gpu-operator"
    assert not cfg.creates_runtime_class   # auto: the operator creates it


def test_hami_values_on_the_hosts_toolkit() -> None:
    values = hami_values(parse_stack_config(_keys()))
    plugin = values["devicePlugin"]
    assert plugin["gpuOperatorToolkitReady"] == {"enabled": False}
    assert plugin["runtimeClassName"] == "nvidia"
    assert values["scheduler"]["admissionWebhook"]["whitelistNamespaces"] == \
        ["kube-system", "gpuplane"]


# -- the component -----------------------------------------------------------------------

def test_gpu_cluster_creates_no_operator_and_hami_does_not_wait_for_one() -> None:
    exports: dict[str, Any] = {}
    resources = _registered(exports=exports)
    releases = {r.inputs["name"]: r for r in resources if r.type == RELEASE}
    assert set(releases) == {"hami"}
    assert not any("gpu-operator" in r.name for r in resources)
    assert "gpuOperatorRelease" not in exports and "hamiRelease" in exports
    by_urn = {r.urn: r for r in resources}
    hami = next(r for r in resources if r.type == "gpuplane:index:Hami")
    after = {by_urn[u].name for u in hami.dependencies}
    # After the node changes, the RuntimeClass gpuplane creates, and its intent.
    assert {"gpu-runtime-class", "containerd-share-02", "gpu-intent"} <= after
    intent = next(r for r in resources if r.name == "gpu-intent")
    assert intent.inputs["metadata"]["name"] == INTENT_CONFIGMAP
    assert intent.inputs["metadata"]["namespace"] == "gpuplane"
    namespace = next(r for r in resources if r.type == "kubernetes:core/v1:Namespace")
    assert namespace.inputs["metadata"]["name"] == "gpuplane"
    assert any(r.type == "kubernetes:node.k8s.io/v1:RuntimeClass" for r in resources)


def test_the_bundled_stack_plans_clean() -> None:
    report = plan_stack("hami-host", STACKS)
    assert report["verdict"] == "ok", report["findings"]
    assert not [f for f in report["findings"] if f["severity"] == "error"]


# -- the rules and the pack --------------------------------------------------------------

def test_fm13_the_toolkit_ready_wait_on_the_hosts_toolkit() -> None:
    host = ClusterIntent(device_plugin="hami", toolkit="host")
    values = {"devicePlugin": {"gpuOperatorToolkitReady": {"enabled": True},
                               "runtimeClassName": "nvidia"},
              "scheduler": {"kubeScheduler": {"image": {"tag": "v1.31.0"}}}}
    found = check_hami_values(values, host, chart_version="2.10.0", where="Release hami")
    assert [f.id for f in found if "gpuOperatorToolkitReady" in f.message] == ["FM13"]
    operator = ClusterIntent(device_plugin="hami", toolkit="operator")
    found = check_hami_values(values, operator, chart_version="2.10.0", where="Release hami")
    assert not [f for f in found if "gpuOperatorToolkitReady" in f.message]


def test_the_pack_judges_the_stack_from_its_intent_and_hami_release() -> None:
    resources = _registered()
    assert run_policies(resources) == []
    broken = copy.deepcopy(resources)
    [hami] = [r for r in broken if r.type == RELEASE]
    hami.inputs["values"]["devicePlugin"]["gpuOperatorToolkitReady"] = {"enabled": True}
    found = run_policies(broken)
    assert {f.id for f in found} == {"FM13"}
    hami.inputs["values"]["devicePlugin"]["runtimeClassName"] = ""
    assert "runtimeClassName" in " ".join(f.message for f in run_policies(broken))


def test_a_broken_variant_is_refused_before_its_first_child(tmp_path: Path) -> None:
    cfg = config_of("hami-host")
    cfg["gpuplane:hami"] = {**cfg["gpuplane:hami"], "values": {
        "devicePlugin": {"gpuOperatorToolkitReady": {"enabled": True}}}}
    write_stack(tmp_path, "broken", cfg)
    report = plan_stack("broken", tmp_path)
    assert report["verdict"] != "ok"
    assert {f["id"] for f in report["findings"] if f["severity"] == "error"} == {"FM13"}


def test_fm12_cannot_arise_without_the_operator() -> None:
    resources = _registered()
    plugins = [r for r in resources if r.type == RELEASE
               and (r.inputs.get("values") or {}).get("devicePlugin", {}).get("enabled", True)]
    assert [r.inputs["name"] for r in plugins] == ["hami"]
    assert "FM12" not in {f.id for f in run_policies(resources)}
