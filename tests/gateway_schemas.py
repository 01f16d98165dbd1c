"""Validate the gateway's custom resources against the published field lists of the pinned versions.

tests/fixtures/gateway_schemas/<Kind>.json holds the structure of each CRD's served version
(written by scripts/extract_gateway_schemas.py from the upstream CRD at the tag it names; the EPP
config's from its Go types). Validation is strict like `kubectl apply --validate=strict`: a field
the schema does not list is an error, except under `x-kubernetes-preserve-unknown-fields`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gateway_schemas"


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: (_strict(v) if k != "properties" else {n: _strict(s) for n, s in v.items()}) for k, v in node.items()}
    if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@functools.cache
def fixture(kind: str) -> dict:
    return json.loads((FIXTURES / f"{kind}.json").read_text())


@functools.cache
def validator(kind: str) -> jsonschema.Draft202012Validator:
    schema = _strict(fixture(kind)["schema"])
    return jsonschema.Draft202012Validator(schema)


def kinds() -> list[str]:
    return sorted(p.stem for p in FIXTURES.glob("*.json"))


def errors(obj: dict) -> list[str]:
    """Every schema violation of `obj` (a custom resource or the EPP config), '' path = the root."""
    kind = obj["kind"]
    fx = fixture(kind)
    problems = []
    if obj.get("apiVersion") != fx["apiVersion"]:
        problems.append(f"apiVersion {obj.get('apiVersion')!r} is not {fx['apiVersion']!r} ({fx['source']['repository']} {fx['source']['tag']})")
    for e in validator(kind).iter_errors(obj):
        problems.append(f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}")
    return problems
