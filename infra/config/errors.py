"""pydantic's errors as Problems: the key path as written in the stack file, the value, and what
is allowed (a type named in words, a range, the allowed keys with the closest one suggested).

Knows no section: the models it walks are the root's (`StackInput`), read from their declarations,
the tags of a discriminated union (a model's `layout:` forms) included."""

from __future__ import annotations

import difflib
import functools
import re
import typing
from typing import Any

import yaml
from pydantic import BaseModel, Tag

from infra.config.base import NS
from infra.errors import Problem


@functools.cache
def _tagged_models(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Tag → model of every discriminated union under `root` (`Annotated[LayoutConfig, Tag(...)]`):
    pydantic puts the tag of the form it chose in an error's location, where it is not a key."""
    tags: dict[str, type[BaseModel]] = {}
    seen: set[type[BaseModel]] = set()

    def walk(annotation: Any) -> None:
        if typing.get_origin(annotation) is typing.Annotated:
            inner, *metadata = typing.get_args(annotation)
            for meta in metadata:
                if isinstance(meta, Tag) and isinstance(inner, type) and issubclass(inner, BaseModel):
                    tags[meta.tag] = inner
            walk(inner)
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation not in seen:
                seen.add(annotation)
                for field in annotation.model_fields.values():
                    walk(field.annotation)
        else:
            for arg in typing.get_args(annotation):
                walk(arg)

    walk(root)
    return tags


def _path(loc: tuple, tags: dict[str, type[BaseModel]]) -> str:
    out = ""
    for part in loc:
        if part == "[key]" or part in tags:
            continue  # pydantic's marker for a bad mapping key / the union form chosen: not a key
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _model_at(loc: tuple, root: type[BaseModel]) -> type[BaseModel] | None:
    """The pydantic model that owns the key at `loc` under `root` (for listing allowed keys)."""
    model: Any = root
    tags = _tagged_models(root)
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        if part in tags:
            model = tags[part]
            continue
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        model = _inner_model(field.annotation)
        if model is None:
            return None
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    meta = getattr(annotation, "__origin__", None)
    if meta is not None and isinstance(meta, type) and issubclass(meta, BaseModel):
        return meta
    return None


_TYPE_NAMES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


_RANGE_ERRORS = {
    "greater_than": "greater than",
    "greater_than_equal": "at least",
    "less_than": "less than",
    "less_than_equal": "at most",
}


def _number_text(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _yaml_float(value: str) -> str:
    """`1e308` as YAML 1.1 reads it as a float: `1.0e+308`."""
    m = re.match(r"^\s*([+-]?[0-9]+)(?:\.([0-9]*))?[eE]([+-]?)([0-9]+)\s*$", value)
    if not m:
        return value.strip()
    return f"{m[1]}.{m[2] or '0'}e{m[3] or '+'}{m[4]}"


def _number_as_text(value: str) -> str:
    """Why a number arrived as text, and how to write it. Quoted (an editor, `yq`, or `pulumi config
    set --path`, which stores anything but an integer or a boolean as a string): what unquoted YAML
    reads as a number. An exponent YAML 1.1 (PyYAML, Pulumi) reads as text even unquoted: `1e308`
    and `5e3`, since a YAML 1.1 float needs a dot and a signed exponent."""
    try:
        loaded = yaml.safe_load(value)
    except yaml.YAMLError:
        loaded = value
    if isinstance(loaded, int | float) and not isinstance(loaded, bool):
        hint = "" if isinstance(loaded, int) else " (`pulumi config set --path` stores it as text unless given `--type float`)"
        return f"{value!r} is quoted, so it is text, not a number: write it without quotes, {value.strip()}{hint}"
    if re.search(r"[0-9][eE][-+]?[0-9]", value):
        return (f"{value!r} is text, not a number: YAML 1.1 reads an exponent as a number only with a dot and a sign; "
                f"write {_yaml_float(value)} or a plain number (and unquoted)")
    return f"{value!r} is text, not a number; write a plain number, unquoted"


def problem_from_pydantic(err: dict, root: type[BaseModel]) -> Problem:
    """One pydantic error of the stack file (`root` its model) as a Problem at its key path."""
    loc = tuple(err["loc"])
    path = NS + _path(loc, _tagged_models(root))
    kind = err["type"]
    value = err.get("input")
    if kind == "extra_forbidden":
        owner = _model_at(loc, root)
        allowed = ", ".join(owner.model_fields) if owner else "see docs/configuration.md"
        close = difflib.get_close_matches(str(loc[-1]).lower(), list(owner.model_fields) if owner else [], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return Problem(path, f"unknown key{hint}; allowed keys: {allowed}")
    if kind == "missing":
        return Problem(path, "required key is missing")
    if kind in ("float_type", "int_type") and isinstance(value, str) and _number_text(value):
        return Problem(path, _number_as_text(value))
    if kind == "finite_number":
        return Problem(path, f"{value!r} is not a finite number; give a real figure (.inf and .nan are not allowed)")
    if kind == "string_type" and isinstance(value, int | float) and not isinstance(value, bool):
        # `version: 1.30` is the number 1.3 to YAML: a string that looks like a number needs quotes.
        return Problem(path, f"{value!r} has the wrong type; expected a string: write it in quotes (\"{value}\")")
    if kind in _TYPE_NAMES:
        return Problem(path, f"{value!r} has the wrong type; expected {_TYPE_NAMES[kind]}")
    if kind in _RANGE_ERRORS:
        bound = next(iter(err.get("ctx", {}).values()), None)
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        return Problem(path, f"{value!r} is out of range; it must be {_RANGE_ERRORS[kind]} {bound}")
    if kind == "value_error":
        msg = str(err["msg"]).removeprefix("Value error, ")
        return Problem(path, msg)
    if kind in ("literal_error", "enum"):
        expected = err.get("ctx", {}).get("expected", "")
        return Problem(path, f"{value!r} is not allowed; allowed: {expected}")
    return Problem(path, f"{value!r}: {err['msg']}")

