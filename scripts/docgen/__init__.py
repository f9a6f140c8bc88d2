"""The generated reference pages under docs/reference/, one module per single source:
`config_ref` (the stack config's pydantic models), `rules_ref` (the rule docs `gpuplane
explain` prints), `cli_ref` (the argparse parsers). `scripts/gen_docs.py` writes them;
tests/pure/test_docs.py regenerates them in memory and fails when a committed page is stale."""
