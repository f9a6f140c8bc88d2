"""`cluster.nodeAccess: pod` without a cluster (issue #30): the stack keys, the agent's pod
as gpuplane writes it, the run against a fake API (exit codes, reruns, clean-up), the
NodeAgentPod provider's lifecycle, the stack's graph (the SSH rollout's batches and
order), the policies and the plan. The real pod on a real node: tests/engine/test_node_pod_real.py
and tests/engine/test_node_pod_engine.py."""

from __future__ import annotations

import asyncio
import gc
import json
import shutil
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from test_checks_component import Recorder, RecordingMonitor

from gpuplane.agent.pod import (
    PROGRAM_KEY,
    agent_pod,
    plan_configmap,
    plan_configmap_name,
    rejection,
    run_agent_pod,
)
from gpuplane.agent.script import agent_plan, apply_stdin, embedded_program, plan_stdin
from gpuplane.cli.main import main
from gpuplane.config import StackConfigError, parse_stack_config
from gpuplane.containerd import ContainerdVersion
from gpuplane.core.psa import psa_problem
from gpuplane.distros.profiles import profile
from gpuplane.kube.client import ApiError
from gpuplane.plan.node import PlanOptions, ToolkitMode, plan_node
from gpuplane.stack.node_pod import (
    ContainerdPodRollout,
    ContainerdPodRolloutArgs,
    NodeAgentPodProvider,
)

STACKS = Path(__file__).resolve().parents[2] / "stacks"
PLAN = agent_plan(plan_node(profile("kubeadm"), ContainerdVersion.parse("1.7"),
                            PlanOptions(toolkit=ToolkitMode.HOST)))
PROGRAM = plan_configmap_name(PLAN.plan_id, plan_stdin(PLAN))
OTHER = plan_configmap_name("other", plan_stdin(PLAN) + "#\n")
# The plan ConfigMaps the stack made (ContainerdPodRollout), as the fake API holds them.
MAPS = {f"/api/v1/namespaces/ns/configmaps/{m['metadata']['name']}": m for m in (
    plan_configmap(PROGRAM, "ns", plan_stdin(PLAN)),
    plan_configmap(OTHER, "ns", plan_stdin(PLAN) + "#\n"))}


def _pod_stack(dest: Path, name: str = "kubeadm-pod", **edits: Any) -> Path:
    """kubeadm-prod with `nodeAccess: pod` (no SSH settings or key, no hosts needed) plus
    `edits`."""
    data = yaml.safe_load((STACKS / "Pulumi.kubeadm-prod.yaml").read_text())
    cfg = data["config"]
    cfg["gpuplane:cluster"]["nodeAccess"] = "pod"
    del cfg["gpuplane:sshPrivateKey"], cfg["gpuplane:ssh"]   # a pod stack has no SSH
    cfg.update(edits)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


def _config(**cluster: Any) -> dict[str, Any]:
    return {"cluster": {"distro": "kubeadm", "kubernetesVersion": "1.31.4",
                        "containerdVersion": "1.7", **cluster},
            "gpuOperator": {"chartVersion": "v25.10.1", "toolkit": "host"},
            "nodes": [{"name": "gpu-1"}]}


# -- stack keys ---------------------------------------------------------------------

def test_pod_access_needs_no_ssh_key_nor_hosts_and_writes_node_files() -> None:
    cfg = parse_stack_config(_config(nodeAccess="pod"))
    assert cfg.node_access and cfg.plan_options().writes_files
    assert cfg.node_pod_namespace == "gpu-operator"   # gpuplane's privileged namespace


def test_pod_access_without_nodes_is_an_error_naming_the_key() -> None:
    raw = _config(nodeAccess="pod")
    raw["nodes"] = []
    with pytest.raises(StackConfigError, match=r"cluster\.nodeAccess is pod but no nodes"):
        parse_stack_config(raw)


@pytest.mark.parametrize("level", ["baseline", "restricted"])
def test_a_namespace_known_to_reject_privileged_pods_is_refused_at_plan_time(
        level: str) -> None:
    raw = _config(nodeAccess="pod")
    raw["nodePod"] = {"namespace": "node-tools", "namespaceLabels": {
        "pod-security.kubernetes.io/enforce": level}}
    with pytest.raises(StackConfigError) as error:
        parse_stack_config(raw)
    text = str(error.value)
    assert "nodePod.namespaceLabels" in text and f"enforces Pod Security '{level}'" in text
    assert "pod-security.kubernetes.io/enforce=privileged" in text


def test_psa_levels() -> None:
    assert psa_problem({}, "x") is None
    assert psa_problem({"pod-security.kubernetes.io/enforce": "privileged"}, "x") is None
    assert psa_problem({"pod-security.kubernetes.io/warn": "restricted"}, "x") is None
    assert "baseline" in str(psa_problem({"pod-security.kubernetes.io/enforce": "baseline"},
                                         "x"))


# -- the pod -------------------------------------------------------------------------

def test_the_apply_pod_enters_the_hosts_namespaces_and_reads_its_program() -> None:
    pod = agent_pod("gpu-1", "apply", namespace="gpu-operator", plan_id=PLAN.plan_id)
    spec = pod["spec"]
    assert spec["nodeName"] == "gpu-1" and spec["hostPID"] is True
    assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] == 600
    container = spec["containers"][0]
    assert container["securityContext"] == {"privileged": True}
    script = container["command"][2]
    assert script.startswith("exec nsenter -t 1 -m -u -i -n -p -- sh -s -- apply")
    assert script.endswith("</gpuplane/program")
    assert spec["volumes"] == [{"name": "program", "configMap": {"name": pod["metadata"]
                                                                 ["name"]}}]


def test_the_restore_pod_runs_the_nodes_agent_only_for_its_plan() -> None:
    pod = agent_pod("gpu-1", "restore", namespace="ns", plan_id="abc123")
    script = pod["spec"]["containers"][0]["command"][2]
    assert "sh /var/lib/gpuplane/agent.sh restore --plan-id abc123" in script
    assert "volumes" not in pod["spec"]


def test_the_pods_program_is_the_ssh_program_with_the_agent_embedded() -> None:
    assert embedded_program(plan_stdin(PLAN)) == apply_stdin(PLAN)
    with pytest.raises(ValueError, match="not a node agent program"):
        embedded_program("echo hi\n")


def test_the_apis_pod_security_refusal_is_translated() -> None:
    exc = ApiError(403, "POST", "/api/v1/namespaces/ns/pods",
                   'pods "x" is forbidden: violates PodSecurity "baseline:latest": '
                   "privileged (container \"agent\" must not set privileged=true)")
    text = rejection(exc, "ns")
    assert "violates PodSecurity" in text and "Fix: label the namespace" in text
    plain = rejection(ApiError(403, "POST", "/api/v1/namespaces/ns/pods", "no"), "ns")
    assert "create pods in namespace ns" in plain


# -- the run against a fake API -----------------------------------------------------------

class FakeApi:
    """Pods end with the next exit code of `codes` (None: no exit code)."""

    def __init__(self, codes: list[int | None], create_error: ApiError | None = None) -> None:
        self.codes, self.create_error = list(codes), create_error
        self.calls: list[tuple[str, str]] = []
        self.pods: list[dict[str, Any]] = []
        self.code: int | None = None
        self.maps = dict(MAPS)

    def get(self, path: str, params: Any = None) -> Any:
        self.calls.append(("GET", path))
        if "/configmaps/" in path:
            if path not in self.maps:
                raise ApiError(404, "GET", path, "not found")
            return self.maps[path]
        state = {"terminated": {"exitCode": self.code}} if self.code is not None else {}
        return {"status": {"phase": "Succeeded" if self.code == 0 else "Failed",
                           "containerStatuses": [{"state": state}]}}

    def get_text(self, path: str, params: Any = None) -> str:
        self.calls.append(("LOG", path))
        return 'gpuplane-agent: done\n{"mode": "apply", "changed": true}\n'

    def post(self, path: str, body: dict[str, Any]) -> Any:
        self.calls.append(("POST", path))
        if path.endswith("/pods"):
            if self.create_error:
                raise self.create_error
            self.pods.append(body)
            self.code = self.codes.pop(0)
        return body

    def delete(self, path: str) -> None:
        self.calls.append(("DELETE", path))


def _provider(api: FakeApi) -> NodeAgentPodProvider:
    provider = NodeAgentPodProvider()
    provider.client_factory = lambda *_: api
    provider.poll_seconds = 0.0
    return provider


def _props() -> dict[str, Any]:
    return {"node": "gpu-1", "namespace": "ns", "image": "busybox:1.36",
            "timeoutSeconds": 60, "program": PROGRAM, "planId": PLAN.plan_id,
            "tries": 3, "kubeconfig": None}


def test_a_run_reads_the_agents_exit_code_and_result_and_cleans_up() -> None:
    api = FakeApi([0])
    pod = agent_pod("gpu-1", "apply", namespace="ns")
    run = run_agent_pod(api, pod, "program", timeout_s=5, poll_s=0)
    assert run.rc == 0 and run.verdict and run.out == {"mode": "apply", "changed": True}
    name = pod["metadata"]["name"]
    assert api.calls[-2:] == [("DELETE", f"/api/v1/namespaces/ns/pods/{name}"),
                              ("DELETE", f"/api/v1/namespaces/ns/configmaps/{name}")]


def test_a_pod_killed_mid_transaction_is_run_again() -> None:
    api = FakeApi([137, 0])
    outs = _provider(api).create(_props()).outs
    assert outs["runs"] == 2 and outs["result"] == {"changed": True}


def test_pods_that_never_give_a_verdict_fail_after_the_tries() -> None:
    outs = _provider(FakeApi([137, None, 143])).create(_props()).outs
    assert "3 pods ended without the agent's verdict" in outs["error"], outs
    assert outs["nodeTouched"] is True and outs["result"] is None


def test_an_agent_that_refuses_fails_the_resource_with_its_exit_code() -> None:
    """A failure is an output (gpuplane.kube.gate logs it and stops the program), never an
    exception: the SDK would print that under its traceback."""
    outs = _provider(FakeApi([2])).create(_props()).outs
    assert "node agent (apply) on gpu-1 exited 2" in outs["error"], outs


def test_a_failed_update_keeps_the_plan_the_node_holds_and_runs_again() -> None:
    provider, olds = _provider(FakeApi([0])), _props()
    applied = provider.create(olds).outs
    assert applied["error"] is None and applied["nodeTouched"] is True
    news = {**olds, "program": OTHER, "planId": "other"}
    provider.client_factory = lambda *_: FakeApi([1])
    failed = provider.update("id", applied, news).outs
    assert "exited 1" in failed["error"]
    # the node still holds the old plan: delete restores that one, and the next `up`
    # (same inputs) runs the agent again
    assert failed["planId"] == olds["planId"] and failed["program"] == olds["program"]
    assert failed["result"] == applied["result"]
    assert provider.diff("id", failed, news).changes
    assert provider.diff("id", failed, failed).changes, "a failed run must always re-run"
    api = FakeApi([0])
    provider.client_factory = lambda *_: api
    again = provider.update("id", failed, news).outs
    assert again["error"] is None and again["planId"] == "other"
    assert not provider.diff("id", again, news).changes


def test_delete_runs_the_restore_pod_for_its_plan() -> None:
    api = FakeApi([0])
    _provider(api).delete("id", _props())
    script = api.pods[0]["spec"]["containers"][0]["command"][2]
    assert f"restore --plan-id {PLAN.plan_id}" in script
    assert not any(p.endswith("/configmaps") for m, p in api.calls if m == "POST")


def test_a_refused_pod_is_a_clear_error_and_its_delete_runs_nothing() -> None:
    api = FakeApi([0], ApiError(403, "POST", "/api/v1/namespaces/ns/pods",
                                "violates PodSecurity \"restricted:latest\""))
    outs = _provider(api).create(_props()).outs
    assert "rejected the node agent's pod in namespace ns" in outs["error"], outs
    assert outs["nodeTouched"] is False
    calls = len(api.calls)
    _provider(api).delete("id", outs)
    assert api.calls[calls:] == [], "delete ran a pod for a plan no agent ever ran"


def test_a_failed_restore_fails_the_delete() -> None:
    with pytest.raises(RuntimeError, match="node agent \\(restore\\) on gpu-1 exited 3"):
        _provider(FakeApi([3])).delete("id", _props())


def test_only_the_plan_and_the_pods_settings_change_the_resource() -> None:
    provider, props = NodeAgentPodProvider(), _props()
    assert not provider.diff("id", props, {**props, "kubeconfig": "other"}).changes
    assert provider.diff("id", props, {**props, "program": OTHER}).changes


def test_the_apply_reads_its_program_from_the_plan_configmap() -> None:
    """The program the pod runs is the plan ConfigMap's, with the agent embedded; the
    outputs keep its name, never the program."""
    api = FakeApi([0])
    outs = _provider(api).create(_props()).outs
    assert ("GET", f"/api/v1/namespaces/ns/configmaps/{PROGRAM}") in api.calls
    assert outs["program"] == PROGRAM and "stdin" not in outs and outs["error"] is None
    assert plan_stdin(PLAN) not in json.dumps(outs)


def test_a_missing_or_changed_plan_configmap_runs_nothing_and_says_what_to_do() -> None:
    api = FakeApi([0])
    del api.maps[f"/api/v1/namespaces/ns/configmaps/{PROGRAM}"]
    outs = _provider(api).create(_props()).outs
    assert f"plan ConfigMap ns/{PROGRAM} does not exist" in outs["error"], outs
    assert "pulumi up --refresh" in outs["error"]
    assert outs["nodeTouched"] is False and api.pods == []
    api = FakeApi([0])
    api.maps[f"/api/v1/namespaces/ns/configmaps/{PROGRAM}"]["data"] = {
        PROGRAM_KEY: plan_stdin(PLAN) + "echo changed\n"}
    outs = _provider(api).create(_props()).outs
    assert "does not hold the program its name says" in outs["error"], outs
    assert outs["nodeTouched"] is False and api.pods == []


# -- the rollout stops at a failed node ----------------------------------------------------

class FailingNode(Recorder):
    """The agent failed on node `failed` (its NodeAgentPod's `error` output)."""

    def __init__(self, failed: str | None) -> None:
        super().__init__()
        self.failed = failed

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        rid, state = super().new_resource(args)
        if args.typ.endswith(":NodeAgentPod"):
            node = state["node"]
            state = {**state, "nodeTouched": True, "error":
                     f"node agent (apply) on {node} exited 1: refused" if node == self.failed
                     else None}
        return rid, state


def _rollout(failed: str | None) -> tuple[RecordingMonitor, list[tuple[str, str]], Any]:
    mocks = FailingNode(failed)
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="gpuplane", stack="test", preview=False,
                             monitor=monitor)
    plan = plan_node(profile("kubeadm"), ContainerdVersion.parse("1.7"),
                     PlanOptions(toolkit=ToolkitMode.HOST))
    logged: list[tuple[str, str]] = []

    def program() -> Any:
        rollout = ContainerdPodRollout("r", ContainerdPodRolloutArgs(
            plans={n: plan for n in ("a", "b", "c")}, batches=[["a"], ["b", "c"]],
            namespace="ns", image="busybox:1.36", timeout_seconds=60))
        return rollout.done

    run = pulumi.runtime.test(program)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pulumi.log, "error",
                      lambda msg, resource=None, **_: logged.append(
                          (msg, resource.pulumi_resource_name)))
        error: pulumi.RunError | None = None
        try:
            run()
        except pulumi.RunError as exc:
            error = exc
        # The gate's failed futures would be reported ("exception never retrieved") when
        # collected, at any later moment; inside a later test's `ast.parse` that breaks
        # CPython 3.11 ("AST constructor recursion depth mismatch"). Retrieved here.
        for obj in gc.get_objects():
            if isinstance(obj, asyncio.Future) and obj.done() and not obj.cancelled():
                obj.exception()     # marks it retrieved
    return monitor, logged, error


def test_each_batch_waits_for_every_node_of_the_one_before() -> None:
    """Through one barrier: it depends on the canary and on the next batch's plan
    ConfigMap, each node of the next batch on it alone."""
    monitor, logged, error = _rollout(None)
    assert error is None and logged == []
    canary = monitor.registered["containerd-a"]["urn"]
    barrier = monitor.registered["r-after-batch-0"]
    [plan] = [r["urn"] for n, r in monitor.registered.items() if "gpuplane-plan-" in n]
    assert barrier["type"] == "pulumi-python:dynamic/gpuplane:RolloutBarrier"
    assert barrier["deps"] == {canary, plan}
    assert plan in monitor.registered["containerd-a"]["deps"]
    for node in ("b", "c"):
        assert monitor.registered[f"containerd-{node}"]["deps"] == {barrier["urn"]}, node


def test_a_node_whose_agent_failed_stops_the_rollout_without_a_traceback() -> None:
    """The agent's message is an error on the node's resource, the program stops with a
    RunError (the CLI prints its message alone) and no later node is registered."""
    monitor, logged, error = _rollout("a")
    assert logged == [("node agent (apply) on a exited 1: refused", "containerd-a")]
    assert error is not None and "the node agent failed on containerd-a" in str(error)
    assert "containerd-b" not in monitor.registered
    assert "containerd-c" not in monitor.registered
    assert "r-after-batch-0" not in monitor.registered, "no barrier after a failed batch"


# -- the stack, the policies and the plan --------------------------------------------------

def _plan(capsys: pytest.CaptureFixture[str], stacks: Path, name: str) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["plan", "--stack", name, "--stacks-dir", str(stacks), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    out["exit"] = code
    return dict(out)


def test_the_pod_rollout_has_the_ssh_rollouts_batches_order_and_findings(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ssh = _plan(capsys, STACKS, "kubeadm-prod")
    pod = _plan(capsys, _pod_stack(tmp_path), "kubeadm-pod")
    assert pod["exit"] == ssh["exit"] == 0
    assert pod["batches"] == ssh["batches"]
    assert [n["files"] for n in pod["nodes"]] == [n["files"] for n in ssh["nodes"]]
    assert pod["findings"] == ssh["findings"]

    def rollout(plan: dict[str, Any], kind: str) -> dict[str, list[str]]:
        """The nodes each node waits for: its dependencies, through a rollout barrier."""
        deps = {r["name"]: r["dependsOn"] for r in plan["resources"]}
        barriers = {r["name"] for r in plan["resources"]
                    if r["type"].endswith(":RolloutBarrier")}

        def waits(name: str) -> list[str]:
            return sorted(w for d in deps[name]
                          for w in (waits(d) if d in barriers else [d])
                          if w.startswith("containerd-"))
        return {r["name"]: waits(r["name"]) for r in plan["resources"] if r["type"] == kind}

    nodes = rollout(pod, "pulumi-python:dynamic/gpuplane:NodeAgentPod")
    assert nodes == rollout(ssh, "command:remote:Command")
    assert not [r for r in pod["resources"] if r["type"].startswith("command:")]
    # Each node names the ConfigMap holding its plan's program: the SSH command's stdin.
    maps = {r["inputs"]["metadata"]["name"]: r for r in pod["resources"]
            if r["type"] == "kubernetes:core/v1:ConfigMap"}
    stdin = {r["name"]: maps[r["inputs"]["program"]]["inputs"]["data"][PROGRAM_KEY]
             for r in pod["resources"] if r["name"].startswith("containerd-")}
    assert stdin == {r["name"]: r["inputs"]["stdin"] for r in ssh["resources"]
                     if r["type"] == "command:remote:Command"}
    canary = next(r for r in pod["resources"] if r["name"] == "containerd-a100-01")
    program = maps[canary["inputs"]["program"]]
    # its pod's namespace, and its program (made in that namespace)
    assert sorted(canary["dependsOn"]) == sorted(["gpu-operator-namespace", program["name"]])
    assert program["dependsOn"] == ["gpu-operator-namespace"]
    view = pod["cluster"]["nodePod"]
    assert view["namespace"] == "gpu-operator" and view["namespaceCreatedByGpuplane"]
    assert view["hostPID"] and view["privileged"]
    assert any("create, get, delete pods in namespace gpu-operator" in n
               for n in view["needs"])
    assert ssh["cluster"]["nodePod"] is None


def test_the_policies_judge_the_pods_plan_as_the_commands(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A rollout the rulebook rejects (every node at once, FM06) is rejected the same way
    with pod access."""
    broken = {"gpuplane:rollout": {"canary": False, "maxUnavailable": 10}}
    pod = _plan(capsys, _pod_stack(tmp_path / "pod", **broken), "kubeadm-pod")
    data = yaml.safe_load((STACKS / "Pulumi.kubeadm-prod.yaml").read_text())
    data["config"].update(broken)
    (tmp_path / "ssh").mkdir()
    (tmp_path / "ssh" / "Pulumi.kubeadm-ssh.yaml").write_text(yaml.safe_dump(data))
    ssh = _plan(capsys, tmp_path / "ssh", "kubeadm-ssh")
    ids = {f["id"] for f in pod["findings"]}
    assert "FM06" in ids and pod["exit"] == ssh["exit"] == 1
    assert ids == {f["id"] for f in ssh["findings"]}


def test_the_text_plan_shows_the_pod_and_its_needs(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    stacks = _pod_stack(tmp_path, **{"gpuplane:nodePod": {"namespace": "node-tools"}})
    capsys.readouterr()
    assert main(["plan", "--stack", "kubeadm-pod", "--stacks-dir", str(stacks)]) == 0
    out = capsys.readouterr().out
    assert "through a pod per node, no SSH" in out and "namespace node-tools" in out
    assert "needs: create, get, delete configmaps in namespace node-tools" in out
    assert main(["plan", "--stack", "kubeadm-pod", "--stacks-dir", str(stacks),
                 "--format", "markdown"]) == 0
    assert "- through a pod per node, no SSH" in capsys.readouterr().out
    shutil.rmtree(stacks)


class StatusApi(FakeApi):
    """The status pod's log: the agent's status line."""

    def __init__(self, status: dict[str, Any]) -> None:
        super().__init__([0])
        self.status = status

    def get_text(self, path: str, params: Any = None) -> str:
        return json.dumps(self.status) + "\n"


def test_refresh_reads_the_agents_status_and_a_drifted_node_runs_again() -> None:
    props = {**_props(), "result": {"mode": "apply"}, "runs": 1, "error": None,
             "nodeTouched": True}
    clean = {"mode": "status", "applied": True, "plan_id": PLAN.plan_id, "drift": False,
             "drifted_files": []}
    api = StatusApi(clean)
    read = _provider(api).read("id", props).outs
    script = api.pods[0]["spec"]["containers"][0]["command"][2]
    assert "status" in script and "restore" not in script
    assert read["nodeStatus"] == {"applied": True, "planId": PLAN.plan_id, "drift": False,
                                  "driftedFiles": []}
    assert not NodeAgentPodProvider().diff("id", read, _props()).changes
    edited = {**clean, "drift": True, "drifted_files": ["/etc/containerd/config.toml"]}
    drifted = _provider(StatusApi(edited)).read("id", props).outs
    assert drifted["nodeStatus"]["driftedFiles"] == ["/etc/containerd/config.toml"]
    assert NodeAgentPodProvider().diff("id", drifted, _props()).changes
    gone = _provider(StatusApi({"mode": "status", "applied": False})).read("id", props).outs
    assert NodeAgentPodProvider().diff("id", gone, _props()).changes


def test_refresh_of_a_plan_never_applied_runs_no_pod() -> None:
    api = StatusApi({})
    props = {**_props(), "nodeTouched": False, "error": "refused"}
    assert _provider(api).read("id", props).outs == props and api.pods == []
