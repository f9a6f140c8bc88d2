"""Start-up time of the `gpuplane` command: `--help` and `explain FM02`.

Each run is a fresh process of the installed console script (interpreter start, imports,
output), so the figure is what a user waits for; the median of N runs is printed, with
the slowest run, and the modules a run imports that a lean start must not.

    .venv/bin/python benchmarks/cli_start.py [RUNS]
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = (["--help"], ["explain", "FM02"])
HEAVY = ("pulumi", "pydantic", "kubernetes", "grpc")


def _script() -> str:
    here = Path(sys.executable).parent / "gpuplane"
    found = str(here) if here.exists() else shutil.which("gpuplane")
    if not found:
        sys.exit("cli_start: no `gpuplane` command; run `make venv` first")
    return found


def _heavy_imports(args: list[str]) -> list[str]:
    code = ("import sys, contextlib, io\nfrom gpuplane.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), "
            "contextlib.redirect_stderr(io.StringIO()):\n"
            f"    main({args!r})\n"
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    return [m for m in out if m.startswith(HEAVY)]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    script = _script()
    print(f"{'command':<22} {'median':>8} {'slowest':>8}  heavy imports")
    for args in COMMANDS:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run([script, *args], capture_output=True, check=False)
            times.append(time.perf_counter() - start)
        heavy = ", ".join(_heavy_imports(args)) or "none"
        print(f"gpuplane {' '.join(args):<13} {statistics.median(times):>7.3f}s "
              f"{max(times):>7.3f}s  {heavy}")


if __name__ == "__main__":
    main()
