"""How long does the node agent take, and how often does it restart containerd?

Per containerd line, on a sandbox node (tests/support/agent_node.py: a kubeadm baseline under a
temporary root, a real containerd that the injected restart command restarts): the
host-toolkit plan applied to the untouched node (a change), then the same plan again
(a no-op), then restore; repeated for several cycles. Latency is the wall time of the
whole `sh -s -- apply` run as Pulumi starts it (shell start, payload check, lock,
`containerd config dump`, and the restart and CRI wait when there is one). CRI ready is
the agent's own measure: from the restart command's start until the CRI plugin answers.
Prints figures only; the targets (no-op < 1 s with 0 restarts, a change with exactly 1
restart) are for reading, not asserted.

    .venv/bin/python benchmarks/node_agent.py [--cycles 5] [--noops 10] [--shell dash]

Needs root and the containerd builds from scripts/fetch-containerd.sh; a missing line is
reported and skipped.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support import oracle  # noqa: E402
from support.agent_node import SandboxNode, parse_result  # noqa: E402

from gpuplane.agent.script import apply_stdin  # noqa: E402
from gpuplane.distros.profiles import profile  # noqa: E402


def timed(node: SandboxNode, mode: str, stdin: str, shell: str) -> tuple[float, dict, int]:
    """(seconds, agent JSON, restarts during the run)."""
    before = node.restarts
    t0 = time.perf_counter()
    proc = subprocess.run(node.command(mode, shell=shell), input=stdin, capture_output=True,
                          text=True, timeout=120, check=False)
    elapsed = time.perf_counter() - t0
    run = parse_result(proc.returncode, proc.stdout, proc.stderr)
    if run.rc != 0:
        raise SystemExit(f"{mode} failed ({run.rc}):\n{run.err}")
    return elapsed, run.out, node.restarts - before


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def bench_line(line: str, cycles: int, noops: int, shell: str) -> dict[str, str]:
    tmp = Path(tempfile.mkdtemp(prefix="gp-", dir="/tmp"))
    node = None
    try:
        node = SandboxNode(tmp, line, profile("kubeadm"))
        node.boot()
        stdin = apply_stdin(node.plan())
        change, ready, noop, restore = [], [], [], []
        change_restarts, noop_restarts, restore_restarts = set(), 0, set()
        for _ in range(cycles):
            seconds, out, restarts = timed(node, "apply", stdin, shell)
            change.append(seconds)
            change_restarts.add(restarts)
            ready.append(out["timings_ms"]["cri_ready"] / 1000)
            for _ in range(noops):
                seconds, out, restarts = timed(node, "apply", stdin, shell)
                noop.append(seconds)
                noop_restarts += restarts
                assert out["written"] == [], out
            seconds, out, restarts = timed(node, "restore", "", shell)
            restore.append(seconds)
            restore_restarts.add(restarts)
        ms = lambda s: f"{1000 * s:.0f}"  # noqa: E731
        return {
            "line": line,
            "no-op median ms": ms(statistics.median(noop)),
            "no-op p95 ms": ms(p95(noop)),
            "no-op restarts": str(noop_restarts),
            "change median ms": ms(statistics.median(change)),
            "restarts/change": ",".join(map(str, sorted(change_restarts))),
            "CRI ready ms": ms(statistics.median(ready)),
            "restore median ms": ms(statistics.median(restore)),
            "restarts/restore": ",".join(map(str, sorted(restore_restarts))),
        }
    finally:
        if node is not None:
            node.close()
        oracle.unmount_under(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=5, help="change/no-op/restore cycles")
    parser.add_argument("--noops", type=int, default=10, help="no-op applies per cycle")
    parser.add_argument("--shell", default=shutil.which("dash") or "/bin/sh",
                        help="shell that runs the agent (a path, or busybox)")
    args = parser.parse_args()
    rows = []
    for line in oracle.LINES:
        try:
            rows.append(bench_line(line, args.cycles, args.noops, args.shell))
        except BaseException as exc:  # pytest.skip from the harness is a BaseException
            if isinstance(exc, SystemExit | KeyboardInterrupt):
                raise
            print(f"containerd {line}: skipped ({exc})", file=sys.stderr)
    if not rows:
        raise SystemExit("no containerd line could be benchmarked")
    print(f"node agent, kubeadm host-toolkit plan, {args.cycles} cycles x "
          f"{args.noops} no-ops, shell {args.shell}")
    headers = list(rows[0])
    widths = [max(len(h), *(len(r[h]) for r in rows)) for h in headers]
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))
    for row in rows:
        print("  ".join(row[h].rjust(w) for h, w in zip(headers, widths, strict=True)))


if __name__ == "__main__":
    main()
