"""Whole-plan invariants: the plan checks itself after rendering, over the rendered objects.

One place for every check that needs the plan as a whole rather than one key: identity (no two
objects share a name), wiring (selectors and references; probes, keys and exec commands as the
kubelet resolves them), capacity (pods, DaemonSets and chart
components fit their pools; storage holds what is written to it), the GPU view (partition modes),
no silent ignores, metric dependencies (what autoscaling and alerts read is still exported), and one
number (the plan's views agree). They run on the Kubernetes objects
the program declares plus those its controllers, charts and DOKS create (implied.py), generic over
kinds, so a new feature's objects are covered without new code.

`check_plan` returns the problems and notes; `enforce` raises them as one ConfigError naming the
stack-file keys. `infra plan`, `infra diff` (both through `infra.offline.build_plan`) and the
Pulumi program (`infra/__main__.py`, before `declare`) all enforce them; docs/configuration.md
lists them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infra.charts.source import chart_name
from infra.errors import ConfigError, Problem
from infra.invariants.capacity import check_capacity, check_storage
from infra.invariants.consistency import check_consistency
from infra.invariants.gpu_view import check_gpu_view
from infra.invariants.identity import check_identity
from infra.invariants.ignores import check_ignores
from infra.invariants.images import tag_only_image_notes
from infra.invariants.implied import implied_objects
from infra.invariants.keypaths import KeyPaths
from infra.invariants.kubelet import check_kubelet_wiring
from infra.invariants.metrics import check_metrics
from infra.invariants.prerequisites import check_prerequisites
from infra.invariants.wiring import check_references, check_selectors
from infra.stack_plan import StackPlan


@dataclass(frozen=True)
class Findings:
    problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = field(default=())


def check_plan(plan: StackPlan, objects: list[dict], resources: list[dict] = (), plan_json: dict | None = None) -> Findings:
    """Every invariant over `plan`, its rendered `objects` and its resource records (Helm releases,
    CRD manifests: what installs what)."""
    releases = [r for r in resources if r.get("type") == "kubernetes:helm.sh/v3:Release"]
    paths = KeyPaths(plan.config, {str((r.get("inputs") or {}).get("name") or r.get("name")):
                                   chart_name(str((r.get("inputs") or {}).get("chart", "")), str((r.get("inputs") or {}).get("version", "")))
                                   for r in releases})
    everything = list(objects) + implied_objects(list(objects), list(releases), dict(plan.cluster.system_node_selector))
    problems: list[Problem] = []
    problems += check_identity(everything, paths)
    problems += check_selectors(everything, paths)
    problems += check_references(everything, paths)
    problems += check_kubelet_wiring(everything, paths)
    problems += check_prerequisites(plan, everything, list(resources), paths)
    problems += check_gpu_view(plan, paths)
    problems += check_capacity(plan, everything, paths)
    problems += check_storage(plan, paths)
    problems += check_metrics(everything, paths)
    ignored, notes = check_ignores(plan, paths)
    problems += ignored
    notes = [*notes, *tag_only_image_notes(plan.config.environment, everything)]
    if plan_json is not None:
        problems += check_consistency(plan_json, paths)
    unique = list(dict.fromkeys(problems))
    return Findings(tuple(unique), tuple(notes))


def enforce(findings: Findings, stack: str) -> None:
    if findings.problems:
        raise ConfigError(list(findings.problems), source=f"stacks/Pulumi.{stack}.yaml")
