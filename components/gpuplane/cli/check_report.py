"""Rendering of a node check: the stable JSON contract and the human text view."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.text import Text

from gpuplane.core.console import print_table
from gpuplane.core.findings import Finding, Severity
from gpuplane.rules.nodecheck import NodeCheck

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def check_to_json(check: NodeCheck, version_source: str = "--containerd-version"
                  ) -> dict[str, Any]:
    """The documented JSON of `gpuplane containerd check --format json`.
    `version_source`: where the containerd release line came from (the flag, or the
    local `containerd --version` when the flag was left out)."""
    eff = check.effective
    return {
        "containerd_version": str(eff.containerd_version),
        "containerd_version_source": version_source,
        "config_version": eff.config_version,
        "files": [f.path for f in eff.files],
        "effective": eff.to_dict(),
        "cri_served": not eff.cri_disabled,
        "no_file": eff.no_file,
        "disabled_plugins": list(eff.disabled_plugins),
        "settings": dict(eff.settings),
        # The RuntimeClass handlers judged as used (name null: --runtime-class-handler).
        "runtime_classes": [{"name": name, "handler": handler}
                            for name, handler in check.runtime_classes],
        "findings": [f.to_dict() for f in check.findings],
    }


def render_check(check: NodeCheck, console: Console,
                 version_source: str = "--containerd-version") -> None:
    """Merge order, effective CRI view and findings, in the CLI's one table style."""
    eff = check.effective
    console.print(Text.assemble(
        ("containerd ", "bold"), (str(eff.containerd_version), "bold"),
        f" (from {version_source})  config version {eff.config_version}  {check.config}"),
        soft_wrap=not console.is_terminal)
    if check.runtime_classes:
        console.print(Text(
            "RuntimeClass handlers judged as used: " + ", ".join(
                f"{handler} (RuntimeClass {name})" if name else handler
                for name, handler in check.runtime_classes)), soft_wrap=True)
    print_table(console, "Merge order", ("#", "file", "version", "imported by"), [
        (str(index), f.path, str(f.version or "1 (none)"), f.imported_by or "")
        for index, f in enumerate(eff.files, start=1)])
    cdi = {True: "on", False: "off", None: "not supported"}[eff.cdi]
    rows = []
    for name, view in sorted(eff.runtimes.items()):
        options = ", ".join(f"{k} = {_toml(v)}" for k, v in sorted(view.options.items()))
        marker = " (default)" if name == eff.default_runtime else ""
        rows.append((name + marker, view.runtime_type or "(missing)", options))
    title = (f'Effective CRI (plugins."{eff.cri_key}"): default runtime '
             f"{eff.default_runtime}, CDI {cdi}")
    if eff.cri_disabled:
        title = "CRI plugin DISABLED (disabled_plugins): containerd serves no pods; " + title
    if eff.no_file:
        title = "no top-level file: containerd's built-in defaults; " + title
    print_table(console, title,
                ("runtime", "runtime_type", "options"), rows)

    if check.findings:
        console.print(Text("Findings", style="bold"))
    for finding in check.findings:
        _print_finding(console, finding)
    console.print(_summary(check.findings), soft_wrap=True)


def _toml(value: Any) -> str:
    """A value as it is written in TOML (true, "text"), not as Python's repr."""
    return json.dumps(value, default=str)


def _print_finding(console: Console, finding: Finding) -> None:
    console.print(Text.assemble(
        (f"{finding.severity.upper():7}", _STYLE[finding.severity]), " ",
        (finding.id, "bold"), "  ", finding.where), soft_wrap=True)
    console.print(Text("  " + finding.message), soft_wrap=True)
    console.print(Text.assemble(("  fix: ", "green"), finding.fix), soft_wrap=True)


def _summary(findings: list[Finding]) -> Text:
    counts = {s: sum(f.severity is s for f in findings) for s in Severity}
    verdict = ("FAIL", "bold red") if counts[Severity.ERROR] else ("OK", "bold green")
    return Text.assemble(
        verdict, f": {counts[Severity.ERROR]} error(s), {counts[Severity.WARNING]} "
        f"warning(s), {counts[Severity.INFO]} info")
