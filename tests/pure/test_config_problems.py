"""A stack's errors come all at once: every value that fails its own check and every
combination that cannot work, each with the stack key to edit (and, through a stack
file, its file:line), so fixing a stack takes one `gpuplane plan` rather than one per
mistake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuplane.config import StackConfig, StackConfigError, parse_stack_config
from gpuplane.config.stackfile import load_stack_file

MINIMAL: dict[str, Any] = {
    "cluster": {"kubernetesVersion": "1.31.4", "containerdVersion": "1.7", "nodeAccess": "none"},
    "gpuOperator": {"chartVersion": "v25.10.1"},
}


def problems(values: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(StackConfigError) as exc:
        parse_stack_config(values)
    return dict(exc.value.problems)


def test_independent_combination_problems_are_all_reported_with_their_keys() -> None:
    found = problems({
        **MINIMAL,
        "nodes": [{"name": "gpu-1"}, {"name": "gpu-1"}],
        "docker": {"setAsDefault": True},
        "hami": {"values": {"devicePlugin": {"deviceSplitCount": 4}}},
    })
    assert "duplicate node names ['gpu-1']" in found["gpuplane:nodes"], found
    assert "docker.nvidiaRuntime is false" in found["gpuplane:docker.setAsDefault"], found
    assert "HAMi is not installed" in found["gpuplane:hami.values"], found
    assert len(found) == 3, found


def test_ssh_without_nodes_or_key_names_both() -> None:
    found = problems({**MINIMAL, "cluster": {**MINIMAL["cluster"], "nodeAccess": "ssh"}})
    assert "no nodes are listed" in found["gpuplane:nodes"], found
    assert "pulumi config set --secret" in found["gpuplane:sshPrivateKey"], found


def test_a_cluster_contradiction_and_a_stack_combination_come_together() -> None:
    found = problems({**MINIMAL, "cluster": {**MINIMAL["cluster"], "containerdBaseDir": "/x"},
                      "docker": {"setAsDefault": True}})
    assert "k8s-snap only" in found["gpuplane:cluster"], found
    assert "gpuplane:docker.setAsDefault" in found, found


def test_a_field_error_and_a_combination_problem_come_together() -> None:
    found = problems({**MINIMAL, "rollout": {"maxUnavailable": 0},
                      "hami": {"values": {"x": 1}}, "docker": {"setAsDefault": True}})
    assert "greater than" in found["gpuplane:rollout.maxUnavailable"], found
    assert "HAMi is not installed" in found["gpuplane:hami.values"], found
    assert "gpuplane:docker.setAsDefault" in found, found


def test_unknown_keys_field_errors_and_combinations_come_together() -> None:
    found = problems({**MINIMAL, "bogus": 1, "runtime": {"name": "Not_DNS"},
                      "docker": {"setAsDefault": True}})
    assert set(found) == {"gpuplane:bogus", "gpuplane:runtime.name",
                          "gpuplane:docker.setAsDefault"}, found


def test_a_combination_that_reads_a_broken_key_is_not_reported() -> None:
    """`devicePlugin` is invalid, so whether HAMi's values apply is unknown: only the cause
    is reported, not a consequence of it."""
    found = problems({**MINIMAL, "devicePlugin": "both", "hami": {"values": {"x": 1}}})
    assert set(found) == {"gpuplane:devicePlugin"}, found


def test_a_missing_required_section_still_lets_the_others_be_compared() -> None:
    found = problems({"cluster": MINIMAL["cluster"], "docker": {"setAsDefault": True}})
    assert "required" in found["gpuplane:gpuOperator"], found
    assert "gpuplane:docker.setAsDefault" in found, found


def test_a_cluster_contradiction_skips_the_checks_that_read_the_cluster_views() -> None:
    """rke2 with containerd 2.x at Kubernetes 1.31 is one mistake; runtimeSetup, which
    reads the distribution's profile, is not judged against it."""
    found = problems({**MINIMAL, "cluster": {**MINIMAL["cluster"], "distro": "rke2",
                                             "containerdVersion": "2.0"},
                      "gpuOperator": {**MINIMAL["gpuOperator"], "runtimeSetup": "detected",
                                      "toolkit": "host"}})
    assert list(found) == ["gpuplane:cluster"], found


def test_model_validate_raises_every_combination_problem_too() -> None:
    with pytest.raises(StackConfigError) as exc:
        StackConfig.model_validate({**MINIMAL, "docker": {"setAsDefault": True},
                                    "hami": {"values": {"x": 1}}})
    assert [key for key, _ in exc.value.problems] == [
        "gpuplane:docker.setAsDefault", "gpuplane:hami.values"]


def test_a_stack_file_names_each_problems_file_line_and_key(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.bad.yaml").write_text(
        "config:\n"
        "  gpuplane:cluster:\n"
        "    kubernetesVersion: '1.31.4'\n"
        "    containerdVersion: '1.7'\n"
        "    nodeAccess: none\n"
        "  gpuplane:gpuOperator:\n"
        "    chartVersion: v25.10.1\n"
        "    driver: yes-please\n"
        "  gpuplane:docker:\n"
        "    setAsDefault: true\n"
        "  gpuplane:hami:\n"
        "    values: {x: 1}\n")
    with pytest.raises(StackConfigError) as exc:
        load_stack_file("bad", tmp_path).config()
    where = [key for key, _ in exc.value.problems]
    path = tmp_path / "Pulumi.bad.yaml"
    assert where == [f"{path}:8: gpuplane:gpuOperator.driver",
                     f"{path}:10: gpuplane:docker.setAsDefault",
                     f"{path}:12: gpuplane:hami.values"], where


@pytest.mark.parametrize("values", [
    MINIMAL,
    {**MINIMAL, "cluster": {**MINIMAL["cluster"], "nodeAccess": "ssh"},
     "nodes": [{"name": "gpu-1"}], "docker": {"nvidiaRuntime": True}},
    {**MINIMAL, "cluster": {**MINIMAL["cluster"], "nodeAccess": "pod"},
     "nodePod": {"namespace": "apps", "namespaceLabels": {
         "pod-security.kubernetes.io/enforce": "baseline"}}},
    {**MINIMAL, "cluster": {**MINIMAL["cluster"], "distro": "rke2"},
     "gpuOperator": {**MINIMAL["gpuOperator"], "runtimeSetup": "detected"},
     "runtime": {"nvidiaDefault": True}},
    {**MINIMAL, "cluster": {**MINIMAL["cluster"], "platform": "aks-ubuntu",
                            "containerdVersion": "2.0"},
     "devicePlugin": "platform", "nodePool": {"cluster": "c", "name": "gpu"},
     "gpuOperator": {**MINIMAL["gpuOperator"], "toolkit": "host"}},
])
def test_each_check_reads_only_the_keys_it_declares(values: dict[str, Any]) -> None:
    """A check runs beside broken keys only if it declares what it reads: here each gets
    only its declared keys (a required section it does not declare is missing, and
    reading it fails) on stacks that take it down its branches."""
    from gpuplane.config import stack

    by_alias = {field.alias: name for name, field in StackConfig.model_fields.items()}
    sections = {by_alias[key]: stack._adapter(by_alias[key]).validate_python(value)
                for key, value in values.items()}
    for check in [*stack.CLUSTER_CHECKS, *stack.STACK_CHECKS]:
        only = StackConfig.model_construct(
            **{name: sections[name] for name in check.needs if name in sections})
        list(check.run(only))
