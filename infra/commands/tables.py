"""Every table the commands print, drawn by rich (https://rich.readthedocs.io/en/stable/tables.html).

On a terminal: rounded box lines, colour where a cell carries a style (rich honours NO_COLOR),
and long cells wrapped to the terminal's width. Anywhere else (a pipe, a CI log, a test): a plain
ASCII box, no escape codes and no wrapping, so the same input always gives the same text and the
output diffs and greps cleanly.

Cells are plain text, never rich markup: a detail such as `[redacted]` or a PromQL selector must
print as written.
"""

from __future__ import annotations

import io
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

_UNLIMITED_WIDTH = 100_000  # off a terminal nothing wraps: one row, one line


@dataclass(frozen=True)
class Column:
    header: str
    justify: Literal["left", "right"] = "left"


Cell = str | Text


def right(header: str) -> Column:
    """A column of numbers: right-aligned so the digits line up."""
    return Column(header, "right")


def render(
    columns: Sequence[str | Column], rows: Iterable[Sequence[Cell]], *, title: str | None = None, terminal: bool | None = None
) -> str:
    """The table as text, without a trailing newline; `terminal` defaults to whether stdout is one."""
    if terminal is None:
        terminal = sys.stdout.isatty()
    table = Table(
        box=box.ROUNDED if terminal else box.ASCII,
        title=Text(title) if title else None,
        title_justify="left",
        header_style="bold" if terminal else "",
        highlight=False,
    )
    for column in columns:
        column = column if isinstance(column, Column) else Column(column)
        table.add_column(Text(column.header), justify=column.justify, overflow="fold")
    for row in rows:
        table.add_row(*(cell if isinstance(cell, Text) else Text(str(cell)) for cell in row))
    out = io.StringIO()
    if terminal:
        console = Console(file=out, force_terminal=True, width=shutil.get_terminal_size().columns, highlight=False)
    else:
        console = Console(
            file=out, force_terminal=False, no_color=True, color_system=None, width=_UNLIMITED_WIDTH,
            highlight=False, emoji=False,
        )
    console.print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").split("\n"))
