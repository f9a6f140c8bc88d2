"""Views of a plan report: text for terminals and logs, markdown for PR comments.

Both lead with the verdict. A rejected plan (an error finding blocks `pulumi up`) is shown
as rejected: what the change tried to do, why it is blocked and the fix — never as the
resources and files it holds back. With `--base`, every change of the diff is shown:
stack settings, resources (with a YAML diff of their inputs), node files, Helm values, the
toolkit env, the rollout and the findings.
"""

from __future__ import annotations

import html
import re
from typing import Any

from rich.console import Console

from gpuplane.cli.plan.diff import to_yaml, toolkit_env
from gpuplane.cli.plan.sharing_text import sharing_line
from gpuplane.cli.plan.toolkit_view import toolkit_lines
from gpuplane.core.console import print_block, print_line, print_table
from gpuplane.platforms.native.result import PlatformInput

GITHUB_COMMENT_LIMIT = 65_536
# What a comment may hold after the room kept for what the PR workflow adds around it
# (a note when the base plan failed, the sticky comment's marker).
COMMENT_BUDGET = GITHUB_COMMENT_LIMIT - 4_096
TRUNCATED_NOTE = (
    "\n---\n**Truncated** to {limit:,} characters (GitHub's comment limit is 65,536): {count} "
    "left out ({names}). The full plan and diff are in the JSON plan "
    "(`gpuplane plan --format json --base ...`), uploaded by the PR workflow as the "
    "`gpuplane-plan` artifact of this run.\n")


# A PR comment lists this many entries of a long list (nodes, batches, resources), then a
# count: a fleet's names would otherwise fill the comment before its restarts and findings.
LISTED = 20


# ---------------------------------------------------------------------------- shared facts

def listed(items: list[str], limit: int | None, what: str = "more") -> list[str]:
    """`items`, or its first `limit` and `… and N <what>` (all of them without a limit)."""
    if limit is None or len(items) <= limit:
        return items
    return [*items[:limit], f"… and {len(items) - limit} {what}"]


def counted(n: int, word: str, plural: str | None = None) -> str:
    """`1 resource`, `2 resources`: a count with its noun in the right number."""
    return f"{n} {word if n == 1 else plural or word + 's'}"


def rejected(plan: dict[str, Any]) -> bool:
    return any(f["severity"] == "error" for f in plan["findings"])


def verdict_line(plan: dict[str, Any]) -> str:
    s = plan["summary"]
    if rejected(plan):
        return (f"REJECTED: {counted(s['errors'], 'blocking finding')}; `pulumi up` stops on "
                "them and nothing is rolled out")
    warn = f" with {counted(s['warnings'], 'warning')}" if s["warnings"] else ""
    return f"OK{warn}"


def headline(plan: dict[str, Any]) -> str:
    c, s = plan["cluster"], plan["summary"]
    tally = (f"{counted(s['errors'], 'error')}, {counted(s['warnings'], 'warning')}")
    if c["distro"] is None:   # a program that builds no GpuCluster (report.program_report)
        return (f"{plan['stack']}: no GpuCluster in the program — "
                f"{counted(s['resources'], 'resource')}, {tally}")
    # A managed platform's nodes share kubeadm's layout, but the platform is what they run.
    where = c.get("platform") or c["distro"]
    return (f"{plan['stack']}: {where}, Kubernetes {c['kubernetesVersion']}, containerd "
            f"{c['containerdVersion']}, {c['devicePlugin']} — "
            f"{counted(s['resources'], 'resource')}, {counted(s['nodes'], 'GPU node')}, "
            f"{_writes(plan)}, {tally}")


def _writes(plan: dict[str, Any]) -> str:
    """The node writes and containerd restarts; files that leave the merged config as it
    was are written without a restart, and the headline says so rather than suggesting
    nothing is written."""
    written = sum(bool(n.get("files")) for n in plan["nodes"])
    restarts = counted(plan["summary"]["restarts"], "containerd restart")
    if not written or written == plan["summary"]["restarts"]:
        return restarts
    return (f"files written on {counted(written, 'node')}, {restarts} (containerd's merged "
            "config is unchanged where no restart is listed)")


def _files_by_content(plan: dict[str, Any], key: str = "files") -> list[tuple[list[str], str,
                                                                             str]]:
    """(nodes, path, content): nodes that get the same file are listed once."""
    groups: dict[tuple[str, str], list[str]] = {}
    for node in plan["nodes"]:
        for path, content in node.get(key, {}).items():
            groups.setdefault((path, content), []).append(node["name"])
    return [(nodes, path, content) for (path, content), nodes in groups.items()]


def _all_files(plan: dict[str, Any]) -> list[tuple[list[str], str, str, str]]:
    """(nodes, path, content, note): the files written, or those a rejected plan holds
    back, marked as such."""
    held = " (withheld: the plan is rejected)"
    return ([(*group, "") for group in _files_by_content(plan)]
            + [(*group, held) for group in _files_by_content(plan, "withheldFiles")])


def _node_diffs(diff: dict[str, Any]) -> list[tuple[list[str], str, str]]:
    """(nodes, path, diff): a file diff shared by several nodes shows once."""
    groups: dict[tuple[str, str], list[str]] = {}
    for node, files in diff["files"].items():
        for path, text in files.items():
            groups.setdefault((path, text), []).append(node)
    return [(nodes, path, text) for (path, text), nodes in groups.items()]


def unit_lines(plan: dict[str, Any]) -> list[str]:
    """The host unit steps of the rollout, nodes that share one listed once: the node
    agent records each unit's state, stops, disables and masks it; destroy puts it back."""
    held = " (withheld: the plan is rejected)"
    groups: dict[tuple[str, str], list[str]] = {}
    for node in plan["nodes"]:
        for key, note in (("hostUnits", ""), ("withheldHostUnits", held)):
            for unit in node.get(key) or []:
                groups.setdefault((unit["unit"], note), []).append(node["name"])
    return [f"host unit {unit}: masked on {', '.join(nodes)} (its state is recorded, then it "
            f"is stopped, disabled and masked; destroy puts it back as it was){note}"
            for (unit, note), nodes in groups.items()]


def unit_changes(diff: dict[str, Any], limit: int | None = None) -> list[str]:
    """The host unit part of a diff, in words: which unit is masked, or put back, where."""
    groups: dict[tuple[str, str], list[str]] = {}
    for node, changes in (diff.get("hostUnits") or {}).items():
        for c in changes:
            groups.setdefault((c["unit"], c["change"]), []).append(node)
    verb = "would be" if diff.get("rejected") else "is"
    return [f"host unit `{unit}` {verb} "
            + ("masked" if change == "mask" else "no longer masked (put back as it was)")
            + f" on {', '.join(listed(nodes, limit))}"
            for (unit, change), nodes in groups.items()]


def batch_lines(plan: dict[str, Any], limit: int | None = None) -> list[str]:
    """The rollout: one line per batch, in order, restarts marked (with a `limit`, each
    batch's nodes cut to their first entries and a count)."""
    restarts = {n["name"] for n in plan["nodes"] if n["restart"]}
    docker = {n["name"] for n in plan["nodes"] if n.get("dockerRestart")}
    batches = plan["batches"] or plan.get("withheldBatches") or []
    held = "" if plan["batches"] else " (withheld: the plan is rejected)"
    lines = []
    for i, batch in enumerate(batches):
        label = " [canary]" if i == 0 and len(batch) == 1 and len(batches) > 1 else ""
        nodes = ", ".join(listed([f"{n}{_restart_note(n in restarts, n in docker)}"
                                  for n in batch], limit))
        lines.append(f"batch {i}{label}: {nodes}{held}")
    return lines


def _restart_note(containerd: bool, docker: bool) -> str:
    """` (restart)`: containerd restarts; Docker's one restart (after containerd's) is
    named apart, since it stops the host's Docker containers' daemon, not the kubelet's."""
    done = [what for what, yes in (("restart", containerd), ("Docker restart", docker)) if yes]
    return f" ({', '.join(done)})" if done else ""


def _fence_of(path: str) -> str:
    return "json" if path.endswith(".json") else "toml"


def baseline_lines(plan: dict[str, Any]) -> list[str]:
    """What the node files were planned from: captured copies, or gpuplane's model (which
    the node agent only applies to nodes whose files match it byte for byte)."""
    groups: dict[str, list[str]] = {}
    for node in plan["nodes"]:
        if not (node["files"] or node.get("withheldFiles")):
            continue
        captured = node.get("baselineFiles") or {}
        label = ("captured " + ", ".join(
            f"{p} = {local}" if local is not None else f"{p} absent (null)"
            for p, local in sorted(captured.items()))) if captured else (
            f"gpuplane's {plan['cluster']['distro']} model: nodes whose files differ are "
            "refused; capture them with `baselineFiles`")
        groups.setdefault(label, []).append(node["name"])
    return [f"{', '.join(nodes)}: {label}" for label, nodes in groups.items()]


def attempted(plan: dict[str, Any]) -> list[str]:
    """What a rejected plan tried to do, in words."""
    diff = plan.get("diff") or {}
    lines = [f"set `{c['key']}`: `{_short(c['base'])}` → `{_short(c['new'])}`"
             for c in diff.get("config", [])]
    files = _files_by_content(plan, "withheldFiles")
    if files:
        nodes = sorted({n for group, _, _ in files for n in group})
        paths = sorted({p for _, p, _ in files})
        lines.append(f"write {', '.join(f'`{p}`' for p in paths)} on "
                     f"{counted(len(nodes), 'node')} in "
                     f"{counted(len(plan.get('withheldBatches') or []), 'batch', 'batches')}"
                     + (" (diff below)" if diff.get("files") else ""))
    held_units = sorted({u["unit"] for n in plan["nodes"]
                         for u in n.get("withheldHostUnits") or []})
    if held_units:
        nodes = [n for n in plan["nodes"] if n.get("withheldHostUnits")]
        lines.append(f"mask {', '.join(f'`{u}`' for u in held_units)} on "
                     f"{counted(len(nodes), 'node')}")
    if not lines:
        lines.append(f"apply the {counted(plan['summary']['resources'], 'resource')} of this "
                     "plan")
    return lines


# How each chart source reads (`plan["helm"][release]["source"]`).
_SOURCES = {"upstream": "upstream repository", "path": "local chart",
            "http": "mirror repository", "oci": "OCI registry"}


def release_line(rel: dict[str, Any]) -> str:
    """`chart <chart> <version> (<source>) from <repo> in <ns>; images from <mirror>`."""
    source = _SOURCES.get(str(rel.get("source")))
    kind = f" ({source})" if source else ""
    repo = f" from {rel['repo']}" if rel.get("repo") else ""
    mirror = f"; images from {rel['imageMirror']}" if rel.get("imageMirror") else ""
    return (f"chart {rel['chart']} {rel['version']}{kind}{repo} in "
            f"{rel['namespace']}{mirror}")


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else to_yaml(value).strip() if isinstance(
        value, dict | list) else str(value).lower() if isinstance(value, bool) else str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= 80 else text[:77] + "..."


def _blocking(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in plan["findings"] if f["severity"] == "error"]


# --------------------------------------------------------------------------------- text

def node_pod_lines(plan: dict[str, Any]) -> list[str]:
    """`nodeAccess: pod`: where the agent's pods run and what they need."""
    pod = plan["cluster"].get("nodePod")
    if not pod:
        return []
    made = " (created by gpuplane, Pod Security privileged)" \
        if pod["namespaceCreatedByGpuplane"] else ""
    return [f"through a pod per node, no SSH: {pod['podName']} in namespace "
            f"{pod['namespace']}{made}, image {pod['image']}, privileged with hostPID, "
            f"at most {pod['timeoutSeconds']} s each",
            *(f"needs: {need}" for need in pod["needs"])]


CLUSTER_COLUMNS = ("GpuCluster", "distro", "containerd", "nodes", "restarts", "batches")


def cluster_rows(plan: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row per GpuCluster of a program that builds several (the report's `clusters`)."""
    return [(c["name"], str(c["cluster"]["distro"]), str(c["cluster"]["containerdVersion"]),
             str(c["summary"]["nodes"]), str(c["summary"]["restarts"]), str(len(c["batches"])))
            for c in plan.get("clusters") or []]


def fleets(plan: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(` of GpuCluster <name>`, its view) for each cluster of a program that builds
    several (the report's `clusters`); ("", the plan) for a program's only one."""
    clusters = plan.get("clusters") or []
    if not clusters:
        return [("", plan)]
    return [(f" of GpuCluster {c['name']}", c) for c in clusters]


def render_text(plan: dict[str, Any], console: Console) -> None:
    """The plan for a terminal or a log (see `gpuplane.core.console` for the style)."""
    print_line(console, ("gpuplane plan ", "bold"), headline(plan))
    print_line(console, ("verdict: ", "bold"),
               (verdict_line(plan), "bold red" if rejected(plan) else "bold green"))
    sharing = sharing_line(plan)
    if sharing:
        print_line(console, sharing)
    if rejected(plan):
        _rejected_text(plan, console)
    if plan.get("clusters"):
        print_table(console, "GpuClusters", CLUSTER_COLUMNS, cluster_rows(plan))
    _diff_text(plan, console)
    print_table(console, "Resources", ("type", "name", "depends on"),
                [(r["type"], r["name"], ", ".join(r["dependsOn"])) for r in plan["resources"]])
    for name, rel in plan["helm"].items():
        print_line(console, (f"Helm release {name}", "bold"), f": {release_line(rel)}")
        print_block(console, to_yaml(rel["values"]), "yaml")
    for release, env in toolkit_env(plan).items():
        print_line(console, (f"Toolkit env ({release})", "bold"))
        print_block(console, env, "bash")
    if plan["cluster"]["distro"] is None:
        _findings_text(console, "Findings", plan["findings"])
        return
    for title, fleet in fleets(plan):
        _rollout_text(title, fleet, console)
    _platform_input_text(plan, console)
    _findings_text(console, "Findings", plan["findings"])


def _rollout_text(title: str, fleet: dict[str, Any], console: Console) -> None:
    """One cluster's node rollout: batches, restarts, where files come from, the files."""
    docker = fleet["cluster"].get("dockerRestartCommand")
    print_line(console, (f"Node rollout{title}", "bold"),
               f" (restart: {fleet['cluster']['restartCommand']}"
               + (f"; Docker, once where its daemon.json changes: {docker}" if docker else "")
               + ")")
    platform = fleet["cluster"].get("platform")
    idle = (f"no node changes: {platform} writes the nodes' containerd config, and gpuplane "
            "leaves it alone" if platform else
            "no node changes (nodes are configured by the operator's toolkit or need nothing)")
    for line in batch_lines(fleet) or [idle]:
        print_line(console, f"  {line}")
    for line in node_pod_lines(fleet):
        print_line(console, f"  {line}")
    for line in baseline_lines(fleet):
        print_line(console, f"  planned from: {line}")
    for line in toolkit_lines(fleet.get("toolkit")):
        print_line(console, f"  toolkit: {line}")
    for line in unit_lines(fleet):
        print_line(console, f"  {line}")
    for nodes, path, content, held in _all_files(fleet):
        print_line(console, (path, "bold"), f" on {', '.join(nodes)}{held}")
        print_block(console, content, _fence_of(path))


def _platform_input_text(plan: dict[str, Any], console: Console) -> None:
    """The managed platform's own node input and what gpuplane leaves to the platform."""
    out = plan.get("platformInput")
    if not out:
        return
    print_line(console, ("Platform input", "bold"),
               " (also the stack output platformInput; docs/platform-inputs.md)")
    for line in PlatformInput.from_output(out).plan_lines():
        print_line(console, f"  {line}")


def _rejected_text(plan: dict[str, Any], console: Console) -> None:
    print_line(console, ("REJECTED", "bold red"), ": this change is blocked")
    print_line(console, "  it tried to:")
    for line in attempted(plan):
        print_line(console, f"    - {line.replace('`', '')}")
    print_line(console, "  blocked by:")
    for f in _blocking(plan):
        print_line(console, f"    - {f['id']} {f['where']}: {f['message']}")
        print_line(console, ("      fix: ", "green"), f["fix"])


def _findings_text(console: Console, title: str, findings: list[dict[str, Any]]) -> None:
    if not findings:
        print_line(console, "No findings.")
        return
    print_line(console, (title, "bold"))
    for f in findings:
        state = f" [{f['state']}]" if f.get("state") else ""
        print_line(console, f"  {f['severity'].upper():7} ", (f["id"], "bold"),
                   f"{state} {f['where']}")
        print_line(console, f"          {f['message']}")
        print_line(console, ("          fix: ", "green"), f["fix"])


def _diff_text(plan: dict[str, Any], console: Console) -> None:
    diff = plan.get("diff")
    if not diff:
        return
    print_line(console, (f"Changes against the base plan ({diff['baseStack']})", "bold"))
    if diff["empty"]:
        print_line(console, "  none: the base plan and this one are the same")
        return
    for c in diff["config"]:
        print_line(console, f"  setting {c['key']}: {_short(c['base'])} -> {_short(c['new'])}")
    res = diff["resources"]
    for kind in ("added", "removed", "withheld"):
        for key in res[kind]:
            note = " (not removed: the plan is rejected)" if kind == "withheld" else ""
            print_line(console, f"  {kind}: {key}{note}")
    for change in res["changed"]:
        print_line(console, f"  changed: {change['resource']} ({', '.join(change['paths'])})")
        print_block(console, change["diff"], "diff")
    for nodes, path, text in _node_diffs(diff):
        verb = "would change" if diff["rejected"] else "changes"
        print_line(console, f"  {path} {verb} on {', '.join(nodes)}:")
        print_block(console, text, "diff")
    for line in unit_changes(diff):
        print_line(console, f"  {line.replace('`', '')}")
    for release, text in diff["values"].items():
        print_line(console, f"  Helm release {release}:")
        print_block(console, text, "diff")
    for line in _rollout_change(diff):
        print_line(console, f"  {line.replace('`', '')}")
    _findings_change_text(console, diff)


def _findings_change_text(console: Console, diff: dict[str, Any]) -> None:
    for kind in ("new", "fixed"):
        for f in diff["findings"][kind]:
            print_line(console, f"  {kind} finding: {f['severity']} {f['id']} {f['where']}: "
                       f"{f['message']}")


def _rollout_change(diff: dict[str, Any], limit: int | None = None) -> list[str]:
    """The rollout part of a diff, in words: batches, restarts in order and why (with a
    `limit`, each list cut to its first entries and a count)."""
    rollout = diff["rollout"]
    lines = []
    if rollout["changed"]:
        batches = [", ".join(listed(b, limit)) for b in rollout["new"]]
        lines.append(f"rollout: {len(rollout['base'])} → {len(rollout['new'])} batches: "
                     + " | ".join(listed(batches, limit and limit // 2, "more batches")))
    disrupted = diff["disrupted"]
    if disrupted:
        # Nodes by why they restart (a fleet-wide change has one reason for thousands).
        why: dict[str, list[str]] = {}
        for d in disrupted:
            why.setdefault(d.get("reason", "config changes"), []).append(
                f"`{d['node']}` (batch {d['batch']})")
        head = f"containerd restarts on {len(disrupted)} node" \
            f"{'s' if len(disrupted) != 1 else ''}, in order"
        if len(why) == 1:
            reason, nodes = next(iter(why.items()))
            lines.append(f"{head}; {reason}: " + ", ".join(listed(nodes, limit)))
        else:
            lines.append(f"{head}, by reason:")
            lines += [f"  - {reason}: " + ", ".join(listed(nodes, limit))
                      for reason, nodes in why.items()]
    elif not diff["rejected"]:
        lines.append("containerd restarts: none")
    for r in rollout.get("workloadRestarts", []):
        lines.append(f"pods restart: `{r['selector']}` in `{r['namespace']}` "
                     f"({r['resource']}: {r['reason']})")
    return lines


# ----------------------------------------------------------------------------- markdown

def _fence(text: str, lang: str) -> str:
    """A code block whose fence is longer than any backtick run in `text`."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def _details(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body}\n</details>\n"


def _code(text: str) -> str:
    return f"<code>{html.escape(text)}</code>"


def _cell(text: str) -> str:
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


def _md_sections(plan: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(name, markdown, essential) in reading order; optional ones may be left out to
    fit a comment."""
    out: list[tuple[str, str, bool]] = []
    icon = "❌" if rejected(plan) else "✅"
    sharing = sharing_line(plan)
    out.append(("headline", f"### {icon} gpuplane plan `{plan['stack']}`: "
                f"{verdict_line(plan)}\n\n{headline(plan)}\n"
                + (f"\n{sharing}\n" if sharing else ""), True))
    if rejected(plan):
        body = ["#### Rejected: this change is blocked", "", "**It tried to:**", ""]
        body += [f"- {line}" for line in attempted(plan)]
        body += ["", "**Blocked by** (fix each, then push again):", ""]
        body += [f"- **{f['id']}** `{f['where']}`: {f['message']}\n  - **fix:** {f['fix']}"
                 for f in _blocking(plan)]
        withheld = (plan.get("diff") or {}).get("resources", {}).get("withheld", [])
        if withheld:
            stay = "stays" if len(withheld) == 1 else "stay"
            body += ["", f"Held back, not removed: {counted(len(withheld), 'resource')} "
                     f"{stay} as they are; a rejected plan creates, changes and deletes nothing ("
                     + ", ".join(f"`{k}`" for k in withheld[:8])
                     + (", ..." if len(withheld) > 8 else "") + ")."]
        out.append(("rejection", "\n".join(body) + "\n", True))
    if plan.get("clusters"):
        rows = ["#### GpuClusters", "", "| " + " | ".join(CLUSTER_COLUMNS) + " |",
                "| " + " | ".join("---" for _ in CLUSTER_COLUMNS) + " |"]
        rows += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in cluster_rows(plan)]
        out.append(("clusters", "\n".join(rows) + "\n", True))
    diff = plan.get("diff")
    if diff:
        out += _md_diff(plan, diff)
    findings = plan["findings"]
    if findings:
        rows = ["#### Policy findings", "", "| severity | rule | where | message | fix |",
                "| --- | --- | --- | --- | --- |"]
        rows += [f"| {f['severity']}{' (' + f['state'] + ')' if f.get('state') else ''} "
                 f"| {f['id']} | {_cell(f['where'])} | {_cell(f['message'])} "
                 f"| {_cell(f['fix'])} |" for f in findings]
        out.append(("findings", "\n".join(rows) + "\n", True))
    else:
        out.append(("findings", "No policy findings.\n", True))
    for title, fleet in fleets(plan):
        batches = batch_lines(fleet, LISTED)
        rollout = [f"#### Rollout{title}", ""] + [f"- {line}" for line in listed(
            batches, LISTED, "more batches") or ["no node changes"]]
        rollout += [f"- {line}" for line in node_pod_lines(fleet)]
        rollout += [f"- planned from: {line}" for line in baseline_lines(fleet)]
        rollout += [f"- toolkit: {line}" for line in toolkit_lines(fleet.get("toolkit"))]
        rollout += [f"- {line}" for line in unit_lines(fleet)]
        # Essential: it is short whatever the fleet (lists are cut to LISTED entries).
        out.append((f"rollout{title}", "\n".join(rollout) + "\n", True))
    if not diff:
        for release, rel in plan["helm"].items():
            out.append((f"values {release}", _details(
                f"Helm values {_code(release)} ({html.escape(release_line(rel))})",
                _fence(to_yaml(rel["values"]), "yaml")),
                False))
        for release, env in toolkit_env(plan).items():
            out.append((f"toolkit env {release}", _details(
                f"Toolkit env {_code(release)}", _fence(env, "sh")), False))
    for title, fleet in fleets(plan):
        for nodes, path, content, held in _all_files(fleet):
            out.append((f"file {path}{title}", _details(
                f"{_code(path)} on {counted(len(nodes), 'node')}{html.escape(title)}: "
                f"{html.escape(', '.join(listed(nodes, LISTED)))}{held}",
                _fence(content, _fence_of(path))), False))
    return out


def _short_key(key: str) -> str:
    """`Kind name` of a `type::name` key: enough to tell resources apart in a list."""
    typ, _, name = key.partition("::")
    return f"{typ.rsplit(':', 1)[-1].rsplit('/', 1)[-1]} {name}"


def _md_diff(plan: dict[str, Any], diff: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """The diff against the base plan: a summary (essential) and collapsible details."""
    res = diff["resources"]
    head = [f"#### Changes against the base plan (`{diff['baseStack']}`)", ""]
    if diff["empty"]:
        head.append("None: this plan and the base plan are the same.")
    for c in diff["config"]:
        head.append(f"- setting `{c['key']}`: `{_short(c['base'])}` → `{_short(c['new'])}`")
    counts = [f"{len(res[k])} {k}" for k in ("added", "removed", "withheld", "changed")
              if res[k]]
    if counts:
        head.append(f"- resources: {', '.join(counts)}")
    for kind in ("added", "removed"):
        if res[kind]:
            head.append(f"  - {kind}: " + ", ".join(listed([f"`{k}`" for k in res[kind]],
                                                           LISTED)))
    if res["changed"]:
        head.append("  - changed: " + ", ".join(listed(
            [f"`{_short_key(c['resource'])}`" for c in res["changed"]], LISTED)))
    head += [f"- {line}" for line in unit_changes(diff, LISTED)]
    head += [f"- {line}" for line in _rollout_change(diff, LISTED)]
    for kind in ("new", "fixed"):
        for f in diff["findings"][kind]:
            head.append(f"- {kind} finding: **{f['id']}** ({f['severity']}) `{f['where']}`"
                        + (f" — fix: {f['fix']}" if kind == "new" else ""))
    out = [("diff summary", "\n".join(head) + "\n", True)]
    verb = "would change (rejected)" if diff["rejected"] else "changes"
    for nodes, path, text in _node_diffs(diff):
        out.append((f"file diff {path}", _details(
            f"{_code(path)} {verb} on {counted(len(nodes), 'node')}: "
            + ", ".join(listed([_code(n) for n in nodes], LISTED)),
            _fence(text, "diff")), False))
    for release, text in diff["values"].items():
        out.append((f"values diff {release}", _details(
            f"Helm values {_code(release)}", _fence(text, "diff")), False))
    for release, rel in plan["helm"].items():
        if release not in diff["values"]:
            out.append((f"values {release}", _details(
                f"Helm values {_code(release)} (unchanged)",
                _fence(to_yaml(rel["values"]), "yaml")), False))
    for release, text in diff.get("toolkitEnv", {}).items():
        out.append((f"toolkit env diff {release}", _details(
            f"Toolkit env {_code(release)}", _fence(text, "diff")), False))
    for release, env in toolkit_env(plan).items():
        if release not in diff.get("toolkitEnv", {}):
            out.append((f"toolkit env {release}", _details(
                f"Toolkit env {_code(release)} (unchanged)", _fence(env, "sh")), False))
    for change in res["changed"]:
        out.append((f"resource {change['resource']}", _details(
            f"{_code(change['resource'])}: {html.escape(', '.join(change['paths']))}",
            _fence(change["diff"], "diff")), False))
    return out


def render_markdown(plan: dict[str, Any], limit: int = COMMENT_BUDGET) -> str:
    """The PR comment: never longer than `limit` characters; sections that do not fit are
    left out, in reading order, with a note pointing at the full JSON plan."""
    sections = _md_sections(plan)
    note_room = len(TRUNCATED_NOTE) + 400
    total = sum(len(text) + 1 for _, text, essential in sections if essential)
    kept, left_out = [], []
    for name, text, essential in sections:
        if essential:
            kept.append(text)
        elif total + len(text) + 1 + note_room <= limit:
            kept.append(text)
            total += len(text) + 1
        else:
            left_out.append(name)
    body = "\n".join(kept)
    if not left_out and len(body) <= limit:
        return body
    if len(body) + note_room > limit:   # the essentials alone are too long: cut them
        body = body[:limit - note_room].rsplit("\n", 1)[0] + "\n"
        left_out.append("the rest of the summary")
    names = ", ".join(left_out[:6]) + (", ..." if len(left_out) > 6 else "")
    return body + TRUNCATED_NOTE.format(limit=limit, count=counted(len(left_out), 'section'),
                                        names=names)


__all__ = ["COMMENT_BUDGET", "GITHUB_COMMENT_LIMIT", "render_markdown", "render_text"]
