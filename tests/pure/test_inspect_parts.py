"""The doctor's node inspector is kept in parts (components/gpuplane/data/doctor/inspect/)
and ships as one standard-library Python file, their join, checked in as
data/doctor/inspect_node.py (issue #38: no module over 500 lines). These tests hold that
file to the join byte for byte, so a part edited without regenerating it fails here
instead of shipping a program nobody reviewed; ruff and mypy check the joined file."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpuplane.core import parts as core_parts
from gpuplane.core.parts import INSPECTOR, PROGRAMS, PartsError, Program
from gpuplane.doctor.inspect import PROGRAM_PATH, program_source

MAX_LINES = 500
"""No part of the inspector may grow past this: the reason it is in parts."""


def test_the_shipped_inspector_is_the_join_of_the_parts() -> None:
    shipped = INSPECTOR.output.read_text(encoding="utf-8")
    assert INSPECTOR.join() == shipped, (
        f"{INSPECTOR.output} is not the join of {INSPECTOR.folder}/: a part changed "
        "without regenerating it; run `python -m gpuplane.core.parts` and review the diff "
        "of inspect_node.py")
    assert core_parts.main(["--check"], (INSPECTOR,)) == 0


def test_the_doctor_ships_the_joined_inspector() -> None:
    assert INSPECTOR in PROGRAMS
    assert INSPECTOR.output.resolve() == PROGRAM_PATH
    assert program_source() == INSPECTOR.join()


def test_every_part_is_short_whole_statements_and_says_why_it_exists() -> None:
    paths = INSPECTOR.parts()
    names = [p.name for p in paths]
    assert names[0] == "10-head.py" and names[-1] == "60-main.py", names
    assert len(names) >= 4, names
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert text.count("\n") <= MAX_LINES, f"{path.name} has {text.count(chr(10))} lines"
        docstring = ast.get_docstring(ast.parse(text))
        assert docstring and len(docstring) > 40, f"{path.name} says not why it exists"
    joined = INSPECTOR.join()
    assert joined.startswith("#!/usr/bin/env python3\n")
    assert joined.endswith('if __name__ == "__main__":\n    sys.exit(main())\n')
    # every part's code is in the program, in order, and its own docstring is not
    at = 0
    for path in paths[1:]:
        text = path.read_text(encoding="utf-8")
        docstring = ast.get_docstring(ast.parse(text), clean=False)
        assert docstring and docstring not in joined, path.name
        body = text.split('"""\n\n', 1)[1]
        at = joined.index("\n\n\n" + body, at)
    ast.parse(joined)


def test_the_joined_inspector_runs(tmp_path: Path) -> None:
    """The shipped file is a working program (a sandbox root and an empty /proc)."""
    (tmp_path / "proc").mkdir()
    done = subprocess.run(
        [sys.executable, str(INSPECTOR.output), "--root", str(tmp_path), "--proc",
         str(tmp_path / "proc"), "--no-cri-probe"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert '"format": 1' in done.stdout and "no kubelet process found" in done.stdout


def _program(tmp_path: Path, files: dict[str, str]) -> Program:
    folder = tmp_path / "parts"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return replace(INSPECTOR, folder=folder, output=tmp_path / "joined.py")


def test_join_drops_later_docstrings_and_puts_two_blank_lines_between(
        tmp_path: Path) -> None:
    program = _program(tmp_path, {
        "20-b.py": '"""Why b exists,\nover two lines."""\n\ndef b() -> int:\n    return 1\n',
        "10-a.py": '"""The program."""\n\nimport os\n',
        "notes.txt": "not a part\n",
        "30-c.sh": "not a part either\n",
    })
    assert program.join() == (
        '"""The program."""\n\nimport os\n\n\ndef b() -> int:\n    return 1\n')


@pytest.mark.parametrize(("files", "message"), [
    ({"10-a.py": "x = 1\n", "20-b.py": "def b() -> None:\n    pass\n"}, "open with a docstring"),
    ({"10-a.py": "x = 1\n", "20-b.py": 'x = 2\n"""late"""\n'}, "open with a docstring"),
    ({"10-a.py": "x = 1\n", "20-b.py": '"""Why."""\nx = 2\n'}, "one blank line"),
    ({"10-a.py": "x = 1\n", "20-b.py": '"""Why."""\n'}, "one blank line"),
    ({"10-a.py": "def a():\n", "20-b.py": '"""Why."""\n\n    return 1\n'},
     "10-a.py is not whole Python statements"),
    ({"10-a.py": "x = 1"}, "10-a.py must end with a newline"),
])
def test_join_refuses_parts_that_would_break_the_program(
        tmp_path: Path, files: dict[str, str], message: str) -> None:
    with pytest.raises(PartsError, match=message):
        _program(tmp_path, files).join()


def test_regenerate_writes_the_join_and_check_reports_a_stale_inspector(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = replace(INSPECTOR, output=tmp_path / "inspect_node.py")
    assert core_parts.main(["--check"], (program,)) == 1
    assert "python -m gpuplane.core.parts" in capsys.readouterr().err
    assert core_parts.main([], (program,)) == 0
    assert program.output.read_bytes() == INSPECTOR.output.read_bytes()
    assert core_parts.main(["--check"], (program,)) == 0
    program.output.write_text(program.output.read_text() + "# edited by hand\n")
    assert core_parts.main(["--check"], (program,)) == 1


@pytest.mark.parametrize("module", ["gpuplane.core.parts", "gpuplane.agent.parts"])
def test_the_command_checks_every_joined_program(module: str) -> None:
    """Both names run the one joiner (the agent's script names gpuplane.agent.parts)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", module, "--check"], capture_output=True,
                          text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0, done.stderr
