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


def yaml_error_line(path: Any, err: Exception) -> str:
    """`FILE: not valid YAML at line L, column C: PROBLEM (CONTEXT)`: one line, from a PyYAML or
    ruamel error (both carry 0-based marks); falls back to the error's first line."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(err, "problem", None) or (str(err).strip().splitlines() or [type(err).__name__])[0]
    context = getattr(err, "context", None)
    return f"{path}: not valid YAML{where}: {problem}" + (f" ({context})" if context else "")
