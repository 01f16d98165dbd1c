"""The plan file's resource records: each planned resource as the Pulumi engine receives it.

`pulumi up` sends every resource to the engine with its inputs (placeholders resolved), its
parent, and options in which a dependency on a group stands for every member of the group (Pulumi
expands a local component into its descendants, never into a custom resource's children; a
provider-implemented component stays itself), and in which every resource an input reads from is
a dependency too. The records here follow those rules, so the plan file reads like the engine's
view; tests/resource_graph/test_declare_matches_plan.py runs `declare` under the mock runtime and
compares what it registers with these records, resource by resource.

Placeholders are shown as `infra/resource_graph/offline_values.py` says: secrets `[secret]`,
what only the cloud knows a stable stand-in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.resource_graph.graph import PlannedResource, ResourceGraph
from infra.resource_graph.offline_values import SECRET_MARKER, UNKNOWN_MARKER, offline_answer, offline_state
from infra.resource_graph.values import (
    Apply,
    Invoke,
    Ref,
    Secret,
    SecretInput,
    is_secret,
    referenced_resources,
)

STACK_TYPE = "pulumi:pulumi:Stack"


class _Unknown:
    """A value no offline answer has (an output nobody echoes)."""


def offline_value(value: Any, graph: ResourceGraph) -> Any:
    """`value` with every placeholder replaced by what the offline plan shows for it."""
    if isinstance(value, (SecretInput, Secret)):
        return SECRET_MARKER
    if isinstance(value, Ref):
        return SECRET_MARKER if value.secret else _ref_value(value, graph)
    if isinstance(value, Invoke):
        answer = _invoke_value(value, graph)
        return SECRET_MARKER if value.secret else answer
    if isinstance(value, Apply):
        if is_secret(value.args):
            return SECRET_MARKER
        args = [offline_value(a, graph) for a in value.args]
        if any(_contains_unknown(a) for a in args):
            return UNKNOWN_MARKER
        return value.fn(*args)
    if isinstance(value, Mapping):
        return {k: offline_value(v, graph) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [offline_value(v, graph) for v in value]
    return value


def _contains_unknown(value: Any) -> bool:
    if value == UNKNOWN_MARKER:
        return True
    if isinstance(value, dict):
        return any(_contains_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(_contains_unknown(v) for v in value)
    return False


def _ref_value(ref: Ref, graph: ResourceGraph) -> Any:
    target = graph[ref.resource]
    state = offline_state(target.type, target.name, offline_value(target.inputs, graph))
    if ref.output == "id":
        return f"{target.name}-id"
    return state.get(ref.output, UNKNOWN_MARKER)


def _invoke_value(invoke: Invoke, graph: ResourceGraph) -> Any:
    answer: Any = offline_answer(invoke.token, offline_value(invoke.args, graph))
    for part in invoke.path:
        answer = answer[part]
    return invoke.check(answer) if invoke.check is not None else answer


def expanded(keys: list[str] | tuple[str, ...], graph: ResourceGraph) -> set[str]:
    """Dependencies as the engine gets them: a group stands for every descendant (groups inside it
    expanded too, custom resources' children not), anything else for itself."""
    out: set[str] = set()
    queue = list(keys)
    while queue:
        key = queue.pop(0)
        res = graph[key]
        if res.is_group:
            queue += [child.key for child in graph.children(key)]
        else:
            out.add(key)
    return out


def _parent_key(res: PlannedResource, project: str, stack: str) -> str:
    return res.parent if res.parent is not None else f"{STACK_TYPE}::{project}-{stack}"


def _normalised(value: Any) -> Any:
    """Plain JSON as the engine's wire form gives it back: dict keys sorted, whole floats as ints."""
    if isinstance(value, dict):
        return {k: _normalised(v) for k, v in sorted(value.items()) if v is not None}
    if isinstance(value, (list, tuple)):
        return [_normalised(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def plan_record(res: PlannedResource, graph: ResourceGraph, *, project: str, stack: str) -> dict[str, Any]:
    """One resource as the plan file records it (the same shape the engine's request has)."""
    opts = res.options
    inputs = {k: v for k, v in res.inputs.items() if v is not None}
    input_deps = {key: expanded(referenced_resources(value), graph) for key, value in inputs.items()}
    explicit = expanded(list(opts.depends_on), graph)
    # A provider is referenced for custom resources and for a provider's own components.
    provider = opts.provider if (res.custom or res.remote) else None
    return {
        "type": res.type,
        "name": res.name,
        "parent": _parent_key(res, project, stack),
        "custom": res.custom,
        "inputs": _normalised(offline_value(inputs, graph)) if inputs else {},
        "options": {
            "protect": bool(opts.protect),
            "ignoreChanges": sorted(opts.ignore_changes),
            "dependsOn": sorted(explicit.union(*input_deps.values()) if input_deps else explicit),
            "deleteBeforeReplace": opts.delete_before_replace,
            "retainOnDelete": bool(opts.retain_on_delete),
            "replaceOnChanges": sorted(opts.replace_on_changes),
            "additionalSecretOutputs": sorted(opts.additional_secret_outputs),
            "customTimeouts": dict(opts.custom_timeouts),
            "provider": provider,
            "deletedWith": opts.deleted_with,
            "aliases": [],
        },
        "inputDependencies": {key: sorted(deps) for key, deps in sorted(input_deps.items()) if deps},
    }


def plan_records(graph: ResourceGraph, *, project: str, stack: str) -> list[dict[str, Any]]:
    """Every planned resource's record, sorted by type and name (the plan file's order)."""
    records = [plan_record(r, graph, project=project, stack=stack) for r in graph]
    return sorted(records, key=lambda r: (r["type"], r["name"]))
