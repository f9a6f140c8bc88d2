"""Post-deploy CUDA probe.

``cuda_probe.py`` next to this file is a standalone, standard-library-only script: gpuplane
puts its text (:func:`probe_source`) into a ConfigMap and runs it with a plain ``python`` image
on GPU nodes, where it loads the injected ``libcuda.so.1``, runs a verified vector-add kernel
on every visible GPU and prints a JSON report.  Its module docstring holds the output and
exit-code contract (0 pass, 1 GPU present but wrong, 2 no driver or no device, 3 usage).

This package only locates the script and runs it locally (``gpuplane probe``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

PROBE_FILENAME = "cuda_probe.py"
PROBE_PATH = Path(__file__).resolve().with_name(PROBE_FILENAME)

__all__ = ["PROBE_FILENAME", "PROBE_PATH", "main", "probe_source"]


def probe_source() -> str:
    """The probe script's text, e.g. for a ConfigMap's ``data``."""
    return PROBE_PATH.read_text(encoding="utf-8")


def main(argv: Sequence[str] | None = None, *, in_process: bool = False) -> int:
    """Run the probe with ``argv`` (its own options, see ``cuda_probe.py --help``).

    By default it runs as a child process of the current interpreter, so a crash inside the
    driver library cannot take the caller down and every run starts with a fresh CUDA state;
    the child writes straight to this process's stdout/stderr.  ``in_process=True`` imports
    and calls the probe here instead.  Returns the probe's exit code; a child killed by a
    signal counts as a failure (1).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if in_process:
        from gpuplane.probe import cuda_probe

        return cuda_probe.main(args)
    sys.stdout.flush()
    sys.stderr.flush()
    # The child's usage and errors name the command the user typed, not the script file.
    env = {**os.environ, "GPUPLANE_PROBE_PROG": "gpuplane probe"}
    code = subprocess.call([sys.executable, str(PROBE_PATH), *args], env=env)
    if code < 0:
        print(f"cuda probe killed by signal {-code}", file=sys.stderr)
        return 1
    return code
