"""The node agent's parts and its joined script, as the agent's code names them.

A node gets one self-contained POSIX sh file (`data/node-agent.sh`), joined from its
source in `data/agent/` (`NN-name.sh` parts in name order; `name.awk` programs included
by a part's `#include name.awk` line) by the one joiner every shipped program uses,
:mod:`gpuplane.core.parts`. `tests/pure/test_agent_parts.py` fails when the script is not
the join of the parts. After editing a part, regenerate it:

    python -m gpuplane.core.parts          # (or gpuplane.agent.parts: the same command)
    python -m gpuplane.core.parts --check  # exit 1 when a joined program is stale
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from gpuplane.core.parts import AGENT, PartsError, main

PARTS_DIR = AGENT.folder
"""The agent's source: the `.sh` parts and the `.awk` programs they include."""

SCRIPT = AGENT.output
"""The joined agent, the one file that ships to nodes (generated: do not edit)."""


def parts(folder: Path = PARTS_DIR) -> list[Path]:
    """The `.sh` parts, in the order they are joined."""
    return replace(AGENT, folder=folder).parts()


def join(folder: Path = PARTS_DIR) -> str:
    """The agent script: the parts in order, each `#include X.awk` line replaced by the
    text of X.awk."""
    return replace(AGENT, folder=folder).join()


__all__ = ["PARTS_DIR", "SCRIPT", "PartsError", "join", "main", "parts"]

if __name__ == "__main__":
    sys.exit(main())
