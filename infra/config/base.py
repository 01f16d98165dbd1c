"""What every section of the stack file shares: the project's names, the strict base model, and
the small helpers its validators use (suggesting the closest allowed value, spotting duplicates)."""

from __future__ import annotations

import difflib
import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

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



# Kubernetes label syntax (kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set):
# a key is an optional DNS-subdomain prefix (≤ 253) and `/`, then a name (≤ 63) of alphanumerics,
# '-', '_', '.', beginning and ending alphanumeric; a value is empty or the same as a name.
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def _label_key_problem(key: str, reserved: tuple[str, ...]) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return "has more than one '/'; a label key is [prefix/]name"
    if not _LABEL_NAME.match(name):
        return (
            "is not a valid label name: at most 63 characters of letters, digits, '-', '_' and '.', "
            "beginning and ending with a letter or digit (optionally after a DNS prefix and '/')"
        )
    if key.startswith("/") or (prefix and (len(prefix) > 253 or not all(_DNS_SUBDOMAIN_LABEL.match(p) for p in prefix.split(".")))):
        return "has a prefix that is not a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)"
    for taken in reserved:
        if prefix == taken or prefix.endswith("." + taken):
            return f"uses the reserved prefix {prefix}/ (reserved: {', '.join(p + '/' for p in reserved)}); choose your own prefix, e.g. example.com/team"
    return None


def label_map(labels: dict[str, str], *, reserved: tuple[str, ...]) -> dict[str, str]:
    """A map of Kubernetes labels (node labels, a node selector): each bad key or value as its own
    error at its key, reported with every other problem; keys under a `reserved` prefix refused."""
    errors = []
    for key, value in labels.items():
        problem = _label_key_problem(key, reserved)
        if problem is None and value and not _LABEL_NAME.match(value):
            shown = value if len(value) <= 70 else value[:67] + "..."
            problem = (
                f"value {shown!r} is not a valid label value: at most 63 characters of letters, digits, '-', '_' "
                "and '.', beginning and ending with a letter or digit (or empty)"
            )
        if problem is not None:
            message = f"label {key!r} {problem}" if not problem.startswith("value") else f"label {key!r}: {problem}"
            errors.append(
                InitErrorDetails(type=PydanticCustomError("value_error", "{message}", {"message": message}), loc=(key,), input=key)
            )
    if errors:
        raise ValidationError.from_exception_data("labels", errors)
    return labels
