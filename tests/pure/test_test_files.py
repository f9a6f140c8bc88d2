"""The test tiers share one module namespace (pytest imports each test file by its base
name, `rootdir` mode): two files with the same name in two tier folders break the
collection of the whole suite, which only `make test` collects at once. Held here, in
the tier `make test-fast` runs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_file_name_is_unique_across_the_tiers() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py")
                    if "__pycache__" not in p.parts)
    assert [n for n, count in names.items() if count > 1] == []
