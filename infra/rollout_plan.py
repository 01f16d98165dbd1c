"""A rollout's share of the stack plan: the candidate variant sized, priced and rendered (pure).

For each model with `models[].rollout` (validated in infra/config/rollout.py, the candidate's fit
in infra/layout_fit.py), the planner predicts the candidate layout like any explicit layout, the
router split (infra/rollout/split.py) gives the
candidate's replica count for the current step, and the candidate's engines get the free GPUs of
the model's pool first and extra nodes for the rest: the pool grows by those nodes for as long
as the rollout lasts, which is what running both variants costs. `promote` from the last step
removes the candidate's Deployment and rolls the model's own engines to the candidate's layout;
`abort` removes the candidate's Deployment and the extra nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from infra.catalog.gpus import GpuSize
from infra.catalog.models import ModelArch
from infra.config import ModelConfig, RolloutConfig
from infra.domain import Layout
from infra.planner import plan_model
from infra.planner.search import ModelPlan
from infra.render.model_service import CANDIDATE, ModelServiceSpec
from infra.rollout.split import RouterSplit, router_split


@dataclass(frozen=True)
class RolloutFacts:
    """One model's rollout as planned: the candidate, the split and what both variants cost."""

    config: RolloutConfig
    candidate_plan: ModelPlan
    split: RouterSplit
    extra_nodes: int  # nodes added to the model's pool for the candidate's engines
    usd_per_node_hour: float | None

    @property
    def candidate_layout(self) -> Layout:
        return self.candidate_plan.chosen.layout

    @property
    def usd_per_hour_extra(self) -> float | None:
        return None if self.usd_per_node_hour is None else self.extra_nodes * self.usd_per_node_hour

    @property
    def next_step(self) -> int | None:
        later = [s for s in self.config.steps if s > self.config.weight]
        return later[0] if later else None

    def to_json(self, model: str) -> dict[str, Any]:
        cand = self.candidate_plan.chosen
        c = self.config.candidate
        return {
            "candidate": {
                "layout": {"name": self.candidate_layout.name, **self.candidate_layout.fields()},
                "image": c.image,
                "extra_args": None if c.extra_args is None else list(c.extra_args),
                "replicas": self.split.candidate_replicas,
                "deployment": f"{model}-engine-candidate",
                "predicted": {
                    "goodput_rps_per_node": round(cand.goodput_rps_per_node, 3),
                    "ttft_p90_ms": None if cand.ttft_p90_ms is None else round(cand.ttft_p90_ms, 1),
                    "tpot_p90_ms": None if cand.tpot_p90_ms is None else round(cand.tpot_p90_ms, 2),
                },
            },
            "current_replicas": self.split.current_replicas,
            "steps": list(self.config.steps),
            "weight_percent": self.config.weight,
            "realised_percent": round(self.split.realised_percent, 1),
            "split_by": "engine count (vllm-router has no per-worker weight)",
            "next_step": self.next_step,
            "extra_nodes": self.extra_nodes,
            "usd_per_hour_extra": None if self.usd_per_hour_extra is None else round(self.usd_per_hour_extra, 2),
            "promote_removes": (
                [f"Deployment {model}-engine-candidate", f"the {self.extra_nodes} extra node(s)"]
                if self.next_step is None
                else []
            ),
            "abort_removes": [f"Deployment {model}-engine-candidate", f"the {self.extra_nodes} extra node(s)"],
        }


def extra_nodes_for(candidate: Layout, replicas: int, gpus_per_node: int, used_per_node: int, nodes: int) -> int:
    """Nodes to add so `replicas` candidate engines fit: first into the GPUs the pool's models
    leave free on each node, then onto new nodes."""
    per_free = max(0, gpus_per_node - used_per_node) // candidate.gpus_per_replica
    remaining = max(0, replicas - nodes * per_free)
    per_new = gpus_per_node // candidate.gpus_per_replica
    return math.ceil(remaining / per_new) if remaining else 0


def plan_rollout(
    model: ModelConfig, arch: ModelArch, gpu: GpuSize, current: Layout, *, pool_nodes: int, used_per_node: int,
    usd_per_node_hour: float | None, fabric: bool, pool_max_nodes: int, efficiency=None,
) -> RolloutFacts:
    """The candidate's predictions, replicas and extra nodes (the config has validated the rollout)."""
    r = model.rollout
    cand_plan = plan_model(
        arch, gpu, model.workload.to_workload(), model.slo.to_slo(), r.candidate.layout.to_layout(gpu.gpus),
        usd_per_hour=usd_per_node_hour, fabric=fabric, pool_nodes=pool_max_nodes, efficiency=efficiency,
    )
    split = router_split(r.weight, current.replicas_for_nodes(pool_nodes))
    extra = extra_nodes_for(cand_plan.chosen.layout, split.candidate_replicas, gpu.gpus, used_per_node, pool_nodes)
    return RolloutFacts(r, cand_plan, split, extra, usd_per_node_hour)


def candidate_service_spec(current: ModelServiceSpec, model: ModelConfig, facts: RolloutFacts) -> ModelServiceSpec:
    """The candidate's engines: the model's spec with the candidate's layout, image, arguments and
    replica count, as the `candidate` variant (a Deployment of its own, nothing else)."""
    c = model.rollout.candidate
    layout = facts.candidate_layout
    return replace(
        current,
        layout=layout,
        image=c.image if c.image is not None else current.image,
        extra_args=tuple(c.extra_args) if c.extra_args is not None else current.extra_args,
        max_model_len=layout.max_model_len,
        autoscaled=False,
        variant=CANDIDATE,
        fixed_replicas=facts.split.candidate_replicas,
        # what the render reports (a flag of the candidate's extra_args, its layout) is the candidate's key
        key_path=f"{current.key_path}.rollout.candidate" if current.key_path else "",
    )
