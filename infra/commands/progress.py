"""Progress for long work, on a terminal only: a rich spinner on stderr with a line that updates.

Not on a terminal (CI logs, pipes, tests) nothing is drawn, so captured output stays exactly what
the commands print.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO


@contextmanager
def status(message: str, *, stream: TextIO | None = None) -> Iterator[Callable[[str], None]]:
    """Show `message` with a spinner while the block runs; yields `update(text)` to change it."""
    stream = stream or sys.stderr
    if not _is_terminal(stream):
        yield lambda text: None
        return
    from rich.console import Console

    console = Console(file=stream)
    with console.status(message) as live:
        yield live.update


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
