"""The offline plan: a StackPlan's resources recorded as a deterministic Plan, and checked.

No engine, no cloud, no credentials, no Pulumi. `build_plan` validates the stack file and decides
everything with `plan_stack`, whose value holds every resource the stack creates, rendered
(infra/stack_resources/); the Plan records each as the Pulumi engine would receive it
(infra/resource_graph/records.py) — `declare` wraps the very same value for `pulumi up`. Secrets
are never read: every secret is `[secret]`.

The Plan is plain data (`Plan.to_json()` is byte-identical for identical input): the resources
with their engine-level inputs and options, the models with their layouts and predictions, and
the cost, all read from the one StackPlan value. `offline_plan` also templates the Helm releases
whose archives are present and runs the whole-plan invariants; `check_before_up` is the same check,
strict, that `pulumi up` runs in-process before declaring anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.charts.releases import archive_problems, chart_objects, template_releases, unknown_value_problems
from infra.charts.template import ChartError, is_test_hook
from infra.config import NS, PROJECT, load_stack_file
from infra.errors import Problem, UserError
from infra.invariants import check_plan, enforce
from infra.project import project_root
from infra.resource_graph.offline_values import SECRET_MARKER, offline_id
from infra.resource_graph.records import plan_records
from infra.stack_plan import StackPlan, plan_stack

# --------------------------------------------------------------------------- plan data


@dataclass
class Plan:
    """Everything the program would declare, as plain data."""

    stack: str
    project: str
    resources: list[dict[str, Any]]
    models: list[dict[str, Any]] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    front_door: dict[str, Any] = field(default_factory=dict)
    charts: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "project": self.project,
            "summary": self.summary,
            "front_door": self.front_door,
            "cost": self.cost,
            "models": self.models,
            "resources": self.resources,
            "charts": self.charts,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        return cls(
            stack=data["stack"],
            project=data["project"],
            resources=data["resources"],
            models=data.get("models", []),
            cost=data.get("cost", {}),
            summary=data.get("summary", {}),
            front_door=data.get("front_door", {}),
            charts=data.get("charts", []),
        )


def money(value: float | None) -> str:
    """US dollars as the plan summary and the plan diff both show them (`$35,368.00`), so a figure
    reads the same in a terminal and in a pull-request comment."""
    return "n/a" if value is None else f"${value:,.2f}"


def record_stack_plan(plan: StackPlan) -> tuple[list[dict[str, Any]], list[str]]:
    """The plan's resources as the plan file records them (sorted by type and name), and its notes."""
    return plan_records(plan.resources, project=PROJECT, stack=plan.stack), list(plan.notes)


def build_plan(stack: str, root: Path | None = None) -> Plan:
    """The offline plan of one stack of the project at `root` (default: found from the cwd)."""
    root = project_root(root)
    cfg = load_stack_file(stack, root)
    return offline_plan(plan_stack(cfg), root)


def _chart_root(root: Path | None) -> Path | None:
    """The project whose charts/ holds the archives: `root`, else the one around the cwd, else
    none (then only INFRA_CHART_DIR is searched)."""
    if root is not None:
        return root
    try:
        return project_root(None)
    except UserError:
        return None


def offline_plan(plan: StackPlan, root: Path | None = None, *, deploy: bool = False) -> Plan:
    """`plan` recorded and checked as a whole (the invariants): a plan that cannot work is refused
    here (ConfigError), so `infra plan`, `infra diff` and the check before `pulumi up`
    (`check_before_up`) never show it as a success. `deploy` (that check): a
    release installing from a local archive whose digest was never recorded is refused, not noted."""
    cfg = plan.config
    resources, notes = record_stack_plan(plan)
    chart_root = _chart_root(root)
    unknown = unknown_value_problems(resources, chart_root)
    bad_archives, archive_notes = archive_problems(resources, deploy=deploy)
    if unknown or bad_archives:
        raise UserError([Problem(where, what) for where, what in unknown + bad_archives])
    notes += archive_notes
    try:
        charts, chart_notes = template_releases(resources, chart_root)
    except ChartError as err:
        raise UserError([Problem("helm releases", str(err))]) from None
    notes += [n for n in chart_notes if n not in notes]
    offline = Plan(
        stack=plan.stack,
        project=PROJECT,
        resources=resources,
        models=plan.models_json(),
        cost=plan.cost_json(),
        front_door=plan.front_door.to_json(),
        charts=charts,
        summary={
            "environment": cfg.environment,
            "region": cfg.region,
            "kubernetes_version_prefix": cfg.cluster.version,
            "ha": bool(cfg.cluster.ha),
            "protect": cfg.protect,
            "pools": plan.pools_json(),
            "secrets_to_set": cfg.missing_secrets,
            "notes": notes,
            **({"existing_cluster": {
                "context": cfg.cluster.existing.context,
                "system_node_selector": dict(cfg.cluster.existing.system_node_selector or {}),
            }} if cfg.cluster.existing is not None else {}),  # fmt: skip
        },
    )
    checked = [o for o in kubernetes_objects(offline) if not is_test_hook(o)]
    findings = check_plan(plan, checked, offline.resources, offline.to_dict())
    enforce(findings, plan.stack)
    notes += [n for n in findings.notes if n not in notes]
    offline.summary["notes"] = notes

    return offline


def check_before_up(plan: StackPlan, root: Path | None = None) -> list[Problem]:
    """The whole-plan check `pulumi up` runs before it declares anything: the offline plan of the
    same StackPlan, strict about chart archives (`deploy`); its problems, none when it holds."""
    try:
        offline_plan(plan, root, deploy=True)
    except UserError as err:
        return list(err.problems)
    return []


def kubernetes_objects(plan: Plan, *, charts: bool = True) -> list[dict[str, Any]]:
    """The Kubernetes objects a plan declares, as manifests (apiVersion, kind, metadata, spec...),
    with the objects of its templated Helm releases unless `charts` is false."""
    objects = []
    for res in plan.resources:
        if not res["type"].startswith("kubernetes:") or not res["custom"]:
            continue
        if res["type"].startswith("kubernetes:helm.sh/") or res["type"] == "pulumi:providers:kubernetes":
            continue
        obj = {k: v for k, v in res["inputs"].items() if k not in ("__defaults",)}
        if "apiVersion" not in obj or "kind" not in obj:
            continue
        if obj["kind"] == "Secret":
            obj = _redacted_secret(obj)
        objects.append(obj)
    for obj in chart_objects(plan.charts) if charts else ():
        objects.append(_redacted_secret(obj) if obj.get("kind") == "Secret" else obj)
    return objects


def _redacted_secret(obj: dict[str, Any]) -> dict[str, Any]:
    """A Secret whose values are redacted: keep its shape valid, say so, never carry a value.
    A chart's Secrets arrive with every value already the placeholder (infra/charts/template.py)."""
    obj = dict(obj)
    redacted = False
    for key in ("data", "stringData"):
        if obj.get(key) == SECRET_MARKER or isinstance(obj.get(key), dict):
            redacted = redacted or obj.get(key) == SECRET_MARKER or SECRET_MARKER in obj[key].values()
            obj[key] = {}
    meta = dict(obj.get("metadata", {}))
    if redacted:
        meta["annotations"] = {**meta.get("annotations", {}), "inference-platform/redacted": "values are Pulumi secrets; apply with pulumi up"}
    obj["metadata"] = meta
    return obj


__all__ = ["Plan", "build_plan", "offline_plan", "check_before_up", "kubernetes_objects", "offline_id", "money", "SECRET_MARKER", "NS"]
