"""The node agent is kept in parts and shipped as one script.

A node gets one self-contained POSIX sh file (`data/node-agent.sh`: it is uploaded as a
file, installed by its sha256 and embedded in stdin programs), but 2,000 lines of sh in
one file are hard to read and review. Its source is therefore the folder `data/agent/`:

* `NN-name.sh`, joined in name order, byte for byte;
* `name.awk`, the awk programs, each placed where a `.sh` part has the line
  `#include name.awk` (inside a single-quoted shell string, so an awk file may hold no
  `'`; awk spells it `\\047`). An awk program is a file of its own so that tests can run
  it alone on real `containerd config dump` output.

The joined script is checked in (the package reads it, and a diff of a change shows what
nodes will run); `tests/pure/test_agent_parts.py` fails when it is not the join of the parts.
After editing a part, regenerate it:

    python -m gpuplane.agent.parts          # rewrite data/node-agent.sh
    python -m gpuplane.agent.parts --check  # exit 1 when it is stale
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DATA = Path(__file__).parent.parent / "data"
PARTS_DIR = DATA / "agent"
"""The agent's source: the `.sh` parts and the `.awk` programs they include."""

SCRIPT = DATA / "node-agent.sh"
"""The joined agent, the one file that ships to nodes (generated: do not edit)."""

_PART = re.compile(r"^[0-9]{2}-[a-z0-9-]+\.sh$")
_INCLUDE = re.compile(r"^#include ([a-z0-9_-]+\.awk)$")


class PartsError(ValueError):
    """The parts cannot be joined into a script (a missing or malformed include)."""


def parts(folder: Path = PARTS_DIR) -> list[Path]:
    """The `.sh` parts, in the order they are joined."""
    return sorted(p for p in folder.iterdir() if _PART.match(p.name))


def _awk(folder: Path, name: str, part: str) -> str:
    path = folder / name
    if not path.is_file():
        raise PartsError(f"{part}: #include {name}: no such file in {folder}")
    text = path.read_text(encoding="utf-8")
    if "'" in text:
        raise PartsError(f"{name} holds a ' (it sits in a single-quoted sh string: "
                         "write \\047)")
    if not text.endswith("\n"):
        raise PartsError(f"{name} must end with a newline")
    return text


def join(folder: Path = PARTS_DIR) -> str:
    """The agent script: the parts in order, each `#include X.awk` line replaced by the
    text of X.awk."""
    out: list[str] = []
    used: set[str] = set()
    for part in parts(folder):
        text = part.read_text(encoding="utf-8")
        if not text.endswith("\n"):
            raise PartsError(f"{part.name} must end with a newline")
        for line in text.splitlines(keepends=True):
            include = _INCLUDE.match(line.rstrip("\n"))
            if include:
                used.add(include[1])
                out.append(_awk(folder, include[1], part.name))
            else:
                out.append(line)
    unused = sorted({p.name for p in folder.glob("*.awk")} - used)
    if unused:
        raise PartsError(f"awk programs no part includes: {', '.join(unused)}")
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    """Write the joined agent to `data/node-agent.sh`, or with `--check` only say whether
    it is current (exit 1 when not)."""
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print("usage: python -m gpuplane.agent.parts [--check]", file=sys.stderr)
        return 2
    text = join()
    current = SCRIPT.read_text(encoding="utf-8") if SCRIPT.exists() else None
    if args == ["--check"]:
        if current != text:
            print(f"{SCRIPT} is not the join of {PARTS_DIR}/: run "
                  "`python -m gpuplane.agent.parts`", file=sys.stderr)
            return 1
        return 0
    if current != text:
        SCRIPT.write_text(text, encoding="utf-8")
        print(f"wrote {SCRIPT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
