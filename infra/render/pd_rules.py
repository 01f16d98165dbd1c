"""Prometheus rules of prefill/decode-disaggregated models (issue 18; pure data, no Pulumi): per
side queues, batch and TTFT, KV transfer and the P/D router's legs, and the alerts on them.
The shared SLO rules and their building blocks are infra/render/slo_rules.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from infra.render.slo_alerts import alerting_rule
from infra.render.slo_rules import (
    DEFAULT_THRESHOLDS,
    PD_ROLE_TARGET_LABEL,
    PD_ROUTER_COMPONENT,
    RUNBOOK_DEFAULT,
    TTFT_METRIC,
    AlertThresholds,
    ObservedModel,
    by_model,
    promql_number,
    quoted,
    recording_rule,
    selector,
)

# --- prefill/decode disaggregation (issue 18) --------------------------------------------------
#
# Metric names verified in the pinned engines (vLLM 0.33.0 wheel, vllm-router 0.1.17 wheel):
# - every engine: vllm:num_requests_waiting, vllm:num_requests_waiting_by_reason{reason=
#   "capacity"|"deferred"} ("deferred" includes requests waiting for a KV transfer),
#   vllm:num_requests_running, vllm:kv_cache_usage_perc, vllm:time_to_first_token_seconds,
#   vllm:request_queue_time_seconds (vllm/v1/metrics/loggers.py);
# - KV consumers (decode engines, any connector): vllm:num_requests_kv_fetch_by_stage{stage=
#   "waiting_to_start"|"in_progress"|"completed_waiting"};
# - NixlConnector only: vllm:nixl_xfer_time_seconds (histogram), vllm:nixl_num_failed_transfers
#   (counter, exported with `_total`; includes handshake and notification failures),
#   vllm:nixl_num_kv_expired_reqs (nixl/stats.py). MoRIIOConnector registers no Prometheus
#   metrics in 0.33.0 (moriio/ has no KVConnectorStats): on AMD the transfer shows only as the
#   decode side's TTFT and KV-fetch gauges, and its failures as the router's decode-leg errors;
# - vllm-router (metrics.rs): vllm_router_pd_requests_total{route},
#   vllm_router_pd_prefill_errors_total{worker}, vllm_router_pd_decode_errors_total{worker}.
#   Its exporter (metrics-exporter-prometheus) only exports a counter once it was incremented, so
#   the error ratios are absent, not 0, until the first error.


@dataclass(frozen=True)
class PdAlertThresholds:
    """Limits of the P/D alerts, with the reason for each default."""

    # Prompts waiting for capacity per up engine of a side: more than two prompts of a
    # prompt-heavy workload queued per engine is a TTFT of three prefills or more.
    queue_per_engine: float = 2.0
    # Decode batch (running ÷ engines × max_num_seqs) below this while prompts queue: the decode
    # side has room the prefill side cannot fill — GPUs in the wrong pool.
    idle_batch_ratio: float = 0.25
    bottleneck_for: str = "15m"
    # KV transfers that fail (NIXL) or requests whose P/D leg the router saw fail.
    kv_transfer_failure_ratio: float = 0.01
    leg_error_ratio: float = 0.05
    router_down_for: str = "5m"
    prefill_down_for: str = "10m"


DEFAULT_PD_THRESHOLDS = PdAlertThresholds()


def _pd_router_selector(model: ObservedModel) -> str:
    return f'{{component="{PD_ROUTER_COMPONENT}", model={quoted(model.name)}, namespace={quoted(model.namespace)}}}'


def _pd_side_rules(model: ObservedModel) -> list[dict]:
    """Per side (prefill, decode): queue, running requests, KV cache, engines up, TTFT and queue
    time; per engine: queue of each side and the decode batch; KV fetches by stage."""
    pd = model.pd
    sides = selector(model, f'{PD_ROLE_TARGET_LABEL}=~"prefill|decode"')
    decode = selector(model, f'{PD_ROLE_TARGET_LABEL}="decode"')
    capacity = selector(model, f'{PD_ROLE_TARGET_LABEL}=~"prefill|decode"', 'reason="capacity"')
    by_side = f"sum by ({PD_ROLE_TARGET_LABEL})"
    up = f'up{{component="vllm", model={quoted(model.name)}, {PD_ROLE_TARGET_LABEL}=~"prefill|decode"}}'

    def side(record: str, role: str) -> str:
        return f'{record}{{model={quoted(model.name)}, {PD_ROLE_TARGET_LABEL}="{role}"}}'

    def per_engine(role: str) -> str:
        # `ignoring(pd_role)` is not needed: both operands carry the same side label.
        return (
            f"sum without ({PD_ROLE_TARGET_LABEL}) ({side('model_side:vllm_requests_waiting_for_capacity:sum', role)}"
            f" / ({side('model_side:vllm_engines_up:sum', role)} > 0))"
        )

    return [
        recording_rule("model_side:vllm_requests_waiting:sum", f"{by_side} (vllm:num_requests_waiting{sides})", model),
        # Waiting for scheduling capacity only: a decode engine's requests whose KV is still in
        # flight wait as "deferred" and are not a queue.
        recording_rule(
            "model_side:vllm_requests_waiting_for_capacity:sum",
            f"{by_side} (vllm:num_requests_waiting_by_reason{capacity})",
            model,
        ),
        recording_rule("model_side:vllm_requests_running:sum", f"{by_side} (vllm:num_requests_running{sides})", model),
        recording_rule(
            "model_side:vllm_kv_cache_usage:max",
            f"max by ({PD_ROLE_TARGET_LABEL}) (vllm:kv_cache_usage_perc{sides})",
            model,
        ),
        recording_rule("model_side:vllm_engines_up:sum", f"{by_side} ({up})", model),
        # Prefill side: queue + prompt compute (its whole request is the one-token leg), i.e. the
        # prefill's contribution to TTFT. Decode side: KV transfer + decode queue + first step.
        recording_rule(
            "model_side:vllm_ttft_seconds:p90",
            f"histogram_quantile(0.9, sum by ({PD_ROLE_TARGET_LABEL}, le) "
            f"(rate({TTFT_METRIC}_bucket{sides}[5m])))",
            model,
        ),
        recording_rule(
            "model_side:vllm_queue_time_seconds:p90",
            f"histogram_quantile(0.9, sum by ({PD_ROLE_TARGET_LABEL}, le) "
            f"(rate(vllm:request_queue_time_seconds_bucket{sides}[5m])))",
            model,
        ),
        recording_rule("model:vllm_pd_prefill_queue_per_engine:ratio", per_engine("prefill"), model),
        recording_rule("model:vllm_pd_decode_queue_per_engine:ratio", per_engine("decode"), model),
        recording_rule(
            "model:vllm_pd_decode_batch:ratio",
            f"sum without ({PD_ROLE_TARGET_LABEL}) ({side('model_side:vllm_requests_running:sum', 'decode')}"
            f" / ({side('model_side:vllm_engines_up:sum', 'decode')} * {pd.decode_max_num_seqs} > 0))",
            model,
        ),
        recording_rule(
            "model:vllm_pd_kv_fetch_requests:sum",
            f"sum by (stage) (vllm:num_requests_kv_fetch_by_stage{decode})",
            model,
        ),
    ]


def _kv_transfer_rules(model: ObservedModel) -> list[dict]:
    """KV transfer time, rate, failures and expiries; only connectors that export them (NIXL)."""
    sides = selector(model, f'{PD_ROLE_TARGET_LABEL}=~"prefill|decode"')
    transfers = f"sum(rate(vllm:nixl_xfer_time_seconds_count{sides}[5m]))"
    failures = f"sum(rate(vllm:nixl_num_failed_transfers_total{sides}[5m]))"
    return [
        recording_rule(
            "model:vllm_kv_transfer_seconds:p90",
            f"histogram_quantile(0.9, sum by (le) (rate(vllm:nixl_xfer_time_seconds_bucket{sides}[5m])))",
            model,
        ),
        recording_rule("model:vllm_kv_transfers:rate5m", transfers, model),
        recording_rule("model:vllm_kv_transfer_failures:rate5m", failures, model),
        recording_rule(
            "model:vllm_kv_transfer_failures:ratio_rate5m",
            f"{failures} / (({transfers} + {failures}) > 0)",
            model,
        ),
        recording_rule(
            "model:vllm_kv_expired_requests:rate5m",
            f"sum(rate(vllm:nixl_num_kv_expired_reqs_total{sides}[5m]))",
            model,
        ),
    ]


def _pd_router_rules(model: ObservedModel) -> list[dict]:
    """The P/D router: up, requests, and errors of its prefill and decode legs."""
    router = _pd_router_selector(model)
    requests = f"sum(rate(vllm_router_pd_requests_total{router}[5m]))"
    return [
        recording_rule("model:pd_router_up:sum", f"sum(up{router}) or vector(0)", model),
        recording_rule("model:pd_router_requests:rate5m", requests, model),
        recording_rule(
            "model:pd_router_leg_errors:rate5m",
            " or ".join(
                f'label_replace(sum(rate(vllm_router_pd_{leg}_errors_total{router}[5m])), "leg", "{leg}", "", "")'
                for leg in ("prefill", "decode")
            ),
            model,
        ),
        recording_rule(
            "model:pd_router_leg_errors:ratio_rate5m",
            f"sum without (leg) ({by_model('model:pd_router_leg_errors:rate5m', model)})"
            f" / on () group_left () ({requests} > 0)",
            model,
        ),
    ]


def pd_recording_group(model: ObservedModel) -> dict | None:
    """Per-side queue, batch, KV cache and latency of a P/D model, its KV transfer (where the
    connector exports it) and its P/D router; None for a colocated model."""
    if model.pd is None:
        return None
    transfer = _kv_transfer_rules(model) if model.pd.exports_transfer_metrics else []
    rules = _pd_side_rules(model) + transfer + _pd_router_rules(model)
    return {"name": f"inference-platform.pd.{model.name}", "rules": rules}


def pd_alert_group(
    models: Iterable[ObservedModel],
    thresholds: PdAlertThresholds = DEFAULT_PD_THRESHOLDS,
    base: AlertThresholds = DEFAULT_THRESHOLDS,
    runbook_base: str = RUNBOOK_DEFAULT,
) -> dict | None:
    """A starved side, KV-transfer and router-leg failures, the P/D router or the prefill side
    down; None when no model is disaggregated."""
    pds = [m for m in models if m.pd is not None]
    if not pds:
        return None
    q = promql_number(thresholds.queue_per_engine)
    rules = [
        alerting_rule(
            "VllmPdPrefillBottleneck",
            f"model:vllm_pd_prefill_queue_per_engine:ratio > {q}"
            f" and on (model) model:vllm_pd_decode_batch:ratio < {promql_number(thresholds.idle_batch_ratio)}",
            "warning",
            thresholds.bottleneck_for,
            "{{ $labels.model }}: prompts queue on the prefill side while the decode side idles",
            f"{{{{ $value }}}} prompts wait per prefill engine (limit {q}) while the decode engines run under "
            f"{thresholds.idle_batch_ratio:.0%} of their batch: TTFT grows although GPUs sit idle — the "
            "split has too few prefill engines for this traffic.",
            runbook_base,
        ),
        alerting_rule(
            "VllmPdDecodeBottleneck",
            f"max by (model) (model:vllm_pd_decode_queue_per_engine:ratio > {q}"
            f' or model_side:vllm_kv_cache_usage:max{{{PD_ROLE_TARGET_LABEL}="decode"}}'
            f" > {promql_number(base.kv_cache_usage_ratio)})"
            " and on (model) model:vllm_pd_prefill_queue_per_engine:ratio < 1",
            "warning",
            thresholds.bottleneck_for,
            "{{ $labels.model }}: the decode side is full while the prefill side has spare capacity",
            f"Requests queue on the decode engines (more than {q} per engine) or their KV cache is over "
            f"{base.kv_cache_usage_ratio:.0%}, while fewer than one prompt waits per prefill engine: TPOT and "
            "TTFT grow although prefill GPUs sit idle — the split has too few decode engines.",
            runbook_base,
        ),
        alerting_rule(
            "VllmPdRouterLegErrors",
            f"model:pd_router_leg_errors:ratio_rate5m > {promql_number(thresholds.leg_error_ratio)}",
            "warning",
            "10m",
            "{{ $labels.model }}: the P/D router sees prefill or decode legs fail",
            "{{ $value | humanizePercentage }} of {{ $labels.model }} P/D requests had a failed prefill or "
            f"decode leg over 5 minutes (limit {thresholds.leg_error_ratio:.0%}); with MoRI-IO, whose engines "
            "export no transfer metrics, a failing KV transfer shows here.",
            runbook_base,
        ),
    ]
    if any(m.pd.exports_transfer_metrics for m in pds):
        rules.append(
            alerting_rule(
                "VllmPdKvTransferFailures",
                f"model:vllm_kv_transfer_failures:ratio_rate5m > {promql_number(thresholds.kv_transfer_failure_ratio)}",
                "warning",
                "5m",
                "{{ $labels.model }}: NIXL KV transfers fail",
                "{{ $value | humanizePercentage }} of {{ $labels.model }} KV transfers (transfer, handshake or "
                f"notification) failed over 5 minutes (limit {thresholds.kv_transfer_failure_ratio:.0%}); the "
                "decode engine recomputes or fails those requests.",
                runbook_base,
            )
        )
    for m in pds:
        for alert, dep, for_, summary, description, severity in (
            (
                "VllmPdRouterDown",
                m.pd.router_deployment,
                thresholds.router_down_for,
                f"{m.name}: no P/D router is ready",
                f"Deployment {m.namespace}/{m.pd.router_deployment} has no ready pod for "
                f"{thresholds.router_down_for}: every request to {m.served_model_name} passes through it "
                "and fails.",
                "critical",
            ),
            (
                "VllmPdPrefillDown",
                m.pd.prefill_deployment,
                thresholds.prefill_down_for,
                f"{m.name}: no prefill engine is ready",
                f"Deployment {m.namespace}/{m.pd.prefill_deployment} wants engines but none has been ready "
                f"for {thresholds.prefill_down_for}: the router cannot prefill, so every request to "
                f"{m.served_model_name} fails (the decode side is watched by VllmModelDown).",
                "critical",
            ),
        ):
            sel = f"namespace={quoted(m.namespace)}, deployment={quoted(dep)}"
            expr = (
                f"kube_deployment_status_replicas_ready{{{sel}}} == 0"
                f" and on () (kube_deployment_spec_replicas{{{sel}}} > 0)"
            )
            if alert == "VllmPdPrefillDown":  # a first load is not an outage (as VllmModelDown)
                expr += f" and on () (time() - kube_deployment_created{{{sel}}} > {base.model_down_grace_seconds})"
            rules.append(
                alerting_rule(alert, expr, severity, for_, summary, description, runbook_base, extra_labels={"model": m.name})
            )
    return {"name": "inference-platform.alerts.pd", "rules": rules}
