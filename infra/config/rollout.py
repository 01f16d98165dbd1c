"""`models[].rollout` — the checks of a layout rollout whose key is the rollout's (or the model's
layout it rolls from). The keys themselves are declared with the model (models.py); whether the
candidate layout fits its model and node is a planning question (infra/layout_fit.py).

A rollout needs a front door that splits traffic, an explicit colocated current layout, sensible
steps, a candidate that differs from the current variant, and a split the router can express with
the current replica count (infra/rollout/split.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.config.base import NS
from infra.config.layout import PdLayoutConfig
from infra.config.models import ModelConfig
from infra.config.pools import GpuPoolConfig
from infra.errors import Problem
from infra.rollout.split import MAX_STEP_PERCENT, router_split, split_problem

if TYPE_CHECKING:
    from infra.config.stack import StackInput

SPLITTING_ROUTERS = ("session", "prefix", "round-robin")


def rollout_problems(raw: StackInput) -> list[Problem]:
    """Every model's rollout checks (models whose pool is unknown are reported elsewhere)."""
    pools = {p.name: p for p in raw.gpu_pools}
    problems: list[Problem] = []
    for i, model in enumerate(raw.models):
        if model.rollout is not None and model.pool in pools:
            problems += model_rollout_problems(raw.router.kind, model, pools[model.pool], f"{NS}models[{i}]")
    return problems


def _front_door_problems(kind: str, at: str) -> list[Problem]:
    if kind == "service":
        return [Problem(
            at, "needs a front door that splits traffic, but router.kind is service (clients reach the engines' "
            "Service directly and kube-proxy balances connections, not requests); set router.kind to session, prefix or round-robin",
        )]
    if kind == "gateway":
        return [Problem(
            at, "is not available with router.kind gateway yet: an InferencePool selects engines by matchLabels only, so "
            "the current variant's pool would also take in the candidate's engines unless the current engines were "
            "relabelled, which restarts them; use router.kind session, prefix or round-robin (docs/serving.md#layout-rollouts)",
        )]
    return []


def _step_problems(steps: list[int], weight: int, at: str) -> list[Problem]:
    problems = []
    bad = [s for s in steps if not 1 <= s <= MAX_STEP_PERCENT]
    if bad:
        problems.append(Problem(
            f"{at}.steps", f"{steps} has {bad}: each step is the candidate's share in percent, 1-{MAX_STEP_PERCENT} "
            "(100 % is `infra rollout promote` from the last step: the candidate becomes the layout)",
        ))
    elif any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
        problems.append(Problem(f"{at}.steps", f"{steps} must increase strictly (e.g. [10, 25, 50])"))
    if weight not in steps:
        problems.append(Problem(f"{at}.weight", f"{weight} is not one of rollout.steps {steps}"))
    return problems


def model_rollout_problems(kind: str, model: ModelConfig, pool: GpuPoolConfig, at: str) -> list[Problem]:
    r = model.rollout
    ra = f"{at}.rollout"
    problems = _front_door_problems(kind, ra) + _step_problems(r.steps, r.weight, ra)
    if model.layout is None:
        problems.append(Problem(
            f"{at}.layout", "auto cannot be the current variant of a rollout: the planner could change it under the canary; "
            "write the layout the engines run now (`infra plan` shows it)",
        ))
        return problems
    if isinstance(model.layout, PdLayoutConfig) or model.layout.nodes_per_replica > 1:
        problems.append(Problem(f"{at}.layout", "rollouts support colocated layouts of one node per replica at most, not P/D or replicas over nodes"))
        return problems
    cand = r.candidate
    if cand.layout.nodes_per_replica > 1:
        problems.append(Problem(f"{ra}.candidate.layout.nodes_per_replica", f"{cand.layout.nodes_per_replica}: a candidate spans one node at most"))
        return problems
    same = (
        cand.layout.model_dump(exclude={"provenance"}) == model.layout.model_dump(exclude={"provenance"})
        and cand.image in (None, model.image)
        and cand.extra_args in (None, model.extra_args)
    )
    if same:
        problems.append(Problem(
            f"{ra}.candidate", f"is the current variant ({model.layout.to_layout().name}, same image and extra_args): "
            "a rollout needs a different layout, image or extra_args",
        ))
    current = model.layout.to_layout().replicas_for_nodes(pool.min_node_count)
    if current < 1:
        problems.append(Problem(ra, f"needs a running current variant; pool {pool.name!r} has min_nodes 0"))
    elif kind in SPLITTING_ROUTERS:
        for j, step in enumerate(r.steps):
            if 1 <= step <= MAX_STEP_PERCENT:
                why = split_problem(router_split(step, current))
                if why:
                    problems.append(Problem(f"{ra}.steps[{j}]", why))
    return problems
