"""docs/reference/cli.md: every `gpuplane` command, from the argparse parsers themselves
(`gpuplane.cli.main.root_parser` and the parsers of the commands that parse their own
arguments, `gpuplane.cli.main.passthrough_parsers`): usage, description, every option with
its choices, default and help. An option added or re-worded in the code changes the page."""

from __future__ import annotations

import argparse

from docgen.md import header, prose, table, value

PAGE = "cli.md"
WIDTH = 88   # usage lines are wrapped at a fixed width: the page must not depend on $COLUMNS


def pages() -> dict[str, str]:
    from gpuplane.cli.main import passthrough_parsers, root_parser

    own = passthrough_parsers()
    parts = [header("components/gpuplane/cli/main.py and the parsers it hands commands to"),
             "# CLI reference\n\n",
             "Exit codes everywhere: 0 clean (warnings allowed), 1 error findings, "
             "2 bad input; `gpuplane probe` adds 3 for a usage error.\n\n"]
    for prog, parser in _commands(root_parser(), own):
        parts.append(_command(prog, parser))
    return {PAGE: "".join(parts).rstrip() + "\n"}


def _commands(parser: argparse.ArgumentParser, own: dict[str, argparse.ArgumentParser],
              prog: str = "gpuplane") -> list[tuple[str, argparse.ArgumentParser]]:
    """(command line, parser) in the order the parsers define them, depth first; a command
    that parses its own arguments is read from its own parser."""
    found = [(prog, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                sub = own.get(name, sub) if prog == "gpuplane" else sub
                sub.prog = f"{prog} {name}"
                found += _commands(sub, own, f"{prog} {name}")
    return found


def _command(prog: str, parser: argparse.ArgumentParser) -> str:
    parts = [f"## `{prog}`\n\n"]
    if parser.description:
        parts.append(prose(parser.description) + "\n\n")
    formatter = argparse.HelpFormatter(prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    parts.append(f"```text\n{formatter.format_help().strip()}\n```\n\n")
    rows, commands = [], []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            commands += [(f"`{prog} {a.dest}`", prose(a.help or "", cell=True))
                         for a in action._choices_actions]
        elif not isinstance(action, argparse._HelpAction):
            rows.append((_invocation(action), _default(action),
                         prose(_help(action, prog), cell=True)))
    if rows:
        parts.append(table(("argument", "default", "meaning"), rows) + "\n")
    if commands:
        parts.append(table(("command", "what it does"), commands) + "\n")
    if parser.epilog:
        parts.append(prose(parser.epilog) + "\n\n")
    return "".join(parts)


def _invocation(action: argparse.Action) -> str:
    meta = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    if action.choices is not None and action.metavar is None:
        meta = "{" + ",".join(str(c) for c in action.choices) + "}"
    if action.nargs == 0:
        shown = ", ".join(action.option_strings)
    elif action.option_strings:
        shown = ", ".join(f"{o} {meta}" for o in action.option_strings)
    else:
        shown = str(meta)
    if action.nargs == "?" and not action.option_strings:
        shown = f"[{shown}]"
    notes = []
    if action.nargs in ("*", "+") or isinstance(action, argparse._AppendAction):
        notes.append("repeatable" if action.option_strings else "one or more")
    if action.required and action.option_strings:
        notes.append("required")
    return f"`{shown}`" + (f" ({', '.join(notes)})" if notes else "")


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, [], ""):
        return ""
    return value(str(action.default))


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%(" in text:   # argparse's own substitutions, as --help shows them
        text = text % {**vars(action), "prog": prog}
    return text
