"""Prefix-cache hit rates (GPU and offload tier) and KV offload transfers: rules and an alert.

vLLM counts prompt tokens looked up in its prefix cache (`vllm:prefix_cache_queries_total`), the
tokens found in the GPU's own cache (`vllm:prefix_cache_hits_total`) and those a KV connector
supplied (`vllm:external_prefix_cache_hits_total`: the offload tier of `kv_offload`); vLLM 0.32's
`vllm:prompt_tokens_cached_by_source` documents that the two hit counters sum to all cached
prompt tokens. Its offloading connector exports transfer counters per direction
(`vllm:kv_offload_load_bytes_total` host→GPU, `vllm:kv_offload_store_bytes_total` GPU→host,
`vllm:kv_offload_{load,store}_time_total` seconds, `vllm:kv_offload_{load,store}_size` histograms
of one transfer's bytes), read from vllm/distributed/kv_transfer/kv_connector/v1/offloading/
metrics.py of the vLLM 0.32.0 wheel; 0.33.0 keeps those names.

A hit rate that collapses is a serving regression nothing else names: every turn of every
conversation re-prefills its history, TTFT and GPU time rise, yet no request fails. Causes: the
front door lost session affinity (a router restart with a new hash ring, a client that stopped
sending x-session-id), replicas were added or restarted (their caches start empty), the KV cache
shrank (a new layout or max_model_len), or the offload tier is gone. VllmPrefixCacheHitRateCollapsed
fires when the 30-minute hit rate falls below half of what the plan predicts for the model's
sessions, or below half of its own level over the previous day, while traffic flows.
"""

from __future__ import annotations

from collections.abc import Iterable

from infra.render.slo_alerts import alerting_rule
from infra.render.slo_rules import RUNBOOK_DEFAULT, ObservedModel, promql_number, recording_rule, selector

QUERIES = "vllm:prefix_cache_queries_total"
GPU_HITS = "vllm:prefix_cache_hits_total"
OFFLOAD_HITS = "vllm:external_prefix_cache_hits_total"
OFFLOAD_COUNTERS = {
    "load": ("vllm:kv_offload_load_bytes_total", "vllm:kv_offload_load_time_total", "vllm:kv_offload_load_size_count"),
    "store": ("vllm:kv_offload_store_bytes_total", "vllm:kv_offload_store_time_total", "vllm:kv_offload_store_size_count"),
}
# The offloading backends whose connector exports the transfer counters: vLLM's native
# OffloadingConnector only (vllm/distributed/kv_transfer/kv_connector/v1/offloading/metrics.py);
# `--kv-offloading-backend lmcache` runs LMCacheMPConnector, which exports none of them (LMCache's
# server keeps its own metrics, on its own port), so a lmcache model gets no transfer rules and the
# dashboard's transfer panels show kind cpu models only.
TRANSFER_METRICS_BACKENDS = ("native",)
# Every vLLM series these rules read (tests/e2e checks them against a real engine's /metrics).
PREFIX_CACHE_METRICS = (QUERIES, GPU_HITS, OFFLOAD_HITS)
OFFLOAD_METRICS = tuple(name for names in OFFLOAD_COUNTERS.values() for name in names)

COLLAPSE_FACTOR = 0.5  # below half of the planned or usual hit rate
MIN_BASELINE_HIT = 0.2  # a model whose usual hit rate is below this has no reuse worth alerting on
MIN_QUERIED_TOKENS_PER_S = 100.0  # prompt tokens/s looked up: below it the ratio is noise


def _ratio(numerator: str, denominator: str) -> str:
    return f"{numerator}\n/\n({denominator} > 0)"


def _sum_rate(metric: str, model: ObservedModel, window: str) -> str:
    return f"sum(rate({metric}{selector(model)}[{window}]))"


def prefix_cache_group(m: ObservedModel) -> dict:
    """Recording rules of one model: hit rates by tier over 5 and 30 minutes, the planned rate
    (`prefix_cache_planned_hit`), and with a native offload tier (`kv_offload` kind cpu) transfer
    volume and mean time per transfer by direction."""
    rules = []
    # The GPU tier's own 5-minute ratio is model:vllm_prefix_cache_hit:ratio_rate5m (slo_rules).
    for window in ("5m", "30m"):
        queries = _sum_rate(QUERIES, m, window)
        gpu = _sum_rate(GPU_HITS, m, window)
        offload = f"({_sum_rate(OFFLOAD_HITS, m, window)} or vector(0))"
        rules += [
            recording_rule(f"model:vllm_prefix_cache_queries:rate{window}", queries, m),
            recording_rule(f"model:vllm_prefix_cache_total_hit:ratio_rate{window}", _ratio(f"({gpu} + {offload})", queries), m),
            recording_rule(f"model:vllm_prefix_cache_offload_hit:ratio_rate{window}", _ratio(offload, queries), m),
        ]
    if m.prefix_cache_planned_hit is not None:
        rules.append(recording_rule("model:vllm_prefix_cache_hit:planned", f"vector({promql_number(round(m.prefix_cache_planned_hit, 4))})", m))
    if m.kv_offload_backend in TRANSFER_METRICS_BACKENDS:
        for direction, (bytes_total, seconds_total, ops) in OFFLOAD_COUNTERS.items():
            rules += [
                recording_rule(f"model:vllm_kv_offload_{direction}_bytes:rate5m", _sum_rate(bytes_total, m, "5m"), m),
                recording_rule(
                    f"model:vllm_kv_offload_{direction}_seconds:mean5m",
                    _ratio(_sum_rate(seconds_total, m, "5m"), _sum_rate(ops, m, "5m")),
                    m,
                ),
            ]
    return {"name": f"inference-platform.prefix-cache.{m.name}", "rules": rules}



def prefix_cache_alert_group(models: Iterable[ObservedModel], runbook_base: str = RUNBOOK_DEFAULT) -> dict:
    """The hit-rate collapse alert, generic over the `model` label of the recorded ratios (the
    comparison with the plan only when some model has a planned hit rate to compare with)."""
    now = "model:vllm_prefix_cache_total_hit:ratio_rate30m"
    usual = f"avg_over_time({now}[1d] offset 30m)"
    traffic = f"model:vllm_prefix_cache_queries:rate30m > {promql_number(MIN_QUERIED_TOKENS_PER_S)}"
    f = promql_number(COLLAPSE_FACTOR)
    below_usual = f"({now} < {f} * {usual} and {usual} > {promql_number(MIN_BASELINE_HIT)})"
    if any(m.prefix_cache_planned_hit is not None for m in models):
        below_usual = f"{now} < {f} * model:vllm_prefix_cache_hit:planned\n  or\n  {below_usual}"
    expr = f"(\n  {below_usual}\n)\nand on (model) {traffic}"
    return {
        "name": "inference-platform.alerts.prefix-cache",
        "rules": [
            alerting_rule(
                "VllmPrefixCacheHitRateCollapsed",
                expr,
                "warning",
                "15m",
                "{{ $labels.model }}: prefix-cache hit rate collapsed",
                "Only {{ $value | humanizePercentage }} of {{ $labels.model }} prompt tokens came from the prefix "
                f"cache (GPU + offload tier) over 30 minutes: below {COLLAPSE_FACTOR:.0%} of the planned hit rate or of "
                "its level over the previous day. Conversations re-prefill their history: TTFT and GPU time rise.",
                runbook_base,
            )
        ],
    }
