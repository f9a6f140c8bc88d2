"""The package's layers hold: a module imports only from its own layer or the layers
below it, lazy imports inside functions included (issue #38). Lowest first:

core (records, console, Pod Security), probe, containerd, kube (cluster client) →
toolkit, distros → platforms (profiles, detection) → rules → plan (the node planner),
platforms.native (the platforms' own inputs) → config → policy, agent → stack, checks,
doctor, capture → cli and the package root (the public API).

docs/architecture.md draws the same picture and says where a new distribution,
platform, rule or command goes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "components" / "gpuplane"
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core", "probe", "containerd", "kube"),
    ("toolkit", "distros"),
    ("platforms", "platforms.profiles", "platforms.detect"),
    ("rules",),
    ("plan", "platforms.native"),
    ("config",),
    ("policy", "agent"),
    ("stack", "checks", "doctor", "capture"),
    ("cli", ""),
)


def layer_of(module: str) -> int:
    """The layer of `gpuplane.<module>`: its longest listed prefix."""
    best, found = -1, -1
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(f"{name}.") or name == "") and \
                    len(name) > best:
                best, found = len(name), index
    return found


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[0] == "data":
            continue   # programs run on nodes, not package modules
        name = ".".join(p for p in parts if p != "__init__")
        out[name] = path
    return out


def imports(path: Path) -> set[str]:
    """Every gpuplane module `path` imports, at any depth (lazy imports too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "gpuplane":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("gpuplane."):
                found.add(node.module.removeprefix("gpuplane."))
        elif isinstance(node, ast.Import):
            found.update(a.name.removeprefix("gpuplane.") for a in node.names
                         if a.name.startswith("gpuplane."))
    return found


def test_every_module_has_a_layer() -> None:
    assert [m for m in modules() if m and layer_of(m) < 0] == []


@pytest.mark.parametrize("module", sorted(m for m in modules() if m))
def test_a_module_imports_only_its_layer_and_below(module: str) -> None:
    mine = layer_of(module)
    upward = sorted(f"{target} (layer {layer_of(target)})"
                    for target in imports(modules()[module]) if layer_of(target) > mine)
    assert upward == [], f"{module} (layer {mine}) imports from above: {upward}"


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a rules module importing the stack is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from gpuplane.stack.cluster import GpuCluster\n")
    assert imports(bad) == {"stack.cluster"}
    assert layer_of("stack.cluster") > layer_of("rules.hami")


# Programs that ship to a node or a pod as one standard-library file: the CUDA probe, and
# the doctor's inspector as joined from its parts (data/doctor/inspect/, each under 500).
ONE_FILE_PROGRAMS = {"probe/cuda_probe.py", "data/doctor/inspect_node.py"}


def test_no_module_outside_the_cli_passes_500_lines() -> None:
    """A module that grows past 500 lines is split by concept (docs/architecture.md)."""
    long = {str(path.relative_to(PACKAGE)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text().splitlines())) > 500}
    assert {p: n for p, n in long.items()
            if not p.startswith("cli/") and p not in ONE_FILE_PROGRAMS} == {}
