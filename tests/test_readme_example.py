"""README.md's example PR comment is the real output of `scripts/readme_example.py`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_example_is_generated() -> None:
    spec = importlib.util.spec_from_file_location("readme_example",
                                                  ROOT / "scripts/readme_example.py")
    assert spec and spec.loader
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    block = example.current_block((ROOT / "README.md").read_text(encoding="utf-8"))
    assert block is not None, "README.md lost its generated example block"
    markdown = example.example_markdown()
    assert "REJECTED" in markdown.splitlines()[0] and "```diff" in markdown
    assert block == example.readme_block(markdown), (
        "README.md's example is stale: run .venv/bin/python scripts/readme_example.py")
