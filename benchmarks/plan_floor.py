"""The floor under `plan_scale.py`: the Pulumi SDK's cost of the two resources per node
alone.

Each size runs in a fresh process: a program that builds only what the node rollout
builds per node (a `remote.CopyToRemote` of the agent and a `remote.Command` with a
plan-sized stdin, the same connection, commands and dependencies: every node of a batch
of 10 after every node of the batch before), run by the plan engine
(`gpuplane.cli.plan.engine.run_program`, with its short registration path). No stack
file, planner, policies or report: what is left is the SDK's constructors (input types,
`Output.secret` of the connection, option merges) and its event loop, which no change
to gpuplane's planner can take off a plan.

    .venv/bin/python benchmarks/plan_floor.py [SIZES...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

SIZES = (2000, 10000)
CHILD = """
import json, resource, sys, time
import pulumi
import pulumi_command as command
from gpuplane.agent.script import (agent_script_path, apply_command, restore_command,
                                   staged_agent_path)
from gpuplane.cli.plan.engine import no_full_gc, run_program

n = int(sys.argv[1])

def program():
    key = pulumi.Output.secret("key")
    agent = pulumi.FileAsset(str(agent_script_path()))
    stdin = "x" * 2800   # a plan's program, shared by the nodes of one plan
    previous = []
    for start in range(0, n, 10):
        current = []
        for i in range(start, min(n, start + 10)):
            connection = command.remote.ConnectionArgs(
                host=f"10.0.{i // 250}.{i % 250 + 1}", user="ubuntu", port=22,
                private_key=key)
            copy = command.remote.CopyToRemote(
                f"gpuplane-agent-copy-{i}", connection=connection,
                remote_path=staged_agent_path(), source=agent)
            current.append(command.remote.Command(
                f"containerd-{i}", connection=connection, create=apply_command(True),
                delete=restore_command(True, plan_id="plan"), stdin=stdin,
                opts=pulumi.ResourceOptions(depends_on=[copy, *previous])))
        previous = current

t0 = time.perf_counter()
with no_full_gc():
    _, resources = run_program(program, project="floor", stack="floor", config={},
                               secret_keys=[])
print(json.dumps({"s": time.perf_counter() - t0, "resources": len(resources),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(n: int) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(n)], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", type=int, metavar="SIZE",
                        help=f"node counts (default: {' '.join(map(str, SIZES))})")
    sizes = parser.parse_args(argv).sizes or SIZES
    print(f"{'nodes':>6} {'resources':>9} {'run s':>7} {'ms/node':>8} {'peak MB':>8}")
    for n in sizes:
        r = measure(n)
        print(f"{n:>6} {r['resources']:>9} {r['s']:>7.2f} {1000 * r['s'] / n:>8.2f} "
              f"{r['peak_mb']:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
