"""The whole `gpuplane plan` command on a large fleet: start, plan, output, exit.

benchmarks/plan_scale.py times the plan inside one process; this runs the installed
command as a user does, once per output format, on the same stack (kubeadm, SSH, canary
then batches of 10, every policy), with stdout to /dev/null, and prints each run's wall
time and peak RSS (from the kernel's accounting of that child alone).

    .venv/bin/python benchmarks/plan_cli.py [SIZE] [--formats json,text,markdown]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from plan_scale import stack


def run(command: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MB, exit code) of one run of `command`."""
    start = time.perf_counter()
    with open(os.devnull, "w") as null:
        child = subprocess.Popen(command, stdout=null, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("size", nargs="?", type=int, default=10000,
                        help="GPU nodes (default: 10000)")
    parser.add_argument("--formats", default="json,text,markdown",
                        help="output formats to run, comma-separated")
    args = parser.parse_args(argv)
    gpuplane = Path(sys.executable).with_name("gpuplane")
    print(f"{'format':>9} {'nodes':>6} {'wall s':>7} {'peak MB':>8} {'exit':>4}")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "Pulumi.bench.yaml").write_text(yaml.safe_dump(stack(args.size)))
        for fmt in args.formats.split(","):
            wall, peak, code = run([str(gpuplane), "plan", "--stack", "bench",
                                    "--stacks-dir", tmp, "--format", fmt])
            print(f"{fmt:>9} {args.size:>6} {wall:>7.2f} {peak:>8.0f} {code:>4}", flush=True)


if __name__ == "__main__":
    main()
