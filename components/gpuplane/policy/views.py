"""The shapes the policy adapters share: one resource as the engine presents it, and the
findings tied to the URN of the resource they are about. Below both `collect` (the stack's
rules) and `nodes` (the node commands), so the two import in one direction only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuplane.containerd.versions import ContainerdVersion
from gpuplane.core.findings import Finding
from gpuplane.core.intent import ClusterIntent
from gpuplane.distros.profiles import DistroProfile, profile


@dataclass(frozen=True)
class View:
    """One resource: what both a PolicyResource and an offline registration provide."""

    type: str
    name: str
    urn: str
    props: Mapping[str, Any]
    dependencies: tuple[str, ...] = ()   # URNs
    parent: str = ""                     # the parent's URN ("": the stack's root)
    provider: str = ""                   # the provider's URN ("": the default provider)


@dataclass
class Located:
    finding: Finding
    urn: str | None


@dataclass
class StackFindings:
    items: list[Located] = field(default_factory=list)

    def add(self, findings: Iterable[Finding], urn: str | None) -> None:
        self.items.extend(Located(f, urn) for f in findings)


def intent_profile(intent: ClusterIntent) -> tuple[DistroProfile, ContainerdVersion]:
    from gpuplane.platforms.profiles import on_platform

    return (on_platform(profile(intent.distro, intent.containerd_base_dir), intent.platform),
            ContainerdVersion.parse(intent.containerd_version))


__all__ = ["Located", "StackFindings", "View", "intent_profile"]
