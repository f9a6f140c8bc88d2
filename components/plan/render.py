"""Views of a plan report: text for terminals (rich) and markdown for PR comments."""

from __future__ import annotations

from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table


def _files_by_content(plan: dict[str, Any]) -> list[tuple[list[str], str, str]]:
    """(nodes, path, content): nodes that get the same file are listed once."""
    groups: dict[tuple[str, str], list[str]] = {}
    for node in plan["nodes"]:
        for path, content in node["files"].items():
            groups.setdefault((path, content), []).append(node["name"])
    return [(nodes, path, content) for (path, content), nodes in groups.items()]


def _node_diffs(diff: dict[str, Any]) -> list[tuple[list[str], str]]:
    """File diffs with the nodes that share them, so a fleet-wide change shows once."""
    groups: dict[str, list[str]] = {}
    for node, files in diff["files"].items():
        for text in files.values():
            groups.setdefault(text, []).append(node)
    return [(nodes, text) for text, nodes in groups.items()]


def _batches(plan: dict[str, Any]) -> list[str]:
    restarts = {n["name"] for n in plan["nodes"] if n["restart"]}
    lines = []
    for i, batch in enumerate(plan["batches"]):
        label = "canary" if i == 0 and len(batch) == 1 and len(plan["batches"]) > 1 else ""
        nodes = ", ".join(f"{n}{' (restart)' if n in restarts else ''}" for n in batch)
        lines.append(f"batch {i}{f' [{label}]' if label else ''}: {nodes}")
    return lines


def _baselines(plan: dict[str, Any]) -> list[str]:
    """What the node files were planned from: captured copies, or gpuplane's model (which
    the node agent only applies to nodes whose files match it byte for byte)."""
    groups: dict[str, list[str]] = {}
    for node in plan["nodes"]:
        if not node["files"]:
            continue
        captured = node.get("baselineFiles") or {}
        label = ("captured " + ", ".join(f"{p} = {local}" for p, local in sorted(
            captured.items()))) if captured else (
            f"gpuplane's {plan['cluster']['distro']} model: nodes whose files differ are "
            "refused; capture them with `baselineFiles`")
        groups.setdefault(label, []).append(node["name"])
    return [f"{', '.join(nodes)}: {label}" for label, nodes in groups.items()]


def _headline(plan: dict[str, Any]) -> str:
    c, s = plan["cluster"], plan["summary"]
    return (f"{plan['stack']}: {c['distro']}, Kubernetes {c['kubernetesVersion']}, containerd "
            f"{c['containerdVersion']}, {c['devicePlugin']} — {s['resources']} resources, "
            f"{s['nodes']} GPU nodes, {s['restarts']} containerd restarts, "
            f"{s['errors']} errors, {s['warnings']} warnings")


def render_text(plan: dict[str, Any], console: Console) -> None:
    console.print(f"[bold]gpuplane plan[/bold] {_headline(plan)}")
    table = Table("type", "name", "depends on", title="Resources", title_justify="left")
    for r in plan["resources"]:
        table.add_row(r["type"], r["name"], ", ".join(r["dependsOn"]))
    console.print(table)
    for name, rel in plan["helm"].items():
        console.print(f"[bold]Helm release {name}[/bold]: chart {rel['chart']} {rel['version']} "
                      f"from {rel['repo']} in {rel['namespace']}")
        console.print(Syntax(yaml.safe_dump(rel["values"], sort_keys=True), "yaml"))
    console.print("[bold]Node rollout[/bold] "
                  f"(restart: {plan['cluster']['restartCommand']})")
    for line in _batches(plan) or ["no node changes (nodes are configured by the "
                                   "operator's toolkit or need nothing)"]:
        console.print(f"  {escape(line)}")
    for line in _baselines(plan):
        console.print(f"  planned from: {escape(line)}")
    for nodes, path, content in _files_by_content(plan):
        console.print(f"[bold]{path}[/bold] on {', '.join(nodes)}")
        console.print(Syntax(content, "toml"))
    _render_diff_text(plan.get("diff"), console)
    console.print("[bold]Findings[/bold]" if plan["findings"] else "No findings.")
    for f in plan["findings"]:
        console.print(f"  {f['severity'].upper():7} {f['id']} {f['where']}{_state(f)}\n"
                      f"          {f['message']}\n          fix: {f['fix']}")


def _state(f: dict[str, Any]) -> str:
    """The rollout state a finding appears in (issue 15), when it names one."""
    return f" (state: {f['state']})" if f.get("state") else ""


def _render_diff_text(diff: dict[str, Any] | None, console: Console) -> None:
    if not diff:
        return
    console.print(f"[bold]Changes against base plan ({diff['baseStack']})[/bold]")
    for kind in ("added", "removed"):
        for r in diff["resources"][kind]:
            console.print(f"  {kind}: {r}")
    for nodes, text in _node_diffs(diff):
        console.print(f"  {', '.join(nodes)}:")
        console.print(Syntax(text, "diff"))
    for release, text in diff["values"].items():
        console.print(f"  release {release}:")
        console.print(Syntax(text, "diff"))
    order = ", ".join(f"{d['node']} (batch {d['batch']})" for d in diff["disrupted"])
    console.print(f"  containerd restarts, in order: {order or 'none'}")


def render_markdown(plan: dict[str, Any]) -> str:
    out = [f"### gpuplane plan `{plan['stack']}`", "", _headline(plan), ""]
    diff = plan.get("diff")
    if diff:
        out += ["#### Nodes disrupted (containerd restart), in order", ""]
        out += [f"{i + 1}. `{d['node']}` (batch {d['batch']})"
                for i, d in enumerate(diff["disrupted"])] or ["none"]
        out.append("")
        for kind in ("added", "removed"):
            if diff["resources"][kind]:
                out += [f"**Resources {kind}:** " + ", ".join(
                    f"`{r}`" for r in diff["resources"][kind]), ""]
        for nodes, text in _node_diffs(diff):
            out += [f"<details><summary>{', '.join(f'<code>{n}</code>' for n in nodes)}"
                    "</summary>", "", "```diff", text.rstrip(), "```", "</details>", ""]
        for release, text in diff["values"].items():
            out += [f"<details><summary>Helm values <code>{release}</code></summary>", "",
                    "```diff", text.rstrip(), "```", "</details>", ""]
    if plan["findings"]:
        out += ["#### Policy findings", "", "| severity | rule | where | message | fix |",
                "| --- | --- | --- | --- | --- |"]
        out += [f"| {f['severity']} | {f['id']} | {_cell(f['where'] + _state(f))} "
                f"| {_cell(f['message'])} | {_cell(f['fix'])} |" for f in plan["findings"]]
        out.append("")
    else:
        out += ["No policy findings.", ""]
    out += ["#### Rollout", ""] + [f"- {line}" for line in _batches(plan) or ["no node changes"]]
    out += [f"- planned from: {line}" for line in _baselines(plan)]
    out.append("")
    for nodes, path, content in _files_by_content(plan):
        out += [f"<details><summary><code>{path}</code> on {len(nodes)} node(s)</summary>", "",
                "```toml", content.rstrip(), "```", "</details>", ""]
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


__all__ = ["render_markdown", "render_text"]
