"""Per-variant SLO series of a layout rollout and the LayoutCanaryWorse alert (pure data).

During a rollout (`models[].rollout`) the model's engines are two variants: the current layout
and the candidate. The vLLM PodMonitor copies the pod label `inference-platform/variant` into the
series label `variant`; engines without the label (every engine outside a rollout, and the
current engines during one: labelling them would restart them) are recorded as
`variant="current"` (infra/render/observability.py). These rules compare the two on the same
SLIs as the per-model rules (infra/render/slo_rules.py), one rule group per model in rollout:

  model_variant:vllm_ttft_seconds:p90, model_variant:vllm_tpot_seconds:p90     5 m
  model_variant:vllm_requests_per_second:rate5m, model_variant:vllm_requests:increase1h,
  model_variant:vllm_served_requests_per_second:rate5m   finished with stop or length
  model_variant:vllm_unserved:ratio_rate5m            errors and aborts / finished requests
  model_variant:vllm_{ttft,tpot}_slo_errors:ratio_rate{5m,1h}
  model_variant:vllm_slo_burn_rate:rate{5m,1h}        max(TTFT, TPOT errors) / the 10 % budget
  model_variant:vllm_gpus_serving:sum, model_variant:vllm_goodput_rps_per_gpu:rate5m

LayoutCanaryWorse fires when the candidate burns its budget faster than it may (> 1×) and more
than WORSE_BURN_FACTOR × the current variant, in both windows, with at least
MIN_CANDIDATE_REQUESTS requests in the hour: the same test `infra rollout status` applies
(infra/rollout/gate.py), so the alert and the command agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.render.slo_alerts import alerting_rule
from infra.render.slo_rules import (
    ERROR_BUDGET,
    SERVED_FINISHED_REASONS,
    TPOT_BUCKETS_S,
    TPOT_METRIC,
    TTFT_BUCKETS_S,
    TTFT_METRIC,
    ObservedModel,
    promql_number,
    quoted,
    selector,
    slo_good_ratio_expr,
)
from infra.rollout.gate import MIN_CANDIDATE_REQUESTS, WORSE_BURN_FACTOR

VARIANT_LABEL = "variant"  # series label, from the pod label inference-platform/variant
VARIANTS = ("current", "candidate")
ROLLOUT_WINDOWS = ("5m", "1h")  # the gate's short and long window
ROLLOUT_ALERT_GROUP = "inference-platform.alerts.rollout"


@dataclass(frozen=True)
class RolloutObserved:
    """A model in rollout as the monitoring sees it: the model and each variant's GPUs per engine."""

    model: ObservedModel
    current_gpus_per_replica: int
    candidate_gpus_per_replica: int

    def gpus_per_replica(self, variant: str) -> int:
        return self.candidate_gpus_per_replica if variant == "candidate" else self.current_gpus_per_replica


def _matcher(variant: str) -> str:
    return f"{VARIANT_LABEL}={quoted(variant)}"


def _series(record: str, model: ObservedModel, variant: str) -> str:
    return f"{record}{{model={quoted(model.name)}, {_matcher(variant)}}}"


def _rule(record: str, expr: str, model: ObservedModel, variant: str) -> dict:
    return {"record": record, "expr": expr, "labels": {"model": model.name, VARIANT_LABEL: variant}}


def variant_rules(rollout: RolloutObserved, variant: str) -> list[dict]:
    """The per-variant series of one variant."""
    m = rollout.model
    v = _matcher(variant)
    sel = selector(m, v)
    served = f'finished_reason=~"{"|".join(SERVED_FINISHED_REASONS)}"'
    unserved = f'finished_reason!~"{"|".join(SERVED_FINISHED_REASONS)}"'
    rules = [
        _rule(
            f"model_variant:vllm_{short}_seconds:p90",
            f"histogram_quantile(0.9, sum by (le) (rate({metric}_bucket{sel}[5m])))",
            m, variant,
        )
        for short, metric in (("ttft", TTFT_METRIC), ("tpot", TPOT_METRIC))
    ]
    rules += [
        _rule("model_variant:vllm_requests_per_second:rate5m", f"sum(rate(vllm:request_success_total{sel}[5m]))", m, variant),
        _rule("model_variant:vllm_requests:increase1h", f"sum(increase(vllm:request_success_total{sel}[1h]))", m, variant),
        _rule(
            "model_variant:vllm_served_requests_per_second:rate5m",
            f"sum(rate(vllm:request_success_total{selector(m, v, served)}[5m]))",
            m, variant,
        ),
        # `or vector(0)`: no unserved series yet means none unserved, not "unknown".
        _rule(
            "model_variant:vllm_unserved:ratio_rate5m",
            f"(sum(rate(vllm:request_success_total{selector(m, v, unserved)}[5m])) or vector(0))"
            f" / sum(rate(vllm:request_success_total{sel}[5m]))",
            m, variant,
        ),
    ]
    for short, metric, limit_ms, buckets in (
        ("ttft", TTFT_METRIC, m.ttft_p90_ms, TTFT_BUCKETS_S),
        ("tpot", TPOT_METRIC, m.tpot_p90_ms, TPOT_BUCKETS_S),
    ):
        for window in ROLLOUT_WINDOWS:
            good = slo_good_ratio_expr(metric, m, limit_ms / 1000.0, buckets, window, (v,))
            rules.append(_rule(f"model_variant:vllm_{short}_slo_errors:ratio_rate{window}", f"1 - ({good})", m, variant))
    for window in ROLLOUT_WINDOWS:
        ttft = _series(f"model_variant:vllm_ttft_slo_errors:ratio_rate{window}", m, variant)
        tpot = _series(f"model_variant:vllm_tpot_slo_errors:ratio_rate{window}", m, variant)
        rules.append(
            _rule(
                f"model_variant:vllm_slo_burn_rate:rate{window}",
                f"({ttft} > {tpot} or {tpot}) / {promql_number(ERROR_BUDGET)}",
                m, variant,
            )
        )
    gpus = _series("model_variant:vllm_gpus_serving:sum", m, variant)
    rules += [
        _rule(
            "model_variant:vllm_gpus_serving:sum",
            f'sum(up{{component="vllm", model={quoted(m.name)}, {v}}}) * {rollout.gpus_per_replica(variant)}',
            m, variant,
        ),
        # Served requests within both limits (the smaller good fraction bounds it), per GPU serving;
        # recorded series on both sides, so their {model, variant} labels match.
        _rule(
            "model_variant:vllm_goodput_rps_per_gpu:rate5m",
            f"{_series('model_variant:vllm_served_requests_per_second:rate5m', m, variant)}"
            f" * (1 - ({_series('model_variant:vllm_ttft_slo_errors:ratio_rate5m', m, variant)}"
            f" > {_series('model_variant:vllm_tpot_slo_errors:ratio_rate5m', m, variant)}"
            f" or {_series('model_variant:vllm_tpot_slo_errors:ratio_rate5m', m, variant)}))"
            f" / ({gpus} > 0)",
            m, variant,
        ),
    ]
    return rules


def rollout_recording_group(rollout: RolloutObserved) -> dict:
    """Both variants' series of one model in rollout (every 30 s: the gate reads 5 m windows)."""
    rules = [r for variant in VARIANTS for r in variant_rules(rollout, variant)]
    return {"name": f"inference-platform.rollout.{rollout.model.name}", "interval": "30s", "rules": rules}


def canary_worse_expr() -> str:
    """Candidate burn > 1× in both windows, > WORSE_BURN_FACTOR × current (or current absent), enough traffic."""
    cand = 'model_variant:vllm_slo_burn_rate:rate{w}{{variant="candidate"}}'
    cur = 'model_variant:vllm_slo_burn_rate:rate{w}{{variant="current"}}'
    parts = []
    for w in ROLLOUT_WINDOWS:
        c, k = cand.format(w=w), cur.format(w=w)
        # A comparison ignoring(variant) drops the label, so the outer `and` matches on the model.
        parts.append(
            f"({c} > 1 and on(model) ({c} > ignoring(variant) {promql_number(WORSE_BURN_FACTOR)} * {k} or on(model) {c} unless on(model) {k}))"
        )
    traffic = f'model_variant:vllm_requests:increase1h{{variant="candidate"}} >= {MIN_CANDIDATE_REQUESTS}'
    return f"{parts[1]}\nand {parts[0]}\nand {traffic}"


def rollout_alert_group(runbook_base: str) -> dict:
    return {
        "name": ROLLOUT_ALERT_GROUP,
        "rules": [
            alerting_rule(
                "LayoutCanaryWorse",
                canary_worse_expr(),
                "warning",
                "5m",
                "{{ $labels.model }}: the candidate layout burns its SLO budget faster than the current one",
                "The candidate variant of {{ $labels.model }} spends its p90 SLO error budget at "
                "{{ $value | printf \"%.2f\" }}× (1 h), more than 1× and more than "
                f"{WORSE_BURN_FACTOR:g}× the current layout's rate. `infra rollout status` shows the numbers; "
                "`infra rollout abort` removes the candidate.",
                runbook_base,
            )
        ],
    }


def render_rollout_rule_groups(rollouts: tuple[RolloutObserved, ...], runbook_base: str) -> dict[str, list[dict]]:
    """PrometheusRule name → groups: one per model in rollout, plus the alert (only with a rollout)."""
    if not rollouts:
        return {}
    out = {f"rollout-{r.model.name}": [rollout_recording_group(r)] for r in rollouts}
    out["rollout-alerts"] = [rollout_alert_group(runbook_base)]
    return out
