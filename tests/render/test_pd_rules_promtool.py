"""The P/D rules and alerts under promtool: each alert fires on synthetic series when it should
and stays silent when it should not, and the per-model SLIs read the right side.

The series carry the labels the scrape gives them: the vLLM PodMonitor's `component`, `model`,
`namespace` and (from the P/D renderer's pod label) `pd_role`; the P/D router's PodMonitor gives
its vllm_router_* series `component="vllm-pd-router"` and the model label.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.render.observability import GpuRuntimeFacts, MonitoringSettings, render_prometheus_rules
from infra.render.slo_rules import ObservedModel, PdObserved
from tests.conftest import need_tool
from tests.render.test_rules_promtool import (
    TPOT_LE,
    TTFT_LE,
    alert,
    cumulative,
    gauge,
    histogram,
    run_promtool,
    run_scenario,
    values,
    write_rule_files,
)

pytestmark = need_tool("promtool", "Debian: apt-get install -y prometheus")

MORIIO = ObservedModel(
    "pd", "pd-served", "inference", 2500, 50, 6, 2, 2.0, deployment="pd-engine-decode",
    pd=PdObserved("MoRIIOConnector", "pd-engine-prefill", "pd-engine-decode", "pd-pd-router",
                  prefill_engines=1, decode_engines=1, prefill_tp=2, decode_tp=4, decode_max_num_seqs=64),
)  # fmt: skip
NIXL = ObservedModel(
    "nx", "nx-served", "inference", 2500, 50, 8, 2, 2.0, deployment="nx-engine-decode",
    pd=PdObserved("NixlConnector", "nx-engine-prefill", "nx-engine-decode", "nx-pd-router",
                  prefill_engines=1, decode_engines=1, prefill_tp=4, decode_tp=4, decode_max_num_seqs=64),
)  # fmt: skip
COLOCATED = ObservedModel("chat", "chat-served", "inference", 2500, 50, 8, 1, 2.0, deployment="chat-engine")
MODELS = [MORIIO, NIXL, COLOCATED]


@pytest.fixture(scope="module")
def rules_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pd-rules")
    groups = [g for obj in render_prometheus_rules(MODELS, GpuRuntimeFacts(vendor="amd"), MonitoringSettings())
              for g in obj["spec"]["groups"]]  # fmt: skip
    return write_rule_files(d, groups)


def side(model: ObservedModel, role: str, engine: str = "0") -> str:
    return (
        f'model_name="{model.served_model_name}", namespace="{model.namespace}", component="vllm", '
        f'model="{model.name}", pd_role="{role}", engine="{engine}"'
    )


def up(model: ObservedModel, role: str, points: str = "1x60") -> dict:
    return gauge("up", f'component="vllm", model="{model.name}", namespace="inference", pd_role="{role}"', points)


def sides_state(model, prefill_waiting: str, decode_waiting: str, decode_running: str, decode_kv: str = "0.3x60"):
    return [
        up(model, "prefill"),
        up(model, "decode"),
        gauge("vllm:num_requests_waiting_by_reason", side(model, "prefill") + ', reason="capacity"', prefill_waiting),
        gauge("vllm:num_requests_waiting_by_reason", side(model, "decode") + ', reason="capacity"', decode_waiting),
        gauge("vllm:num_requests_running", side(model, "prefill"), "1x60"),
        gauge("vllm:num_requests_running", side(model, "decode"), decode_running),
        gauge("vllm:kv_cache_usage_perc", side(model, "decode"), decode_kv),
        gauge("vllm:kv_cache_usage_perc", side(model, "prefill"), "0.1x60"),
    ]


def test_promtool_checks_the_pd_rule_groups(rules_dir):
    result = run_promtool("check", "rules", str(rules_dir / "all.yml"))
    assert result.returncode == 0 and "SUCCESS" in result.stdout + result.stderr, result.stdout + result.stderr


def test_prefill_bottleneck_fires_while_prompts_queue_and_decode_idles(rules_dir):
    # 5 prompts wait on the one prefill engine; the decode engine runs 4 of its 64 slots (6 %).
    run_scenario(rules_dir, "pd-prefill-bottleneck", {
        "input_series": sides_state(MORIIO, "5x60", "0x60", "4x60"),
        "alert_rule_test": [
            alert("10m", "VllmPdPrefillBottleneck"),  # not yet: `for` 15m
            alert("20m", "VllmPdPrefillBottleneck", {"severity": "warning", "model": "pd"}),
            alert("20m", "VllmPdDecodeBottleneck"),
        ],
    })  # fmt: skip


def test_prefill_bottleneck_silent_when_the_decode_side_is_busy_too(rules_dir):
    # 40 of 64 decode slots busy: both sides loaded — demand above capacity, not a wrong split.
    run_scenario(rules_dir, "pd-prefill-busy-decode", {
        "input_series": sides_state(MORIIO, "5x60", "0x60", "40x60"),
        "alert_rule_test": [alert("30m", "VllmPdPrefillBottleneck"), alert("30m", "VllmPdDecodeBottleneck")],
    })  # fmt: skip


def test_decode_bottleneck_fires_on_a_decode_queue_or_a_full_decode_cache_with_prefill_idle(rules_dir):
    queue = sides_state(MORIIO, "0x60", "6x60", "64x60")
    full = sides_state(NIXL, "0x60", "0x60", "64x60", decode_kv="0.97x60")
    run_scenario(rules_dir, "pd-decode-bottleneck", {
        "input_series": queue + full,
        "alert_rule_test": [
            alert("10m", "VllmPdDecodeBottleneck"),
            alert("20m", "VllmPdDecodeBottleneck",
                  {"severity": "warning", "model": "nx"}, {"severity": "warning", "model": "pd"}),
            alert("20m", "VllmPdPrefillBottleneck"),
        ],
    })  # fmt: skip


def test_decode_bottleneck_silent_while_prompts_queue_too(rules_dir):
    run_scenario(rules_dir, "pd-decode-busy-prefill", {
        "input_series": sides_state(MORIIO, "3x60", "6x60", "64x60"),
        "alert_rule_test": [alert("30m", "VllmPdDecodeBottleneck")],
    })  # fmt: skip


def nixl_transfers(per_min_ok: float, per_min_failed: float) -> list[dict]:
    labels = side(NIXL, "decode")
    return [
        {"series": f"vllm:nixl_xfer_time_seconds_count{{{labels}}}", "values": values(cumulative([per_min_ok] * 60))},
        {"series": f"vllm:nixl_num_failed_transfers_total{{{labels}}}",
         "values": values(cumulative([per_min_failed] * 60))},
    ]  # fmt: skip


def test_kv_transfer_failures_fire_above_one_percent(rules_dir):
    run_scenario(rules_dir, "pd-kv-failures", {
        "input_series": nixl_transfers(60, 2),  # 2 / 62 = 3.2 %
        "alert_rule_test": [
            alert("3m", "VllmPdKvTransferFailures"),  # not yet: `for` 5m
            alert("15m", "VllmPdKvTransferFailures", {"severity": "warning", "model": "nx"}),
        ],
    })  # fmt: skip


def test_kv_transfer_failures_silent_below_one_percent(rules_dir):
    run_scenario(rules_dir, "pd-kv-failures-low", {
        "input_series": nixl_transfers(120, 0.5),  # 0.4 %
        "alert_rule_test": [alert("30m", "VllmPdKvTransferFailures")],
    })  # fmt: skip


def router_series(model: ObservedModel, requests_per_min: float, decode_errors_per_min: float) -> list[dict]:
    labels = f'component="vllm-pd-router", model="{model.name}", namespace="inference"'
    return [
        {"series": f'vllm_router_pd_requests_total{{{labels}, route="/v1/chat/completions"}}',
         "values": values(cumulative([requests_per_min] * 60))},
        {"series": f'vllm_router_pd_decode_errors_total{{{labels}, worker="http://10.0.0.9:8000"}}',
         "values": values(cumulative([decode_errors_per_min] * 60))},
    ]  # fmt: skip


def test_router_leg_errors_fire_above_five_percent_and_stay_silent_below(rules_dir):
    run_scenario(rules_dir, "pd-leg-errors", {
        "input_series": router_series(MORIIO, 60, 6) + router_series(NIXL, 60, 1),  # 10 % and 1.7 %
        "alert_rule_test": [
            alert("8m", "VllmPdRouterLegErrors"),
            alert("20m", "VllmPdRouterLegErrors", {"severity": "warning", "model": "pd"}),
        ],
    })  # fmt: skip


def deployment(name: str, ready: int, desired: int = 1, created_s: int = 0, minutes: int = 90) -> list[dict]:
    sel = f'namespace="inference", deployment="{name}"'
    return [
        gauge("kube_deployment_status_replicas_ready", sel, f"{ready}x{minutes}"),
        gauge("kube_deployment_spec_replicas", sel, f"{desired}x{minutes}"),
        gauge("kube_deployment_created", sel, f"{created_s}x{minutes}"),
    ]


def down(model: str, deployment_name: str) -> dict:
    return {"severity": "critical", "model": model, "namespace": "inference", "deployment": deployment_name}


def test_pd_router_down_pages_and_a_ready_router_does_not(rules_dir):
    run_scenario(rules_dir, "pd-router-down", {
        "input_series": deployment("pd-pd-router", 0) + deployment("nx-pd-router", 1),
        "alert_rule_test": [
            alert("3m", "VllmPdRouterDown"),
            alert("10m", "VllmPdRouterDown", down("pd", "pd-pd-router")),
        ],
    })  # fmt: skip


def test_prefill_down_pages_after_the_first_load_grace(rules_dir):
    # "pd" was created at t=0 and is an hour older than the grace at 75m; "nx" is created at
    # 3000 s, its first load still within the grace at 75m.
    run_scenario(rules_dir, "pd-prefill-down", {
        "input_series": deployment("pd-engine-prefill", 0) + deployment("nx-engine-prefill", 0, created_s=3000),
        "alert_rule_test": [
            alert("30m", "VllmPdPrefillDown"),
            alert("75m", "VllmPdPrefillDown", down("pd", "pd-engine-prefill")),
        ],
    })  # fmt: skip


def test_slis_read_prefill_for_ttft_and_decode_for_tpot_and_gpus_count_per_side(rules_dir):
    """Every request runs on both sides: prefill TTFTs all slow, decode TTFTs fast → the TTFT SLI
    sees 100 % slow (prefill side); prefill TPOTs fast (its one token), decode TPOTs slow → the
    TPOT SLI sees 100 % slow (decode side). Mixing the sides would report 50 % for both."""
    ones, zeros = [1.0] * 60, [0.0] * 60

    series = []
    for role, ttft_bad, tpot_bad in (("prefill", ones, zeros), ("decode", zeros, ones)):
        for metric, le, fast, slow, bad in (
            ("vllm:time_to_first_token_seconds", TTFT_LE, 0.8, 4.0, ttft_bad),
            ("vllm:request_time_per_output_token_seconds", TPOT_LE, 0.04, 0.2, tpot_bad),
        ):
            for s in histogram(metric, MORIIO, le, fast, slow, bad):
                s["series"] = s["series"].replace('component="vllm"', f'component="vllm", pd_role="{role}"')
                series.append(s)
    series += [up(MORIIO, "prefill"), up(MORIIO, "decode")]
    model = 'model="pd"'
    run_scenario(rules_dir, "pd-sli-sides", {
        "input_series": series,
        "promql_expr_test": [
            {"expr": f"model:vllm_ttft_slo_errors:ratio_rate5m{{{model}}}", "eval_time": "30m",
             "exp_samples": [{"labels": f"model:vllm_ttft_slo_errors:ratio_rate5m{{{model}}}", "value": 1}]},
            {"expr": f"model:vllm_tpot_slo_errors:ratio_rate5m{{{model}}}", "eval_time": "30m",
             "exp_samples": [{"labels": f"model:vllm_tpot_slo_errors:ratio_rate5m{{{model}}}", "value": 1}]},
            # one request per second, counted once (both sides would make it 2)
            {"expr": f"count(model:vllm_ttft_requests:rate1h{{{model}}} > 0.9 < 1.1)", "eval_time": "59m",
             "exp_samples": [{"labels": "{}", "value": 1}]},
            # prefill TP2 + decode TP4
            {"expr": f"model:vllm_gpus_serving:sum{{{model}}}", "eval_time": "30m",
             "exp_samples": [{"labels": f"model:vllm_gpus_serving:sum{{{model}}}", "value": 6}]},
        ],
    })  # fmt: skip


def test_side_series_keep_the_side_label(rules_dir):
    run_scenario(rules_dir, "pd-side-series", {
        "input_series": sides_state(MORIIO, "5x60", "1x60", "32x60"),
        "promql_expr_test": [
            {"expr": 'model_side:vllm_requests_waiting_for_capacity:sum{model="pd"}', "eval_time": "10m",
             "exp_samples": [
                 {"labels": 'model_side:vllm_requests_waiting_for_capacity:sum{model="pd", pd_role="decode"}', "value": 1},
                 {"labels": 'model_side:vllm_requests_waiting_for_capacity:sum{model="pd", pd_role="prefill"}', "value": 5},
             ]},
            {"expr": 'model:vllm_pd_decode_batch:ratio{model="pd"}', "eval_time": "10m",
             "exp_samples": [{"labels": 'model:vllm_pd_decode_batch:ratio{model="pd"}', "value": 0.5}]},
        ],
    })  # fmt: skip
