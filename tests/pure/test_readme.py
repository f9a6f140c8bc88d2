"""The README is the front page: it keeps the two commands CI and people look for, stays
short (the detail lives in docs/), its quick-start stack really plans, and every link
into docs/ leads to a page."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_two_commands_are_there() -> None:
    assert "make plan STACK=<name>" in README
    assert "make test" in README


def test_the_readme_stays_a_front_page() -> None:
    assert len(README.splitlines()) <= 250


def test_every_docs_link_leads_to_a_page() -> None:
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", README)
    assert len(links) >= 10
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert missing == []


def test_the_quick_start_stack_plans_clean(tmp_path: Path) -> None:
    """The stack shown in the quick start, as written, is a valid stack whose plan has
    no blocking finding."""
    from gpuplane.cli.plan.run import plan_stack
    from gpuplane.core.findings import Severity

    block = re.search(r"```yaml\n(config:\n.*?)```", README, re.S)
    assert block, "the quick start lost its stack"
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.quickstart.yaml").write_text(block.group(1), encoding="utf-8")
    plan = plan_stack("quickstart", stacks)
    assert plan["verdict"] == "ok"
    assert not [f for f in plan["findings"] if f["severity"] == Severity.ERROR]
    assert [n["name"] for n in plan["nodes"]] == ["a100-01"]
