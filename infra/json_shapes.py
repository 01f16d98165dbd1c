"""Check parsed JSON against a pydantic model and say, in one line per problem, what is wrong where.

`validate(model, data)` returns the model instance or raises `ShapeError` whose `problems` are
(where, what) pairs such as (`resources[0].inputs`, `is a list, expected an object`). Validation
is strict (a string is never read as a number, a list never as an object): the models describe
files and API answers this program reads, and a value of the wrong kind means the producer is not
what we think it is.

The value itself is never quoted, only its kind: an API answer may carry a secret and a plan file
may be pages long. A field states what it expects in its own words with `expected("a resource
name")`, and a model with `model_config = ConfigDict(json_schema_extra={"expected": ...})`;
otherwise the wording follows the error type.
"""

from __future__ import annotations

import typing
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infra.errors import json_kind


class Shape(BaseModel):
    """Base of the document models: strict, unknown keys ignored (producers add fields)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


def expected(text: str, default: Any = ..., **kwargs: Any) -> Any:
    """A Field whose wrong value is reported as `..., expected <text>`."""
    return Field(default, json_schema_extra={"expected": text}, **kwargs)


M = TypeVar("M", bound=BaseModel)


class ShapeError(ValueError):
    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{where} {what}".strip() for where, what in problems))


def validate(model: type[M], data: Any, *, prefix: str = "") -> M:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ShapeError(problems(model, err, prefix=prefix)) from None


def problems(model: type[BaseModel], err: ValidationError, *, prefix: str = "") -> list[tuple[str, str]]:
    """(where, what) for every error of `err`, raised by validating against `model`."""
    out = []
    for error in err.errors(include_url=False):
        loc = tuple(part for part in error["loc"] if not _is_union_tag(part))
        where = _path(loc, prefix)
        wanted = _expected_at(model, loc) or _DEFAULT_EXPECTED.get(error["type"]) or error["msg"]
        if error["type"] == "missing":
            out.append((where, f"is missing, expected {wanted}"))
        else:
            out.append((where, f"is {_kind(error)}, expected {wanted}"))
    return out


_DEFAULT_EXPECTED = {
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "a list",
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean",
    "string_pattern_mismatch": "a non-blank string",
}


def _kind(error: dict) -> str:
    value = error.get("input")
    if error["type"] == "string_pattern_mismatch" and isinstance(value, str):
        return "an empty string" if value == "" else "a blank string"
    if error["type"] in ("greater_than_equal", "greater_than", "less_than", "less_than_equal") and isinstance(value, int | float):
        return repr(value)  # a number is no secret, and "is -3" says more than "is a number"
    return json_kind(value)


def _path(loc: tuple, prefix: str) -> str:
    text = prefix
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _is_union_tag(part: Any) -> bool:
    """pydantic names the branch of a union in the location (`str`, `list[...]`): not a key."""
    return isinstance(part, str) and ("[" in part or part in ("str", "int", "float", "bool", "dict", "list", "none"))


def _expected_at(model: type[BaseModel], loc: tuple) -> str | None:
    """The `expected` wording of the field or list item at `loc`, walking the model's annotations."""
    annotation: Any = model
    said: str | None = _model_expected(model) if not loc else None
    for part in loc:
        said = None
        if isinstance(part, int):
            annotation = _item_type(annotation)
            said = _model_expected(annotation)
            continue
        current = _model_of(annotation)
        if current is None or part not in current.model_fields:
            return None
        field = current.model_fields[part]
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        said = extra.get("expected")
        annotation = field.annotation
    return said


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _item_type(annotation: Any) -> Any:
    if typing.get_origin(annotation) is list:
        return typing.get_args(annotation)[0]
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is list:
            return typing.get_args(arg)[0]
    return None


def _model_expected(annotation: Any) -> str | None:
    model = _model_of(annotation)
    if model is None:
        return None
    extra = model.model_config.get("json_schema_extra")
    return extra.get("expected") if isinstance(extra, dict) else None
