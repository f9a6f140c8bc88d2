"""`gpuplane plan --base`: every change in the Pulumi program shows up in the diff.

The cases are the issue's (#17): time-slicing replicas 4 -> 8 on k8s-snap-dgx (nine
resources' inputs change), rollout.maxUnavailable 2 -> 1 on kubeadm-prod (3 -> 5
batches), and a change a rule rejects (systemdCgroup false -> FM07) shown as rejected,
never as removals. A hypothesis property changes random stack keys.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpuplane.cli.plan.diff import changed_paths, is_empty, plan_diff
from gpuplane.cli.plan.run import plan_stack
from gpuplane.config import StackConfigError
from gpuplane.config.stackfile import StackFileError

STACKS = Path(__file__).resolve().parents[2] / "stacks"


@cache
def bundled_plan(stack: str) -> dict[str, Any]:
    return plan_stack(stack, STACKS)


def plan_changed(stack: str, tmp: Path, edit: Any) -> dict[str, Any]:
    """The plan of bundled `stack` after `edit(config)` changed its stack file."""
    doc = yaml.safe_load((STACKS / f"Pulumi.{stack}.yaml").read_text())
    edit(doc["config"])
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))
    return plan_stack(stack, tmp)


def test_time_slicing_replicas_change_shows_six_resources(tmp_path: Path) -> None:
    def edit(c: dict[str, Any]) -> None:
        c["gpuplane:timeSlicing"]["replicas"] = 8

    diff = plan_diff(bundled_plan("k8s-snap-dgx"), plan_changed("k8s-snap-dgx", tmp_path, edit))
    assert not is_empty(diff)
    assert diff["config"] == [{"key": "gpuplane:timeSlicing.replicas", "base": 4, "new": 8}]
    changed = {c["resource"]: c for c in diff["resources"]["changed"]}
    # The two ConfigMaps, the device plugin restart and the three checks (their intent and
    # fingerprint): the Jobs the checks run are not resources.
    assert len(changed) == 6, sorted(changed)
    sharing = changed["kubernetes:core/v1:ConfigMap::gpu-time-slicing"]
    assert sharing["paths"] == ["inputs.data.any"]
    # The embedded sharing config diffs line by line (YAML literal block), not as one line.
    assert "\n-            replicas: 4\n+            replicas: 8\n" in sharing["diff"]
    intent = changed["kubernetes:core/v1:ConfigMap::gpu-intent"]["diff"]
    assert '-        "time_slicing_replicas": 4,\n+        "time_slicing_replicas": 8,' in intent
    assert "pulumi-python:dynamic:Resource::gpu-time-slicing-restart" in changed
    restarts = diff["rollout"]["workloadRestarts"]
    assert [r["selector"] for r in restarts] == ["app=nvidia-device-plugin-daemonset"]
    assert diff["disrupted"] == []   # no containerd restart: the operator's toolkit


def test_max_unavailable_change_shows_the_new_batches(tmp_path: Path) -> None:
    def edit(c: dict[str, Any]) -> None:
        c["gpuplane:rollout"]["maxUnavailable"] = 1

    diff = plan_diff(bundled_plan("kubeadm-prod"), plan_changed("kubeadm-prod", tmp_path, edit))
    assert not is_empty(diff)
    rollout = diff["rollout"]
    assert rollout["changed"] and len(rollout["base"]) == 3 and len(rollout["new"]) == 5
    changed = {c["resource"]: c["paths"] for c in diff["resources"]["changed"]}
    # It now waits behind another batch's barrier (gpuplane.stack.barrier): one URN.
    assert changed["command:remote:Command::containerd-l40s-01"] == ["dependsOn[0]"]
    assert "pulumi-python:dynamic/gpuplane:RolloutBarrier::gpu-containerd-after-batch-3" \
        in {r["resource"] if isinstance(r, dict) else r for r in diff["resources"]["added"]}


def test_rejected_change_is_not_shown_as_removals(tmp_path: Path) -> None:
    def edit(c: dict[str, Any]) -> None:
        c["gpuplane:runtime"]["systemdCgroup"] = False

    new = plan_changed("kubeadm-prod", tmp_path, edit)
    assert new["verdict"] == "rejected" and new["batches"] == []
    assert new["withheldBatches"] == bundled_plan("kubeadm-prod")["batches"]
    assert new["nodes"][0]["withheldFiles"]
    diff = plan_diff(bundled_plan("kubeadm-prod"), new)
    assert diff["rejected"] and diff["verdict"] == "rejected"
    assert diff["resources"]["removed"] == [] and diff["resources"]["added"] == []
    assert "command:remote:Command::containerd-a100-01" in diff["resources"]["withheld"]
    # What the change tried to do: the attempted file change, not a deleted file.
    text = diff["files"]["a100-01"]["/etc/containerd/config.toml"]
    assert "\n-        SystemdCgroup = true\n+        SystemdCgroup = false\n" in text
    assert "+++ b/etc/containerd/config.toml\n@@ -19,7 +19,7 @@" in text   # not deleted
    assert {f["id"] for f in diff["findings"]["new"]} == {"FM07"}   # in each state it appears
    assert diff["rollout"]["changed"] is False and diff["disrupted"] == []


def test_fixing_a_finding_is_listed_as_fixed(tmp_path: Path) -> None:
    def edit(c: dict[str, Any]) -> None:
        c["gpuplane:runtime"]["systemdCgroup"] = False

    rejected = plan_changed("kubeadm-prod", tmp_path, edit)
    diff = plan_diff(rejected, bundled_plan("kubeadm-prod"))
    assert {f["id"] for f in diff["findings"]["fixed"]} == {"FM07"}
    assert diff["verdict"] == "ok" and not diff["rejected"]


def test_same_plan_is_an_empty_diff() -> None:
    plan = bundled_plan("kubeadm-prod")
    assert is_empty(plan_diff(plan, copy.deepcopy(plan)))


def test_changed_paths() -> None:
    assert changed_paths({"a": {"b": 1, "c": [1, 2]}}, {"a": {"b": 2, "c": [1, 3]}}) == [
        "a.b", "a.c[1]"]
    assert changed_paths({"a": [1]}, {"a": [1, 2]}) == ["a"]
    assert changed_paths({"a": 1}, {}) == ["a"]


# Keys a reviewer changes in a stack file, with values that are valid or (some) invalid.
MUTATIONS: dict[str, st.SearchStrategy[Any]] = {
    "gpuplane:timeSlicing.replicas": st.integers(0, 12),
    "gpuplane:rollout.maxUnavailable": st.integers(1, 6),
    "gpuplane:rollout.canary": st.booleans(),
    "gpuplane:runtime.nvidiaDefault": st.booleans(),
    "gpuplane:runtime.systemdCgroup": st.booleans(),
    "gpuplane:runtime.name": st.sampled_from(["nvidia", "nvidia-gpu"]),
    "gpuplane:gpuOperator.cdi": st.booleans(),
    "gpuplane:gpuOperator.toolkit": st.sampled_from(["operator", "host"]),
    "gpuplane:checks.enabled": st.booleans(),
    "gpuplane:cluster.kubeletCgroupDriver": st.sampled_from(["systemd", "cgroupfs"]),
    "gpuplane:nodes.0.gpus": st.integers(0, 8),
    "gpuplane:nodes.4.pool": st.sampled_from(["l40s", "a100", "h100"]),
}


def _set(config: dict[str, Any], key: str, value: Any) -> None:
    section, _, path = key.partition(".")
    target: Any = config.setdefault(section, {})
    parts = path.split(".")
    for part in parts[:-1]:
        target = target[int(part)] if part.isdigit() else target.setdefault(part, {})
    target[parts[-1]] = value


def _planned(plan: dict[str, Any]) -> Any:
    """Everything the Pulumi program registers and rolls out (registration order is not
    part of a plan: the SDK registers concurrently)."""
    resources = {f"{r['type']}::{r['name']}": r for r in plan["resources"]}
    return (resources, plan["batches"], [n["files"] for n in plan["nodes"]])


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(changes=st.dictionaries(st.sampled_from(sorted(MUTATIONS)), st.none(),
                               min_size=1, max_size=3).flatmap(
    lambda keys: st.fixed_dictionaries({k: MUTATIONS[k] for k in keys})))
def test_any_planned_change_gives_a_non_empty_diff(tmp_path_factory: pytest.TempPathFactory,
                                                   changes: dict[str, Any]) -> None:
    def edit(config: dict[str, Any]) -> None:
        for key, value in changes.items():
            _set(config, key, value)

    try:
        new = plan_changed("kubeadm-prod", tmp_path_factory.mktemp("stacks"), edit)
    except (StackConfigError, StackFileError):
        assume(False)
        return
    base = bundled_plan("kubeadm-prod")
    diff = plan_diff(base, new)
    if _planned(new) != _planned(base):
        assert not is_empty(diff), changes
    else:
        assert diff["resources"]["changed"] == [] and diff["files"] == {}
