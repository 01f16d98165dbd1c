"""What every section of the stack file shares: the project's names, the strict base model, and
the small helpers its validators use (suggesting the closest allowed value, spotting duplicates)."""

from __future__ import annotations

import difflib
import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from infra.errors import Problem

PROJECT = "inference-platform"
NS = f"{PROJECT}:"
ENVIRONMENTS = ("dev", "staging", "prod")

# Stack names become DigitalOcean resource names (`<stack>-doks`, `<stack>-net-vpc`) and file names
# (`stacks/Pulumi.<stack>.yaml`): DNS-label characters only, so no name reaches outside stacks/.
_STACK_NAME = re.compile(r"^[a-z][a-z0-9-]{0,38}[a-z0-9]$")
STACK_NAME_RULE = (
    "2 to 40 characters of lowercase letters, digits and '-', starting with a letter and ending with a "
    "letter or digit (e.g. staging-eu)"
)

_DNS_LABEL = re.compile(r"^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$")


def one_of(value: str, allowed: list[str], what: str) -> str:
    """`value` when allowed; else a ValueError naming the closest allowed value and all of them."""
    if value in allowed:
        return value
    close = difflib.get_close_matches(value, allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"{value!r} is not a {what}{hint}; allowed: {', '.join(allowed)}")


def dns_label(value: str) -> str:
    if not _DNS_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a valid name; use lowercase letters, digits and '-', start with a letter, "
            "at most 40 characters"
        )
    return value


Name = Annotated[str, AfterValidator(dns_label)]


class StrictModel(BaseModel):
    # allow_inf_nan=False: `.inf` and `.nan` are YAML floats, and no key means either.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


def duplicates(items: list, attr: str, section: str, consequence: str = "") -> list[Problem]:
    """A problem at each item of `section` whose `attr` repeats an earlier item's."""
    seen: dict[str, int] = {}
    problems = []
    for i, item in enumerate(items):
        value = getattr(item, attr)
        if value in seen:
            problems.append(Problem(f"{NS}{section}[{i}].{attr}", f"{value!r} duplicates {section}[{seen[value]}]; names must be unique{consequence}"))
        else:
            seen[value] = i
    return problems


def stack_name_problem(stack: str) -> str | None:
    """Why `stack` cannot name a stack (its file and its DigitalOcean resources), or None."""
    if _STACK_NAME.match(stack):
        return None
    shown = stack if len(stack) <= 60 else stack[:57] + "..."
    return f"{shown!r} is not a valid stack name; use {STACK_NAME_RULE}"


def stack_name_problems(stack: str) -> list[Problem]:
    problem = stack_name_problem(stack)
    return [Problem("stack", problem)] if problem else []

