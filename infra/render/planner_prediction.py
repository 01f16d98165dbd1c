"""What the plan predicted for one model, as the monitoring compares it with what the cluster serves.

A value type of its own (no rules here) so that `slo_rules.ObservedModel` can carry it and
`planner_rules` can render it without importing each other. Built by `prediction_of` from the
planner's chosen candidate: the numbers the plan sized the pool with, at the plan's workload.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlannerPrediction:
    """The plan's prediction for one model's chosen layout, per node of its pool.

    goodput_rps_per_node: requests/s one node serves within both p90 SLOs (the planner's figure).
    band_low / band_high: measured ÷ predicted where the planner was tested on sources it was not
        fitted to (infra/planner/efficiency.py Band); the band the measurement is expected in.
    output_tokens_per_s_per_node: output tokens/s per node at that goodput.
    in_flight_per_node: requests one node holds in flight (running) at that goodput.
    step_s: one decode step (≈ the inter-token latency a request sees) at that load; None when the
        planner has no step time for the layout.
    prompt_tokens / output_tokens: the workload the prediction is for (the stack's).
    gpus_per_node: GPUs of one node the layout uses; turns "GPUs behind scraped engines" into nodes.
    """

    goodput_rps_per_node: float
    band_low: float
    band_high: float
    output_tokens_per_s_per_node: float
    in_flight_per_node: float
    step_s: float | None
    prompt_tokens: int
    output_tokens: int
    gpus_per_node: int

    @property
    def low_rps_per_node(self) -> float:
        return self.goodput_rps_per_node * min(1.0, self.band_low)

    @property
    def high_rps_per_node(self) -> float:
        return self.goodput_rps_per_node * max(1.0, self.band_high)


def prediction_of(candidate, prompt_tokens: int, output_tokens: int) -> PlannerPrediction | None:
    """The prediction of a planner `Candidate` (infra.planner.search), or None when it predicts
    nothing to compare against (does not fit, or never meets the SLO)."""
    if not candidate.fits or candidate.goodput_rps_per_node <= 0:
        return None
    layout = candidate.layout
    gpus = layout.gpus_per_node_used
    return PlannerPrediction(
        goodput_rps_per_node=candidate.goodput_rps_per_node,
        band_low=candidate.band.low,
        band_high=candidate.band.high,
        output_tokens_per_s_per_node=candidate.output_tokens_per_s_per_gpu * gpus,
        in_flight_per_node=candidate.running_per_replica * layout.replicas_per_node_share,
        step_s=candidate.step_ms / 1000.0 if candidate.step_ms else None,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        gpus_per_node=gpus,
    )
