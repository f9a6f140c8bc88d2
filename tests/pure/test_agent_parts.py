"""The node agent's source is in parts (components/gpuplane/data/agent/); nodes get one
script, the parts' join, checked in as data/node-agent.sh. These tests hold that file to
the join byte for byte, so a part edited without regenerating it fails here instead of
shipping a script nobody reviewed."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from gpuplane.agent import parts as agent_parts
from gpuplane.agent.parts import PARTS_DIR, SCRIPT, PartsError, join
from gpuplane.agent.script import agent_digest, agent_script_path, agent_source
from gpuplane.core.parts import AGENT

MAX_LINES = 500
"""No file of the agent's source may grow past this: the reason it is in parts."""


def test_the_shipped_script_is_the_join_of_the_parts() -> None:
    joined = join()
    shipped = SCRIPT.read_text(encoding="utf-8")
    assert joined == shipped, (
        f"{SCRIPT} is not the join of {PARTS_DIR}/: a part changed without regenerating "
        "it; run `python -m gpuplane.core.parts` and review the diff of node-agent.sh")
    assert agent_parts.main(["--check"]) == 0


def test_the_package_ships_the_joined_script() -> None:
    assert agent_script_path() == SCRIPT
    assert agent_source() == join()
    assert agent_digest() == hashlib.sha256(join().encode()).hexdigest()


def test_every_part_is_short_and_the_script_starts_and_ends_as_a_script() -> None:
    names = [p.name for p in agent_parts.parts()]
    assert names[0] == "10-head.sh" and names[-1] == "99-main.sh", names
    for path in [*agent_parts.parts(), *PARTS_DIR.glob("*.awk")]:
        lines = path.read_text(encoding="utf-8").count("\n")
        assert lines <= MAX_LINES, f"{path.name} has {lines} lines"
    text = join()
    assert text.startswith("#!/bin/sh\n")
    assert "#include " not in text
    # every part's own text is in the script, in order
    at = 0
    for path in agent_parts.parts():
        first = path.read_text(encoding="utf-8").splitlines(keepends=True)[0]
        at = text.index(first, at)


def test_an_awk_program_is_included_verbatim_in_a_quoted_string() -> None:
    text = join()
    for awk in sorted(PARTS_DIR.glob("*.awk")):
        program = awk.read_text(encoding="utf-8")
        assert f"='\n{program}'\n" in text, awk.name


def _parts(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_join_order_and_includes(tmp_path: Path) -> None:
    folder = _parts(tmp_path, {
        "20-b.sh": "B='\n#include prog.awk\n'\n",
        "10-a.sh": "#!/bin/sh\n",
        "notes.txt": "not a part\n",
        "prog.awk": "{ print \\047x\\047 }\n",
    })
    assert join(folder) == "#!/bin/sh\nB='\n{ print \\047x\\047 }\n'\n"


@pytest.mark.parametrize(("files", "message"), [
    ({"10-a.sh": "A='\n#include gone.awk\n'\n"}, "no such file"),
    ({"10-a.sh": "A='\n#include q.awk\n'\n", "q.awk": "{ print 'x' }\n"}, "holds a '"),
    ({"10-a.sh": "A='\n#include n.awk\n'\n", "n.awk": "{ print }"}, "end with a newline"),
    ({"10-a.sh": ":\n", "stray.awk": "{ print }\n"}, "no part includes: stray.awk"),
    ({"10-a.sh": ":"}, "10-a.sh must end with a newline"),
])
def test_join_refuses_what_would_break_the_script(
        tmp_path: Path, files: dict[str, str], message: str) -> None:
    with pytest.raises(PartsError, match=message):
        join(_parts(tmp_path, files))


def test_regenerate_writes_the_join_and_check_reports_a_stale_script(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "node-agent.sh"
    programs = (replace(AGENT, output=script),)
    assert agent_parts.main(["--check"], programs) == 1
    assert "python -m gpuplane.core.parts" in capsys.readouterr().err
    assert agent_parts.main([], programs) == 0
    assert script.read_text(encoding="utf-8") == join()
    assert agent_parts.main(["--check"], programs) == 0
    assert agent_parts.main(["--bogus"], programs) == 2
