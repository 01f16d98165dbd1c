"""Measured against predicted, live: recording rules and the PlannerPredictionDrift alert.

The plan sizes every pool on the planner's prediction (goodput per node within the p90 SLOs, at
the stack's workload). These rules put the cluster's own measurement next to it, per model and
per node, so a wrong prediction shows up as numbers rather than as a surprise at peak:

  measured (per node: the model's GPUs behind scraped engines ÷ the layout's GPUs per node)
    model:planner_measured_requests_per_s:per_node           served requests/s (stop|length)
    model:planner_measured_goodput_requests_per_s:per_node   of which within both SLOs
    model:planner_measured_output_tokens_per_s:per_node      output tokens/s
    model:planner_measured_in_flight:per_node                running + waiting requests
    model:planner_measured_step_seconds:mean_rate5m          mean inter-token latency ≈ one decode step
    model:planner_measured_prompt_tokens:mean_rate5m         mean prompt length (the measured workload)
    model:planner_measured_output_tokens:mean_rate5m         mean generated length
    model_side:planner_measured_*                            the same per P/D side (label pd_role)
  predicted (constants from the plan; `band` = low | expected | high)
    model:planner_predicted_goodput_requests_per_s:per_node, model:planner_predicted_output_tokens_per_s:per_node,
    model:planner_predicted_in_flight:per_node, model:planner_predicted_step_seconds,
    model:planner_predicted_prompt_tokens, model:planner_predicted_output_tokens
  model:planner_prediction_ratio   measured served requests/s per node ÷ predicted goodput per node

The ratio alone is not an error: below capacity it reads utilisation. Capacity is only observed
at its edges, so the alert reads it there (both directions carry the label `direction`):
  below — the p90 SLO is missed (fewer than 90 % of requests within a limit) while a node carries
          less than the band's low end: the real capacity is below the band;
  above — both p90s are met while a node carries more than the band's high end: the real capacity
          is above it.
Either must hold for 1 h at meaningful load: at least MIN_REQUESTS_PER_HOUR served requests per
hour (the burn-rate alerts' guard) and, for `below`, at least MEANINGFUL_LOAD_SHARE of the band's
low end per node — an SLO miss at a trickle of traffic is a slow client or a cold cache, not a
capacity figure. No drift alert while the model is in a layout rollout (its series then include
the candidate's engines). `infra tune calibrate --prometheus` (infra/tuning/telemetry.py) turns the same
series into new factors. Metric names: vLLM V1 (vllm/v1/metrics/loggers.py) —
vllm:inter_token_latency_seconds, vllm:request_prompt_tokens and vllm:request_generation_tokens
are histograms, read through their _sum and _count.
"""

from __future__ import annotations

from collections.abc import Iterable

from infra.render.planner_prediction import PlannerPrediction
from infra.render.slo_rules import (
    MIN_REQUESTS_PER_HOUR,
    PD_ROLE_TARGET_LABEL,
    SERVED_FINISHED_REASONS,
    SLO_QUANTILE,
    ObservedModel,
    quoted,
    selector,
)

DRIFT_ALERT = "PlannerPredictionDrift"
DRIFT_FOR = "1h"
# An SLO miss below this share of the band's low end per node is not read as a capacity figure.
MEANINGFUL_LOAD_SHARE = 0.25
ITL_METRIC = "vllm:inter_token_latency_seconds"
PROMPT_LEN_METRIC = "vllm:request_prompt_tokens"
OUTPUT_LEN_METRIC = "vllm:request_generation_tokens"
BANDS = ("low", "expected", "high")


def _num(x: float) -> str:
    return f"{x:.6g}"


def _rule(record: str, expr: str, model: ObservedModel, **labels: str) -> dict:
    return {"record": record, "expr": expr, "labels": {"model": model.name, **labels}}


def _of(record: str, model: ObservedModel, **labels: str) -> str:
    extra = "".join(f", {k}={quoted(v)}" for k, v in labels.items())
    return f"{record}{{model={quoted(model.name)}{extra}}}"


def _mean(metric: str, sel: str, by: str = "") -> str:
    """Mean of a histogram over 5 m: rate of its _sum ÷ rate of its _count (absent when idle)."""
    agg = f"sum{f' by ({by})' if by else ''}"
    return f"{agg} (rate({metric}_sum{sel}[5m])) / ({agg} (rate({metric}_count{sel}[5m])) > 0)"


def _band_values(value: float, p: PlannerPrediction) -> dict[str, float]:
    return {"low": value * min(1.0, p.band_low), "expected": value, "high": value * max(1.0, p.band_high)}


def planner_recording_group(model: ObservedModel) -> dict | None:
    """Measured and predicted series of one model; None when the plan predicts nothing for it."""
    p: PlannerPrediction | None = model.prediction
    if p is None:
        return None
    sel = selector(model)
    # Raw vLLM sums carry no labels, the recorded node count carries `model`: `/ on ()` matches them.
    nodes = f"({_of('model:planner_nodes_serving:sum', model)} > 0)"
    served = f'finished_reason=~"{"|".join(SERVED_FINISHED_REASONS)}"'
    rules = [
        _rule(
            "model:planner_nodes_serving:sum",
            f"{_of('model:vllm_gpus_serving:sum', model)} / {p.gpus_per_node}",
            model,
        ),
        _rule(
            "model:planner_measured_requests_per_s:per_node",
            f"sum(rate(vllm:request_success_total{selector(model, served)}[5m])) / on () {nodes}",
            model,
        ),
        _rule(
            "model:planner_measured_goodput_requests_per_s:per_node",
            f"{_of('model:vllm_goodput_requests_per_second:rate5m', model)} / {nodes}",
            model,
        ),
        _rule(
            "model:planner_measured_output_tokens_per_s:per_node",
            f"sum(rate(vllm:generation_tokens_total{sel}[5m])) / on () {nodes}",
            model,
        ),
        _rule(
            "model:planner_measured_in_flight:per_node",
            f"(sum(vllm:num_requests_running{sel}) + sum(vllm:num_requests_waiting{sel})) / on () {nodes}",
            model,
        ),
        _rule("model:planner_measured_step_seconds:mean_rate5m", _mean(ITL_METRIC, sel), model),
        _rule("model:planner_measured_prompt_tokens:mean_rate5m", _mean(PROMPT_LEN_METRIC, sel), model),
        _rule("model:planner_measured_output_tokens:mean_rate5m", _mean(OUTPUT_LEN_METRIC, sel), model),
    ]
    for band, value in _band_values(p.goodput_rps_per_node, p).items():
        rules.append(
            _rule("model:planner_predicted_goodput_requests_per_s:per_node", f"vector({_num(value)})", model, band=band)
        )
    for band, value in _band_values(p.output_tokens_per_s_per_node, p).items():
        rules.append(
            _rule("model:planner_predicted_output_tokens_per_s:per_node", f"vector({_num(value)})", model, band=band)
        )
    rules += [
        _rule("model:planner_predicted_in_flight:per_node", f"vector({_num(p.in_flight_per_node)})", model),
        _rule("model:planner_predicted_prompt_tokens", f"vector({p.prompt_tokens})", model),
        _rule("model:planner_predicted_output_tokens", f"vector({p.output_tokens})", model),
    ]
    if p.step_s is not None:
        rules.append(_rule("model:planner_predicted_step_seconds", f"vector({_num(p.step_s)})", model))
    rules.append(
        _rule(
            "model:planner_prediction_ratio",
            f"{_of('model:planner_measured_requests_per_s:per_node', model)}"
            f" / on (model) {_of('model:planner_predicted_goodput_requests_per_s:per_node', model, band='expected')}",
            model,
        )
    )
    rules += _side_rules(model)
    return {"name": f"inference-platform.planner.{model.name}", "rules": rules}


def _side_rules(model: ObservedModel) -> list[dict]:
    """Per P/D side: output tokens/s and step time (running and KV usage per side are recorded by
    slo_rules.pd_recording_group)."""
    if model.pd is None:
        return []
    sides = selector(model, f'{PD_ROLE_TARGET_LABEL}=~"prefill|decode"')
    return [
        _rule(
            "model_side:planner_measured_output_tokens_per_s:sum",
            f"sum by ({PD_ROLE_TARGET_LABEL}) (rate(vllm:generation_tokens_total{sides}[5m]))",
            model,
        ),
        _rule(
            "model_side:planner_measured_step_seconds:mean_rate5m", _mean(ITL_METRIC, sides, PD_ROLE_TARGET_LABEL), model
        ),
    ]


def drift_conditions(model: ObservedModel) -> dict[str, str]:
    """{direction: PromQL that holds while capacity sits outside the band at meaningful load}."""
    p: PlannerPrediction = model.prediction
    served = _of("model:planner_measured_requests_per_s:per_node", model)
    ttft_good = _of("model:vllm_ttft_slo_good:ratio_rate5m", model)
    tpot_good = _of("model:vllm_tpot_slo_good:ratio_rate5m", model)
    busy = f"{_of('model:vllm_served_requests_per_second:rate5m', model)} * 3600 >= {MIN_REQUESTS_PER_HOUR}"
    # `and on ()`: the operands are one series each, labelled by model only on one side.
    return {
        "below": (
            f"({served} < {_num(p.low_rps_per_node)}"
            f" and {served} >= {_num(p.low_rps_per_node * MEANINGFUL_LOAD_SHARE)})"
            f" and on (model) ({ttft_good} < {SLO_QUANTILE} or {tpot_good} < {SLO_QUANTILE})"
            f" and on (model) ({busy})"
        ),
        "above": (
            f"({served} > {_num(p.high_rps_per_node)})"
            f" and on (model) ({ttft_good} >= {SLO_QUANTILE} and on (model) {tpot_good} >= {SLO_QUANTILE})"
            f" and on (model) ({busy})"
        ),
    }


def planner_alert_group(models: Iterable[ObservedModel], runbook_base: str) -> dict | None:
    """PlannerPredictionDrift per predicted model and direction; None when nothing is predicted."""
    rules = []
    for model in models:
        p = model.prediction
        # In a layout rollout the model's series include the candidate's engines: no verdict on the
        # current layout's prediction until the rollout is promoted or aborted.
        if p is None or model.candidate_gpus_per_replica is not None:
            continue
        for direction, expr in drift_conditions(model).items():
            where = "below the band's low end" if direction == "below" else "above the band's high end"
            rules.append(
                {
                    "alert": DRIFT_ALERT,
                    "expr": expr,
                    "for": DRIFT_FOR,
                    "labels": {"severity": "warning", "model": model.name, "direction": direction},
                    "annotations": {
                        "summary": f"{model.name}: measured capacity {where} of the plan's prediction for 1 h",
                        "description": (
                            f"The plan predicts {_num(p.goodput_rps_per_node)} req/s per node within the SLO "
                            f"(band {_num(p.low_rps_per_node)}–{_num(p.high_rps_per_node)}); measured "
                            "{{ $value | printf \"%.2f\" }} req/s per node "
                            + ("while missing the p90 SLO." if direction == "below" else "while meeting both p90 SLOs.")
                            + " Compare the measured workload with the plan's, then re-fit the factors: "
                            "`infra tune calibrate --prometheus URL --stack STACK`."
                        ),
                        "runbook_url": f"{runbook_base}#plannerpredictiondrift",
                    },
                }
            )
    if not rules:
        return None
    return {"name": "inference-platform.planner-alerts", "rules": rules}
