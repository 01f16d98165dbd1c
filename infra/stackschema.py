"""Generate docs/stack.schema.json, the JSON Schema of a stack file, from the config model.

    python -m infra.stackschema > docs/stack.schema.json

Editors that speak the YAML language server validate and complete a stack file as it is typed
when its first line is `# yaml-language-server: $schema=../docs/stack.schema.json` (every shipped
stack and `infra new-env` output carry it). The schema is what `infra/config/` accepts: each
`inference-platform:<key>` of `StackInput`, the secret keys and `digitalocean:token` as Pulumi
`{secure: ...}` values, other providers' namespaced keys left alone. It checks shape and types
only; `infra plan` still gives the full verdict (cross-key rules, catalog lookups, the planner).
A test keeps the committed file equal to this output and validates the shipped stacks with it.
"""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

from infra.config import NS, PROVIDER_SECRET_KEYS, SECRET_KEYS, StackInput

SCHEMA_PATH = "docs/stack.schema.json"
MODELINE = "# yaml-language-server: $schema=../docs/stack.schema.json"

_SECURE = {
    "description": "A Pulumi secret: set it with `pulumi config set --secret KEY VALUE` (plain text is an error).",
    "type": "object",
    "properties": {"secure": {"type": "string", "description": "The value encrypted by Pulumi."}},
    "required": ["secure"],
    "additionalProperties": False,
}

# Inputs a field's own schema does not show, because a BeforeValidator maps them to its type.
_ALSO_ACCEPTED: dict[tuple[str, str], dict] = {
    ("ModelConfig", "layout"): {"const": "auto", "description": "The planner chooses the layout."},
}


def render_schema() -> dict[str, Any]:
    model = copy.deepcopy(StackInput.model_json_schema(mode="validation", ref_template="#/$defs/{model}"))
    defs = model.pop("$defs", {})
    for (name, field), accepted in _ALSO_ACCEPTED.items():
        prop = defs[name]["properties"][field]
        branches = prop.pop("anyOf", None) or [{k: prop.pop(k) for k in list(prop) if k not in ("description", "default", "title")}]
        prop["anyOf"] = [accepted, *branches]
    properties: dict[str, Any] = {}
    for key, prop in model["properties"].items():
        properties[f"{NS}{key}"] = prop
    for key, what in SECRET_KEYS.items():
        properties[f"{NS}{key}"] = {"$ref": "#/$defs/Secure", "description": what}
    # A map of secrets, each on its own path: the names stay readable, the keys encrypted.
    properties[f"{NS}api_keys"] = {
        "description": SECRET_KEYS["api_keys"],
        "type": "object",
        "propertyNames": {"pattern": "^[a-z0-9-]{1,40}$"},
        "additionalProperties": {"$ref": "#/$defs/Secure"},
        "minProperties": 1,
    }
    described = {
        "digitalocean:token": "DigitalOcean API token (or DIGITALOCEAN_TOKEN in the environment).",
        "digitalocean:spacesSecretKey": "Spaces secret key for the provider's bucket calls (or SPACES_SECRET_ACCESS_KEY).",
    }
    for key in PROVIDER_SECRET_KEYS:
        properties[key] = {"$ref": "#/$defs/Secure", "description": described[key]}
    known = sorted(properties)
    config = {
        "description": model.get("description", ""),
        "type": "object",
        "properties": properties,
        "required": [f"{NS}{key}" for key in model.get("required", [])],
        # Unknown `inference-platform:` keys are errors (a typo must not silently do nothing);
        # other providers' namespaced keys (`kubernetes:context`, ...) are not ours to judge.
        "propertyNames": {"anyOf": [{"enum": known}, {"pattern": f"^(?!{NS})[^:]+:.+$"}]},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "inference-platform stack file (stacks/Pulumi.<stack>.yaml)",
        "description": "Generated from infra/config/ by `python -m infra.stackschema`; do not edit by hand. "
        "Key reference: docs/configuration.md.",
        "type": "object",
        "properties": {
            "config": config,
            "secretsprovider": {"type": "string"},
            "encryptedkey": {"type": "string"},
            "encryptionsalt": {"type": "string"},
            "environment": {"description": "Pulumi ESC environments to import."},
        },
        "required": ["config"],
        "$defs": {"Secure": _SECURE, **defs},
    }


def render() -> str:
    return json.dumps(render_schema(), indent=2, sort_keys=False, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
