"""The rendered rules checked and unit-tested by Prometheus' own promtool.

`promtool check rules` validates every rule group the toolkit renders; `promtool test rules` feeds
synthetic vLLM / AMD-exporter / kube-state-metrics series and asserts each alert fires when it
should and stays silent when it should not. promtool comes with Debian's `prometheus` package
(`apt-get install -y prometheus`); without it these tests skip.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from infra.render.observability import GpuRuntimeFacts, MonitoringSettings, render_prometheus_rules
from infra.render.slo_alerts import GPU_ALERT_METRICS
from infra.render.slo_rules import ObservedModel
from tests.conftest import need_tool

PROMTOOL = shutil.which("promtool")
pytestmark = need_tool("promtool", "Debian: apt-get install -y prometheus")

# "chat" has SLO limits on bucket boundaries (2.5 s, 50 ms); "interp" has a TTFT limit between
# buckets (2.0 s between 1.0 and 2.5) to exercise the interpolation.
# Billed cost: "chat" has a pool of its own ($16/node-h); "shared-a" and "shared-b" share a pool,
# 4 of its 8 GPUs per node each (0 replicas expected, so the readiness scenarios leave them out);
# "interp" is on a pool scaled to zero.
CHAT = ObservedModel(
    "chat", "chat-served", "inference", 2500, 50, 8, 2, 2.0, pool="mi300x", usd_per_node_hour=16.0,
    deployment="chat-engine", predicted_ready_seconds=600,
)
INTERP = ObservedModel(
    "interp", "interp-served", "inference", 2000, 50, 1, 1, None, pool="parked", usd_per_node_hour=10.0,
    deployment="interp-engine",
)
SHARED = [
    ObservedModel(
        f"shared-{x}", f"shared-{x}", "inference", 2500, 50, 4, 0, 2.0,
        pool="shared", usd_per_node_hour=16.0, pool_gpu_share=0.5,
        deployment=f"shared-{x}-engine",
    )
    for x in "ab"
]  # fmt: skip
MODELS = [CHAT, INTERP, *SHARED]
MINUTES = 120
REQUESTS_PER_MIN = 60

TTFT_FAST_S, TTFT_SLOW_S = 0.8, 4.0  # observed TTFTs of good and bad requests
TPOT_FAST_S, TPOT_SLOW_S = 0.04, 0.2
TTFT_LE = ("1.0", "2.5", "5.0", "+Inf")
TPOT_LE = ("0.05", "0.075", "0.2", "+Inf")


def rule_objects() -> list[dict]:
    return render_prometheus_rules(MODELS, GpuRuntimeFacts(vendor="amd"), MonitoringSettings())


@pytest.fixture(scope="module")
def rules_dir(tmp_path_factory) -> Path:
    """Each PrometheusRule's groups as a plain rule file, plus one file with all of them.

    `all-bare.yml` drops alert annotations: promtool compares annotations exactly, and the firing
    logic is what the scenarios test. `all.yml` keeps them for the annotation scenario.
    """
    d = tmp_path_factory.mktemp("rules")
    groups = []
    for obj in rule_objects():
        (d / f"{obj['metadata']['name']}.yml").write_text(yaml.safe_dump({"groups": obj["spec"]["groups"]}))
        groups += obj["spec"]["groups"]
    return write_rule_files(d, groups)


def write_rule_files(d: Path, groups: list[dict]) -> Path:
    """`all.yml` with every group, and `all-bare.yml` without alert annotations (see rules_dir)."""
    (d / "all.yml").write_text(yaml.safe_dump({"groups": groups}))
    bare = copy.deepcopy(groups)
    for g in bare:
        for r in g["rules"]:
            r.pop("annotations", None)
    (d / "all-bare.yml").write_text(yaml.safe_dump({"groups": bare}))
    return d


def run_promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)


# --- synthetic series ---------------------------------------------------------------------------


def values(points: list[float]) -> str:
    return " ".join(f"{v:g}" for v in points)


def cumulative(per_minute: list[float]) -> list[float]:
    out, total = [], 0.0
    for v in per_minute:
        total += v
        out.append(total)
    return [0.0, *out]


def bad_fraction(segments: list[tuple[int, int, float]]) -> list[float]:
    """Per-minute fraction of slow requests: [(from_min, to_min, fraction)], else 0."""
    out = [0.0] * MINUTES
    for start, end, f in segments:
        for t in range(start, min(end, MINUTES)):
            out[t] = f
    return out


def histogram(
    metric: str,
    model: ObservedModel,
    le_bounds: tuple[str, ...],
    fast_s: float,
    slow_s: float,
    bad: list[float],
    rate: float = REQUESTS_PER_MIN,
) -> list[dict]:
    """Cumulative bucket and count series of a vLLM histogram, `rate` requests per minute."""
    labels = vllm_labels(model)
    series = []
    for le in le_bounds:
        bound = float("inf") if le == "+Inf" else float(le)
        per_min = [rate * ((1 - f) * (fast_s <= bound) + f * (slow_s <= bound)) for f in bad]
        series.append(
            {"series": f'{metric}_bucket{{{labels}, le="{le}"}}', "values": values(cumulative(per_min))}
        )
    series.append({"series": f"{metric}_count{{{labels}}}", "values": values(cumulative([rate] * len(bad)))})
    return series


def traffic(
    model: ObservedModel,
    ttft_bad: list[float] | None = None,
    tpot_bad: list[float] | None = None,
    rate: float = REQUESTS_PER_MIN,
) -> list[dict]:
    zero = [0.0] * MINUTES
    return [
        *histogram(
            "vllm:time_to_first_token_seconds",
            model,
            TTFT_LE,
            TTFT_FAST_S,
            TTFT_SLOW_S,
            ttft_bad or zero,
            rate,
        ),
        *histogram(
            "vllm:request_time_per_output_token_seconds",
            model,
            TPOT_LE,
            TPOT_FAST_S,
            TPOT_SLOW_S,
            tpot_bad or zero,
            rate,
        ),
    ]


def gauge(name: str, labels: str, points: str) -> dict:
    return {"series": f"{name}{{{labels}}}", "values": points}


def vllm_labels(model: ObservedModel, engine: str = "0") -> str:
    # the target labels the vLLM PodMonitor adds (namespace, component) plus vLLM's own
    return f'model_name="{model.served_model_name}", namespace="{model.namespace}", component="vllm", engine="{engine}"'


def alert(eval_time: str, name: str, *expected: dict) -> dict:
    return {"eval_time": eval_time, "alertname": name, "exp_alerts": [{"exp_labels": e} for e in expected]}


def run_scenario(rules_dir: Path, name: str, test: dict, rule_file: str = "all-bare.yml") -> None:
    doc = {"rule_files": [rule_file], "evaluation_interval": "1m", "tests": [{"interval": "1m", **test}]}
    path = rules_dir / f"test-{name}.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=10_000))
    result = run_promtool("test", "rules", str(path))
    assert result.returncode == 0, f"promtool test rules failed for {name}:\n{result.stdout}\n{result.stderr}"


# --- promtool check rules -------------------------------------------------------------------------


def test_promtool_checks_every_rendered_rule_group(rules_dir):
    objs = rule_objects()
    assert len(objs) == len(MODELS) + 2  # one per model, the pools' cost, the alerts
    for obj in objs:
        result = run_promtool("check", "rules", str(rules_dir / f"{obj['metadata']['name']}.yml"))
        assert result.returncode == 0, result.stdout + result.stderr
        assert "SUCCESS" in result.stdout + result.stderr


def test_promtool_check_rejects_a_broken_rule(tmp_path):
    """Guard against a check that cannot fail."""
    path = tmp_path / "broken.yml"
    path.write_text(
        yaml.safe_dump({"groups": [{"name": "g", "rules": [{"record": "x:y", "expr": "sum(rate(a[5m])"}]}]})
    )
    assert run_promtool("check", "rules", str(path)).returncode != 0


# --- alert scenarios ------------------------------------------------------------------------------

CRIT = {"severity": "critical"}
WARN = {"severity": "warning"}


def test_ttft_fast_burn_fires_on_sustained_slow_first_tokens(rules_dir):
    run_scenario(
        rules_dir,
        "ttft-burn",
        {
            "input_series": traffic(CHAT, ttft_bad=bad_fraction([(0, MINUTES, 0.8)])) + traffic(INTERP),
            "alert_rule_test": [
                alert("10m", "VllmTtftSloFastBurn", {"model": "chat", **CRIT}),
                alert("70m", "VllmTtftSloFastBurn", {"model": "chat", **CRIT}),
                alert("70m", "VllmTpotSloFastBurn"),  # decode was fine
            ],
        },
    )


def test_ttft_burn_silent_within_budget(rules_dir):
    # 5 % of requests slow: inside the 10 % budget of a p90 SLO
    run_scenario(
        rules_dir,
        "ttft-quiet",
        {
            "input_series": traffic(CHAT, ttft_bad=bad_fraction([(0, MINUTES, 0.05)])) + traffic(INTERP),
            "alert_rule_test": [alert("70m", "VllmTtftSloFastBurn"), alert("110m", "VllmTtftSloSlowBurn")],
        },
    )


def test_ttft_burn_resets_when_the_short_window_recovers(rules_dir):
    # all requests slow for 40 minutes, then healthy: the long windows stay high for hours but the
    # short windows clear, so the page stops 30 minutes after recovery
    run_scenario(
        rules_dir,
        "ttft-reset",
        {
            "input_series": traffic(CHAT, ttft_bad=bad_fraction([(0, 40, 1.0)])) + traffic(INTERP),
            "alert_rule_test": [
                alert("35m", "VllmTtftSloFastBurn", {"model": "chat", **CRIT}),
                alert("75m", "VllmTtftSloFastBurn"),
            ],
            "promql_expr_test": [
                {
                    # the 6h window still says 40 of 75 minutes were bad
                    "expr": 'round(model:vllm_ttft_slo_errors:ratio_rate6h{model="chat"}, 0.001)',
                    "eval_time": "75m",
                    "exp_samples": [{"labels": '{model="chat"}', "value": 0.533}],
                }
            ],
        },
    )


def test_ttft_slow_burn_warns_on_a_moderate_miss(rules_dir):
    # 20 % slow: twice the budget, not enough to page
    run_scenario(
        rules_dir,
        "ttft-slow",
        {
            "input_series": traffic(CHAT, ttft_bad=bad_fraction([(0, MINUTES, 0.2)])) + traffic(INTERP),
            "alert_rule_test": [
                alert("110m", "VllmTtftSloFastBurn"),
                alert("110m", "VllmTtftSloSlowBurn", {"model": "chat", **WARN}),
            ],
        },
    )


def test_tpot_fast_burn_fires_and_ttft_stays_silent(rules_dir):
    run_scenario(
        rules_dir,
        "tpot-burn",
        {
            "input_series": traffic(CHAT, tpot_bad=bad_fraction([(20, MINUTES, 0.7)])) + traffic(INTERP),
            "alert_rule_test": [
                alert("15m", "VllmTpotSloFastBurn"),  # before the regression
                alert("90m", "VllmTpotSloFastBurn", {"model": "chat", **CRIT}),
                alert("90m", "VllmTtftSloFastBurn"),
            ],
        },
    )


def test_tpot_burn_silent_within_budget(rules_dir):
    run_scenario(
        rules_dir,
        "tpot-quiet",
        {
            "input_series": traffic(CHAT, tpot_bad=bad_fraction([(0, MINUTES, 0.08)])) + traffic(INTERP),
            "alert_rule_test": [alert("90m", "VllmTpotSloFastBurn"), alert("110m", "VllmTpotSloSlowBurn")],
        },
    )


def test_burn_alerts_silent_below_the_minimum_traffic(rules_dir):
    # 1 request/min = 60/h, below MIN_REQUESTS_PER_HOUR (100): every request slow, still no page
    # and no ticket — a handful of requests is no evidence of a burning budget
    all_bad = bad_fraction([(0, MINUTES, 1.0)])
    run_scenario(
        rules_dir,
        "burn-low-traffic",
        {
            "input_series": traffic(CHAT, ttft_bad=all_bad, tpot_bad=all_bad, rate=1) + traffic(INTERP),
            "alert_rule_test": [
                alert("70m", "VllmTtftSloFastBurn"),
                alert("110m", "VllmTtftSloFastBurn"),
                alert("110m", "VllmTtftSloSlowBurn"),
                alert("110m", "VllmTpotSloFastBurn"),
                alert("110m", "VllmTpotSloSlowBurn"),
            ],
            "promql_expr_test": [
                {
                    # the ratio itself is recorded; only the alert is held back
                    "expr": 'model:vllm_ttft_slo_errors:ratio_rate1h{model="chat"}',
                    "eval_time": "110m",
                    "exp_samples": [
                        {"labels": 'model:vllm_ttft_slo_errors:ratio_rate1h{model="chat"}', "value": 1}
                    ],
                },
                {
                    "expr": 'round(model:vllm_ttft_requests:rate1h{model="chat"} * 3600)',
                    "eval_time": "110m",
                    "exp_samples": [{"labels": '{model="chat"}', "value": 60}],
                },
            ],
        },
    )


def test_burn_alerts_fire_above_the_minimum_traffic(rules_dir):
    # 2 requests/min = 120/h: once the 1h window holds an hour of traffic, all-slow requests page
    all_bad = bad_fraction([(0, MINUTES, 1.0)])
    run_scenario(
        rules_dir,
        "burn-enough-traffic",
        {
            "input_series": traffic(CHAT, ttft_bad=all_bad, rate=2) + traffic(INTERP),
            "alert_rule_test": [
                alert("30m", "VllmTtftSloFastBurn"),  # 60 requests in the last hour so far
                alert("70m", "VllmTtftSloFastBurn", {"model": "chat", **CRIT}),
                # the guard averages over the long window: 2 h of history at 120/h is 10/h
                # over the 1d window, so the ticket waits for more evidence
                alert("110m", "VllmTtftSloSlowBurn"),
                alert("70m", "VllmTpotSloFastBurn"),
            ],
        },
    )
    # 30 requests/min: 110 minutes of it average > 100/h over the 1d window; the ticket opens
    run_scenario(
        rules_dir,
        "burn-enough-traffic-slow",
        {
            "input_series": traffic(CHAT, ttft_bad=all_bad, rate=30) + traffic(INTERP),
            "alert_rule_test": [
                alert("110m", "VllmTtftSloSlowBurn", {"model": "chat", **WARN}),
                alert("110m", "VllmTtftSloFastBurn", {"model": "chat", **CRIT}),
            ],
        },
    )


def test_goodput_counts_only_stopped_or_length_finished_requests(rules_dir):
    # 1 req/s finished: 0.5 stop + 0.2 length (served), 0.2 abort + 0.1 error (not served); all
    # requests within both SLOs → goodput 0.7 req/s, not 1.0
    labels = vllm_labels(CHAT)
    finished = [
        gauge("vllm:request_success_total", f'{labels}, finished_reason="{reason}"', f"0+{per_min}x40")
        for reason, per_min in (("stop", 30), ("length", 12), ("abort", 12), ("error", 6))
    ]
    run_scenario(
        rules_dir,
        "goodput-served",
        {
            "input_series": traffic(CHAT) + traffic(INTERP) + finished,
            "promql_expr_test": [
                {
                    "expr": 'round(model:vllm_goodput_requests_per_second:rate5m{model="chat"}, 0.001)',
                    "eval_time": "30m",
                    "exp_samples": [{"labels": '{model="chat"}', "value": 0.7}],
                },
                {
                    "expr": 'round(model:vllm_requests_per_second:rate5m{model="chat"}, 0.001)',
                    "eval_time": "30m",
                    "exp_samples": [{"labels": '{model="chat"}', "value": 1.0}],
                },
                {
                    "expr": 'round(model:vllm_unserved_requests_per_second:rate5m{model="chat"}, 0.001)',
                    "eval_time": "30m",
                    "exp_samples": [
                        {"labels": '{model="chat", finished_reason="abort"}', "value": 0.2},
                        {"labels": '{model="chat", finished_reason="error"}', "value": 0.1},
                    ],
                },
            ],
        },
    )


def test_interpolated_slo_limit(rules_dir):
    # INTERP's 2.0 s limit sits between the 1.0 s and 2.5 s buckets. Requests: 50 % at 0.8 s,
    # 50 % at 4 s → good = 0.5·(1/3) + 0.5·(2/3)… of the (1.0, 2.5] bucket, which is empty here,
    # so exactly 0.5; a second check puts mass inside the bucket.
    run_scenario(
        rules_dir,
        "interp",
        {
            "input_series": traffic(CHAT) + traffic(INTERP, ttft_bad=bad_fraction([(0, MINUTES, 0.5)])),
            "promql_expr_test": [
                {
                    "expr": 'model:vllm_ttft_slo_good:ratio_rate5m{model="interp"}',
                    "eval_time": "30m",
                    "exp_samples": [
                        {"labels": 'model:vllm_ttft_slo_good:ratio_rate5m{model="interp"}', "value": 0.5}
                    ],
                }
            ],
        },
    )
    # 60 requests/min: 30 at ≤ 1.0 s, 30 in (1.0, 2.5] → good ≈ 30/60 + 30/60 · (2.0-1.0)/(2.5-1.0)
    labels = vllm_labels(INTERP)
    series = [
        gauge("vllm:time_to_first_token_seconds_bucket", f'{labels}, le="1.0"', "0+30x40"),
        gauge("vllm:time_to_first_token_seconds_bucket", f'{labels}, le="2.5"', "0+60x40"),
        gauge("vllm:time_to_first_token_seconds_bucket", f'{labels}, le="+Inf"', "0+60x40"),
        gauge("vllm:time_to_first_token_seconds_count", labels, "0+60x40"),
    ]
    run_scenario(
        rules_dir,
        "interp-inside",
        {
            "input_series": series,
            "promql_expr_test": [
                {
                    "expr": 'round(model:vllm_ttft_slo_good:ratio_rate5m{model="interp"}, 0.0001)',
                    "eval_time": "30m",
                    "exp_samples": [{"labels": '{model="interp"}', "value": 0.8333}],
                }
            ],
        },
    )


def test_queue_growth_fires_only_while_growing(rules_dir):
    growing = [gauge("vllm:num_requests_waiting", vllm_labels(CHAT, e), "0+1x60") for e in ("0", "1")]
    flat = [gauge("vllm:num_requests_waiting", vllm_labels(INTERP), "40x60")]
    run_scenario(
        rules_dir,
        "queue",
        {
            "input_series": growing + flat,
            "alert_rule_test": [
                alert("40m", "VllmQueueGrowing", {"model": "chat", **WARN}),
            ],
        },
    )
    # the router re-exports vLLM-named series; they must not count as the engine's queue
    router = [
        gauge(
            "vllm:num_requests_waiting",
            f'model_name="{CHAT.served_model_name}", namespace="inference", component="router"',
            "0+5x60",
        )
    ]
    run_scenario(
        rules_dir,
        "queue-flat",
        {
            "input_series": flat + router,
            "alert_rule_test": [alert("40m", "VllmQueueGrowing")],
        },
    )


def test_kv_cache_saturation_needs_ten_minutes(rules_dir):
    run_scenario(
        rules_dir,
        "kv",
        {
            "input_series": [
                gauge("vllm:kv_cache_usage_perc", vllm_labels(CHAT, "0"), "0.97x40"),
                gauge("vllm:kv_cache_usage_perc", vllm_labels(CHAT, "1"), "0.40x40"),
                # a 5-minute spike on the other model: not sustained, no alert
                gauge("vllm:kv_cache_usage_perc", vllm_labels(INTERP), "0.99x5 0.5x35"),
            ],
            "alert_rule_test": [
                alert("5m", "VllmKvCacheSaturated"),
                alert("20m", "VllmKvCacheSaturated", {"model": "chat", **WARN}),
            ],
        },
    )


def test_kv_cache_alert_annotations_render(rules_dir):
    run_scenario(
        rules_dir,
        "kv-annotations",
        {
            "input_series": [gauge("vllm:kv_cache_usage_perc", vllm_labels(CHAT), "0.97x40")],
            "alert_rule_test": [
                {
                    "eval_time": "20m",
                    "alertname": "VllmKvCacheSaturated",
                    "exp_alerts": [
                        {
                            "exp_labels": {"model": "chat", **WARN},
                            "exp_annotations": {
                                "summary": "chat: KV cache nearly full",
                                "description": "The fullest chat replica uses 97% of its KV cache; vLLM preempts and "
                                "recomputes sequences when it runs out.",
                                "runbook_url": "docs/runbook.md#vllmkvcachesaturated",
                            },
                        }
                    ],
                }
            ],
        },
        rule_file="all.yml",
    )


def test_gpu_junction_temperature(rules_dir):
    run_scenario(
        rules_dir,
        "gpu-temp",
        {
            "input_series": [
                # two series for GPU 0 (exporter labels it with the pod holding it): one alert per GPU
                gauge("gpu_junction_temperature", 'hostname="n1", gpu_id="0", pod="chat-0"', "97x30"),
                gauge("gpu_junction_temperature", 'hostname="n1", gpu_id="0", pod=""', "96x30"),
                gauge("gpu_junction_temperature", 'hostname="n1", gpu_id="1"', "70x30"),
                gauge("gpu_junction_temperature", 'hostname="n2", gpu_id="0"', "90x30"),
            ],
            "alert_rule_test": [
                alert("3m", "AmdGpuJunctionTemperatureHigh"),
                alert("15m", "AmdGpuJunctionTemperatureHigh", {"hostname": "n1", "gpu_id": "0", **WARN}),
            ],
        },
    )


def test_gpu_health_and_ecc(rules_dir):
    run_scenario(
        rules_dir,
        "gpu-health",
        {
            "input_series": [
                gauge("gpu_health", 'hostname="n1", gpu_id="3"', "1x10 0x20"),
                gauge("gpu_health", 'hostname="n1", gpu_id="4"', "1x30"),
                gauge("gpu_ecc_uncorrect_total", 'hostname="n1", gpu_id="3"', "0x10 2x20"),
                gauge("gpu_ecc_uncorrect_total", 'hostname="n1", gpu_id="4"', "5x30"),  # old errors, none new
            ],
            "alert_rule_test": [
                alert("8m", "AmdGpuUnhealthy"),
                alert("20m", "AmdGpuUnhealthy", {"hostname": "n1", "gpu_id": "3", **CRIT}),
                alert("8m", "AmdGpuUncorrectableEccErrors"),
                alert("15m", "AmdGpuUncorrectableEccErrors", {"hostname": "n1", "gpu_id": "3", **CRIT}),
            ],
        },
    )


def deployment_ready(model: ObservedModel, points: str) -> dict:
    # kube-state-metrics' Deployment status; the vLLM Deployment is `<model>-engine`
    return gauge(
        "kube_deployment_status_replicas_ready",
        f'namespace="{model.namespace}", deployment="{model.deployment}"',
        points,
    )


def test_deadman_fires_for_ready_replicas_without_metrics(rules_dir):
    # absent() keeps the selector's equality labels, so the alert names the namespace too
    same = {"namespace": "inference", "component": "vllm", **CRIT}
    chat = {"model": "chat", "model_name": "chat-served", **same}
    interp = {"model": "interp", "model_name": "interp-served", **same}
    run_scenario(
        rules_dir,
        "deadman",
        {
            "input_series": [
                # both Deployments report ready replicas throughout; chat reports metrics for 30
                # minutes, then they vanish (scrape broken); interp's are never scraped
                deployment_ready(CHAT, "2x60"),
                deployment_ready(INTERP, "1x60"),
                gauge("vllm:num_requests_running", vllm_labels(CHAT), "3x30"),
            ],
            "alert_rule_test": [
                alert("20m", "VllmMetricsAbsent", interp),
                alert("38m", "VllmMetricsAbsent", interp),  # chat gone 8 minutes: not yet
                alert("55m", "VllmMetricsAbsent", chat, interp),
            ],
        },
    )


def test_deadman_silent_while_a_rollout_loads(rules_dir):
    # a fresh rollout: no replica ready (and so no /metrics) for 40 minutes while the weights
    # load, then ready with metrics; a parked model (0 replicas) never pages either
    run_scenario(
        rules_dir,
        "deadman-rollout",
        {
            "input_series": [
                deployment_ready(CHAT, "0x40 2x40"),
                gauge("vllm:num_requests_running", vllm_labels(CHAT), "_x40 0x40"),
                deployment_ready(INTERP, "0x80"),
            ],
            "alert_rule_test": [
                alert("30m", "VllmMetricsAbsent"),
                alert("39m", "VllmMetricsAbsent"),
                alert("44m", "VllmMetricsAbsent"),
                alert("70m", "VllmMetricsAbsent"),
            ],
        },
    )
    # without kube-state-metrics' Deployment series (the Deployment does not exist) no page
    run_scenario(
        rules_dir,
        "deadman-no-deployment",
        {
            "input_series": [gauge("up", 'job="x"', "1x40")],
            "alert_rule_test": [alert("30m", "VllmMetricsAbsent")],
        },
    )


def deployment_series(model: ObservedModel, ready: str, desired: str, created_s: int) -> list[dict]:
    """kube-state-metrics' view of `<model>-engine`: ready and desired counts, creation time."""
    labels = f'namespace="{model.namespace}", deployment="{model.deployment}"'
    return [
        gauge("kube_deployment_status_replicas_ready", labels, ready),
        gauge("kube_deployment_spec_replicas", labels, desired),
        gauge("kube_deployment_created", labels, f"{created_s}x120"),
    ]


def test_model_down_pages_when_no_replica_is_ready(rules_dir):
    down = {"model": "chat", "namespace": "inference", "deployment": CHAT.deployment, **CRIT}
    run_scenario(
        rules_dir,
        "model-down",
        {
            "input_series": [
                # chat was created two hours before the test's clock starts at 0 (created = -7200):
                # ready for 30 minutes, then all replicas gone
                *deployment_series(CHAT, "2x30 0x60", "2x90", -7200),
                # interp is ready throughout
                *deployment_series(INTERP, "1x90", "1x90", -7200),
            ],
            "alert_rule_test": [
                alert("20m", "VllmModelDown"),
                alert("38m", "VllmModelDown"),  # down 7 minutes: not yet
                alert("45m", "VllmModelDown", down),
            ],
        },
    )


def test_model_down_silent_for_a_first_load_and_a_parked_model(rules_dir):
    run_scenario(
        rules_dir,
        "model-down-quiet",
        {
            "input_series": [
                # chat's Deployment was just created: 40 minutes of loading is not an outage
                *deployment_series(CHAT, "0x40 2x50", "2x90", 0),
                # interp is parked at zero replicas
                *deployment_series(INTERP, "0x90", "0x90", -7200),
            ],
            "alert_rule_test": [alert(t, "VllmModelDown") for t in ("15m", "39m", "60m", "85m")],
        },
    )


def test_replicas_not_ready(rules_dir):
    def pod(name: str, ready: str) -> list[dict]:
        return [
            gauge("kube_pod_status_ready", f'namespace="inference", pod="{name}", condition="true"', ready),
            gauge(
                "kube_pod_labels",
                f'namespace="inference", pod="{name}", label_app_kubernetes_io_name="vllm", '
                'label_inference_platform_model="chat"',
                "1x80",
            ),
        ]

    # interp expects one replica; it is ready throughout
    interp = [
        gauge("kube_pod_status_ready", 'namespace="inference", pod="interp-0", condition="true"', "1x80"),
        gauge(
            "kube_pod_labels",
            'namespace="inference", pod="interp-0", label_app_kubernetes_io_name="vllm", '
            'label_inference_platform_model="interp"',
            "1x80",
        ),
    ]
    run_scenario(
        rules_dir,
        "not-ready",
        {
            "input_series": pod("chat-0", "1x80") + pod("chat-1", "0x80") + interp,
            "alert_rule_test": [
                alert("30m", "VllmReplicasNotReady"),  # still within a model load
                alert("60m", "VllmReplicasNotReady", {"model": "chat", **WARN}),
            ],
        },
    )
    run_scenario(
        rules_dir,
        "all-ready",
        {
            "input_series": pod("chat-0", "1x80") + pod("chat-1", "0x10 1x70") + interp,
            "alert_rule_test": [alert("60m", "VllmReplicasNotReady")],
        },
    )


def test_pod_restarts(rules_dir):
    labels = 'namespace="inference", pod="chat-0"'
    run_scenario(
        rules_dir,
        "restarts",
        {
            "input_series": [
                gauge("kube_pod_container_status_restarts_total", f'{labels}, container="vllm"', "0+0.2x40"),
                gauge(
                    "kube_pod_labels",
                    f'{labels}, label_app_kubernetes_io_name="vllm", label_inference_platform_model="chat"',
                    "1x40",
                ),
                # a pod of another app restarting in the same namespace is not ours
                gauge(
                    "kube_pod_container_status_restarts_total",
                    'namespace="inference", pod="x", container="x"',
                    "0+1x40",
                ),
                gauge(
                    "kube_pod_labels",
                    'namespace="inference", pod="x", label_app_kubernetes_io_name="other"',
                    "1x40",
                ),
            ],
            "alert_rule_test": [
                alert(
                    "35m",
                    "InferencePodRestarting",
                    {
                        "namespace": "inference",
                        "pod": "chat-0",
                        "model": "chat",
                        "label_inference_platform_model": "chat",
                        **WARN,
                    },
                ),
            ],
        },
    )


def test_cost_per_million_output_tokens(rules_dir):
    # 2 replicas × 8 GPUs × $2/GPU-h = $32/h; 1000 output tokens/s = 3.6 M/h → $8.89 per million
    run_scenario(
        rules_dir,
        "cost",
        {
            "input_series": [
                gauge("up", 'component="vllm", model="chat", pod="chat-0"', "1x90"),
                gauge("up", 'component="vllm", model="chat", pod="chat-1"', "1x90"),
                gauge("up", 'component="router", model="chat", pod="router-0"', "1x90"),
                gauge("vllm:generation_tokens_total", vllm_labels(CHAT, "0"), "0+30000x90"),
                gauge("vllm:generation_tokens_total", vllm_labels(CHAT, "1"), "0+30000x90"),
            ],
            "promql_expr_test": [
                {
                    "expr": 'model:gpu_cost_usd_per_hour:sum{model="chat"}',
                    "eval_time": "80m",
                    "exp_samples": [{"labels": 'model:gpu_cost_usd_per_hour:sum{model="chat"}', "value": 32}],
                },
                {
                    "expr": 'round(model:vllm_cost_usd_per_million_output_tokens:rate1h{model="chat"}, 0.001)',
                    "eval_time": "80m",
                    "exp_samples": [{"labels": '{model="chat"}', "value": 8.889}],
                },
                {
                    "expr": 'round(model:vllm_output_tokens_per_second_per_gpu:rate5m{model="chat"}, 0.01)',
                    "eval_time": "80m",
                    "exp_samples": [{"labels": '{model="chat"}', "value": 62.5}],
                },
            ],
        },
    )


def node_labels(node: str, pool: str, instance: str = "ksm-0") -> dict:
    # kube-state-metrics' per-node series; the DOKS pool label only with the nodes allow-list
    return gauge(
        "kube_node_labels",
        f'node="{node}", label_doks_digitalocean_com_node_pool="{pool}", instance="{instance}"',
        "1x90",
    )


def sample(expr: str, labels: str, value: float | None, eval_time: str = "80m") -> dict:
    return {
        "expr": expr,
        "eval_time": eval_time,
        "exp_samples": [] if value is None else [{"labels": labels, "value": value}],
    }


def test_billed_cost_prices_every_node_of_the_pool_and_splits_shared_pools(rules_dir):
    # 3 nodes × $16 = $48/h per pool, whatever runs on them (one replica of chat is not even up).
    # chat has the pool alone → $48/h; shared-a/-b hold 4 of 8 GPUs per node each → $24/h each.
    # chat: 1000 output tokens/s = 3.6 M/h → $48 / 3.6 = $13.333 per million; shared-a: no tokens.
    nodes = [node_labels(f"{pool}-{i}", pool) for pool in ("mi300x", "shared") for i in range(3)]
    run_scenario(
        rules_dir,
        "billed-cost",
        {
            "input_series": [
                *nodes,
                node_labels("mi300x-0", "mi300x", instance="ksm-1"),  # kube-state-metrics rollover
                node_labels("system-0", "stack-system"),
                gauge("up", 'component="vllm", model="chat", pod="chat-0"', "1x90"),
                gauge("up", 'component="vllm", model="chat", pod="chat-1"', "0x90"),
                gauge("vllm:generation_tokens_total", vllm_labels(CHAT, "0"), "0+60000x90"),
            ],
            "promql_expr_test": [
                sample(
                    'pool:node_cost_usd_per_hour:sum{pool="mi300x"}',
                    'pool:node_cost_usd_per_hour:sum{pool="mi300x"}',
                    48,
                ),
                sample(
                    'pool:node_cost_usd_per_hour:sum{pool="shared"}',
                    'pool:node_cost_usd_per_hour:sum{pool="shared"}',
                    48,
                ),
                # scaled to zero: 0, not absent, since other nodes carry the pool label
                sample(
                    'pool:node_cost_usd_per_hour:sum{pool="parked"}',
                    'pool:node_cost_usd_per_hour:sum{pool="parked"}',
                    0,
                ),
                sample(
                    'model:billed_cost_usd_per_hour:sum{model="chat"}',
                    'model:billed_cost_usd_per_hour:sum{model="chat"}',
                    48,
                ),
                *(
                    sample(
                        f'model:billed_cost_usd_per_hour:sum{{model="{m.name}"}}',
                        f'model:billed_cost_usd_per_hour:sum{{model="{m.name}"}}',
                        24,
                    )
                    for m in SHARED
                ),
                sample(
                    'round(model:vllm_billed_cost_usd_per_million_output_tokens:rate1h{model="chat"}, 0.001)',
                    '{model="chat"}',
                    13.333,
                ),
                # the serving-replica figure stays the lower bound: 1 scraped replica × 8 GPUs × $2
                sample(
                    'model:gpu_cost_usd_per_hour:sum{model="chat"}',
                    'model:gpu_cost_usd_per_hour:sum{model="chat"}',
                    16,
                ),
                # no output tokens: no series rather than +Inf or NaN
                sample(
                    'model:vllm_billed_cost_usd_per_million_output_tokens:rate1h{model="shared-a"}', "", None
                ),
            ],
        },
    )


def test_billed_cost_absent_without_the_node_pool_label(rules_dir):
    # kube-state-metrics without the nodes allow-list: kube_node_labels has no label_* columns.
    # The pool cost is absent (not a misleading 0), and so is every model's billed cost.
    run_scenario(
        rules_dir,
        "billed-cost-no-allow-list",
        {
            "input_series": [gauge("kube_node_labels", f'node="mi300x-{i}"', "1x90") for i in range(3)],
            "promql_expr_test": [
                sample("pool:node_cost_usd_per_hour:sum", "", None),
                sample("model:billed_cost_usd_per_hour:sum", "", None),
            ],
        },
    )


def gpu_capacity(node: str, resource: str, points: str) -> dict:
    # kube-state-metrics' node capacity series; extended resources are sanitised (amd.com/gpu)
    unit = "integer" if resource.endswith("_gpu") else "core"
    return gauge("kube_node_status_capacity", f'node="{node}", resource="{resource}", unit="{unit}"', points)


AMD_NODES = [gpu_capacity("gpu-1", "amd_com_gpu", "8x60"), gpu_capacity("gpu-2", "amd_com_gpu", "8x60")]


def exporter_series(hostname: str, points: str, metrics=GPU_ALERT_METRICS) -> list[dict]:
    return [gauge(metric, f'hostname="{hostname}", gpu_id="0"', points) for metric in metrics]


def absent_metric(metric: str) -> dict:
    return {"metric": metric, **WARN}


ALL_ABSENT = [absent_metric(m) for m in GPU_ALERT_METRICS]


def test_gpu_metrics_absent_fires_when_amd_nodes_have_no_exporter_series(rules_dir):
    description = (
        "2 nodes offer amd.com/gpu, but Prometheus has scraped no gpu_health series from the ROCm "
        "device-metrics-exporter for 10m: the alerts reading it are blind (gpu_junction_temperature: "
        "AmdGpuJunctionTemperatureHigh, gpu_health: AmdGpuUnhealthy, gpu_ecc_uncorrect_total: "
        "AmdGpuUncorrectableEccErrors)."
    )
    run_scenario(
        rules_dir,
        "gpu-metrics-absent",
        {
            "input_series": AMD_NODES + [gpu_capacity("gpu-1", "cpu", "64x60")],
            "alert_rule_test": [
                alert("5m", "AmdGpuMetricsAbsent"),  # a node scaling up from zero gets 10 minutes
                {
                    "eval_time": "15m",
                    "alertname": "AmdGpuMetricsAbsent",
                    "exp_alerts": [
                        {
                            "exp_labels": absent_metric(metric),
                            "exp_annotations": {
                                "summary": f"No {metric} from the AMD GPU exporter although the cluster has "
                                "AMD GPU nodes",
                                "description": description.replace("gpu_health series", f"{metric} series"),
                                "runbook_url": "docs/runbook.md#amdgpumetricsabsent",
                            },
                        }
                        for metric in GPU_ALERT_METRICS
                    ],
                },
            ],
        },
        rule_file="all.yml",
    )


def test_gpu_metrics_absent_fires_once_the_exporter_stops(rules_dir):
    # scraped for 10 minutes, then gone: absent after 10 more minutes, firing 10 minutes later
    run_scenario(
        rules_dir,
        "gpu-metrics-stop",
        {
            "input_series": AMD_NODES + exporter_series("gpu-1", "60x10"),
            "alert_rule_test": [
                alert("25m", "AmdGpuMetricsAbsent"),
                alert("35m", "AmdGpuMetricsAbsent", *ALL_ABSENT),
            ],
        },
    )


def test_gpu_metrics_absent_fires_for_each_missing_metric(rules_dir):
    # temperature and ECC arrive but gpu_health does not (dropped from the exporter's field
    # list): AmdGpuUnhealthy is blind, so the deadman names gpu_health alone
    run_scenario(
        rules_dir,
        "gpu-metrics-health-missing",
        {
            "input_series": AMD_NODES
            + exporter_series("gpu-1", "60x60", ["gpu_junction_temperature", "gpu_ecc_uncorrect_total"]),
            "alert_rule_test": [alert("40m", "AmdGpuMetricsAbsent", absent_metric("gpu_health"))],
        },
    )
    # only gpu_health: the temperature and ECC alerts are blind
    run_scenario(
        rules_dir,
        "gpu-metrics-health-only",
        {
            "input_series": AMD_NODES + exporter_series("gpu-1", "1x60", ["gpu_health"]),
            "alert_rule_test": [
                alert(
                    "40m",
                    "AmdGpuMetricsAbsent",
                    absent_metric("gpu_junction_temperature"),
                    absent_metric("gpu_ecc_uncorrect_total"),
                )
            ],
        },
    )


def test_gpu_metrics_absent_silent_with_exporter_series_or_without_amd_nodes(rules_dir):
    run_scenario(
        rules_dir,
        "gpu-metrics-present",
        {
            "input_series": AMD_NODES
            + [gauge("gpu_junction_temperature", 'hostname="gpu-1", gpu_id="0", pod="chat-0"', "60x60")]
            + exporter_series("gpu-2", "55x60"),
            "alert_rule_test": [alert("40m", "AmdGpuMetricsAbsent")],
        },
    )
    # no AMD GPU nodes (pools scaled to zero, or NVIDIA only): nothing to measure, no alert
    run_scenario(
        rules_dir,
        "gpu-metrics-no-nodes",
        {
            "input_series": [
                gpu_capacity("sys-1", "cpu", "4x60"),
                gpu_capacity("gpu-9", "nvidia_com_gpu", "8x60"),
                gpu_capacity("gpu-3", "amd_com_gpu", "0x60"),
            ],
            "alert_rule_test": [alert("40m", "AmdGpuMetricsAbsent")],
        },
    )


def test_time_to_ready_is_recorded_and_a_slow_start_warns_at_twice_the_plan(rules_dir):
    """Issue 20. chat's plan: a new pod is ready 600 s after it starts, so the alert waits 1200 s.
    chat-0 started at 0 and never gets ready (fires after 20 min + 1 min `for`); chat-1 was ready
    after 10 min (recorded: 600 s, no alert); chat-2 was ready, then went unready at 25 min — an
    unready pod, not a slow start, so it stays silent."""

    def pod(name: str, start: str, ready: str, ready_time: str | None = None) -> list[dict]:
        labels = f'namespace="inference", pod="{name}"'
        series = [
            gauge("kube_pod_start_time", labels, start),
            gauge("kube_pod_status_ready", labels + ', condition="true"', ready),
            gauge(
                "kube_pod_labels",
                labels + ', label_app_kubernetes_io_name="vllm", label_inference_platform_model="chat"',
                "1x60",
            ),
        ]
        if ready_time:
            series.append(gauge("kube_pod_status_ready_time", labels, ready_time))
        return series

    series = pod("chat-0", "0x60", "0x60") + pod("chat-1", "0x60", "0x10 1x50", "0x10 600x50")
    series += pod("chat-2", "0x60", "1x25 0x35", "0x60")
    slow = {"model": "chat", "namespace": "inference", "pod": "chat-0", **WARN}
    run_scenario(
        rules_dir,
        "time-to-ready",
        {
            "input_series": series,
            "alert_rule_test": [
                alert("15m", "VllmReplicaSlowToReady"),
                alert("25m", "VllmReplicaSlowToReady", slow),
                alert("50m", "VllmReplicaSlowToReady", slow),
            ],
            "promql_expr_test": [
                {
                    "expr": "model:engine_time_to_ready_seconds",
                    "eval_time": "30m",
                    "exp_samples": [
                        {"labels": 'model:engine_time_to_ready_seconds{model="chat", namespace="inference", pod="chat-1"}', "value": 600},
                    ],
                },
                {
                    "expr": "model:engine_predicted_ready_seconds",
                    "eval_time": "30m",
                    "exp_samples": [{"labels": 'model:engine_predicted_ready_seconds{model="chat"}', "value": 600}],
                },
            ],
        },
    )
