"""The rule registry (`gpuplane.rules.registry`) is data the tests verify: every rule has
checks and tests that exist and mention it, and every place in components/ that emits a
rule id is listed, so the registry cannot go stale."""

from __future__ import annotations

import ast
import gc
import inspect
import re
import subprocess
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

from gpuplane.rules.catalogue import RULES
from gpuplane.rules.registry import REGISTRY, RuleIndex, describe, find, module_of, resolve

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "components"
RULE_ID = re.compile(r"FM\d\d$")
# The calls that build a finding: `Finding(id, ...)` and the modules' thin helpers.
EMITTERS = {"Finding", "finding", "_finding"}


def _parse(text: str) -> ast.Module:
    """`ast.parse` after a collection: a failed future an earlier Pulumi-mocks test left
    behind logs its traceback when it is collected, and CPython 3.11's traceback parses
    source lines with `ast` too. Collected in the middle of this parse, that nested parse
    unbalances the AST constructor's depth count ("SystemError: AST constructor recursion
    depth mismatch"); collected first, it cannot."""
    gc.collect()
    return ast.parse(text)


def _ids(node: ast.AST) -> set[str]:
    return {c.value for c in ast.walk(node)
            if isinstance(c, ast.Constant) and isinstance(c.value, str) and RULE_ID.match(c.value)}


def _module(path: Path) -> str:
    parts = path.relative_to(SOURCE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def emitted() -> dict[str, set[str]]:
    """rule id -> dotted names of the functions in components/ that emit it: a rule-id
    literal in the first argument of a Finding construction, or anywhere in a function
    typed `-> str` (the functions that pick the id a finding gets)."""
    found: dict[str, set[str]] = defaultdict(set)

    class Visitor(ast.NodeVisitor):
        def __init__(self, module: str) -> None:
            self.module, self.stack = module, list[str]()

        def _named(self) -> str:
            return ".".join([self.module, *self.stack])

        def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
            self.stack.append(node.name)
            if node.returns is not None and ast.unparse(node.returns) in ("str", "str | None"):
                for rule_id in _ids(node):
                    found[rule_id].add(self._named())
            self.generic_visit(node)
            self.stack.pop()

        def visit_ClassDef(self, node: ast.ClassDef) -> None:
            self.stack.append(node.name)
            self.generic_visit(node)
            self.stack.pop()

        def visit_Call(self, node: ast.Call) -> None:
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in EMITTERS and node.args and self.stack:
                for rule_id in _ids(node.args[0]):
                    found[rule_id].add(self._named())
            self.generic_visit(node)

    for path in sorted(SOURCE.rglob("*.py")):
        Visitor(_module(path)).visit(_parse(path.read_text()))
    return found


@cache
def _test_source(file: str, name: str) -> str | None:
    """The source of test `name` in `file` (with its decorators), None when missing."""
    path = ROOT / file
    if not path.is_file():
        return None
    text = path.read_text()
    tree = _parse(text)
    cls, _, func = name.rpartition("::")
    body = tree.body
    if cls:
        owner = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == cls), None)
        body = owner.body if owner else []
    for node in body:
        if isinstance(node, ast.FunctionDef) and node.name == func:
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            return "\n".join(text.splitlines()[start - 1:node.end_lineno])
    return None


def problems(index: RuleIndex) -> list[str]:
    """What is wrong with one entry (empty when nothing)."""
    out = []
    if index.id not in RULES:
        out.append(f"{index.id}: not in the catalogue")
    if not index.checks:
        out.append(f"{index.id}: no check emits it")
    if not index.tests:
        out.append(f"{index.id}: no test holds it")
    for name in index.checks:
        try:
            func = resolve(name)
        except (ImportError, AttributeError, ValueError, TypeError) as exc:
            out.append(f"{index.id}: check {name} does not exist ({exc})")
            continue
        if index.id not in inspect.getsource(func):
            out.append(f"{index.id}: check {name} never mentions {index.id}")
    for test in index.tests:
        file, sep, name = test.partition("::")
        source = _test_source(file, name) if sep else None
        if source is None:
            out.append(f"{index.id}: test {test} does not exist")
        elif index.id.lower() not in source.lower():
            out.append(f"{index.id}: test {test} never mentions {index.id}")
        elif index.id.lower() not in name.lower():
            out.append(f"{index.id}: test {test} is not named by its rule "
                       f"(test_{index.id.lower()}_...)")
    return out


def test_every_rule_of_the_catalogue_and_nothing_else_is_registered() -> None:
    assert list(REGISTRY) == sorted(RULES)
    assert all(index.id == key for key, index in REGISTRY.items())


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_each_rule_has_real_checks_and_tests_that_mention_it(rule_id: str) -> None:
    assert problems(REGISTRY[rule_id]) == []


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_every_function_that_emits_a_rule_is_registered_under_it(rule_id: str) -> None:
    """A new `Finding("FMxx", ...)` (or id picker) anywhere in components/ fails here until
    the registry lists its function under that id."""
    missing = emitted()[rule_id] - set(REGISTRY[rule_id].checks)
    assert not missing, f"add to gpuplane.rules.registry {rule_id} checks: {sorted(missing)}"


def test_no_rule_id_outside_the_catalogue_is_emitted() -> None:
    assert set(emitted()) <= set(RULES)


@pytest.mark.parametrize(("bad", "says"), [
    (RuleIndex("FM01", (), ("tests/pure/test_rules_registry.py::test_find_and_describe",)),
     "no check emits it"),
    (RuleIndex("FM01", ("gpuplane.rules.containerd.reading.fm01",), ()), "no test holds it"),
    (RuleIndex("FM01", ("gpuplane.rules.containerd.reading.no_such_check",),
               ("tests/pure/test_rules_registry.py::test_find_and_describe",)), "does not exist"),
    (RuleIndex("FM07", ("gpuplane.rules.containerd.reading.fm01",),
               ("tests/pure/test_rules_registry.py::test_find_and_describe",)),
     "never mentions FM07"),
    (RuleIndex("FM01", ("gpuplane.rules.containerd.reading.fm01",),
               ("tests/pure/test_rules_registry.py::test_no_such_test",)), "does not exist"),
    (RuleIndex("FM01", ("gpuplane.rules.containerd.reading.fm01",),
               ("tests/test_no_such_file.py::test_x",)), "does not exist"),
    (RuleIndex("FM01", ("gpuplane.rules.containerd.reading.fm01",),
               ("tests/pure/test_rules_registry.py::test_registry_import_is_pure",)),
     "never mentions FM01"),
    (RuleIndex("FM99", ("gpuplane.rules.containerd.reading.fm01",), ()), "not in the catalogue"),
    (RuleIndex("FM11", ("gpuplane.rules.workloads._runtime_class",),
               ("tests/pure/test_rules_registry.py::test_find_and_describe",)),
     "not named by its rule"),
])
def test_a_broken_entry_is_caught(bad: RuleIndex, says: str) -> None:
    """The checks above would fail on each of these."""
    assert any(says in p for p in problems(bad)), problems(bad)


def test_find_and_describe() -> None:
    fm11 = find(" fm11 ")
    assert fm11 is REGISTRY["FM11"] and fm11.rule is RULES["FM11"]
    assert [c.key for c in fm11.events][:2] == ["no-runtime", "no-runtimeclass"]
    text = describe("FM11")
    assert text.startswith("FM11: ") and "gpuplane.rules.workloads._runtime_class" in text
    assert "tests/real/test_rules_cluster_workloads.py::" in text
    assert module_of("gpuplane.rules.containerd.facts.Analysis.rule_of") == \
        "gpuplane.rules.containerd.facts"
    assert "gpuplane.policy.nodes" in REGISTRY["FM03"].modules()
    with pytest.raises(KeyError):
        find("FM99")


def test_registry_import_is_pure() -> None:
    """Importing the registry names the checks and the doctor but loads neither."""
    code = ("import sys, gpuplane.rules.registry\n"
            "print(sorted(m for m in sys.modules if m.startswith(('gpuplane.checks', "
            "'gpuplane.doctor', 'pulumi', 'kubernetes', 'pydantic'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
