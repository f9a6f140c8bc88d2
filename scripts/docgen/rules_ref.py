"""docs/reference/rules/: one page per failure mode FM01-FM18 and an index, from the
catalogue `gpuplane explain` prints (`gpuplane.rules.catalogue.RULES` and the checks
within a rule, `gpuplane.rules.topics.TOPICS`): the same symptom, cause, example, fix and
upstream source, so a finding's id leads to the same words in a terminal and on the site.
Each page ends with where the rule lives (`gpuplane.rules.registry`): the functions that
emit it, the event texts that point at it and the tests that hold it."""

from __future__ import annotations

from docgen.md import header, prose, table

SOURCE = "components/gpuplane/rules/catalogue.py, topics.py and registry.py"


def pages() -> dict[str, str]:
    from gpuplane.rules import RULES
    from gpuplane.rules.topics import topics_of

    out = {"rules/index.md": _index()}
    for rule in RULES.values():
        parts = [header(SOURCE), f"# {rule.id}: {prose(rule.title)}\n\n",
                 f"Default severity: **{rule.severity.value}**. In a terminal: "
                 f"`gpuplane explain {rule.id}`. Policies: `gpuplane-{rule.id.lower()}` "
                 f"(errors) and `gpuplane-{rule.id.lower()}-advisory` (warnings).\n\n"]
        parts += _sections((("Symptom", rule.symptom), ("Why it breaks", rule.why),
                            ("Example", rule.example), ("Fix", rule.fix)), "##")
        parts.append(f"## Upstream\n\n`{rule.upstream}`\n\n")
        topics = topics_of(rule.id)
        if topics:
            parts.append(f"## Checks within {rule.id}\n\n")
        for topic in topics:
            parts.append(f"### {topic.id}: {prose(topic.title)}\n\n"
                         f"`gpuplane explain {topic.id}`\n\n")
            parts += _sections((("Why it breaks", topic.why), ("Example", topic.example),
                                ("Fix", topic.fix)), "####")
            parts.append(f"#### Upstream\n\n`{topic.upstream}`\n\n")
        parts.append(_where(rule.id))
        out[f"rules/{rule.id}.md"] = "".join(parts).rstrip() + "\n"
    return out


def _where(rule_id: str) -> str:
    """Where the rule lives in the code and the tests, from the registry (which the tests
    hold against the source, so this list is complete)."""
    from gpuplane.rules.registry import find

    index = find(rule_id)
    lines = [f"## Where {rule_id} lives\n\n"
             f"`python -c 'from gpuplane.rules.registry import describe; "
             f"print(describe(\"{rule_id}\"))'` prints this list.\n\n",
             "Emitted by:\n\n", *[f"- `{name}`\n" for name in index.checks]]
    if index.events:
        lines += ["\nEvent texts that point at it (`gpuplane.rules.events`): ",
                  ", ".join(f"`{c.key}`" for c in index.events), ".\n"]
    lines += ["\nTests:\n\n", *[f"- `{test}`\n" for test in index.tests]]
    return "".join(lines)


def _sections(items: tuple[tuple[str, str], ...], level: str) -> list[str]:
    return [f"{level} {title}\n\n{prose(text)}\n\n" for title, text in items]


def _index() -> str:
    from gpuplane.rules import RULES
    from gpuplane.rules.topics import TOPICS

    rows = [(f"[{r.id}]({r.id}.md)", r.severity.value, prose(r.title, cell=True))
            for r in RULES.values()]
    checks = [(f"[{t.id}]({t.id.split('-', 1)[0]}.md#{_anchor(t.id, t.title)})",
               prose(t.title, cell=True)) for t in TOPICS.values()]
    return (header(SOURCE) + "# Failure modes\n\n"
            "Every finding gpuplane reports, in a plan, a policy violation, a failed "
            "`pulumi up` or a doctor report, carries one of these ids; "
            "`gpuplane explain ID` prints the same text, and each page ends with where the "
            "rule lives: the functions that emit it, the event texts that point at it and "
            "the tests that hold it ([finding a rule by id](../../architecture.md"
            "#finding-a-rule-by-id)).\n\n"
            + table(("rule", "default severity", "title"), rows)
            + "\n## Checks within a failure mode\n\n"
            + table(("check", "title"), checks))


def _anchor(topic_id: str, title: str) -> str:
    """The id MkDocs' toc extension gives the heading `### <id>: <title>`."""
    from markdown.extensions.toc import slugify

    return str(slugify(f"{topic_id}: {title}", "-"))
