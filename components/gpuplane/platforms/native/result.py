"""The one shape every platform-native input takes, so the plan, the stack outputs and
`gpuplane plan` treat an EKS NodeConfig, Bottlerocket settings and a node-pool command
alike: what to feed to the platform, where, and what gpuplane leaves to the platform."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["eks-nodeconfig", "bottlerocket-settings", "aks-nodepool", "gke-nodepool"]


class PlatformInputError(ValueError):
    """An intent the platform's own input cannot express. `key` names the stack key to
    change, `fix` says how; str() is the whole message, fit for the CLI without a
    traceback."""

    def __init__(self, key: str, problem: str, fix: str) -> None:
        self.key = key
        self.problem = problem
        self.fix = fix
        super().__init__(f"{key}: {problem} Fix: {fix}")


@dataclass(frozen=True)
class PlatformInput:
    """What gpuplane hands the user instead of writing node files.

    `document` is a text to paste (a NodeConfig YAML, a Bottlerocket settings TOML);
    `fields` the same intent as structured data for the user's node-group resource (a
    Pulumi resource's input names, dotted); `command` a CLI argv that creates the node
    group. `will_not_touch` lists what the platform owns, for the plan's "gpuplane will
    not touch ..." line; `sources` the upstream file@ref behind each fact used.
    """

    kind: Kind
    platform: str
    summary: str
    document: str | None = None
    document_format: Literal["yaml", "toml"] | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    command: tuple[str, ...] = ()
    will_not_touch: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def command_line(self) -> str:
        """`command` quoted for a POSIX shell ("" when there is none)."""
        return shlex.join(self.command) if self.command else ""

    def to_output(self) -> dict[str, Any]:
        """A JSON-serialisable dict for a Pulumi stack output (keys camelCase)."""
        out: dict[str, Any] = {"kind": self.kind, "platform": self.platform,
                               "summary": self.summary}
        if self.document is not None:
            out["document"] = self.document
            out["documentFormat"] = self.document_format
        if self.fields:
            out["fields"] = self.fields
        if self.command:
            out["command"] = list(self.command)
            out["commandLine"] = self.command_line
        out["willNotTouch"] = list(self.will_not_touch)
        out["sources"] = list(self.sources)
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    @classmethod
    def from_output(cls, out: dict[str, Any]) -> PlatformInput:
        """Back from `to_output()`: the plan's text render reads the JSON report, and
        prints the same `plan_lines()` the object would."""
        return cls(kind=out["kind"], platform=out["platform"], summary=out["summary"],
                   document=out.get("document"), document_format=out.get("documentFormat"),
                   fields=dict(out.get("fields") or {}),
                   command=tuple(out.get("command") or ()),
                   will_not_touch=tuple(out.get("willNotTouch") or ()),
                   sources=tuple(out.get("sources") or ()),
                   notes=tuple(out.get("notes") or ()))

    def plan_lines(self) -> list[str]:
        """The lines `gpuplane plan` prints for this input."""
        lines = [f"{self.platform}: {self.summary}"]
        if self.command:
            lines.append(f"  run: {self.command_line}")
        if self.document is not None:
            lines.append(f"  feed this {self.document_format} to the node group:")
            lines += [f"    {line}" if line else "" for line in self.document.splitlines()]
        lines += [f"  gpuplane will not touch {item}" for item in self.will_not_touch]
        lines += [f"  note: {note}" for note in self.notes]
        return lines
