"""Prometheus recording and alerting rules for the inference SLOs (pure data, no Pulumi).

The SLO the platform promises per model is "p90 time-to-first-token ≤ X and p90 time-per-output-
token ≤ Y". Read as an objective over requests, "p90 ≤ X" means *at least 90 % of requests finish
their first token within X*: the error budget is the 10 % of requests allowed to be slower (not
1 % — that would be a p99 promise). Alerts burn that budget with the multi-window,
multi-burn-rate method of the Google SRE workbook ("Alerting on SLOs"), adapted to the 10 % budget:
the workbook's 14.4× page threshold is unreachable here because the error ratio can never exceed
1.0, i.e. the burn rate is capped at 1 / 0.10 = 10×. The policy below keeps every threshold
under that cap (a test enforces it).

Where the numbers come from: vLLM V1 exports `vllm:time_to_first_token_seconds` and
`vllm:request_time_per_output_token_seconds` as classic histograms. In vLLM 0.33 their default
bucket boundaries live in vllm/v1/metrics/buckets.py and can be replaced with
`--custom-histogram-buckets`; the stack config rejects that flag in `extra_args`, because these
rules select the default boundaries by value. "Requests within X" is only exact when X is a
bucket boundary; in between, the rules interpolate linearly between the two neighbouring
buckets — the same assumption `histogram_quantile` makes for the p90 panels — and
`slo_bucket_warnings` says so.

Caveats of the SLIs:
- A request that generates a single token has no decode phase; vLLM records its time per output
  token as 0, so it always counts as within the TPOT limit (classification-style traffic makes
  the TPOT SLI look better than streaming users experience).
- Both histograms count every request that produced the timing, whatever its finish reason.
  "Served" requests (requests/s behind goodput) are those vLLM finished with `finished_reason`
  stop or length; abort (client went away) and error are recorded as their own series.
- Burn-rate alerts need at least MIN_REQUESTS_PER_HOUR requests per hour, averaged over the
  alert's long window: with a handful of requests one slow client is "100 % bad".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from infra.domain import LONGEST_SLO_WINDOW_DAYS
from infra.durations import duration_days
from infra.render.planner_prediction import PlannerPrediction

# vLLM V1 default histogram bucket upper bounds in seconds. In 0.33 they are defined in
# vllm/v1/metrics/buckets.py (earlier releases had them inline in vllm/v1/metrics/loggers.py) and
# `--custom-histogram-buckets` can override them; infra/config/engine_flags.py rejects that flag in a model's
# extra_args so these stay true. Keep in step with the pinned vLLM in infra/catalog/versions.py.
TTFT_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
TPOT_BUCKETS_S: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
)  # fmt: skip

TTFT_METRIC = "vllm:time_to_first_token_seconds"
TPOT_METRIC = "vllm:request_time_per_output_token_seconds"

# vLLM's `finished_reason` label on vllm:request_success_total: stop, length, abort, error.
# Only stop (EOS / stop string) and length (max_tokens) delivered a complete response.
SERVED_FINISHED_REASONS: tuple[str, ...] = ("stop", "length")

# Burn-rate alerts stay silent below this many requests per hour (averaged over the alert's long
# window). At 100/h the 1 h page needs > 60 slow requests and each request is 1 % of the window;
# below it a single client's burst of slow requests (a huge prompt, a retry loop) could page on
# its own. Low-traffic models are watched on the dashboard and by the deadman instead.
MIN_REQUESTS_PER_HOUR = 100

SLO_QUANTILE = 0.90
ERROR_BUDGET = round(1.0 - SLO_QUANTILE, 6)  # 0.10 of requests may exceed the p90 limit


RUNBOOK_DEFAULT = "docs/runbook.md"

# The vLLM PodMonitor copies the P/D renderer's pod label `inference-platform/pd-role`
# (infra/render/pd_service.PD_ROLE_LABEL) to this target label; colocated engines have none.
PD_ROLE_TARGET_LABEL = "pd_role"
PD_ROUTER_COMPONENT = "vllm-pd-router"  # the P/D router pods' app.kubernetes.io/name


@dataclass(frozen=True)
class PdObserved:
    """The prefill/decode sides of a P/D model, as the monitoring sees them.

    connector: vLLM's kv_connector (`MoRIIOConnector` | `NixlConnector`); only NIXL exports
        transfer series (`vllm:nixl_*`, vLLM 0.33 nixl/stats.py); MoRI-IO exports none.
    *_deployment: the side's Deployment; router_deployment: the model's P/D router.
    *_engines: engine pods a side should keep ready; *_tp: GPUs per engine of the side.
    decode_max_num_seqs: one decode engine's batch limit (how "idle" the decode side is).
    """

    connector: str
    prefill_deployment: str
    decode_deployment: str
    router_deployment: str
    prefill_engines: int
    decode_engines: int
    prefill_tp: int
    decode_tp: int
    decode_max_num_seqs: int

    @property
    def exports_transfer_metrics(self) -> bool:
        return self.connector == "NixlConnector"


@dataclass(frozen=True)
class ObservedModel:
    """One served model as the monitoring sees it.

    name: platform model name; the vLLM and router pods carry `inference-platform/model: <name>`.
    served_model_name: vLLM's `--served-model-name`; vLLM puts it in the `model_name` metric label.
    namespace: where the model's pods run.
    ttft_p90_ms / tpot_p90_ms: the SLO limits at the 90th percentile.
    gpus_per_replica: GPUs one vLLM pod holds (tp × dp); turns replicas into GPU-hours.
    replicas: pods the deployment should keep ready (for the not-ready alert).
    usd_per_gpu_hour: the pool's hourly node price divided by its GPUs; None when the contract
        price is unknown, which drops the cost rules for this model. The serving-replica cost
        rules price only the GPUs of scraped replicas (see model_recording_group), not every GPU
        the pool bills.
    pool: the GPU pool's name, which is also its DOKS node-pool name (the nodes' label
        `doks.digitalocean.com/node-pool`); None drops the billed-cost rules.
    usd_per_node_hour: the pool's hourly node price (catalog or `gpu_pools[].usd_per_hour`,
        the price the plan uses); None when unknown, which drops the billed-cost rules.
    pool_gpu_share: the model's share of the pool's billed cost: its GPUs per node (replicas per
        node × tp × dp) ÷ the sum of that over every model on the pool. A render-time constant
        (shared pools have fixed layouts); 1.0 for a pool with one model.
    deployment: the vLLM Deployment's name (infra.render.model_service.deployment_name), for the
        not-ready and metrics-absent alerts and the autoscaler's target.
    predicted_ready_seconds: the plan's pod start → Ready for a rollout's new pod (measured, or
        the load model's, infra/planner/loading.py); VllmReplicaSlowToReady fires at
        READY_ALERT_FACTOR × it. None: no time-to-ready rules for this model.
    pd: the sides of a prefill/decode-disaggregated model (None: colocated). Every user request
        runs twice, a one-token leg on a prefill engine and the generation on a decode engine, so
        the per-model series read the decode side (`selector`), except the TTFT SLI, which reads
        the prefill side (`sli_side`); `deployment` is then the decode Deployment and `replicas`
        counts the engines of both sides.
    """

    name: str
    served_model_name: str
    namespace: str
    ttft_p90_ms: float
    tpot_p90_ms: float
    gpus_per_replica: int
    replicas: int
    usd_per_gpu_hour: float | None = None
    pool: str | None = None
    usd_per_node_hour: float | None = None
    pool_selector: Mapping[str, str] | None = None  # the pool's node labels; None: its DOKS node-pool label
    pool_gpu_share: float = 1.0
    deployment: str = field(kw_only=True)
    # "statefulset" for a replica that spans nodes: the LeaderWorkerSet's leader StatefulSet (named
    # like the LWS, its pods the leaders that serve) stands in for the Deployment in the alerts.
    workload: str = field(default="deployment", kw_only=True)
    predicted_ready_seconds: int | None = field(default=None, kw_only=True)
    pd: PdObserved | None = field(default=None, kw_only=True)
    # The plan's predicted share of prompt tokens from the prefix cache (GPU + offload tier) for a
    # multi-turn workload, None without one; and the KV offload tier's backend, vLLM's
    # `--kv-offloading-backend` ("native" | "lmcache"), None without a tier: only the native
    # backend's OffloadingConnector exports the transfer counters prefix_cache_rules.py records.
    prefix_cache_planned_hit: float | None = field(default=None, kw_only=True)
    kv_offload_backend: str | None = field(default=None, kw_only=True)
    # The plan's prediction for this model (infra/render/planner_rules.py); None: no planner series.
    prediction: PlannerPrediction | None = field(default=None, kw_only=True)
    # GPUs per engine of a rollout's candidate (models[].rollout), whose engines the model's series
    # include (label variant="candidate"); None: no rollout.
    candidate_gpus_per_replica: int | None = field(default=None, kw_only=True)

    @property
    def billed(self) -> bool:
        """Whether the billed-cost rules (pool nodes × node price × share) apply to this model."""
        return self.pool is not None and self.usd_per_node_hour is not None


@dataclass(frozen=True)
class BurnRateWindow:
    """Alert when the error ratio over both windows exceeds burn_rate × ERROR_BUDGET.

    The long window makes the alert significant, the short one makes it reset quickly once the
    problem is gone (SRE workbook, "multiwindow, multi-burn-rate alerts").
    """

    long_window: str
    short_window: str
    burn_rate: float
    severity: str  # "critical" pages, "warning" opens a ticket

    @property
    def error_ratio_threshold(self) -> float:
        return round(self.burn_rate * ERROR_BUDGET, 6)


# Budget: 10 % of requests over a 30-day period. A burn rate of b spends b × window / 30 d of it.
#   6× for 1 h  → 60 % of requests slow (even the median is over the limit): 0.8 % of the budget/h.
#   3× for 6 h  → 30 % slow for a quarter day: 2.5 % of the budget.
#   1.5× for 1 d, 1× for 3 d: the SLO is being missed slowly; fix within working hours.
BURN_RATE_POLICY: tuple[BurnRateWindow, ...] = (
    BurnRateWindow("1h", "5m", 6.0, "critical"),
    BurnRateWindow("6h", "30m", 3.0, "critical"),
    BurnRateWindow("1d", "2h", 1.5, "warning"),
    BurnRateWindow("3d", "6h", 1.0, "warning"),
)
SLO_WINDOWS: tuple[str, ...] = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
# The config's minimum retention is the longest window: no rule may read further back.
assert max(duration_days(w) for w in SLO_WINDOWS) <= LONGEST_SLO_WINDOW_DAYS


@dataclass(frozen=True)
class AlertThresholds:
    """Tunable limits of the non-SLO alerts, with the reason for each default."""

    # vLLM preempts (recomputes) sequences when the KV cache is full; sustained > 95 % means
    # latency is about to degrade for everyone on the replica.
    kv_cache_usage_ratio: float = 0.95
    # A queue that grows by one request per minute for 15 minutes is demand above capacity.
    queue_growth_per_minute: float = 1.0
    # MI300X/MI325X throttle near 100–105 °C junction; warn before the clocks drop.
    gpu_junction_temperature_c: float = 95.0
    # A model load takes tens of minutes; only complain when readiness stays short this long.
    replicas_not_ready_for: str = "45m"
    pod_restarts_per_30m: int = 2
    deadman_window: str = "10m"
    # A model with no ready replica serves nobody. The first load of a new Deployment (a 235B
    # model: ~40 min) is not an outage, so Deployments younger than this do not page.
    model_down_for: str = "10m"
    model_down_grace_seconds: int = 3600


DEFAULT_THRESHOLDS = AlertThresholds()


# --- bucket precision ------------------------------------------------------------------------


@dataclass(frozen=True)
class BucketBracket:
    """Where an SLO limit falls among a histogram's buckets."""

    limit_s: float
    lower_s: float | None  # largest boundary ≤ limit (None: below the first bucket, count is 0)
    upper_s: float | None  # smallest boundary ≥ limit (None: above the last finite bucket)

    @property
    def exact(self) -> bool:
        return self.lower_s == self.limit_s


def bracket(limit_s: float, buckets: Iterable[float]) -> BucketBracket:
    """The bucket boundaries around `limit_s`."""
    bounds = sorted(buckets)
    lower = max((b for b in bounds if b <= limit_s + 1e-12), default=None)
    upper = min((b for b in bounds if b >= limit_s - 1e-12), default=None)
    return BucketBracket(limit_s, lower, upper)


def slo_bucket_warnings(models: Iterable[ObservedModel]) -> list[str]:
    """One warning per SLO limit that is not a vLLM histogram bucket boundary.

    A quantile (and the fraction of requests within a limit) is only as precise as the buckets
    around it: with TTFT buckets at 1.0 s and 2.5 s, a 2.0 s limit is estimated by assuming the
    requests between 1.0 s and 2.5 s are spread evenly. Choosing a boundary makes it exact.
    """
    warnings: list[str] = []
    for m in models:
        for sli, limit_ms, buckets in (
            ("ttft_p90_ms", m.ttft_p90_ms, TTFT_BUCKETS_S),
            ("tpot_p90_ms", m.tpot_p90_ms, TPOT_BUCKETS_S),
        ):
            b = bracket(limit_ms / 1000.0, buckets)
            if b.exact:
                continue
            if b.upper_s is None:
                warnings.append(
                    f"model {m.name}: slo.{sli}={limit_ms:g} is above vLLM's largest finite bucket "
                    f"({b.lower_s * 1000:g} ms); the SLO is evaluated at {b.lower_s * 1000:g} ms"
                )
                continue
            lower_ms = 0.0 if b.lower_s is None else b.lower_s * 1000
            warnings.append(
                f"model {m.name}: slo.{sli}={limit_ms:g} lies between vLLM histogram buckets "
                f"{lower_ms:g} ms and {b.upper_s * 1000:g} ms; the fraction within the SLO and the "
                f"p90 are interpolated between them. Use {lower_ms:g} or {b.upper_s * 1000:g} for an "
                f"exact SLO"
            )
    return warnings


# --- PromQL building blocks ------------------------------------------------------------------


def promql_number(x: float) -> str:
    """A float as PromQL prints it best: 0.6, 2, 1e-06 stays readable."""
    return f"{x:.10g}"


def regex_literal(text: str) -> str:
    """`text` as an RE2 pattern inside a double-quoted PromQL string (backslashes doubled)."""
    return re.escape(text).replace("\\", "\\\\")


def le_matcher(bound_s: float) -> str:
    """Match one bucket boundary however it was written.

    prometheus_client (vLLM) writes `le="1.0"`; Prometheus 3 normalises classic-histogram `le`
    values on ingestion to `le="1"`. The regex accepts both and escapes the dot, because an
    unescaped `1.0` would also match `le="160"`.
    """
    python_form = repr(float(bound_s))
    forms = [python_form]
    if python_form.endswith(".0"):
        forms.append(python_form[:-2])
    return 'le=~"' + "|".join(regex_literal(f) for f in forms) + '"'


def quoted(value: str) -> str:
    """A label value as a double-quoted PromQL string."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def selector(model: ObservedModel, *extra: str) -> str:
    """The label matchers that select one model's vLLM series.

    `component="vllm"` comes from the vLLM PodMonitor's relabeling; it keeps out the router's own
    `vllm:`-prefixed series should a router re-export some under the same names (the production-stack
    router did; vllm-router's are `vllm_router_*`).
    For a P/D model the matchers select the decode side unless `extra` names a side: every user
    request finishes there, while the prefill engines' one-token legs would count each request
    twice (and record a TPOT of 0).
    """
    parts = [
        f"model_name={quoted(model.served_model_name)}",
        f"namespace={quoted(model.namespace)}",
        'component="vllm"',
        *extra,
    ]
    if model.pd is not None and not any(p.startswith(PD_ROLE_TARGET_LABEL) for p in extra):
        parts.append(f'{PD_ROLE_TARGET_LABEL}="decode"')
    return "{" + ", ".join(parts) + "}"


def sli_side(model: ObservedModel, short: str) -> tuple[str, ...]:
    """Extra matchers of an SLI's histogram. P/D: TTFT from the prefill engines (queue + prompt
    compute, nearly all of a prompt-heavy request's first-token time), TPOT from the decode
    engines. The decode side's own TTFT (KV transfer + decode queue + first step) is not in the
    SLI: no engine sees the user's whole first-token time; it is recorded per side
    (`model_side:vllm_ttft_seconds:p90`) so the gap stays visible. Colocated: nothing."""
    if model.pd is None:
        return ()
    return (f'{PD_ROLE_TARGET_LABEL}="{"prefill" if short == "ttft" else "decode"}"',)


def slo_good_ratio_expr(
    metric: str, model: ObservedModel, limit_s: float, buckets: Iterable[float], window: str,
    side: tuple[str, ...] = (),
) -> str:
    """Fraction of requests at or under `limit_s` over `window`, from histogram buckets."""
    b = bracket(limit_s, buckets)
    count = f"sum(rate({metric}_count{selector(model, *side)}[{window}]))"

    def cumulative(bound: float) -> str:
        return f"sum(rate({metric}_bucket{selector(model, *side, le_matcher(bound))}[{window}]))"

    if b.exact:
        good = cumulative(b.lower_s)
    elif b.upper_s is None:  # above the last finite bucket: evaluate at the last one (stricter)
        good = cumulative(b.lower_s)
    else:
        lower = 0.0 if b.lower_s is None else b.lower_s
        weight = (limit_s - lower) / (b.upper_s - lower)
        upper_term = f"{cumulative(b.upper_s)} * {promql_number(weight)}"
        good = (
            upper_term if b.lower_s is None else f"({cumulative(lower)} * {promql_number(1 - weight)} + {upper_term})"
        )
    return f"{good} / {count}"


def recording_rule(record: str, expr: str, model: ObservedModel) -> dict:
    return {"record": record, "expr": expr, "labels": {"model": model.name}}


def _quantile_rules(short: str, metric: str, model: ObservedModel) -> list[dict]:
    sel = selector(model, *sli_side(model, short))
    return [
        recording_rule(
            f"model:vllm_{short}_seconds:p{int(q * 100)}",
            f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket{sel}[5m])))",
            model,
        )
        for q in (0.5, 0.9, 0.99)
    ]


def by_model(record: str, model: ObservedModel) -> str:
    return f"{record}{{model={quoted(model.name)}}}"


# --- recording rules -------------------------------------------------------------------------


# --- time to ready (issue 20) ------------------------------------------------------------------

READY_ALERT_FACTOR = 2.0
# A pod that was Ready within this window and is not now is unready, not loading.
READY_LOOKBACK = "6h"


def readiness_rules(model: ObservedModel, pod_labels: str) -> list[dict]:
    """Per engine pod: seconds from pod start to Ready (kube-state-metrics), and how long a pod
    that has not been Ready yet has been loading; plus the plan's prediction.

    `kube_pod_status_ready_time` is EXPERIMENTAL in kube-state-metrics v2.18 (the version
    kube-prometheus-stack 81.x ships) and on by default; it is only read where the Ready
    condition is true, since it carries the condition's last transition either way. The loading
    series and the alert use STABLE metrics only (`kube_pod_start_time`, `kube_pod_status_ready`).
    """
    if model.predicted_ready_seconds is None:
        return []
    ns = f"namespace={quoted(model.namespace)}"
    ready_now = f'(kube_pod_status_ready{{{ns}, condition="true"}} == 1)'
    return [
        recording_rule(
            "model:engine_time_to_ready_seconds",
            f"(kube_pod_status_ready_time{{{ns}}} - kube_pod_start_time{{{ns}}})"
            f" and on (namespace, pod) {ready_now} and on (namespace, pod) {pod_labels}",
            model,
        ),
        recording_rule(
            "model:engine_loading_seconds",
            f"(time() - kube_pod_start_time{{{ns}}})"
            f' unless on (namespace, pod) (max_over_time(kube_pod_status_ready{{{ns}, condition="true"}}[{READY_LOOKBACK}]) == 1)'
            f" and on (namespace, pod) {pod_labels}",
            model,
        ),
        recording_rule("model:engine_predicted_ready_seconds", f"vector({model.predicted_ready_seconds})", model),
    ]


def _gpus_serving_expr(model: ObservedModel) -> str:
    """GPUs behind scraped engines: up targets × GPUs per engine (per side for P/D, per variant
    during a rollout, whose sides / variants may differ in TP; `or vector(0)` keeps a side with no
    target at 0)."""
    if model.pd is None and model.candidate_gpus_per_replica is not None:
        return " + ".join(
            f'(sum(up{{component="vllm", model={quoted(model.name)}, variant="{variant}"}}) or vector(0)) * {gpus}'
            for variant, gpus in (("current", model.gpus_per_replica), ("candidate", model.candidate_gpus_per_replica))
        )
    if model.pd is None:
        return f"{by_model('model:vllm_replicas_up:sum', model)} * {model.gpus_per_replica}"
    return " + ".join(
        f'(sum(up{{component="vllm", model={quoted(model.name)}, {PD_ROLE_TARGET_LABEL}="{role}"}}) or vector(0)) * {tp}'
        for role, tp in (("prefill", model.pd.prefill_tp), ("decode", model.pd.decode_tp))
    )


def _serving_rules(model: ObservedModel) -> list[dict]:
    """Per-model latency quantiles, throughput, saturation, replicas, efficiency, SLO limits and
    time to ready."""
    sel = selector(model)
    served = f'finished_reason=~"{"|".join(SERVED_FINISHED_REASONS)}"'
    unserved = f'finished_reason!~"{"|".join(SERVED_FINISHED_REASONS)}"'
    pod_labels = (
        f'kube_pod_labels{{namespace={quoted(model.namespace)}, label_app_kubernetes_io_name="vllm", '
        f"label_inference_platform_model={quoted(model.name)}}}"
    )
    return [
        *_quantile_rules("ttft", TTFT_METRIC, model),
        *_quantile_rules("tpot", TPOT_METRIC, model),
        # Every finished request, whatever the finish reason: the load the engines carried.
        recording_rule(
            "model:vllm_requests_per_second:rate5m", f"sum(rate(vllm:request_success_total{sel}[5m]))", model
        ),
        # Served: finished with a complete response (stop or length); the base of goodput.
        recording_rule(
            "model:vllm_served_requests_per_second:rate5m",
            f"sum(rate(vllm:request_success_total{selector(model, served)}[5m]))",
            model,
        ),
        # Not served (abort: the client went away or was cancelled; error: the engine failed it),
        # per finish reason.
        recording_rule(
            "model:vllm_unserved_requests_per_second:rate5m",
            f"sum by (finished_reason) (rate(vllm:request_success_total{selector(model, unserved)}[5m]))",
            model,
        ),
        recording_rule(
            "model:vllm_output_tokens_per_second:rate5m",
            f"sum(rate(vllm:generation_tokens_total{sel}[5m]))",
            model,
        ),
        recording_rule(
            "model:vllm_prompt_tokens_per_second:rate5m",
            f"sum(rate(vllm:prompt_tokens_total{sel}[5m]))",
            model,
        ),
        recording_rule("model:vllm_requests_waiting:sum", f"sum(vllm:num_requests_waiting{sel})", model),
        recording_rule("model:vllm_requests_running:sum", f"sum(vllm:num_requests_running{sel})", model),
        recording_rule("model:vllm_kv_cache_usage:max", f"max(vllm:kv_cache_usage_perc{sel})", model),
        recording_rule("model:vllm_kv_cache_usage:avg", f"avg(vllm:kv_cache_usage_perc{sel})", model),
        recording_rule(
            "model:vllm_prefix_cache_hit:ratio_rate5m",
            f"sum(rate(vllm:prefix_cache_hits_total{sel}[5m])) / sum(rate(vllm:prefix_cache_queries_total{sel}[5m]))",
            model,
        ),
        # Targets the vLLM PodMonitor scrapes successfully (its relabelings set model/component).
        recording_rule(
            "model:vllm_replicas_up:sum", f'sum(up{{component="vllm", model={quoted(model.name)}}})', model
        ),
        recording_rule("model:vllm_gpus_serving:sum", _gpus_serving_expr(model), model),
        recording_rule(
            "model:vllm_output_tokens_per_second_per_gpu:rate5m",
            f"{by_model('model:vllm_output_tokens_per_second:rate5m', model)}"
            f" / ({by_model('model:vllm_gpus_serving:sum', model)} > 0)",
            model,
        ),
        # Ready pods from kube-state-metrics; `or vector(0)` so that "no pod at all" is 0, not absent.
        recording_rule(
            "model:vllm_replicas_ready:sum",
            f'sum(kube_pod_status_ready{{namespace={quoted(model.namespace)}, condition="true"}}'
            f" * on (namespace, pod) {pod_labels}) or vector(0)",
            model,
        ),
        recording_rule("model:vllm_replicas_expected:count", f"vector({model.replicas})", model),
        recording_rule("model:slo_ttft_p90_limit_seconds", f"vector({promql_number(model.ttft_p90_ms / 1000)})", model),
        recording_rule("model:slo_tpot_p90_limit_seconds", f"vector({promql_number(model.tpot_p90_ms / 1000)})", model),
        *readiness_rules(model, pod_labels),
    ]


def _cost_rules(model: ObservedModel) -> list[dict]:
    """Per-model cost: of the serving GPUs at the catalog price (a lower bound), and billed (the
    model's share of its pool's nodes); each only when its price is known."""
    sel = selector(model)
    rules: list[dict] = []
    # Cost of the serving replicas: GPUs behind a successfully scraped vLLM pod × the pool's
    # price per GPU. It leaves out GPUs DigitalOcean bills all the same — nodes whose replica is
    # still loading (no /metrics yet) or fails its scrape, GPUs a node's replicas do not use, and
    # pool nodes without a replica — so it is a lower bound of the pool's cost. The billed cost
    # below prices the pool's nodes instead; see docs/runbook.md, "Cost figures".
    priced = model.usd_per_gpu_hour is not None
    if priced:
        rules += [
            recording_rule("model:gpu_price_usd_per_gpu_hour", f"vector({promql_number(model.usd_per_gpu_hour)})", model),
            recording_rule(
                "model:gpu_cost_usd_per_hour:sum",
                f"{by_model('model:vllm_gpus_serving:sum', model)} * {promql_number(model.usd_per_gpu_hour)}",
                model,
            ),
        ]
    if priced or model.billed:
        rules.append(
            recording_rule(
                "model:vllm_output_tokens_per_second:rate1h",
                f"sum(rate(vllm:generation_tokens_total{sel}[1h]))",
                model,
            )
        )
    million_tokens_per_hour = (
        f"({by_model('model:vllm_output_tokens_per_second:rate1h', model)} * 3600 / 1e6 > 0)"
    )
    if priced:
        # $/h ÷ (million output tokens per hour); the `> 0` drops idle hours instead of +Inf.
        rules.append(
            recording_rule(
                "model:vllm_cost_usd_per_million_output_tokens:rate1h",
                f"{by_model('model:gpu_cost_usd_per_hour:sum', model)} / {million_tokens_per_hour}",
                model,
            )
        )
    if model.billed:
        # Billed cost: the model's configured GPU share of what its pool's nodes cost (pool rules
        # in pool_cost_group), idle and loading GPUs included. `sum` drops the `pool` label so
        # the series carries `model` only, like every other per-model series.
        rules += [
            recording_rule("model:pool_gpu_share:ratio", f"vector({promql_number(model.pool_gpu_share)})", model),
            recording_rule(
                "model:billed_cost_usd_per_hour:sum",
                f"sum(pool:node_cost_usd_per_hour:sum{{pool={quoted(model.pool)}}})"
                f" * {promql_number(model.pool_gpu_share)}",
                model,
            ),
            recording_rule(
                "model:vllm_billed_cost_usd_per_million_output_tokens:rate1h",
                f"{by_model('model:billed_cost_usd_per_hour:sum', model)} / {million_tokens_per_hour}",
                model,
            ),
        ]
    return rules


def model_recording_group(model: ObservedModel) -> dict:
    """Per-model serving, saturation, efficiency and cost series (evaluated every interval)."""
    return {"name": f"inference-platform.model.{model.name}", "rules": _serving_rules(model) + _cost_rules(model)}


# kube-state-metrics' name for the DOKS node-pool label on kube_node_labels; exported only
# because kube-state-metrics.metricLabelsAllowlist lists it for nodes (infra/render/observability.py).
DOKS_NODE_POOL_LABEL = "label_doks_digitalocean_com_node_pool"


def node_label_series(label: str) -> str:
    """kube-state-metrics' name for a node label on kube_node_labels: `label_` and the label with
    every character Prometheus does not allow in a label name as `_`."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", label)


def pool_cost_group(models: Iterable[ObservedModel]) -> dict | None:
    """What each GPU pool that serves a priced model costs: its nodes × the node price.

    DigitalOcean bills every node of the pool whatever runs on it, so this counts the pool's nodes
    (kube_node_labels, one series per node) rather than replicas. A pool scaled to zero costs 0 —
    as long as some node carries the pool label at all, which proves the label allow-list works
    (otherwise the series is absent rather than a misleading 0). None when no model is billed.
    """
    prices: dict[str, float] = {}
    selectors: dict[str, dict[str, str]] = {}
    for m in models:
        if not m.billed:
            continue
        # Every model of a pool has the pool's price (platform.observed_models_of).
        prices.setdefault(m.pool, m.usd_per_node_hour)
        selectors.setdefault(m.pool, {node_label_series(k): v for k, v in m.pool_selector.items()}
                             if m.pool_selector is not None else {DOKS_NODE_POOL_LABEL: m.pool})
    if not prices:
        return None
    rules = []
    for pool, price in prices.items():
        matchers = ",".join(f"{k}={quoted(v)}" for k, v in selectors[pool].items())
        nodes = f"count(count by (node) (kube_node_labels{{{matchers}}}))"
        labelled = f'group(kube_node_labels{{{next(iter(selectors[pool]))}!=""}})'
        rules.append(
            {
                "record": "pool:node_cost_usd_per_hour:sum",
                "expr": f"({nodes} or {labelled} * 0) * {promql_number(price)}",
                "labels": {"pool": pool},
            }
        )
    return {"name": "inference-platform.pools", "rules": rules}


def slo_recording_group(model: ObservedModel) -> dict:
    """Per-model SLO error ratios over every burn-rate window, plus goodput.

    Evaluated once a minute: the 1d and 3d rates over bucket series are the most expensive rules
    here and do not change faster than that.
    """
    rules: list[dict] = []
    for short, metric, limit_ms, buckets in (
        ("ttft", TTFT_METRIC, model.ttft_p90_ms, TTFT_BUCKETS_S),
        ("tpot", TPOT_METRIC, model.tpot_p90_ms, TPOT_BUCKETS_S),
    ):
        side = sli_side(model, short)
        for window in SLO_WINDOWS:
            good = slo_good_ratio_expr(metric, model, limit_ms / 1000.0, buckets, window, side)
            rules.append(recording_rule(f"model:vllm_{short}_slo_errors:ratio_rate{window}", f"1 - ({good})", model))
        rules.append(
            recording_rule(
                f"model:vllm_{short}_slo_good:ratio_rate5m",
                f"1 - {by_model(f'model:vllm_{short}_slo_errors:ratio_rate5m', model)}",
                model,
            )
        )
        # Requests per second over each burn-rate long window: the minimum-traffic guard.
        for window in dict.fromkeys(w.long_window for w in BURN_RATE_POLICY):
            rules.append(
                recording_rule(
                    f"model:vllm_{short}_requests:rate{window}",
                    f"sum(rate({metric}_count{selector(model, *side)}[{window}]))",
                    model,
                )
            )
    # The two histograms are separate, so the fraction of requests meeting *both* SLOs is not
    # observable; the smaller of the two fractions is an upper bound on it. Only served requests
    # (stop/length) count: an aborted or failed request is not goodput however fast it was.
    ttft_good = by_model("model:vllm_ttft_slo_good:ratio_rate5m", model)
    tpot_good = by_model("model:vllm_tpot_slo_good:ratio_rate5m", model)
    rules.append(
        recording_rule(
            "model:vllm_goodput_requests_per_second:rate5m",
            f"{by_model('model:vllm_served_requests_per_second:rate5m', model)}"
            f" * ({ttft_good} < {tpot_good} or {tpot_good})",
            model,
        )
    )
    return {"name": f"inference-platform.slo.{model.name}", "interval": "1m", "rules": rules}


def alert_names(groups: Iterable[dict]) -> list[str]:
    """Distinct alert names in rule groups, in order of first appearance."""
    seen: dict[str, None] = {}
    for g in groups:
        for r in g["rules"]:
            if "alert" in r:
                seen.setdefault(r["alert"], None)
    return list(seen)


def recorded_names(groups: Iterable[dict]) -> set[str]:
    """Every series name the groups record."""
    return {r["record"] for g in groups for r in g["rules"] if "record" in r}
