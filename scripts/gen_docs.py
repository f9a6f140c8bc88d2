"""Write the generated reference pages under docs/reference/ from their single sources
(the stack config's models, the rule catalogue, the CLI's parsers; see scripts/docgen/).
The pages are committed, and tests/pure/test_docs.py fails when one is stale.

    .venv/bin/python scripts/gen_docs.py           # rewrite docs/reference/
    .venv/bin/python scripts/gen_docs.py --check   # exit 1 naming each stale page
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docgen import cli_ref, config_ref, rules_ref
from docgen.md import MARKER

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"


def generated() -> dict[Path, str]:
    """Every generated page's path and text, built in memory."""
    pages = {**config_ref.pages(), **rules_ref.pages(), **cli_ref.pages()}
    return {REFERENCE / name: text for name, text in sorted(pages.items())}


def stale(pages: dict[Path, str]) -> list[str]:
    """The pages whose committed text differs from `pages`, missing ones, and generated
    pages no source makes any more (relative to the repository root)."""
    out = [str(p.relative_to(ROOT)) for p, text in pages.items()
           if not p.is_file() or p.read_text(encoding="utf-8") != text]
    out += [str(p.relative_to(ROOT)) for p in _committed() if p not in pages]
    return sorted(out)


def _committed() -> list[Path]:
    return [p for p in REFERENCE.rglob("*.md")
            if p.read_text(encoding="utf-8").startswith(MARKER)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report stale pages")
    args = parser.parse_args()
    pages = generated()
    if args.check:
        old = stale(pages)
        for name in old:
            print(f"stale: {name}", file=sys.stderr)
        return 1 if old else 0
    for path in _committed():
        if path not in pages:
            path.unlink()
    for path, text in pages.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
