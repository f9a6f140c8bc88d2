"""Where the installed CrossGuard pack lives: `gpuplane/data/policypack` beside the code,
whether gpuplane runs from a wheel or a checkout (`policies/` links to it there). No
import of the Pulumi SDK: `gpuplane policy-pack path` starts fast."""

from __future__ import annotations

from pathlib import Path

PACK_DIR = Path(__file__).resolve().parent.parent / "data" / "policypack"


def pack_dir() -> Path:
    """The pack's directory (it holds PulumiPolicy.yaml)."""
    return PACK_DIR


__all__ = ["PACK_DIR", "pack_dir"]
