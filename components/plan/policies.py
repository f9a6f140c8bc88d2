"""The offline policy runner: the pack's policies over mock-engine registrations, with
the same validation arguments the Pulumi engine builds (resource and stack)."""

from __future__ import annotations

from components.findings import Finding
from components.plan.engine import Registered


def run_policies(resources: list[Registered]) -> list[Finding]:
    return []
