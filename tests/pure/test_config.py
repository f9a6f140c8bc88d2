"""Stack config: defaults in one place, every invalid value named by its key (and file
line when it comes from a stack file), derived views for the planner and the rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplane.config import KEYS, StackConfigError, parse_stack_config
from gpuplane.config.stackfile import load_stack_file
from gpuplane.plan.rollout import batches

MINIMAL: dict[str, Any] = {
    "cluster": {"kubernetesVersion": "1.31.4", "containerdVersion": "1.7", "nodeAccess": "none"},
    "gpuOperator": {"chartVersion": "v25.10.1"},
}


def problems(values: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(StackConfigError) as exc:
        parse_stack_config(values)
    return dict(exc.value.problems)


def test_defaults_live_in_the_model() -> None:
    cfg = parse_stack_config(MINIMAL)
    assert cfg.cluster.distro == "kubeadm"
    assert cfg.gpu_operator.driver == "preinstalled"
    assert cfg.runtime.name == "nvidia" and not cfg.runtime.nvidia_default
    assert cfg.rollout.max_unavailable == 1 and cfg.rollout.canary
    assert cfg.hami_scheduler_tag == "v1.31.4"
    assert cfg.plan_options().toolkit_dropin  # chart v25.10 writes a drop-in


@pytest.mark.parametrize(("patch", "key", "fragment"), [
    ({"cluster": {**MINIMAL["cluster"], "distro": "openshift"}}, "gpuplane:cluster.distro",
     "'kubeadm', 'k8s-snap', 'rke2', 'k3s', 'microk8s' or 'k0s'"),
    ({"cluster": {**MINIMAL["cluster"], "containerdVersion": "1.5"}},
     "gpuplane:cluster.containerdVersion", "1.6, 1.7 and 2.x"),
    ({"cluster": {**MINIMAL["cluster"], "kubernetesVersion": "latest"}},
     "gpuplane:cluster.kubernetesVersion", "1.31.4"),
    ({"cluster": {**MINIMAL["cluster"], "containerdBaseDir": "/x"}}, "gpuplane:cluster",
     "k8s-snap only"),
    ({"gpuOperator": {"chartVersion": "v25.10.1", "driver": "yes"}},
     "gpuplane:gpuOperator.driver", "'preinstalled' or 'managed'"),
    ({"devicePlugin": "both"}, "gpuplane:devicePlugin", "'gpu-operator', 'hami' or 'platform'"),
    ({"rollout": {"maxUnavailable": 0}}, "gpuplane:rollout.maxUnavailable", "greater than"),
    ({"nodes": [{"name": "GPU_1"}]}, "gpuplane:nodes[0].name", "DNS subdomain"),
    ({"timeSlicing": {"replicas": -1}}, "gpuplane:timeSlicing.replicas", "greater than"),
    ({"hami": {"webhookFailurePolicy": "Maybe"}}, "gpuplane:hami.webhookFailurePolicy",
     "'Fail' or 'Ignore'"),
    ({"gpuOperator": {"chartVersion": "v25.10.1", "toolkit": "host"}},
     "gpuplane:gpuOperator.toolkit",
     "needs node access"),
    ({"cluster": {**MINIMAL["cluster"], "distro": "k0s", "kubernetesVersion": "1.36.3",
                  "containerdVersion": "2.2"}}, "gpuplane:cluster",
     "k0s 1.36.3 runs containerd 2.3"),
    ({"cluster": {**MINIMAL["cluster"], "distro": "k0s", "containerdVersion": "2.1"}},
     "gpuplane:cluster", 'k0s 1.31.4 ships containerd 1.7; set containerdVersion: "1.7"'),
    ({"cluster": {**MINIMAL["cluster"], "distro": "k0s", "kubernetesVersion": "1.26.15",
                  "containerdVersion": "1.6"}}, "gpuplane:cluster", "upgrade k0s first"),
    ({"clusterr": {}}, "gpuplane:clusterr", "unknown key"),
    ({"runtime": {"nvidiaDefaults": True}}, "gpuplane:runtime.nvidiaDefaults", "unknown key"),
])
def test_invalid_values_name_their_key_and_the_allowed_values(
        patch: dict[str, Any], key: str, fragment: str) -> None:
    found = problems({**MINIMAL, **patch})
    assert key in found, found
    assert fragment in found[key]


@pytest.mark.parametrize(("chart", "fragments"), [
    ("v23.9.2", ["older than v24.3.0, the oldest chart gpuplane supports",
                 "set gpuplane:gpuOperator.chartVersion to v24.3.0 or later"]),
    ("v1.0.0", ["older than v24.3.0"]),
    ("v26.10.0", ["newer than v26.7.0, the newest chart",
                  "set gpuplane:gpuOperator.chartVersion to v26.7.0 or an older"]),
    ("v24.6.0", ["not a release gpuplane has measured", "v24.6.2", "v26.7.0"]),
])
def test_unsupported_operator_chart_is_refused_naming_the_bound(
        chart: str, fragments: list[str]) -> None:
    found = problems({**MINIMAL, "gpuOperator": {"chartVersion": chart}})
    message = found["gpuplane:gpuOperator.chartVersion"]
    assert all(f in message for f in fragments), message


@pytest.mark.parametrize("chart", ["v24.3.0", "24.9.1", "v25.3.0", "v26.3.2", "v26.7.0"])
def test_every_supported_operator_chart_is_accepted(chart: str) -> None:
    cfg = parse_stack_config({**MINIMAL, "gpuOperator": {"chartVersion": chart}})
    assert cfg.plan_options().operator_chart == chart


def test_ssh_access_needs_hosts_and_a_key() -> None:
    values = {**MINIMAL, "cluster": {**MINIMAL["cluster"], "nodeAccess": "ssh"},
              "nodes": [{"name": "a"}]}
    assert "host missing" in problems(values)["gpuplane:nodes"]
    values["nodes"] = [{"name": "a", "host": "10.0.0.1"}]
    assert "pulumi config set --secret" in problems(values)["gpuplane:sshPrivateKey"]
    values["sshPrivateKey"] = "key"
    assert parse_stack_config(values).node_access


def test_all_documented_keys_exist() -> None:
    assert KEYS == ("cluster", "ssh", "sshPrivateKey", "nodePod", "nodes", "devicePlugin",
                    "runtime", "gpuOperator", "timeSlicing", "sharing", "hami", "draDriver",
                    "rollout", "checks",
                    "docker", "nodePool", "rules")


def test_stack_file_errors_name_file_line_and_key(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.bad.yaml").write_text(
        "config:\n"
        "  gpuplane:cluster:\n"
        "    kubernetesVersion: '1.31.4'\n"
        "    containerdVersion: '1.7'\n"
        "    nodeAccess: none\n"
        "  gpuplane:gpuOperator:\n"
        "    chartVersion: v25.10.1\n"
        "    driver: yes-please\n")
    stack = load_stack_file("bad", tmp_path)
    with pytest.raises(StackConfigError) as exc:
        stack.config()
    [(where, message)] = exc.value.problems
    assert where == f"{tmp_path}/Pulumi.bad.yaml:8: gpuplane:gpuOperator.driver"
    assert "'preinstalled' or 'managed'" in message


@given(st.lists(st.text("abcdefgh", min_size=1, max_size=4), unique=True, max_size=30),
       st.booleans(), st.integers(1, 6))
def test_batches_partition_in_order(nodes: list[str], canary: bool, size: int) -> None:
    out = batches(nodes, canary=canary, max_unavailable=size)
    assert [n for b in out for n in b] == nodes
    assert all(1 <= len(b) <= size for b in out)
    if canary and nodes:
        assert out[0] == [nodes[0]]


@pytest.mark.parametrize(("patch", "key", "fragment"), [
    ({"cluster": {"containerdVersion": "1.7"}}, "gpuplane:cluster.kubernetesVersion",
     "required; fix: add it"),
    ({"cluster": "kubeadm"}, "gpuplane:cluster", "must be a mapping"),
    ({"nodes": {"a": 1}}, "gpuplane:nodes", "must be a list"),
    ({"rollout": {"maxUnavailable": "two"}}, "gpuplane:rollout.maxUnavailable",
     "must be a whole number, not the str 'two'"),
    ({"rollout": {"canary": "maybe"}}, "gpuplane:rollout.canary", "must be true or false"),
    ({"runtime": {"name": 5}}, "gpuplane:runtime.name", "must be text, not the int 5; quote it"),
])
def test_type_errors_are_worded_for_the_stack_file_with_the_fix(
        patch: dict[str, Any], key: str, fragment: str) -> None:
    found = problems({**MINIMAL, **patch})
    assert fragment in found[key], found


SSH: dict[str, Any] = {
    **MINIMAL, "cluster": {**MINIMAL["cluster"], "nodeAccess": "ssh"},
    "nodes": [{"name": "gpu-1", "host": "10.0.0.1"}], "sshPrivateKey": "<secret>",
}


def test_docker_runtime_is_off_by_default_and_planned_when_enabled() -> None:
    assert parse_stack_config(SSH).docker_settings is None
    cfg = parse_stack_config({**SSH, "docker": {"nvidiaRuntime": True, "setAsDefault": True}})
    assert cfg.docker_settings is not None and cfg.docker_settings.set_as_default


@pytest.mark.parametrize(("values", "key", "fragment"), [
    ({**MINIMAL, "docker": {"nvidiaRuntime": True}}, "gpuplane:docker.nvidiaRuntime",
     "cluster.nodeAccess is none"),
    ({**SSH, "docker": {"setAsDefault": True}}, "gpuplane:docker.setAsDefault",
     "docker.nvidiaRuntime is false"),
    ({**SSH, "docker": {"nvidiaRuntime": True, "runtimeArgs": []}},
     "gpuplane:docker.runtimeArgs", "unknown key"),
    ({**SSH, "docker": {"nvidiaRuntime": "maybe"}}, "gpuplane:docker.nvidiaRuntime",
     "true or false"),
])
def test_docker_keys_are_checked_and_named(values: dict[str, Any], key: str,
                                           fragment: str) -> None:
    found = problems(values)
    assert key in found and fragment in found[key], found
