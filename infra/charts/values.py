"""Values checked by the chart: a value path the chart's defaults and schema do not know is an error.

Helm ignores a value no template reads, so a misspelt key is found — if ever — in the cluster. The
chart itself says what it reads: its default values (subcharts included, under their names) and its
`values.schema.json`. A *value index* is that knowledge as data: the tree of default value paths
(a leaf — a scalar, a list, an empty or null map — is open: anything below it is the chart's
business, like `nodeSelector: {}`) and the schema. scripts/chart_index.py derives it from an
archive into infra/catalog/charts/<chart>-<version>.json, committed, so CI checks the project's
values without the archive; with the archive at hand the index is derived from it directly.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

OPEN = 1  # a leaf of the value tree: anything below it is allowed
# Keys whose value is a Kubernetes label map whatever the defaults hold (cert-manager's default
# `nodeSelector: {kubernetes.io/os: linux}` would otherwise close it to that one label).
LABEL_MAP_KEYS = frozenset({"nodeSelector"})


def value_tree(defaults: Any) -> Any:
    """The paths of merged default values as a tree; OPEN where anything below is allowed."""
    if isinstance(defaults, dict) and defaults:
        return {str(k): value_tree(v) for k, v in sorted(defaults.items())}
    return OPEN


def index_from_chart(chart) -> dict[str, Any]:
    """The value index of a loaded helm_python Chart."""
    return {
        "chart": chart.name, "version": chart.version,
        "values": value_tree(chart.merge_values({})), "schema": chart.schema,
    }


def _schema_knows(schema: Any, key: str) -> tuple[bool, Any]:
    """(whether `schema` — an object schema — names `key` or admits any key, the key's schema)."""
    if not isinstance(schema, dict):
        return False, None
    props = schema.get("properties") or {}
    if key in props:
        return True, props[key]
    if schema.get("patternProperties") or isinstance(schema.get("additionalProperties"), dict):
        return True, None
    return False, None


def unknown_paths(values: Any, tree: Any, schema: Any = None, prefix: str = "") -> list[str]:
    """Every path in `values` that neither the default value tree nor the schema knows (the
    shortest: below an unknown key nothing more is reported). `global` is Helm's, always known."""
    if tree == OPEN or not isinstance(values, dict):
        return []
    out = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        in_schema, sub_schema = _schema_knows(schema, str(key))
        if key in LABEL_MAP_KEYS and isinstance(tree, dict) and key in tree:
            continue
        if isinstance(tree, dict) and key in tree:
            out += unknown_paths(value, tree[key], sub_schema, path + ".")
        elif key == "global" and not prefix:
            continue
        elif not in_schema:
            out.append(path)
        elif sub_schema is not None and isinstance(value, dict):
            # known to the schema only: its own properties decide below
            out += unknown_paths(value, {}, sub_schema, path + ".") if sub_schema.get("properties") else []
    return out


def index_path(chart: str, version: str) -> str:
    return f"{chart}-{version}.json"


def committed_index(chart: str, version: str) -> dict[str, Any] | None:
    """The committed value index of `chart` at `version`, or None when none was generated."""
    ref = resources.files("infra.catalog").joinpath("charts", index_path(chart, version))
    if not ref.is_file():
        return None
    return json.loads(ref.read_text())


def write_index(index: dict[str, Any], directory: Path) -> Path:
    path = directory / index_path(index["chart"], index["version"])
    path.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return path
