"""The one error type for user mistakes.

Anything a user can fix by editing a stack file or a command line raises `UserError`; the CLI and
the Pulumi entry point render it as one line per problem with no traceback. Everything else is a
bug and is allowed to raise normally.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input: where, what was given, and what is allowed."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class UserError(Exception):
    """A mistake in user input (stack config, CLI arguments, input files).

    Carries every problem found so that a user fixes a file in one round trip, not one per run.
    """

    def __init__(self, problems: list[Problem] | str, *, source: str | None = None):
        if isinstance(problems, str):
            problems = [Problem("", problems)]
        self.problems = list(problems)
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        head = f"{self.source}: " if self.source else ""
        if len(self.problems) == 1:
            return f"{head}{self.problems[0]}"
        lines = [f"{head}{len(self.problems)} problems:"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


class ConfigError(UserError):
    """The stack configuration is invalid."""


def json_kind(value: Any) -> str:
    """A JSON value's kind for "expected an object, got a list": never its content, which may
    hold a secret (an API answer) or be pages long (a plan file)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return {str: "a string", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)
