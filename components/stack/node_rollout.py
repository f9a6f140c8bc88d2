"""containerd changes on GPU nodes, one `remote.Command` per node, canary first.

Each command pipes the node agent and the planned files to `sh -s` over SSH, so the
files are plain text inside the resource's `stdin` input: a preview shows their diff and
policies read them. create/update = agent `apply` (verify, restart only when the
effective config changes, roll back on failure); delete = agent `restore` (originals
byte-exact). No `triggers`: a trigger change replaces, and a replacement's delete
(restore) would run after the new create (apply) and undo it.

Batches run in order: every node of batch k depends on every node of batch k-1, so the
first failing node stops the rollout before the next batch restarts anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_command as command

from gpuplane.agent import agent_plan, apply_command, apply_stdin, restore_command
from gpuplane.planner import NodeContainerdPlan


@dataclass(frozen=True)
class NodeTarget:
    """Where and how to reach one node."""

    name: str
    host: str
    user: str
    port: int
    sudo: bool


class ContainerdRollout(pulumi.ComponentResource):
    commands: dict[str, command.remote.Command]

    def __init__(self, name: str, *, targets: Sequence[NodeTarget],
                 plans: Mapping[str, NodeContainerdPlan], batches: Sequence[Sequence[str]],
                 private_key: pulumi.Input[str],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuplane:index:ContainerdRollout", name, None, opts)
        by_name = {t.name: t for t in targets}
        # Nodes sharing a plan share its agent program (built once: a fleet is thousands).
        programs: dict[int, tuple[str, str]] = {}
        for plan in plans.values():
            if id(plan) not in programs:
                ap = agent_plan(plan)
                programs[id(plan)] = (ap.plan_id, apply_stdin(ap))
        key = pulumi.Output.secret(private_key)
        self.commands = {}
        previous: list[pulumi.Resource] = []
        for batch in batches:
            current = []
            for node in batch:
                target = by_name[node]
                plan_id, stdin = programs[id(plans[node])]
                cmd = command.remote.Command(
                    f"containerd-{node}",
                    connection=command.remote.ConnectionArgs(
                        host=target.host, user=target.user, port=target.port,
                        private_key=key),
                    create=apply_command(target.sudo),
                    update=apply_command(target.sudo),
                    # With the plan id, a replaced command's delete (which Pulumi runs
                    # after its successor's create) leaves the successor's files alone.
                    delete=restore_command(target.sudo, plan_id=plan_id),
                    stdin=stdin,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=previous))
                self.commands[node] = cmd
                current.append(cmd)
            previous = current
        self.register_outputs({"nodes": list(self.commands)})
