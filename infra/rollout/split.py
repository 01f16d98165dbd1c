"""How a rollout step's weight becomes a traffic split behind the vLLM router.

vllm-router 0.1.17 has no per-worker weight: its policies spread requests evenly over the
registered workers of a model (`consistent_hash` places 160 virtual nodes per worker URL on its
hash ring, vllm-project/router `src/policies/consistent_hash.rs`; `round_robin` and `cache_aware`
balance over workers too), and `POST /workers` takes a URL and a model id, no weight. The
registrar files every ready engine of the model's Service, candidate and current alike, so the
share of requests the candidate gets is its share of the model's engines:

    candidate share = candidate replicas / (candidate replicas + current replicas)

The plan therefore sizes the candidate so that this share is as close as possible to the step's
weight, and refuses a step the fleet cannot express within WEIGHT_TOLERANCE_POINTS (a "5 %" canary
that really takes 20 % is a bigger bet than the one asked for): small steps need many current
replicas (5 % ± 5 points needs at least 9). Why the gateway front door does not do weights yet:
docs/serving.md#layout-rollouts.

Stickiness comes with it: under `consistent_hash` a session's key maps to one worker, which is
either a candidate or a current engine, so a conversation stays on one variant for as long as
the set of workers does not change (a step change re-hashes the sessions whose arc moves).
"""

from __future__ import annotations

from dataclasses import dataclass

# How far (percentage points) the realised share may be from the step's weight.
WEIGHT_TOLERANCE_POINTS = 5.0
MAX_STEP_PERCENT = 99  # 100 % is the promotion itself: the candidate becomes the layout


@dataclass(frozen=True)
class RouterSplit:
    """A step's split over engines: replicas of each variant and the share that results."""

    weight_percent: int  # what the step asks for
    current_replicas: int
    candidate_replicas: int

    @property
    def realised_percent(self) -> float:
        total = self.current_replicas + self.candidate_replicas
        return 100.0 * self.candidate_replicas / total if total else 0.0

    @property
    def off_by_points(self) -> float:
        return abs(self.realised_percent - self.weight_percent)

    @property
    def expressible(self) -> bool:
        return self.off_by_points <= WEIGHT_TOLERANCE_POINTS


def router_split(weight_percent: int, current_replicas: int) -> RouterSplit:
    """The candidate replica count whose share of all engines is nearest `weight_percent` (at least 1)."""
    if not 0 < weight_percent < 100:
        raise ValueError(f"weight {weight_percent} is not in 1..99")
    if current_replicas < 1:
        raise ValueError("the current variant has no replica")
    exact = current_replicas * weight_percent / (100 - weight_percent)
    options = {max(1, int(exact)), max(1, int(exact) + 1)}
    best = min(options, key=lambda c: (abs(100 * c / (c + current_replicas) - weight_percent), c))
    return RouterSplit(weight_percent, current_replicas, best)


def expressible_percents(current_replicas: int, upto: int = MAX_STEP_PERCENT) -> list[float]:
    """The shares a fleet of `current_replicas` can give a candidate (1, 2, ... candidate replicas)."""
    out = []
    c = 1
    while True:
        share = 100.0 * c / (c + current_replicas)
        if share > upto:
            return out
        out.append(round(share, 1))
        c += 1


def split_problem(split: RouterSplit) -> str | None:
    """Why a step cannot be run behind the router, or None."""
    if split.expressible:
        return None
    shares = ", ".join(f"{s:g} %" for s in expressible_percents(split.current_replicas)[:6])
    return (
        f"{split.weight_percent} % cannot be expressed behind vllm-router with {split.current_replicas} current "
        f"replica(s): it has no per-worker weight, so the candidate's share is its share of the engines "
        f"({split.candidate_replicas} candidate replica(s) → {split.realised_percent:.1f} %, more than "
        f"{WEIGHT_TOLERANCE_POINTS:g} points off); expressible shares: {shares} …; choose steps among them "
        "(docs/serving.md#layout-rollouts)"
    )
