"""containerd changes on GPU nodes without SSH (`cluster.nodeAccess: pod`): one
`NodeAgentPod` per node, in the SSH rollout's batches and order.

Why a dynamic provider and not a `kubernetes` Job per node: the agent must also run at
`pulumi destroy` (restore, byte for byte), and deleting a Job the Kubernetes provider
manages runs nothing on the node; a Job's pod template is also immutable, so a plan change
would replace it, and a replacement's delete comes after its successor's create. A
dynamic resource has the SSH command's lifecycle exactly: create and update run the
agent's `apply` in a pod, delete runs its `restore` (only while this resource's plan is
the one applied: `--plan-id`) in a pod. Like `GpuJobCheck` (gpuplane.checks.provider) it
uses the Kubernetes client with the stack's kubeconfig; the pods and their ConfigMaps
live for one run only.

A node's resource holds its plan id and the name of the ConfigMap that holds its plan's
program (the `stdin` the SSH command carries), one ConfigMap per distinct plan
(`gpuplane-plan-<planId>-<digest>`, made by `ContainerdPodRollout` through the Kubernetes
provider before the nodes that use it): a fleet's nodes mostly share one plan, and a copy
of the program per node made the state about 7 KB per node (issue 49). The provider reads
the program from that ConfigMap when it applies; restore and status need only the plan id;
the policies read the program from the ConfigMap by name (gpuplane.policy.nodes). In the
same way each batch after the canary depends on one `RolloutBarrier` that depends on the
batch before it (gpuplane.stack.barrier), not on each of that batch's nodes: a node's
record keeps one URN of the rollout's order, whatever the batch size.

A pod that ends without the agent's verdict (killed, its container lost when a restart
took the shims down) is run again, up to `tries` times: the agent's write-ahead journal
makes a rerun converge from any step (tests/real/test_agent_faults.py). An agent that ends
with a verdict other than 0, or a pod that cannot run, fails `pulumi up` with the agent's
message as over SSH, but through an output and gpuplane.kube.gate rather than an exception (no
SDK traceback): the failed node's batch finishes, no later batch nor the operator is
registered, and the failed node runs again at the next `up`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, UpdateResult

from gpuplane.agent.pod import (
    PodFailed,
    PodRun,
    agent_pod,
    plan_configmap,
    plan_configmap_name,
    read_plan_program,
    run_agent_pod,
)
from gpuplane.agent.script import agent_plan, embedded_program, plan_stdin
from gpuplane.kube.client import ClusterClient
from gpuplane.kube.gate import gate, judged
from gpuplane.kube.provider import KubeResourceProvider
from gpuplane.plan.node import NodeContainerdPlan
from gpuplane.stack import child_options
from gpuplane.stack.barrier import RolloutBarrier
from gpuplane.stack.batches import in_batches, urns_of
from gpuplane.stack.refusal import refuse

PROVIDER_KEY = "__provider"
_INPUT_KEYS = ("node", "namespace", "image", "timeoutSeconds", "program", "planId", "tries")
# What the outputs keep of the inputs: what diff compares, what delete and read need.
_KEPT_KEYS = (*_INPUT_KEYS, "kubeconfig")
SANDBOX_ENV = "GPUPLANE_NODE_POD_SANDBOX"
"""Tests and benchmarks only: JSON {"agentArgs": [...], "root": DIR, "hostPid": N} that
points the pods at a sandbox node (tests/support/agent_node.py, tests/support/ns_node.py)
instead of the host's /; or {node name: that} for several nodes."""


class NodeAgentPodProvider(KubeResourceProvider):
    """Runs the node agent in a pod on the node: apply at create and update, restore at
    delete."""

    # Test seam: None means the real client; a plain attribute so that dill pickles it.
    client_factory: Callable[[str | None, str | None], ClusterClient] | None = None
    poll_seconds: float = 2.0
    # The pickled provider (in each node's inputs and outputs) is a reference to this
    # class and captures no secret: kept in plain text, not as ciphertext, it is about
    # 400 B less per node. The SDK still makes it a secret if one was captured
    # (pulumi/dynamic/dynamic.py `serialize_as_secret_always`, pulumi 3.260.0).
    serialize_as_secret_always = False

    def _client(self, props: Mapping[str, Any]) -> ClusterClient:
        if self.client_factory is not None:
            return self.client_factory(self.kubeconfig(props), self.stack_context)
        from gpuplane.kube.client import KubeClient

        return KubeClient(self.kubeconfig(props), self.stack_context)

    def _pod(self, props: Mapping[str, Any], mode: str) -> dict[str, Any]:
        sandbox = json.loads(os.environ.get(SANDBOX_ENV) or "{}")
        sandbox = sandbox.get(str(props["node"]), {}) if "hostPid" not in sandbox else sandbox
        return agent_pod(str(props["node"]), mode, namespace=str(props["namespace"]),
                         image=str(props["image"]), timeout_s=int(props["timeoutSeconds"]),
                         plan_id=str(props["planId"]),
                         agent_args=tuple(sandbox.get("agentArgs") or ()),
                         root=str(sandbox.get("root") or ""),
                         host_pid=int(sandbox.get("hostPid") or 1))

    def _run(self, props: Mapping[str, Any], mode: str) -> tuple[PodRun, int]:
        """Run `mode` until the agent gives a verdict (at most `tries` pods); a verdict
        other than 0, or none, is AgentFailed."""
        node, tries = str(props["node"]), int(props.get("tries") or 3)
        program = None
        if mode == "apply":
            try:
                program = embedded_program(read_plan_program(
                    self._client(props), str(props["namespace"]), str(props["program"])))
            except PodFailed as exc:
                raise AgentFailed(f"node agent ({mode}) on {node}: {exc}",
                                  started=False) from None
        run = PodRun(None)
        for attempt in range(1, tries + 1):
            try:
                run = run_agent_pod(self._client(props), self._pod(props, mode), program,
                                    timeout_s=float(props["timeoutSeconds"]),
                                    poll_s=self.poll_seconds)
            except PodFailed as exc:
                raise AgentFailed(f"node agent ({mode}) on {node}: {exc}",
                                  started=exc.started or attempt > 1) from None
            if run.verdict:
                if run.rc != 0:
                    raise AgentFailed(f"node agent ({mode}) on {node} exited {run.rc}: "
                                      f"{run.tail()}", started=True)
                return run, attempt
        raise AgentFailed(f"node agent ({mode}) on {node}: {tries} pods ended without the "
                          f"agent's verdict (exit {run.rc}, phase {run.phase}): {run.tail()}",
                          started=True)

    def _apply(self, props: Mapping[str, Any],
               olds: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The outputs of an apply. A failure is an output (`error`), not an exception
        (gpuplane.kube.gate): the outputs then keep what the node holds, the old plan after a
        failed update (the agent changed nothing, or rolled back), so that the next diff
        runs the agent again and delete restores the plan the node has."""
        inputs = _inputs(props)
        try:
            run, runs = self._run(props, "apply")
        except AgentFailed as exc:
            if olds is not None:
                return {**_inputs(olds), "result": olds.get("result"), "runs": olds.get("runs"),
                        "error": str(exc), "nodeTouched": True}
            return {**inputs, "result": None, "runs": 0, "error": str(exc),
                    "nodeTouched": exc.started}
        return {**inputs, "result": _summary(run.out), "runs": runs, "error": None,
                "nodeTouched": True}

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"node-agent-{props['node']}", outs=self._apply(props))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """A change of the plan or the pod's settings, or a failed last run (it always runs
        again)."""
        return DiffResult(changes=bool(olds.get("error")) or _drifted(olds)
                          or any(olds.get(k) != news.get(k) for k in _INPUT_KEYS))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self._apply(news, None if olds.get("error") and
                                             not olds.get("nodeTouched") else olds))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """`pulumi refresh` (and `preview --refresh`): what the node's agent says now, as
        the `nodeStatus` output (applied, plan, drift, the drifted files). A drifted node,
        or one where no plan is applied any more, makes the next diff run the agent again,
        which refuses to overwrite the drifted files (FM05) and fails `up` with their
        names. A status pod that cannot run leaves the state as it was."""
        if not props.get("nodeTouched", True):
            return ReadResult(id_, props)
        try:
            run = run_agent_pod(self._client(props), self._pod(props, "status"),
                                timeout_s=float(props["timeoutSeconds"]),
                                poll_s=self.poll_seconds)
        except PodFailed:
            return ReadResult(id_, props)
        out = run.out
        status = {"applied": bool(out.get("applied")), "planId": out.get("plan_id"),
                  "drift": bool(out.get("drift")),
                  "driftedFiles": list(out.get("drifted_files") or [])}
        return ReadResult(id_, {**props, "nodeStatus": status})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Restore the node. Raised here, a failure shows the SDK's traceback: a delete has
        no outputs to carry it."""
        if props.get("nodeTouched") is False:
            return      # its only pod never started: the node holds nothing of this plan
        try:
            self._run(props, "restore")
        except AgentFailed as exc:
            raise RuntimeError(str(exc)) from None


class AgentFailed(Exception):
    """The node agent failed on the node, or its pod could not run it. `started`: whether
    an agent may have run (the node may hold a change to restore)."""

    def __init__(self, message: str, *, started: bool) -> None:
        super().__init__(message)
        self.started = started


def _drifted(olds: Mapping[str, Any]) -> bool:
    """The last refresh found the node off this plan: drifted, or no plan applied."""
    status = olds.get("nodeStatus") or {}
    return bool(status) and (bool(status.get("drift")) or not status.get("applied")
                             or status.get("planId") != olds.get("planId"))


_SUMMARY_KEYS = ("changed", "restarted")


def _summary(out: Mapping[str, Any]) -> dict[str, Any]:
    """The agent's result as every node's state keeps it: whether it changed the node's
    files and restarted containerd. The files are the plan's (its `planId`); the rest of
    the agent's report (digest, timings, the runtimes containerd serves) is the node's,
    which `pulumi refresh` and `gpuplane doctor` ask again."""
    return {k: out[k] for k in _SUMMARY_KEYS if k in out}


def _inputs(props: Mapping[str, Any]) -> dict[str, Any]:
    """What the outputs keep of `props`: never a copy of what only the inputs need."""
    return {k: props.get(k) for k in _KEPT_KEYS}


def failure(error: Any) -> str | None:
    """The `error` output as gpuplane.kube.gate.judged reads it."""
    return str(error) if error else None


class NodeAgentPod(pulumi.dynamic.Resource, module="gpuplane", name="NodeAgentPod"):
    """The node agent's plan for one node, applied from a pod on it (restored at delete).

    Its outputs in the state: `result` (the agent's summary), `runs` (pods run),
    `error`, `nodeTouched` (whether an agent may have run on the node for this plan:
    delete restores it) and `nodeStatus` (what the agent said at the last refresh:
    applied, planId, drift, driftedFiles). Only `error` is an attribute: the program reads
    no other, and each attribute is an Output the SDK makes, serializes and resolves at
    every node's registration."""

    # For type checkers only: the SDK evaluates a resource class's annotations at every
    # registration (`resource_types`, pulumi/_types.py, pulumi 3.260.0: `get_type_hints`
    # of each string, a thousand times in a 1,000-node preview), and needs them only to
    # turn outputs into output types or enums, which this is not.
    if TYPE_CHECKING:
        error: pulumi.Output[str | None]
        """Why the agent failed on the node (None when it applied the plan)."""

    def __init__(self, name: str, *, node: str, program: str, plan_id: str, namespace: str,
                 image: str, timeout_seconds: int, tries: int = 3,
                 kubeconfig: pulumi.Input[str] | None = None,
                 opts: pulumi.ResourceOptions | None = None,
                 provider: NodeAgentPodProvider | None = None):
        props = {"node": node, "namespace": namespace, "image": image,
                 "timeoutSeconds": timeout_seconds, "program": program, "planId": plan_id,
                 "tries": tries,
                 "kubeconfig": kubeconfig,
                 # The one output the program reads (each key here is an Output the
                 # SDK makes and resolves per node); the others are the provider's and
                 # the state's alone.
                 "error": None}
        # A kubeconfig given is a secret in the outputs too; none given, the state
        # records no secret output for every node.
        secret = pulumi.ResourceOptions(
            additional_secret_outputs=["kubeconfig"] if kubeconfig is not None else None)
        super().__init__(provider or NodeAgentPodProvider(), name, props,
                         pulumi.ResourceOptions.merge(opts or pulumi.ResourceOptions(), secret))


@dataclass
class ContainerdPodRolloutArgs:
    """The plan per node, the batches (canary first), the agent pods' namespace, image and
    bound (`gpuplane:nodePod`), where to reach the cluster, and what the canary waits for
    (its namespace, when gpuplane creates it)."""

    plans: Mapping[str, NodeContainerdPlan]
    batches: Sequence[Sequence[str]]
    namespace: str
    image: str
    timeout_seconds: int
    kubeconfig: pulumi.Input[str] | None = None
    after: Sequence[pulumi.Resource] = ()


class ContainerdPodRollout(pulumi.ComponentResource):
    """`ContainerdRollout` (gpuplane.stack.node_rollout) without SSH: every node of batch
    k waits for every node of batch k-1 (through one `RolloutBarrier`), canary first."""

    commands: dict[str, NodeAgentPod]
    finished: list[pulumi.Output[pulumi.Resource]]
    """The nodes of the last batch once every node applied its plan, for `depends_on` of
    what comes after the rollout (the operator); the program stops (`pulumi.RunError`)
    when the agent failed on any node."""
    done: pulumi.Output[pulumi.Resource] | None
    """A node of the last batch once every node applied its plan, for `depends_on`; the
    program stops (`pulumi.RunError`) when the agent failed on any node."""

    def __init__(self, name: str, args: ContainerdPodRolloutArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuplane:index:ContainerdPodRollout", name, None, opts)
        plans, batches, after = args.plans, [list(b) for b in args.batches], args.after
        # A plan with errors is never rolled out: refused before the first child (the
        # agent would refuse it too, but only as a traceback from inside the program).
        refuse(self, [f for plan in {id(p): p for p in plans.values()}.values()
                      for f in plan.findings])
        # One ConfigMap per distinct program, made before the nodes that use it (after the
        # namespace) and deleted after them.
        programs: dict[int, tuple[str, str]] = {}
        self.programs: dict[str, k8s.core.v1.ConfigMap] = {}
        for plan in plans.values():
            if id(plan) not in programs:
                ap = agent_plan(plan)
                stdin = plan_stdin(ap)
                cm = plan_configmap_name(ap.plan_id, stdin)
                programs[id(plan)] = (ap.plan_id, cm)
                if cm not in self.programs:
                    manifest = plan_configmap(cm, args.namespace, stdin)
                    self.programs[cm] = k8s.core.v1.ConfigMap(
                        f"{name}-{cm}", metadata=manifest["metadata"], data=manifest["data"],
                        immutable=True, opts=child_options(self, opts, depends_on=after))
        self.commands = {}

        def configmaps(batch: Sequence[str]) -> list[pulumi.Resource]:
            return [self.programs[cm]
                    for cm in dict.fromkeys(programs[id(plans[n])][1] for n in batch)]

        canary = set(batches[0]) if batches else set()

        def make(batch: Sequence[str], depends_on: list[pulumi.Input[pulumi.Resource]]
                 ) -> list[pulumi.Resource]:
            for node in batch:
                plan_id, cm = programs[id(plans[node])]
                # The first batch waits for its plans' ConfigMaps itself; a later one
                # through the barrier before it, which waits for them too: one URN in
                # each node's record, not two.
                mine = [self.programs[cm]] if node in canary else []
                self.commands[node] = NodeAgentPod(
                    f"containerd-{node}", node=node, program=cm, plan_id=plan_id,
                    namespace=args.namespace, image=args.image,
                    timeout_seconds=args.timeout_seconds, kubeconfig=args.kubeconfig,
                    opts=child_options(self, opts, depends_on=[*depends_on, *mine]))
            return [self.commands[node] for node in batch]

        def barrier(index: int, previous: list[pulumi.Input[pulumi.Resource]]
                    ) -> pulumi.Resource:
            """After batch `index`: its nodes, and the ConfigMaps of the batch after it."""
            return RolloutBarrier(f"{name}-after-batch-{index}", opts=child_options(
                self, opts, depends_on=[*previous, *configmaps(batches[index + 1])]))

        # The canary waits for its namespace; each later batch for the one before it
        # through a barrier (gpuplane.stack.barrier: one dependency per node), made when
        # that batch is released (gpuplane.stack.batches): in `up`, after its gate, so a
        # node whose agent failed stops the rollout there (gpuplane.kube.gate).
        self.finished = in_batches(batches, make, after, _released, barrier)
        self.done = self.finished[0] if self.finished else None
        self.register_outputs({"nodes": [n for b in batches for n in b]})


def _released(current: list[pulumi.Resource]) -> pulumi.Output[list[str]]:
    """A batch's URNs, in `up` once every agent's verdict is in (they are known only after
    `up` ran them); the gate raises when one failed."""
    urns = urns_of(current)
    if pulumi.runtime.is_dry_run():
        return urns
    pods = [p for p in current if isinstance(p, NodeAgentPod)]
    verdict = gate(pods, [judged(p, p.error, failure) for p in pods], _stopped)
    return pulumi.Output.all(verdict, urns).apply(lambda v: list(v[1]))


def _stopped(failed: list[str]) -> str:
    return (f"gpuplane: the node agent failed on {', '.join(failed)}; its message is above. "
            "The rollout stopped there: no later node was changed. Fix what it says and run "
            "`pulumi up` again: a node whose agent failed always runs again.")


__all__ = ["SANDBOX_ENV", "ContainerdPodRollout", "ContainerdPodRolloutArgs", "NodeAgentPod",
           "NodeAgentPodProvider"]
