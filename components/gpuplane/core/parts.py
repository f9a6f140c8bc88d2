"""Programs that ship to nodes as one file are kept in parts and joined here.

A node gets each of these programs as one self-contained file (uploaded, installed by its
sha256, passed inline to `python3 -c`), but 500-line files and longer are hard to read and
review (issue #38). The source of each is therefore a folder of parts, joined in name
order byte for byte into the one file that ships:

* the node agent (`data/agent/` → `data/node-agent.sh`, POSIX sh): the parts are
  `NN-name.sh`; its awk programs are `name.awk` files, each placed where a part has the
  line `#include name.awk` (inside a single-quoted shell string, so an awk file may hold
  no `'`; awk spells it `\\047`). An awk program is a file of its own so that tests can
  run it alone on real `containerd config dump` output.
* the doctor's node inspector (`data/doctor/inspect/` → `data/doctor/inspect_node.py`,
  standard-library Python): the parts are `NN-name.py`, each made of whole top-level
  statements. The first part is the program's head (shebang, docstring, imports,
  constants); every later part opens with a docstring of its own that says why the part
  exists, followed by one blank line: the join leaves both out and puts two blank lines
  between parts, so the joined program reads as one module. A part alone is not a module
  (it uses the names the parts before it define), so ruff and mypy check the joined file
  and skip the parts (pyproject.toml); the join parses every part.

The joined files are checked in (the package reads them, and a diff of a change shows
what nodes will run); `tests/pure/test_agent_parts.py` and `tests/pure/test_inspect_parts.py`
fail when one is not the join of its parts. After editing a part, regenerate them:

    python -m gpuplane.core.parts          # rewrite every joined file that is stale
    python -m gpuplane.core.parts --check  # exit 1 when one is stale
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).parent.parent / "data"


class PartsError(ValueError):
    """The parts cannot be joined into a program (a missing or malformed include, a part
    that is not whole Python statements or lacks its docstring)."""


@dataclass(frozen=True)
class Program:
    """One program that ships as a single file joined from a folder of parts."""

    name: str
    """What it is, for messages."""
    folder: Path
    """The source: the parts (`NN-name<suffix>`) and any files they include."""
    output: Path
    """The joined program, the one file that ships (generated: do not edit)."""
    suffix: str
    """The parts' file suffix: `.sh`, `.py`."""
    include: str | None = None
    """The suffix of the files a part may include with a line `#include name<suffix>`
    (each lands inside a single-quoted sh string), or None."""
    python: bool = False
    """Python parts: each must parse; a part after the first opens with a docstring and a
    blank line the join leaves out, and parts are joined with two blank lines between."""

    def parts(self) -> list[Path]:
        """The parts, in the order they are joined."""
        pattern = re.compile(r"^[0-9]{2}-[a-z0-9-]+" + re.escape(self.suffix) + "$")
        return sorted(p for p in self.folder.iterdir() if pattern.match(p.name))

    def join(self) -> str:
        """The program: the parts in order, each `#include X` line replaced by the text of
        X; for Python, each later part without its docstring, two blank lines between."""
        out: list[str] = []
        used: set[str] = set()
        for index, part in enumerate(self.parts()):
            text = part.read_text(encoding="utf-8")
            if not text.endswith("\n"):
                raise PartsError(f"{part.name} must end with a newline")
            if self.python:
                text = _python_part(part.name, text, first=index == 0)
                if index:
                    out.append("\n\n")
            for line in text.splitlines(keepends=True):
                include = self._include(line)
                if include:
                    used.add(include)
                    out.append(self._included(include, part.name))
                else:
                    out.append(line)
        if self.include:
            unused = sorted({p.name for p in self.folder.glob(f"*{self.include}")} - used)
            if unused:
                raise PartsError(f"{self.include[1:]} programs no part includes: "
                                 f"{', '.join(unused)}")
        return "".join(out)

    def _include(self, line: str) -> str | None:
        if not self.include:
            return None
        match = re.match(r"^#include ([a-z0-9_-]+" + re.escape(self.include) + r")$",
                         line.rstrip("\n"))
        return match[1] if match else None

    def _included(self, name: str, part: str) -> str:
        path = self.folder / name
        if not path.is_file():
            raise PartsError(f"{part}: #include {name}: no such file in {self.folder}")
        text = path.read_text(encoding="utf-8")
        if "'" in text:
            raise PartsError(f"{name} holds a ' (it sits in a single-quoted sh string: "
                             "write \\047)")
        if not text.endswith("\n"):
            raise PartsError(f"{name} must end with a newline")
        return text

    def stale(self) -> bool:
        """Whether the checked-in file is not the join of the parts."""
        current = self.output.read_text(encoding="utf-8") if self.output.exists() else None
        return current != self.join()


def _python_part(name: str, text: str, *, first: bool) -> str:
    """A Python part as it goes into the join: whole statements, and for a part after the
    first, without the docstring that opens it and the blank line after that."""
    try:
        body = ast.parse(text, filename=name).body
    except SyntaxError as exc:
        raise PartsError(f"{name} is not whole Python statements: {exc}") from exc
    if first:
        return text
    opening = body[0] if body else None
    if not (isinstance(opening, ast.Expr) and isinstance(opening.value, ast.Constant)
            and isinstance(opening.value.value, str) and opening.lineno == 1):
        raise PartsError(f"{name} must open with a docstring that says why the part exists")
    lines = text.splitlines(keepends=True)
    end = opening.end_lineno or 1
    if end >= len(lines) or lines[end] != "\n" or end + 1 >= len(lines):
        raise PartsError(f"{name}: its docstring must be followed by one blank line and "
                         "the part's code")
    return "".join(lines[end + 1:])


AGENT = Program("the node agent", DATA / "agent", DATA / "node-agent.sh", ".sh",
                include=".awk")
INSPECTOR = Program("the doctor's node inspector", DATA / "doctor" / "inspect",
                    DATA / "doctor" / "inspect_node.py", ".py", python=True)
PROGRAMS = (AGENT, INSPECTOR)


def main(argv: list[str] | None = None, programs: tuple[Program, ...] = PROGRAMS) -> int:
    """Write each joined program that is stale, or with `--check` only say which are
    (exit 1 when one is)."""
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print("usage: python -m gpuplane.core.parts [--check]", file=sys.stderr)
        return 2
    stale = False
    for program in programs:
        if not program.stale():
            continue
        if args == ["--check"]:
            print(f"{program.output} is not the join of {program.folder}/: run "
                  "`python -m gpuplane.core.parts`", file=sys.stderr)
            stale = True
        else:
            program.output.write_text(program.join(), encoding="utf-8")
            print(f"wrote {program.output}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
