"""docs/plan.md's example PR comment is the real output of `scripts/plan_example.py`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_plan_page_example_is_generated() -> None:
    spec = importlib.util.spec_from_file_location("plan_example",
                                                  ROOT / "scripts/plan_example.py")
    assert spec and spec.loader
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    block = example.current_block((ROOT / "docs/plan.md").read_text(encoding="utf-8"))
    assert block is not None, "docs/plan.md lost its generated example block"
    markdown = example.example_markdown()
    assert "REJECTED" in markdown.splitlines()[0] and "```diff" in markdown
    assert block == example.page_block(markdown), (
        "docs/plan.md's example is stale: run .venv/bin/python scripts/plan_example.py")
