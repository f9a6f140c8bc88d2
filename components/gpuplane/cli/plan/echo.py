"""What the mock engine's provider adds to the inputs it echoes back as outputs: one place
for the in-process engine (gpuplane.cli.plan.engine) and its short registration path
(gpuplane.cli.plan.fastreg), so both record the same state."""

from __future__ import annotations

from typing import Any

AUTONAME_SUFFIX = "xxxxxxxx"


def provider_additions(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Outputs a provider adds to the echoed inputs."""
    added: dict[str, Any] = {}
    metadata = inputs.get("metadata")
    if typ.startswith("kubernetes:") and isinstance(metadata, dict) and "name" not in metadata:
        # The provider auto-names objects without metadata.name: <name>-<8 random
        # characters>. A fixed suffix keeps plans comparable.
        added["metadata.name"] = f"{name}-{AUTONAME_SUFFIX}"
    if typ == "kubernetes:helm.sh/v3:Release" and "status" not in inputs:
        added["status"] = {"status": "deployed"}
    return added


__all__ = ["AUTONAME_SUFFIX", "provider_additions"]
