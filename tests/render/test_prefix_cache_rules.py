"""Prefix-cache hit rates by tier, KV offload transfers and VllmPrefixCacheHitRateCollapsed (issue 26):
promtool scenarios over the rendered groups (infra/render/prefix_cache_rules.py).

The inputs are vLLM's own counters, per minute: prompt tokens looked up, tokens found in the GPU
cache, tokens an offload tier supplied, and the offloading connector's transfer counters. "chat"
plans a 60 % hit rate (its sessions), so the alert's threshold is 30 %.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from infra.render.prefix_cache_rules import (
    COLLAPSE_FACTOR,
    GPU_HITS,
    MIN_QUERIED_TOKENS_PER_S,
    OFFLOAD_HITS,
    QUERIES,
    prefix_cache_alert_group,
    prefix_cache_group,
)
from tests.render.test_rules_promtool import (
    CHAT,
    alert,
    run_promtool,
    run_scenario,
    vllm_labels,
    write_rule_files,
)

PLANNED = 0.6
MODEL = replace(CHAT, prefix_cache_planned_hit=PLANNED, kv_offload_backend="native")
UNPLANNED = replace(CHAT, name="plain", served_model_name="plain-served", prefix_cache_planned_hit=None, kv_offload_backend=None)
ALERT = "VllmPrefixCacheHitRateCollapsed"
FIRING = {"severity": "warning", "model": "chat"}
MINUTES = 90
QUERIED_PER_MIN = 12_000  # 200 prompt tokens/s looked up: above the alert's traffic guard


@pytest.fixture(scope="module")
def rules_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("prefix-cache-rules")
    return write_rule_files(d, [prefix_cache_group(MODEL), prefix_cache_alert_group([MODEL])])


def _counter(name: str, per_min: float, model=MODEL) -> dict:
    return {"series": f"{name}{{{vllm_labels(model)}}}", "values": f"0+{per_min:g}x{MINUTES}"}


def _lookups(gpu_share: float, offload_share: float, queried_per_min: float = QUERIED_PER_MIN) -> list[dict]:
    return [
        _counter(QUERIES, queried_per_min),
        _counter(GPU_HITS, queried_per_min * gpu_share),
        _counter(OFFLOAD_HITS, queried_per_min * offload_share),
    ]


def test_promtool_checks_the_prefix_cache_groups(rules_dir):
    result = run_promtool("check", "rules", str(rules_dir / "all.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_hit_rates_by_tier_and_offload_transfers(rules_dir):
    transfers = [
        _counter("vllm:kv_offload_load_bytes_total", 6e9),  # 100 MB/s host → GPU
        _counter("vllm:kv_offload_load_time_total", 3.0),  # 3 s of transfers a minute ...
        _counter("vllm:kv_offload_load_size_count", 600),  # ... in 600 transfers: 5 ms each
        _counter("vllm:kv_offload_store_bytes_total", 1.2e10),
        _counter("vllm:kv_offload_store_time_total", 6.0),
        _counter("vllm:kv_offload_store_size_count", 1200),
    ]

    def sample(expr: str, value: float) -> dict:
        return {"expr": f"round({expr}, 0.001)", "eval_time": "40m", "exp_samples": [{"labels": '{model="chat"}', "value": value}]}

    run_scenario(
        rules_dir,
        "tiers",
        {
            "input_series": _lookups(0.4, 0.15) + transfers,
            "promql_expr_test": [
                sample("model:vllm_prefix_cache_total_hit:ratio_rate5m", 0.55),
                sample("model:vllm_prefix_cache_offload_hit:ratio_rate30m", 0.15),
                sample("model:vllm_prefix_cache_hit:planned", PLANNED),
                sample("model:vllm_kv_offload_load_bytes:rate5m / 1e6", 100.0),
                sample("model:vllm_kv_offload_load_seconds:mean5m", 0.005),
                sample("model:vllm_kv_offload_store_seconds:mean5m", 0.005),
            ],
        },
    )


def test_collapse_below_half_the_planned_rate_fires_after_15_minutes(rules_dir):
    # 20 % from cache against a plan of 60 %: below 30 % from the first 30-minute window on
    run_scenario(
        rules_dir,
        "collapse",
        {"input_series": _lookups(0.15, 0.05), "alert_rule_test": [alert("10m", ALERT), alert("40m", ALERT, FIRING)]},
    )


@pytest.mark.parametrize(
    ("name", "gpu", "offload", "queried"),
    [
        pytest.param("within-half", 0.3, 0.05, QUERIED_PER_MIN, id="35 % against a plan of 60 %: within half"),
        pytest.param("trickle", 0.0, 0.0, MIN_QUERIED_TOKENS_PER_S * 60 * 0.5, id="no hits at a trickle of traffic"),
    ],
)
def test_collapse_silent(rules_dir, name, gpu, offload, queried):
    assert (gpu + offload >= COLLAPSE_FACTOR * PLANNED) or queried < MIN_QUERIED_TOKENS_PER_S * 60
    run_scenario(rules_dir, f"silent-{name}", {"input_series": _lookups(gpu, offload, queried), "alert_rule_test": [alert("60m", ALERT)]})


def test_without_a_plan_the_collapse_is_against_the_previous_day(tmp_path):
    """A model with no planned rate alerts when its 30-minute rate halves against its own day."""
    write_rule_files(tmp_path, [prefix_cache_group(UNPLANNED), prefix_cache_alert_group([UNPLANNED])])
    day = 24 * 12  # 5-minute steps
    usual, collapsed = 0.6 * QUERIED_PER_MIN * 5, 0.1 * QUERIED_PER_MIN * 5  # hits per step
    hits = f"0+{usual:g}x{day} {usual * day + collapsed:g}+{collapsed:g}x23"  # a day at 60 %, then 2 h at 10 %
    series = [
        {"series": f"{QUERIES}{{{vllm_labels(UNPLANNED)}}}", "values": f"0+{QUERIED_PER_MIN * 5:g}x{day + 24}"},
        {"series": f"{GPU_HITS}{{{vllm_labels(UNPLANNED)}}}", "values": hits},
    ]
    doc = {
        "rule_files": ["all-bare.yml"],
        "evaluation_interval": "5m",
        "tests": [{"interval": "5m", "input_series": series,
                   "alert_rule_test": [alert("23h", ALERT), alert(f"{(day + 20) * 5}m", ALERT, {"severity": "warning", "model": "plain"})]}],
    }  # fmt: skip
    path = tmp_path / "test-day.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=10_000))
    result = run_promtool("test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("backend", "transfers"), [("native", True), ("lmcache", False), (None, False)])
def test_transfer_rules_only_where_the_backend_exports_them(backend, transfers):
    """vLLM's native OffloadingConnector exports vllm:kv_offload_*; LMCacheMPConnector does not
    (issue 37): a lmcache model gets hit-rate rules, no transfer rules reading series that never come."""
    group = prefix_cache_group(replace(MODEL, kv_offload_backend=backend))
    recorded = {r["record"] for r in group["rules"]}
    assert ("model:vllm_kv_offload_load_bytes:rate5m" in recorded) is transfers
    assert "model:vllm_prefix_cache_offload_hit:ratio_rate5m" in recorded
    exprs = " ".join(r["expr"] for r in group["rules"])
    assert ("vllm:kv_offload_load_bytes_total" in exprs) is transfers
