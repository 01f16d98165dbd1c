"""`models[].rollout` — the checks of a layout rollout against its own model: the keys themselves are
declared with the model (models.py); whether the candidate layout fits its model and node is a
planning question (infra/layout_fit.py).

A rollout needs sensible steps, an explicit colocated current layout, and a candidate that differs
from the current variant. What it needs from the other sections — a front door that splits traffic,
and a split the router can express with the current replica count on the model's pool
(infra/rollout/split.py) — is infra/config/cross_checks.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.config.layout import PdLayoutConfig
from infra.errors import Problem
from infra.rollout.split import MAX_STEP_PERCENT

if TYPE_CHECKING:
    from infra.config.models import ModelConfig


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


def single_node_variants(model: ModelConfig) -> bool:
    """Whether both variants of the rollout are explicit colocated layouts of one node per replica
    at most: the only rollouts `rollout_problems` lets through to their split."""
    layout, candidate = model.layout, model.rollout.candidate
    return (layout is not None and not isinstance(layout, PdLayoutConfig) and layout.nodes_per_replica <= 1
            and candidate.layout.nodes_per_replica <= 1)


def rollout_problems(model: ModelConfig, at: str) -> list[Problem]:
    """The rollout of the model at `at` (`inference-platform:models[i]`) against the model itself."""
    r = model.rollout
    ra = f"{at}.rollout"
    problems = _step_problems(r.steps, r.weight, ra)
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
    return problems
