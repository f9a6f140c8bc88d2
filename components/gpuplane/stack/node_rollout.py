"""containerd changes on GPU nodes, one `remote.Command` per node, canary first.

Each node gets two resources (a fleet is thousands of nodes: each resource costs plan
time, state and engine steps):

- `gpuplane-agent-copy-<node>` (`remote.CopyToRemote`) uploads the node agent as a file
  asset: Pulumi's state holds its path and hash, not its text, and it uploads again only
  when the agent's digest changes;
- `containerd-<node>` pipes the plan (settings, bases, the planned files as plain
  heredocs) to `sh -s` as root, which installs that upload at
  /var/lib/gpuplane/agent-<digest>.sh (sha256 checked) when that version is not there
  yet, and runs the installed agent by its digest path. The files
  are plain text inside the resource's `stdin` input: a preview shows their diff and
  policies read them. create (update runs create again) = agent `apply` (verify,
  restart only when the effective config changes, roll back on failure); delete = agent
  `restore` (originals byte-exact) with the copy the agent keeps at
  /var/lib/gpuplane/agent.sh, then removes the install and the upload when no plan is
  left applied. No
  `triggers`: a trigger change replaces, and a replacement's delete (restore) would run
  after the new create (apply) and undo it.

Batches run in order: every node of batch k waits for every node of batch k-1, so the
first failing node stops the rollout before the next batch restarts anything. It waits
through one `RolloutBarrier` (gpuplane.stack.barrier) that depends on batch k-1, as over
`nodeAccess: pod`: a node's record keeps its upload's URN and the barrier's, not one URN
per node of the batch before (which grew the state and the engine's dependency walk with
the batch size; issue 49). At destroy the engine deletes batch k (each node restores),
then the barrier, then batch k-1. The agent uploads do not wait for batches (they change
nothing containerd reads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_command as command

from gpuplane.agent.script import (
    agent_plan,
    agent_script_path,
    apply_command,
    plan_stdin,
    restore_command,
    staged_agent_path,
)
from gpuplane.plan.node import NodeContainerdPlan
from gpuplane.stack import child_options
from gpuplane.stack.barrier import RolloutBarrier
from gpuplane.stack.batches import in_batches
from gpuplane.stack.refusal import refuse
from gpuplane.stack.sdk_debug import quiet_registrations


@dataclass(frozen=True)
class NodeTarget:
    """Where and how to reach one node."""

    name: str
    host: str
    user: str
    port: int
    sudo: bool


@dataclass
class ContainerdRolloutArgs:
    """How to reach each node (`targets`), the plan per node, the batches (canary first)
    and the SSH key (a secret)."""

    targets: Sequence[NodeTarget]
    plans: Mapping[str, NodeContainerdPlan]
    batches: Sequence[Sequence[str]]
    private_key: pulumi.Input[str]


class ContainerdRollout(pulumi.ComponentResource):
    """The node agent over SSH, node by node (see the module's docstring)."""

    commands: dict[str, command.remote.Command]
    finished: list[pulumi.Output[pulumi.Resource]]
    """The last batch's commands (stand-ins), once every batch ran, for `depends_on`."""

    def __init__(self, name: str, args: ContainerdRolloutArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuplane:index:ContainerdRollout", name, None, opts)
        targets, plans, batches = args.targets, args.plans, args.batches
        private_key = args.private_key
        # A plan with errors is never rolled out: refused before the first child (the
        # agent would refuse it too, but only as a traceback from inside the program).
        refuse(self, [f for plan in {id(p): p for p in plans.values()}.values()
                      for f in plan.findings])
        by_name = {t.name: t for t in targets}
        # Nodes sharing a plan share its program (built once: a fleet is thousands).
        programs: dict[int, tuple[str, str]] = {}
        for plan in plans.values():
            if id(plan) not in programs:
                ap = agent_plan(plan)
                programs[id(plan)] = (ap.plan_id, plan_stdin(ap))
        key = pulumi.Output.secret(private_key)
        agent = pulumi.FileAsset(str(agent_script_path()))
        self.commands = {}
        # The agent uploads do not wait for batches; every node's goes first.
        with quiet_registrations():   # one per node, as the batches (gpuplane.stack.sdk_debug)
            copies = {node: command.remote.CopyToRemote(
                f"gpuplane-agent-copy-{node}", connection=_connection(by_name[node], key),
                remote_path=staged_agent_path(), source=agent, opts=child_options(self, opts))
                for batch in batches for node in batch}

        def make(batch: Sequence[str], previous: list[pulumi.Input[pulumi.Resource]]
                 ) -> list[pulumi.Resource]:
            for node in batch:
                target = by_name[node]
                plan_id, stdin = programs[id(plans[node])]
                self.commands[node] = command.remote.Command(
                    f"containerd-{node}",
                    connection=_connection(target, key),
                    create=apply_command(target.sudo),   # update: create again
                    # With the plan id, a replaced command's delete (which Pulumi runs
                    # after its successor's create) leaves the successor's files alone.
                    delete=restore_command(target.sudo, plan_id=plan_id),
                    stdin=stdin,
                    opts=child_options(self, opts, depends_on=[copies[node], *previous]))
            return [self.commands[node] for node in batch]

        def barrier(index: int, previous: list[pulumi.Input[pulumi.Resource]]
                    ) -> pulumi.Resource:
            return RolloutBarrier(f"{name}-after-batch-{index}",
                                  opts=child_options(self, opts, depends_on=previous))

        # Each batch is made once the one before it is registered (in `up`: done; a failed
        # command fails its registration, so neither the barrier after it nor any later
        # batch is made), and waits for it through a barrier: gpuplane.stack.batches.
        self.finished = in_batches(batches, make, barrier=barrier)
        self.register_outputs({"nodes": [n for b in batches for n in b]})


def _connection(target: NodeTarget, key: pulumi.Output[str]) -> command.remote.ConnectionArgs:
    # Plain args (the generated classes make the connection secret): an Output here would
    # be unwrapped again by each resource.
    return command.remote.ConnectionArgs(host=target.host, user=target.user,
                                         port=target.port, private_key=key)


__all__ = ["ContainerdRollout", "ContainerdRolloutArgs", "NodeTarget"]
