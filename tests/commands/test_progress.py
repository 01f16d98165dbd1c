"""Progress is drawn on a terminal only: captured and piped output stays exactly what commands print."""

from __future__ import annotations

import io

from infra.commands.progress import status


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_nothing_is_drawn_off_a_terminal():
    stream = io.StringIO()
    with status("waiting for job x", stream=stream) as update:
        update("still waiting")
    assert stream.getvalue() == ""


def test_a_terminal_gets_the_spinner_line():
    stream = _Terminal()
    with status("waiting for job x", stream=stream) as update:
        update("waiting for job x: 15 of at most 4380 s")
    assert "waiting for job x" in stream.getvalue()
