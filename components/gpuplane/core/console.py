"""One text style for every command: rich on a terminal, plain text when piped.

On a terminal: colour, the terminal's width, tables with a simple head rule whose cells
fold rather than being cut. Piped (a file, CI log, `grep`): no colour, no wrapping, no
padding to a width and no truncation — a line is as long as its content, and tables are
aligned plain columns without trailing spaces, so the output diffs and greps cleanly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO

from rich import box
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text


def make_console(file: IO[str] | None = None) -> Console:
    """The console every command prints to (see the module docstring)."""
    console = Console(file=file)
    if console.is_terminal:
        return console
    return Console(file=file, no_color=True, highlight=False, soft_wrap=True, emoji=False)


def print_line(console: Console, *parts: str | tuple[str, str]) -> None:
    """One line of text and (text, style) pieces; never read as markup, wrapped only on a
    terminal."""
    console.print(Text.assemble(*parts), soft_wrap=not console.is_terminal)


def print_block(console: Console, text: str, lexer: str) -> None:
    """A file, diff or YAML document: highlighted on a terminal, verbatim when piped."""
    if console.is_terminal:
        console.print(Syntax(text.rstrip("\n"), lexer, word_wrap=True))
    else:
        console.out(text.rstrip("\n"), highlight=False)


def print_table(console: Console, title: str, columns: Sequence[str],
                rows: Sequence[Sequence[str]]) -> None:
    """A titled table in the one table style of the CLI."""
    if console.is_terminal:
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    console.out("\n".join(plain_table(title, columns, rows)), highlight=False)


def plain_table(title: str, columns: Sequence[str],
                rows: Sequence[Sequence[str]]) -> list[str]:
    """Aligned columns, two spaces apart, a dashed rule under the head, no trailing
    spaces; cells keep their whole text."""
    table = [list(columns), *[[c.replace("\n", " ") for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    rule = ["-" * w for w in widths]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [title, line(table[0]), line(rule), *[line(r) for r in table[1:]]]


__all__ = ["make_console", "plain_table", "print_block", "print_line", "print_table"]
