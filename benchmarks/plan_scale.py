"""Plan time, peak memory and Pulumi state per node for 1 to 10,000 GPU nodes, every
policy on.

Each size runs in a fresh process (so peak RSS is that plan's alone): a kubeadm stack
with SSH access and N nodes, canary then batches of 10, planned with `plan_stack`
(mock engine, every policy of the pack, the JSON report). Prints a table. "state B/node"
is the serialized inputs (compact JSON) of every per-node SSH resource (the agent upload and
the node command) as the engine registered them, per node: what Pulumi's state
holds per node, with the SSH key's ciphertext counted as the engine's placeholder.
"cpu s" is the plan's CPU time (steadier than its wall time on a loaded machine), "load 1m"
the machine's 1-minute load average when the plan ended; the JSON report is encoded piece
by piece, as `gpuplane plan --format json` writes it, so "peak MB" is the plan's and its
output's, not a second copy of the text.

    .venv/bin/python benchmarks/plan_scale.py [SIZES...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

SIZES = (1, 100, 1000, 2000, 5000, 10000)
CHILD = """
import json, os, resource, sys, time
from pathlib import Path
t0 = time.perf_counter()
import gpuplane.cli.plan.run as run
t1 = time.perf_counter()
seen = []
phases = {}
def timed(name, f):
    def call(*args, **kw):
        start = time.perf_counter()
        result = f(*args, **kw)
        phases[name] = phases.get(name, 0.0) + time.perf_counter() - start
        return result
    return call
def recording(*args, _run=run.run_program, **kw):
    result = _run(*args, **kw)
    seen.append(result[1])
    return result
run.run_program = timed("program", recording)
run.load_stack_file = timed("stack file", run.load_stack_file)
run.run_policies = timed("policies", run.run_policies)
run.build_report = timed("report", run.build_report)
c1 = time.process_time()
plan = run.plan_stack("bench", Path(sys.argv[1]))
t2 = time.perf_counter()
c2 = time.process_time()
nodes = len(plan["nodes"])
state = sum(len(json.dumps(r.inputs, separators=(",", ":"))) for r in seen[0]
            if r.type.startswith("command:remote:"))
# Encoded piece by piece, as `gpuplane plan --format json` writes it (never the whole text
# at once: that string and its pieces would add 2x its size to the peak).
size = sum(len(piece) for piece in json.JSONEncoder().iterencode(plan))
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "plan_s": t2 - t1, "cpu_s": c2 - c1, "json_s": t3 - t2,
                  "resources": plan["summary"]["resources"], "findings": len(plan["findings"]),
                  "bytes": size, "state_per_node": state / max(nodes, 1), "phases": phases,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "load": os.getloadavg()[0]}))
"""


def stack(n: int) -> dict:
    return {"config": {
        "gpuplane:cluster": {"distro": "kubeadm", "kubernetesVersion": "1.31.4",
                             "containerdVersion": "1.7", "nodeAccess": "ssh"},
        "gpuplane:ssh": {"user": "ubuntu", "sudo": True},
        "gpuplane:sshPrivateKey": {"secure": "v1:bench"},
        "gpuplane:nodes": [{"name": f"gpu-{i:04d}", "host": f"10.0.{i // 250}.{i % 250 + 1}",
                            "gpus": 8, "pool": f"pool-{i % 4}"} for i in range(n)],
        "gpuplane:runtime": {"systemdCgroup": True},
        "gpuplane:gpuOperator": {"chartVersion": "v25.10.1"},
        "gpuplane:timeSlicing": {"replicas": 2},
        "gpuplane:rollout": {"canary": True, "maxUnavailable": 10},
    }}


def measure(n: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "Pulumi.bench.yaml").write_text(yaml.safe_dump(stack(n)))
        done = subprocess.run([sys.executable, "-c", CHILD, tmp], capture_output=True,
                              text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", type=int, metavar="SIZE",
                        help=f"node counts to plan (default: {' '.join(map(str, SIZES))})")
    parser.add_argument("--phases", action="store_true",
                        help="also print the seconds of each phase of each plan (stack file, "
                        "program under the plan engine, policies, report)")
    args = parser.parse_args(argv)
    sizes = args.sizes or SIZES
    print(f"{'nodes':>6} {'resources':>9} {'plan s':>8} {'cpu s':>6} {'ms/node':>8} "
          f"{'json s':>7} {'import s':>8} {'peak MB':>8} {'state B/node':>12} "
          f"{'findings':>8} {'load 1m':>7}")
    for n in sizes:
        r = measure(n)
        print(f"{n:>6} {r['resources']:>9} {r['plan_s']:>8.2f} {r['cpu_s']:>6.2f} "
              f"{1000 * r['plan_s'] / n:>8.2f} {r['json_s']:>7.2f} {r['import_s']:>8.2f} "
              f"{r['peak_mb']:>8.0f} {r['state_per_node']:>12.0f} {r['findings']:>8} "
              f"{r['load']:>7.2f}", flush=True)
        if args.phases:
            print("       " + ", ".join(f"{k} {v:.2f} s" for k, v in r["phases"].items()),
                  flush=True)


if __name__ == "__main__":
    main()
