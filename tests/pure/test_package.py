"""The installed package: one import name (`gpuplane`), no import cycles, a lean CLI start,
and a `GpuCluster` that composes into a user's own Pulumi program."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from support import wheel as wheel_build

import gpuplane

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "components" / "gpuplane"   # src layout: components/ is the source root
PACKAGE = "gpuplane"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SOURCE).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in SOURCE.rglob("*.py") if "data" not in p.parts}


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Every gpuplane module `path` imports, at module level or inside a function (a lazy
    import still makes a cycle); imports only a type checker sees are left out."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if _type_checking_only(node):
            skip.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        found.update(t for t in targets if t in known and t != name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(path, name, known) for name, path in modules.items()}


def test_the_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 50, "the graph must cover the whole package"
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def test_the_cycle_check_sees_a_lazy_import_cycle(tmp_path: Path) -> None:
    """The checker itself: a function-level import that closes a loop is a cycle."""
    graph = import_graph()
    graph["gpuplane.rules.toolkit"] = {*graph["gpuplane.rules.toolkit"], "gpuplane.plan.node"}
    with pytest.raises(graphlib.CycleError):
        tuple(graphlib.TopologicalSorter(graph).static_order())


def test_the_rulebook_sits_below_the_planner_and_the_components() -> None:
    graph = import_graph()
    below = {m for m in graph if m.startswith("gpuplane.rules")}
    reach: set[str] = set()
    todo = list(below)
    while todo:
        for dep in graph[todo.pop()]:
            if dep not in reach:
                reach.add(dep)
                todo.append(dep)
    above = {"gpuplane.plan.node", "gpuplane.config", "gpuplane.cli.main"}
    assert not reach & above
    assert not {m for m in reach if m.startswith("gpuplane.config.")}   # its modules too
    assert not {m for m in reach if m.startswith(("gpuplane.stack", "gpuplane.cli.plan."))}


def test_every_package_folder_is_in_the_distribution() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["packages"]["find"]["where"] == ["components"]
    import setuptools

    found = set(setuptools.find_packages(str(ROOT / "components")))
    folders = {_module_name(p) for p in SOURCE.rglob("__init__.py")}
    assert folders <= found


def test_the_public_api_is_curated_and_every_name_resolves() -> None:
    assert sorted(gpuplane.__all__) == sorted(gpuplane._LAZY)
    for name in gpuplane.__all__:
        assert getattr(gpuplane, name) is not None, name
    with pytest.raises(AttributeError):
        _ = gpuplane.no_such_name


def test_the_cli_start_imports_nothing_heavy() -> None:
    """`gpuplane --help` and `explain` must not import the Pulumi SDK, pydantic or the
    Kubernetes client (start-up figures: benchmarks/cli_start.py)."""
    code = ("import sys, contextlib, io\n"
            "from gpuplane.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()): main(['explain', 'FM02'])\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
            "{'pulumi', 'pulumi_kubernetes', 'pulumi_command', 'pydantic', 'kubernetes', "
            "'grpc'})\n"
            "print(','.join(heavy))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    assert done.stdout.strip() == ""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The wheel pip builds from a copy of the source as a developer's checkout has it:
    byte-compiled (`__pycache__` folders everywhere, also below `data/`). Returns the
    wheel and everything pip and setuptools printed while building it."""
    return wheel_build.build(tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="module")
def wheel(built: tuple[Path, str]) -> Path:
    return built[0]


def test_building_the_wheel_prints_no_warning(built: tuple[Path, str]) -> None:
    """setuptools warns about every folder below a package it was not told about (data
    folders, `__pycache__`); the packaging config declares data so that it has none."""
    warnings = [line for line in built[1].splitlines() if "warning" in line.lower()]
    assert warnings == []


def test_the_wheel_ships_exactly_the_data_folder(wheel: Path) -> None:
    """Every file under `gpuplane/data/` (git's `.keep` placeholders aside), and no
    bytecode anywhere: a wheel must not carry the builder's `__pycache__`."""
    names = set(zipfile.ZipFile(wheel).namelist())
    data = {f"{PACKAGE}/{p.relative_to(SOURCE).as_posix()}"
            for p in (SOURCE / "data").rglob("*")
            if p.is_file() and p.name != ".keep" and "__pycache__" not in p.parts}
    assert data and {n for n in names if n.startswith(f"{PACKAGE}/data/")} == data
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_wheel_installs_gpuplane_and_no_components_package(wheel: Path,
                                                               tmp_path: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {PACKAGE, wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1]
                    + ".dist-info"}
    assert f"{PACKAGE}/data/node-agent.sh" in names
    assert f"{PACKAGE}/data/doctor/inspect_node.py" in names
    entry = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "gpuplane = gpuplane.cli.main:entry" in entry
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    # From the unpacked wheel (first on sys.path, outside the checkout): gpuplane imports
    # and finds its data; `components` does not exist.
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "import gpuplane, gpuplane.agent.script\n"
            "assert gpuplane.__file__.startswith(sys.argv[1]), gpuplane.__file__\n"
            "assert gpuplane.agent.script.agent_source().startswith('#!')\n"
            "try:\n    import components\n"
            "except ModuleNotFoundError:\n    print('no components')\n")
    done = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "no components"


def test_the_wheel_ships_the_policy_pack_ready_to_run_and_publish(wheel: Path,
                                                                  tmp_path: Path) -> None:
    """The CrossGuard pack is in the package (#40): `gpuplane policy-pack path` prints its
    directory inside the installed package, outside any checkout; it names no
    checkout-relative virtualenv (it runs with the Python gpuplane is installed in) and its
    requirements name gpuplane at this version, for `pulumi policy publish`."""
    import yaml

    names = set(zipfile.ZipFile(wheel).namelist())
    pack = f"{PACKAGE}/data/policypack"
    assert {f"{pack}/PulumiPolicy.yaml", f"{pack}/__main__.py", f"{pack}/requirements.txt",
            f"{pack}/policy-config.example.json"} <= names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "from gpuplane.cli.main import main\n"
            "sys.exit(main(['policy-pack', 'path']))\n")
    done = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    where = Path(done.stdout.strip())
    assert where == site / pack
    spec = yaml.safe_load((where / "PulumiPolicy.yaml").read_text())
    assert spec["runtime"] == "python"     # no options: no virtualenv of a checkout
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert spec["version"] == version
    requirements = (where / "requirements.txt").read_text().split()
    assert f"gpuplane=={version}" in requirements
    assert any(r.startswith("pulumi-policy") for r in requirements)


def test_the_checkouts_policies_folder_is_the_packaged_pack() -> None:
    """One source: `policies/` (the layout users asked for) is the packaged pack."""
    from gpuplane.policy.location import pack_dir

    assert (ROOT / "policies").resolve() == pack_dir()
    assert (pack_dir() / "PulumiPolicy.yaml").is_file()
