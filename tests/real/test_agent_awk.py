"""The node agent's TOML reader (components/gpuplane/data/agent/facts.awk) against real
`containerd config dump` output.

A node has no TOML parser, so the agent reads the dump with 80 lines of awk: the default
runtime, enable_cdi and each runtime's type, BinaryName and SystemdCgroup. Everything the
agent decides (does the merged config keep runc, is nvidia the default) rests on that
reader, so it is held to Python's `tomllib` on the same bytes:

* live: configs are dumped by each containerd line's real binary at test time and read
  by both (skipped without the binaries, failing under GPUPLANE_REQUIRE_REAL=1, like the
  other real tests: `oracle.binary`);
* golden: dumps checked in under tests/data/agent-awk/ (`<line>-<case>.toml`, made by
  the real binaries from the CASES below, with `<line>-<case>.facts`, what the reader
  prints), which run everywhere. `PYTHONPATH=tests python tests/real/test_agent_awk.py`
  regenerates them from
  the binaries in the cache.

Each awk a node may have runs it: mawk (Debian, Ubuntu), busybox awk and gawk, where
installed here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import oracle

from gpuplane.agent.parts import PARTS_DIR

FACTS_AWK = PARTS_DIR / "facts.awk"
JSTR_AWK = PARTS_DIR / "jstr.awk"
GOLDEN = Path(__file__).parents[1] / "data" / "agent-awk"
CRI_KEYS = ("io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime")


def _awks() -> list[Any]:
    found = {"awk": ["awk"], "mawk": ["mawk"], "gawk": ["gawk"], "busybox": ["busybox", "awk"]}
    params = []
    for name, argv in found.items():
        have = shutil.which(argv[0]) is not None
        if have and name == "busybox":
            have = subprocess.run([*argv, "BEGIN {}"], capture_output=True,
                                  check=False).returncode == 0
        # Missing: skipped locally; under GPUPLANE_REQUIRE_REAL the test runs and fails in
        # `_need` (scripts/fetch-containerd.sh installs gawk; mawk and busybox come with it).
        marks = [] if have or oracle.require_real() else \
            [pytest.mark.skip(reason=f"{name} is not installed here")]
        params.append(pytest.param(argv, id=name, marks=marks))
    return params


AWKS = _awks()


def _need(awk: list[str]) -> None:
    if shutil.which(awk[0]) is None:
        oracle.unavailable(f"{awk[0]} is not installed here",
                           "sh scripts/fetch-containerd.sh installs it")


def awk_facts(awk: list[str], dump: Path) -> str:
    """What the agent's gp_dump_host records: `awk "$GP_AWK_FACTS" DUMP`."""
    _need(awk)
    proc = subprocess.run([*awk, FACTS_AWK.read_text(encoding="utf-8"), str(dump)],
                          capture_output=True, text=True, check=False, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _toml_word(value: Any) -> str:
    """A scalar as the reader prints it: strings unquoted, booleans as TOML spells them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def tomllib_facts(text: str) -> str:
    """The reader's output, computed from tomllib's reading of the same dump: the CRI
    tables in document order, a later value replacing an earlier one, runtimes in the
    order they first appear."""
    data = tomllib.loads(text)
    default, cdi = "", ""
    runtimes: dict[str, dict[str, Any]] = {}
    for key, table in data.get("plugins", {}).items():
        if key not in CRI_KEYS:
            continue
        if "enable_cdi" in table:
            cdi = _toml_word(table["enable_cdi"])
        containerd = table.get("containerd", {})
        if "default_runtime_name" in containerd:
            default = _toml_word(containerd["default_runtime_name"])
        for name, runtime in containerd.get("runtimes", {}).items():
            facts = runtimes.setdefault(name, {})
            options = runtime.get("options", {})
            for fact, value in (("type", runtime.get("runtime_type")),
                                ("bin", options.get("BinaryName")),
                                ("sys", options.get("SystemdCgroup"))):
                if value is not None:
                    facts[fact] = _toml_word(value)
    lines = [f"default\t{default}"]
    if cdi:
        lines.append(f"cdi\t{cdi}")
    lines += ["\t".join(["runtime", name, f.get("type", ""), f.get("bin", ""), f.get("sys", "")])
              for name, f in runtimes.items()]
    return "".join(line + "\n" for line in lines)


# --------------------------------------------------------------------------------------
# The configs dumped: what gpuplane writes, and keys and values that need quoting


def _runtimes(key: str, version: int, body: str) -> str:
    return f"version = {version}\n" + body.replace("CRI", f'plugins."{key}"')


def _default(key: str, version: int) -> str:
    return f"version = {version}\n"


def _nvidia(key: str, version: int) -> str:
    return _runtimes(key, version, """
[CRI]
  enable_cdi = true
[CRI.containerd]
  default_runtime_name = "nvidia"
[CRI.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[CRI.containerd.runtimes.runc.options]
  SystemdCgroup = true
[CRI.containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
[CRI.containerd.runtimes.nvidia.options]
  BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
  SystemdCgroup = true
[CRI.containerd.runtimes.nvidia-cdi]
  runtime_type = "io.containerd.runc.v2"
[CRI.containerd.runtimes.nvidia-cdi.options]
  BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi"
""")


def _quoted(key: str, version: int) -> str:
    # Names with dots and blanks are quoted keys in the dump; a BinaryName with quotes,
    # backslashes, `=` and non-ASCII text comes back as an escaped basic string.
    return _runtimes(key, version, r"""
[CRI]
  enable_cdi = false
[CRI.containerd]
  default_runtime_name = "nvidia.cdi"
[CRI.containerd.runtimes."nvidia.cdi"]
  runtime_type = "io.containerd.runc.v2"
[CRI.containerd.runtimes."nvidia.cdi".options]
  BinaryName = 'C:\odd "dir"\n\nvidia = é'
  SystemdCgroup = false
[CRI.containerd.runtimes."gpu runtime"]
  runtime_type = "io.containerd.kata.v2"
[CRI.containerd.runtimes."gpu runtime".options]
  BinaryName = "/opt/gpu runtime/bin [x] = 1"
[CRI.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
""")


CASES: dict[str, Callable[[str, int], str]] = {
    "default": _default, "nvidia": _nvidia, "quoted": _quoted}
GOLDEN_CASES = ("nvidia", "quoted")
"""The cases checked in (a few KB of dump each); the live test runs them all."""


def _config(line: str, case: str) -> str:
    """The case for `line`: a version 3 file on 2.x (its own format), version 2 on 1.x."""
    return CASES[case](oracle.cri_runtime_table_key(line), 3 if line.startswith("2.") else 2)


def _real_dump(line: str, case: str, tmp_path: Path) -> str:
    config = tmp_path / f"{case}.toml"
    config.write_text(_config(line, case), encoding="utf-8")
    result = oracle.dump(line, config)
    assert result.ok, result.error
    return result.text


# --------------------------------------------------------------------------------------
# live: the binaries in the cache


@pytest.mark.parametrize("awk", AWKS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_reader_matches_tomllib_on_real_dumps(
        containerd_line: str, case: str, awk: list[str], tmp_path: Path) -> None:
    text = _real_dump(containerd_line, case, tmp_path)
    dump = tmp_path / "dump.toml"
    dump.write_text(text, encoding="utf-8")
    expected = tomllib_facts(text)
    assert awk_facts(awk, dump) == expected
    # the reader found what the case wrote (the comparison is not two empty outputs)
    assert "runtime\trunc\tio.containerd.runc.v2\t" in expected
    if case == "quoted":
        assert ('runtime\tnvidia.cdi\tio.containerd.runc.v2\tC:\\odd "dir"\\n\\nvidia = é'
                "\tfalse\n") in expected
        assert "default\tnvidia.cdi\n" in expected
        # 1.6 drops enable_cdi (it has no such key): the reader prints no cdi line then
        assert ("cdi\tfalse\n" in expected) == (containerd_line != "1.6")


# --------------------------------------------------------------------------------------
# golden: dumps made by the real binaries, checked in


def _golden() -> list[Path]:
    return sorted(GOLDEN.glob("*.toml"))


def test_golden_set_is_there() -> None:
    names = {p.name for p in _golden()}
    assert {f"{line}-{case}.toml" for line in ("1.7", "2.1") for case in GOLDEN_CASES} <= names
    assert {p.with_suffix(".facts").name for p in _golden()} <= {p.name for p in GOLDEN.iterdir()}


@pytest.mark.parametrize("awk", AWKS)
@pytest.mark.parametrize("dump", _golden(), ids=lambda p: p.stem)
def test_reader_matches_tomllib_on_golden_dumps(awk: list[str], dump: Path) -> None:
    expected = dump.with_suffix(".facts").read_text(encoding="utf-8")
    assert tomllib_facts(dump.read_text(encoding="utf-8")) == expected
    assert awk_facts(awk, dump) == expected


# --------------------------------------------------------------------------------------
# jstr.awk: the JSON strings of the agent's results


@pytest.mark.parametrize("awk", AWKS)
def test_json_strings_read_back(awk: list[str]) -> None:
    _need(awk)
    for value in ['plain', 'a "quoted" \\ path', "tab\there", 'C:\\odd "dir"\\nvidia é',
                  "\\", '"']:
        program = JSTR_AWK.read_text(encoding="utf-8") + ' { printf "%s", jstr($0) }'
        proc = subprocess.run([*awk, program], input=value, capture_output=True, text=True,
                              check=True, timeout=30)
        assert json.loads(proc.stdout) == value, proc.stdout


def regenerate() -> None:
    """Write the golden set from the real binaries in the cache (each line present)."""
    GOLDEN.mkdir(parents=True, exist_ok=True)
    tmp = Path(subprocess.run(["mktemp", "-d"], capture_output=True, text=True,
                              check=True).stdout.strip())
    try:
        for line in oracle.LINES:
            exe = oracle.cache_dir() / "containerd" / line / "bin" / "containerd"
            if not exe.exists():
                continue
            for case in GOLDEN_CASES:
                text = _real_dump(line, case, tmp)
                (GOLDEN / f"{line}-{case}.toml").write_text(text, encoding="utf-8")
                (GOLDEN / f"{line}-{case}.facts").write_text(tomllib_facts(text),
                                                             encoding="utf-8")
                print(f"{line}-{case}", file=sys.stderr)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    regenerate()
