"""Generate docs/configuration.md from the config schema, so the reference cannot drift from the code.

Run `python -m infra.configdoc > docs/configuration.md`; a test fails when the committed file is stale.
"""

from __future__ import annotations

import sys
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from infra.config import NS, SECRET_KEYS, StackInput

HEADER = """# Configuration reference

Generated from `infra/config/` by `python -m infra.configdoc` — do not edit by hand.

Keys live under the project namespace `inference-platform:` in `stacks/Pulumi.<stack>.yaml`. Unknown
keys are errors at every level, so a typo never silently does nothing. Structured values are YAML
mappings (or `pulumi config set --path 'models[0].slo.ttft_p90_ms' 2000`). Every validation error
names the key path, the bad value and what is allowed; all errors of a file are reported together.
Editors check a stack file as it is typed against `docs/stack.schema.json` (generated from the same
model by `python -m infra.stackschema`), which each stack file names on its first line.

Environment defaults: `prod` turns on the HA control plane, `protect` on stateful resources and
observability; `staging` turns on observability; `dev` turns on neither.
"""


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        names = [_type_name(a) for a in args if a is not type(None)]
        suffix = " (optional)" if type(None) in args else ""
        return " or ".join(names) + suffix
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[0])} → {_type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    return getattr(annotation, "__name__", str(annotation))


def _default(field) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "see below"
        return f"`{value!r}`"
    if field.default is PydanticUndefined:
        return "**required**"
    if field.default is None:
        return "unset"
    return f"`{field.default!r}`" if not isinstance(field.default, str) else f"`{field.default}`"


def _nested(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _nested(arg)
        if found is not None:
            return found
    return None


def _alternatives(annotation: Any) -> list[type[BaseModel]]:
    """Every mapping type a key accepts (a union of two mappings documents both)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += [m for m in _alternatives(arg) if m not in found]
    return found


def _section(model: type[BaseModel], path: str, out: list[str]) -> None:
    out += [f"### `{path}`", "", (model.__doc__ or "").strip(), "", "| key | type | default | description |", "|---|---|---|---|"]
    children = []
    for name, field in model.model_fields.items():
        out.append(f"| `{name}` | {_type_name(field.annotation)} | {_default(field)} | {field.description or ''} |")
        item = "[]" if typing.get_origin(field.annotation) is list else ""
        for k, nested in enumerate(_alternatives(field.annotation)):
            # a second mapping form of the same key (models[].layout: colocated or P/D) gets its own section
            suffix = "" if k == 0 else f" ({nested.__name__})"
            children.append((nested, f"{path}.{name}{item}{suffix}"))
    out.append("")
    for nested, child_path in children:
        _section(nested, child_path, out)


def render() -> str:
    out = [HEADER, "## Keys", "", "| key | type | default | description |", "|---|---|---|---|"]
    sections = []
    for name, field in StackInput.model_fields.items():
        out.append(f"| `{NS}{name}` | {_type_name(field.annotation)} | {_default(field)} | {field.description or ''} |")
        nested = _nested(field.annotation)
        if nested is not None:
            item = "[]" if typing.get_origin(field.annotation) is list else ""
            sections.append((nested, f"{NS}{name}{item}"))
    out += ["", "## Secrets", "", "Set with `pulumi config set --secret KEY VALUE`; a secret given in plain text is an error.", "",
            "| key | what it is |", "|---|---|", "| `digitalocean:token` | DigitalOcean API token (or `DIGITALOCEAN_TOKEN` in the environment) |"]
    out += [f"| `{NS}{k}` | {v} |" for k, v in SECRET_KEYS.items()]
    out += ["", "A credential in any other key is an error too: every string of the stack file, in every namespace, is "
            "scanned (`infra/config/credentials.py`): access tokens by their prefix, JWTs and private keys; incoming-webhook "
            "URLs (a Slack webhook is a credential: it belongs in `alert_webhook_url`); URLs with a password or a credential "
            "in their query string (`runbook_url`, env values); env variables and provider keys named like a credential "
            "(`*TOKEN*`, `*SECRET*`, `*KEY*`, `*PASSWORD*`, `kubernetes:kubeconfig`); credential flags in argument lists "
            "(`--api-key`, `--hf-token`). The error names the key, never the value."]
    out += ["", "## Sections", ""]
    for model, path in sections:
        _section(model, path, out)
    from infra.invariants.doc import INVARIANTS_DOC  # the whole-plan checks, stated where the keys are

    out += ["", INVARIANTS_DOC.rstrip()]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
