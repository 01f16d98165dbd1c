"""`ModelFacts`: one model as planned — its config, pool, architecture, the planner's choice,
and the measurement, readiness, sessions and rollout facts beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.catalog.models import ModelArch
from infra.config import GpuPoolConfig, ModelConfig
from infra.domain import KvOffload, Layout, Provenance
from infra.planner import ModelPlan, ReadinessPlan
from infra.planner.kv_offload import OffloadDecision
from infra.planner.search import nodes_for_peak, usd_per_million_output_tokens
from infra.rollout_plan import RolloutFacts


@dataclass(frozen=True)
class ModelFacts:
    """One model's resolved layout, the planner's view of it, and its measurement if any."""

    config: ModelConfig
    pool: GpuPoolConfig
    arch: ModelArch
    plan: ModelPlan
    measured: Provenance | None = None  # the layout's provenance, when it carries a goodput
    readiness: ReadinessPlan | None = None  # time-to-ready from the weight source (planner/loading.py)
    sessions: OffloadDecision | None = None  # multi-turn hit rates, with and without a KV offload tier

    @property
    def kv_offload(self) -> KvOffload | None:
        """The host-memory KV tier the engines run with: configured (cpu, lmcache) or chosen (auto)."""
        if self.sessions is not None:
            return self.sessions.offload
        return self.config.kv_offload.to_offload()
    rollout: RolloutFacts | None = None  # models[].rollout: the candidate beside this layout

    @property
    def layout(self) -> Layout:
        return self.plan.chosen.layout

    @property
    def goodput_rps_per_node(self) -> float:
        """What sizes the pool: the measurement when there is one, else the prediction."""
        if self.measured is not None:
            return float(self.measured.measured_goodput_rps)
        return self.plan.chosen.goodput_rps_per_node

    @property
    def nodes_needed(self) -> int | None:
        """The one figure every view shows: from the measurement, else the planner's (sized on the
        band's low end in whole replicas, as the model line says)."""
        if self.measured is None:
            return self.plan.chosen.nodes_needed
        return nodes_for_peak(self.config.workload.peak_rps, self.goodput_rps_per_node)

    def measured_json(self) -> dict[str, Any] | None:
        """The measurement next to (never in place of) the prediction in the plan's models[]."""
        if self.measured is None:
            return None
        mg = self.measured
        measured = float(mg.measured_goodput_rps)
        predicted = self.plan.chosen.goodput_rps_per_node
        usd_per_m = usd_per_million_output_tokens(self.pool.node_usd_per_hour, measured, self.config.workload.output_tokens)
        return {
            "goodput_rps_per_node": round(measured, 3),
            "measured_at": mg.measured_at,
            "vllm_version": mg.vllm_version,
            "image": mg.image,
            "predicted_at_measurement_rps": mg.predicted_goodput_rps,
            "vs_predicted": round(measured / predicted, 3) if predicted > 0 else None,
            "nodes_needed": self.nodes_needed,
            "usd_per_million_output_tokens": None if usd_per_m is None else round(usd_per_m, 3),
        }
