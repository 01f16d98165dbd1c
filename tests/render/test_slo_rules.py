"""Rules and dashboards: PromQL parses, names exist, SLO math and runbook links hold (no promtool)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import promql_parser
import pytest

from infra.render.model_service import deployment_name
from infra.render.observability import (
    DASHBOARD_DIR,
    GpuRuntimeFacts,
    MonitoringSettings,
    render_prometheus_rules,
    render_rule_groups,
)
from infra.render.prefix_cache_rules import OFFLOAD_METRICS
from infra.render.slo_alerts import GPU_ALERT_METRICS
from infra.render.slo_rules import (
    BURN_RATE_POLICY,
    ERROR_BUDGET,
    MIN_REQUESTS_PER_HOUR,
    SLO_WINDOWS,
    TPOT_BUCKETS_S,
    TTFT_BUCKETS_S,
    ObservedModel,
    alert_names,
    bracket,
    le_matcher,
    recorded_names,
    slo_bucket_warnings,
)
from tests.conftest import ROOT as TESTS_ROOT

REPO = TESTS_ROOT

MODELS = [
    ObservedModel(
        "qwen3-235b",
        "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        "inference",
        2000,
        50,
        4,
        4,
        3.5,
        pool="mi325x",
        usd_per_node_hour=28.0,
        deployment="qwen3-235b-engine",
    ),
    ObservedModel("llama-8b", "llama-8b", "small-models", 1000, 25, 1, 2, None, deployment="llama-8b-engine"),
]
AMD = GpuRuntimeFacts(vendor="amd", mode="doks-managed")
# A multi-turn chat model with a planned hit rate and a KV offload tier (prefix_cache_rules.py).
MULTI_TURN = ObservedModel(
    "chat-mt", "chat-mt", "inference", 2000, 50, 4, 2, deployment="chat-mt-engine",
    prefix_cache_planned_hit=0.6, kv_offload_backend="native",
)

# Every metric a rule or dashboard may read that it does not record itself, with its source.
# A name missing here fails the test: add it only after confirming it in the source named.
VLLM = "vLLM V1 vllm/v1/metrics/loggers.py (PrometheusStatLogger); counters gain _total"
AMD_EXPORTER = "ROCm/device-metrics-exporter docs/configuration/metricslist.md + grafana/dashboard_gpu.json"
KSM = "kube-state-metrics docs/metrics/workload/pod-metrics.md"
KSM_NODE = "kube-state-metrics docs/metrics/cluster/node-metrics.md (resource name sanitised: amd_com_gpu)"
KSM_DEPLOYMENT = "kube-state-metrics docs/metrics/workload/deployment-metrics.md (no label allow-list needed)"
NIXL = "vLLM vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py (NixlConnector only)"
VLLM_ROUTER = "vllm-project/router src/metrics.rs (vllm-router 0.1.17)"
OFFLOADING = "vLLM vllm/distributed/kv_transfer/kv_connector/v1/offloading/metrics.py (OffloadingConnector: kv_offload)"
EXTERNAL_METRICS: dict[str, str] = {
    "vllm:time_to_first_token_seconds_bucket": VLLM,
    "vllm:time_to_first_token_seconds_count": VLLM,
    "vllm:request_time_per_output_token_seconds_bucket": VLLM,
    "vllm:request_time_per_output_token_seconds_count": VLLM,
    "vllm:request_success_total": VLLM,
    "vllm:generation_tokens_total": VLLM,
    "vllm:prompt_tokens_total": VLLM,
    "vllm:num_requests_waiting": VLLM,
    "vllm:num_requests_running": VLLM,
    "vllm:kv_cache_usage_perc": VLLM,
    "vllm:prefix_cache_hits_total": VLLM,
    "vllm:prefix_cache_queries_total": VLLM,
    "vllm:num_preemptions_total": VLLM,
    # measured vs predicted (infra/render/planner_rules.py): histograms read through _sum/_count
    "vllm:inter_token_latency_seconds_sum": VLLM,
    "vllm:inter_token_latency_seconds_count": VLLM,
    "vllm:request_prompt_tokens_sum": VLLM,
    "vllm:request_prompt_tokens_count": VLLM,
    "vllm:request_generation_tokens_sum": VLLM,
    "vllm:request_generation_tokens_count": VLLM,
    "gpu_gfx_activity": AMD_EXPORTER,
    "gpu_umc_activity": AMD_EXPORTER,
    "gpu_used_vram": AMD_EXPORTER,
    "gpu_total_vram": AMD_EXPORTER,
    "gpu_package_power": AMD_EXPORTER,
    "gpu_junction_temperature": AMD_EXPORTER,
    "gpu_memory_temperature": AMD_EXPORTER,
    "gpu_health": AMD_EXPORTER,
    "gpu_ecc_uncorrect_total": AMD_EXPORTER,
    "gpu_ecc_correct_total": AMD_EXPORTER,
    "kube_pod_status_ready": KSM,
    "kube_pod_labels": KSM + " (labels allow-listed by kube-state-metrics.metricLabelsAllowlist)",
    "kube_pod_container_status_restarts_total": KSM,
    "kube_node_status_capacity": KSM_NODE,
    "kube_node_labels": "kube-state-metrics docs/metrics/cluster/node-metrics.md (labels allow-listed by "
    "kube-state-metrics.metricLabelsAllowlist: nodes=[doks.digitalocean.com/node-pool])",
    "kube_deployment_status_replicas_ready": KSM_DEPLOYMENT,
    "kube_deployment_spec_replicas": KSM_DEPLOYMENT,
    "kube_deployment_created": KSM_DEPLOYMENT,
    "up": "Prometheus: synthetic per-target series",
    # P/D (checked in the vLLM 0.33.0 and vllm-router 0.1.17 wheels)
    "vllm:num_requests_waiting_by_reason": VLLM,
    "vllm:num_requests_kv_fetch_by_stage": VLLM + " (KV consumers only)",
    "vllm:request_queue_time_seconds_bucket": VLLM,
    "vllm:nixl_xfer_time_seconds_bucket": NIXL,
    "vllm:nixl_xfer_time_seconds_count": NIXL,
    "vllm:nixl_num_failed_transfers_total": NIXL,
    "vllm:nixl_num_kv_expired_reqs_total": NIXL,
    "vllm_router_pd_requests_total": VLLM_ROUTER,
    "vllm_router_pd_prefill_errors_total": VLLM_ROUTER,
    "vllm_router_pd_decode_errors_total": VLLM_ROUTER,
    # prefix cache by tier and KV offload transfers (checked in the vLLM 0.32.0 CPU wheel:
    # v1/metrics/loggers.py, distributed/kv_transfer/kv_connector/v1/offloading/metrics.py)
    "vllm:external_prefix_cache_hits_total": VLLM,
    **{name: OFFLOADING for name in OFFLOAD_METRICS},
}


def all_groups() -> list[dict]:
    from infra.render.rollout_rules import RolloutObserved
    from tests.render.test_pd_rules_promtool import MORIIO, NIXL
    from tests.render.test_planner_rules import PREDICTION

    predicted = [replace(m, name=f"{m.name}-predicted", prediction=PREDICTION) for m in (MODELS[0], NIXL)]
    models = [*MODELS, MORIIO, NIXL, *predicted]
    # the first model in a layout rollout, so the dashboards' rollout row counts too
    rollout = (RolloutObserved(MODELS[0], MODELS[0].gpus_per_replica, MODELS[0].gpus_per_replica),)
    return [g for groups in render_rule_groups([*models, MULTI_TURN], AMD, rollouts=rollout).values() for g in groups]


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (raises ValueError if it does not parse)."""
    names: set[str] = set()

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector):
            name = node.name or next((m.value for m in node.matchers.matchers if m.name == "__name__"), None)
            assert name, f"selector without a metric name in {expr!r}"
            names.add(name)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


# Grafana variables replaced by something PromQL parses, as Grafana would before querying.
GRAFANA_VARS = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range_s": "86400",
    "$__range": "1d",
    "${datasource}": "prometheus",
    "$model": "qwen3-235b",
    "$pd_model": "pd",
    "$rollout_model": "qwen3-235b",
    "$hostname": "node-1",
}


def grafana_expr_to_promql(expr: str) -> str:
    for var, value in sorted(GRAFANA_VARS.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unknown Grafana variable in {expr!r}"
    return expr


def dashboard_exprs() -> list[tuple[str, str]]:
    out = []
    for path in sorted(DASHBOARD_DIR.glob("*.json")):
        board = json.loads(path.read_text())
        panels = [*board["panels"], *(p for row in board["panels"] for p in row.get("panels", []))]
        for panel in panels:
            for target in panel.get("targets", []):
                out.append((f"{path.name}: {panel['title']}", target["expr"]))
        for var in board["templating"]["list"]:
            if var["type"] == "query":
                m = re.fullmatch(r"label_values\((.+), *\w+\)", var["query"]["query"])
                assert m, var
                out.append((f"{path.name}: variable {var['name']}", m.group(1)))
    return out


# --- SLO arithmetic ---------------------------------------------------------------------------


def test_error_budget_is_ten_percent_for_a_p90_slo():
    assert ERROR_BUDGET == pytest.approx(0.10)


def test_every_burn_threshold_is_reachable():
    # error ratio ≤ 1, so a burn rate ≥ 1 / budget can never fire
    for w in BURN_RATE_POLICY:
        assert 0 < w.error_ratio_threshold < 1, w
        assert w.long_window in SLO_WINDOWS and w.short_window in SLO_WINDOWS


def test_bucket_boundaries_match_vllm():
    assert 1.0 in TTFT_BUCKETS_S and 2.5 in TTFT_BUCKETS_S and 2.0 not in TTFT_BUCKETS_S
    assert 0.05 in TPOT_BUCKETS_S and list(TPOT_BUCKETS_S) == sorted(TPOT_BUCKETS_S)


def test_bucket_warning_only_between_boundaries():
    warnings = slo_bucket_warnings(MODELS)
    assert len(warnings) == 1
    assert "qwen3-235b" in warnings[0] and "ttft_p90_ms=2000" in warnings[0]
    assert "1000" in warnings[0] and "2500" in warnings[0]
    aligned = ObservedModel("m", "m", "ns", 2500, 50, 1, 1, deployment="m-engine")
    assert slo_bucket_warnings([aligned]) == []


def test_bucket_warning_above_last_bucket():
    huge = ObservedModel("m", "m", "ns", 3_000_000, 90_000, 1, 1, deployment="m-engine")
    warnings = slo_bucket_warnings([huge])
    assert len(warnings) == 2 and all("largest finite bucket" in w for w in warnings)


def test_bracket():
    assert bracket(2.0, TTFT_BUCKETS_S).lower_s == 1.0 and bracket(2.0, TTFT_BUCKETS_S).upper_s == 2.5
    assert bracket(0.05, TPOT_BUCKETS_S).exact
    assert bracket(0.005, TPOT_BUCKETS_S).lower_s is None


def test_le_matcher_accepts_both_spellings_and_not_neighbours():
    pattern = re.search(r'le=~"(.*)"', le_matcher(1.0)).group(1).replace("\\\\", "\\")
    assert re.fullmatch(pattern, "1.0") and re.fullmatch(pattern, "1")
    assert not re.fullmatch(pattern, "160") and not re.fullmatch(pattern, "10.0")
    assert le_matcher(0.05) == 'le=~"0\\\\.05"'


# --- PromQL validity and names -----------------------------------------------------------------


def test_every_rule_expression_parses_and_uses_known_names():
    groups = all_groups()
    recorded = recorded_names(groups)
    unknown = {}
    for g in groups:
        for r in g["rules"]:
            names = metric_names(r["expr"])
            missing = names - recorded - EXTERNAL_METRICS.keys()
            if missing:
                unknown[r.get("record") or r.get("alert")] = missing
    assert not unknown


def test_every_dashboard_expression_parses_and_uses_known_names():
    recorded = recorded_names(all_groups())
    exprs = dashboard_exprs()
    assert len(exprs) > 20
    unknown = {}
    for where, expr in exprs:
        missing = metric_names(grafana_expr_to_promql(expr)) - recorded - EXTERNAL_METRICS.keys()
        if missing:
            unknown[where] = missing
    assert not unknown


def test_allow_list_has_no_dead_entries():
    used = set()
    for g in all_groups():
        for r in g["rules"]:
            used |= metric_names(r["expr"])
    for _, expr in dashboard_exprs():
        used |= metric_names(grafana_expr_to_promql(expr))
    assert set(EXTERNAL_METRICS) <= used


def test_metric_name_check_catches_a_typo():
    assert metric_names('sum(vllm:num_request_waiting{model_name="x"})') - EXTERNAL_METRICS.keys() == {
        "vllm:num_request_waiting"
    }


def test_rules_are_scoped_per_model():
    groups = render_rule_groups(MODELS, AMD)
    qwen = groups["model-qwen3-235b"][0]["rules"]
    assert all(r["labels"]["model"] == "qwen3-235b" for r in qwen)
    exprs = " ".join(r["expr"] for r in qwen)
    assert 'model_name="Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"' in exprs and "llama" not in exprs


def test_cost_rules_only_with_a_price():
    groups = render_rule_groups(MODELS, AMD)
    assert "model:vllm_cost_usd_per_million_output_tokens:rate1h" in recorded_names(
        groups["model-qwen3-235b"]
    )
    assert "model:vllm_cost_usd_per_million_output_tokens:rate1h" not in recorded_names(
        groups["model-llama-8b"]
    )


def test_billed_cost_rules_only_with_a_pool_and_its_node_price():
    groups = render_rule_groups(MODELS, AMD)
    billed = {
        "model:pool_gpu_share:ratio",
        "model:billed_cost_usd_per_hour:sum",
        "model:vllm_billed_cost_usd_per_million_output_tokens:rate1h",
    }
    assert billed <= recorded_names(groups["model-qwen3-235b"])
    assert not billed & recorded_names(groups["model-llama-8b"])
    (pool_rule,) = groups["pools"][0]["rules"]
    assert pool_rule["record"] == "pool:node_cost_usd_per_hour:sum"
    assert pool_rule["labels"] == {"pool": "mi325x"}
    assert 'label_doks_digitalocean_com_node_pool="mi325x"' in pool_rule["expr"]
    assert pool_rule["expr"].endswith("* 28")
    # no priced pool, no pool group (and no PrometheusRule for it)
    assert "pools" not in render_rule_groups(MODELS[1:], AMD)


def test_billed_cost_is_the_pool_cost_times_the_models_share():
    shared = [
        ObservedModel(
            n, n, "inference", 2500, 50, 2, 4, 2.0, pool="p", usd_per_node_hour=16.0, pool_gpu_share=0.25,
            deployment=f"{n}-engine",
        )
        for n in ("a", "b")
    ]
    rules = {
        r["record"]: r["expr"]
        for r in render_rule_groups(shared, AMD)["model-a"][0]["rules"]
        if "record" in r
    }
    assert (
        rules["model:billed_cost_usd_per_hour:sum"] == 'sum(pool:node_cost_usd_per_hour:sum{pool="p"}) * 0.25'
    )
    # one rule per pool, however many models share it
    assert len(render_rule_groups(shared, AMD)["pools"][0]["rules"]) == 1
    # the per-million figure divides by the same token rate as the serving-replica one, guarded by > 0
    assert rules["model:vllm_billed_cost_usd_per_million_output_tokens:rate1h"].endswith(
        rules["model:vllm_cost_usd_per_million_output_tokens:rate1h"].split(" / ", 1)[1]
    )


def test_gpu_alerts_follow_the_exporter():
    with_exporter = alert_names(render_rule_groups(MODELS, AMD)["alerts"])
    nvidia = alert_names(render_rule_groups(MODELS, GpuRuntimeFacts(vendor="nvidia"))["alerts"])
    assert "AmdGpuJunctionTemperatureHigh" in with_exporter and "AmdGpuMetricsAbsent" in with_exporter
    assert not [a for a in nvidia if a.startswith("AmdGpu")]
    # device-plugin mode scrapes the same DOKS exporter, so it gets the same alerts
    device_plugin = GpuRuntimeFacts(vendor="amd", mode="device-plugin")
    assert alert_names(render_rule_groups(MODELS, device_plugin)["alerts"]) == with_exporter


def test_gpu_metrics_deadman_needs_amd_gpu_nodes_and_no_exporter_series():
    gpu = next(
        g for g in render_rule_groups(MODELS, AMD)["alerts"] if g["name"] == "inference-platform.alerts.gpu"
    )
    rule = next(r for r in gpu["rules"] if r.get("alert") == "AmdGpuMetricsAbsent")
    assert rule["labels"] == {"severity": "warning"}
    assert 'kube_node_status_capacity{resource="amd_com_gpu"}' in rule["expr"]
    assert rule["annotations"]["runbook_url"] == "docs/runbook.md#amdgpumetricsabsent"
    # every exporter metric another GPU alert reads is watched, each on its own (`metric` label)
    read_by_alerts = set()
    for r in gpu["rules"]:
        if r["alert"] != "AmdGpuMetricsAbsent":
            read_by_alerts |= metric_names(r["expr"])
            assert GPU_ALERT_METRICS[next(iter(metric_names(r["expr"])))] == r["alert"]
    assert (
        read_by_alerts == set(GPU_ALERT_METRICS) == metric_names(rule["expr"]) - {"kube_node_status_capacity"}
    )
    for metric in GPU_ALERT_METRICS:
        assert f'"metric", "{metric}"' in rule["expr"]


def test_vllm_deadman_names_the_models_deployment():
    """The deadman joins on the Deployment model_service renders."""
    from tests.render.test_model_service import make_spec

    spec = make_spec()
    observed = ObservedModel(
        spec.name, spec.served_model_name, "inference", 2000, 50, 4, 2, deployment=deployment_name(spec)
    )
    serving = next(
        g
        for g in render_rule_groups([observed], AMD)["alerts"]
        if g["name"] == "inference-platform.alerts.serving"
    )
    (rule,) = [r for r in serving["rules"] if r.get("alert") == "VllmMetricsAbsent"]
    assert (
        f'kube_deployment_status_replicas_ready{{namespace="inference", deployment="{deployment_name(spec)}"}}'
        in rule["expr"]
    )


def test_goodput_counts_only_served_requests():
    rules = {
        r["record"]: r["expr"]
        for g in render_rule_groups(MODELS, AMD)["model-qwen3-235b"]
        for r in g["rules"]
    }
    assert 'finished_reason=~"stop|length"' in rules["model:vllm_served_requests_per_second:rate5m"]
    assert 'finished_reason!~"stop|length"' in rules["model:vllm_unserved_requests_per_second:rate5m"]
    assert (
        "model:vllm_served_requests_per_second:rate5m"
        in rules["model:vllm_goodput_requests_per_second:rate5m"]
    )
    # the only other reader of request_success_total is the all-reasons load series
    readers = {name for name, expr in rules.items() if "vllm:request_success_total" in expr}
    assert readers == {
        "model:vllm_requests_per_second:rate5m",
        "model:vllm_served_requests_per_second:rate5m",
        "model:vllm_unserved_requests_per_second:rate5m",
    }


def test_every_burn_condition_has_a_minimum_traffic_guard():
    assert MIN_REQUESTS_PER_HOUR == 100
    slo = next(
        g for g in render_rule_groups(MODELS, AMD)["alerts"] if g["name"] == "inference-platform.alerts.slo"
    )
    recorded = recorded_names(all_groups())
    for r in slo["rules"]:
        short = "ttft" if "Ttft" in r["alert"] else "tpot"
        conditions = r["expr"].split("\n or\n")
        windows = [w for w in BURN_RATE_POLICY if w.severity == r["labels"]["severity"]]
        assert len(conditions) == len(windows)
        for cond, w in zip(conditions, windows, strict=True):
            guard = f"model:vllm_{short}_requests:rate{w.long_window} * 3600 >= {MIN_REQUESTS_PER_HOUR}"
            assert guard in cond
            assert f"model:vllm_{short}_requests:rate{w.long_window}" in recorded


def test_required_alerts_exist():
    names = set(alert_names(all_groups()))
    assert {
        "VllmTtftSloFastBurn",
        "VllmTtftSloSlowBurn",
        "VllmTpotSloFastBurn",
        "VllmTpotSloSlowBurn",
        "VllmQueueGrowing",
        "VllmKvCacheSaturated",
        "VllmReplicasNotReady",
        "InferencePodRestarting",
        "VllmMetricsAbsent",
        "VllmModelDown",
        "AmdGpuJunctionTemperatureHigh",
        "AmdGpuUnhealthy",
        "AmdGpuUncorrectableEccErrors",
        "AmdGpuMetricsAbsent",
    } <= names


# --- runbook -----------------------------------------------------------------------------------


def test_every_alert_links_to_a_runbook_section():
    runbook = (REPO / "docs" / "runbook.md").read_text()
    anchors = {h.strip().lower() for h in re.findall(r"^## (\S+)\s*$", runbook, flags=re.M)}
    for g in all_groups():
        for r in g["rules"]:
            if "alert" in r:
                url = r["annotations"]["runbook_url"]
                assert url.startswith("docs/runbook.md#")
                assert url.split("#", 1)[1] in anchors, r["alert"]
                assert r["labels"]["severity"] in {"critical", "warning"}


# --- PrometheusRule shape (CRD monitoring.coreos.com/v1, prometheus-operator v0.88) -----------

GROUP_FIELDS = {"name", "interval", "rules", "limit", "query_offset", "partial_response_strategy", "labels"}
RULE_FIELDS = {"record", "alert", "expr", "for", "keep_firing_for", "labels", "annotations"}
DURATION = re.compile(
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)


def test_prometheus_rule_objects_match_the_crd():
    objs = render_prometheus_rules(MODELS, AMD, MonitoringSettings(namespace="monitoring"))
    names = [o["metadata"]["name"] for o in objs]
    assert len(names) == len(set(names)) == 4  # two models, the pools' cost, the alerts
    group_names = [g["name"] for o in objs for g in o["spec"]["groups"]]
    assert len(group_names) == len(set(group_names))
    for o in objs:
        assert o["apiVersion"] == "monitoring.coreos.com/v1" and o["kind"] == "PrometheusRule"
        assert o["metadata"]["namespace"] == "monitoring"
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", o["metadata"]["name"])
        for g in o["spec"]["groups"]:
            assert set(g) <= GROUP_FIELDS and g["rules"]
            assert DURATION.match(g.get("interval", "0"))
            for r in g["rules"]:
                assert set(r) <= RULE_FIELDS
                assert ("record" in r) != ("alert" in r)
                assert isinstance(r["expr"], str)
                assert DURATION.match(r.get("for", "0"))
                assert all(isinstance(v, str) for v in r.get("labels", {}).values())


def test_label_values_are_escaped():
    odd = ObservedModel("m", 'Org/Model "v2"', "ns", 2500, 50, 1, 1, 1.0, deployment="m-engine")
    for g in render_rule_groups([odd], AMD)["model-m"]:
        for r in g["rules"]:
            promql_parser.parse(r["expr"])  # raises on a broken string literal
    assert (
        'model_name="Org/Model \\"v2\\""' in render_rule_groups([odd], AMD)["model-m"][0]["rules"][0]["expr"]
    )


def test_observed_models_carry_the_pool_price_and_gpu_share(monkeypatch):
    from types import SimpleNamespace as NS

    from infra.stack_plan import ModelFacts, monitoring, observed_models

    # Only the spec's name matters here (the Deployment's name).
    monkeypatch.setattr(monitoring, "model_service_spec", lambda m, _cache_pvc: NS(name=m.config.name))

    def facts(name: str, pool, tp: int, dp: int, rpn: int) -> ModelFacts:
        layout = NS(replicas_per_node=rpn, gpus_per_replica=tp * dp, gpus_per_node_used=tp * dp * rpn, multi_node=False,
                    replicas_for_nodes=lambda nodes: rpn * nodes)
        config = NS(
            name=name, api_model_name=name, slo=NS(ttft_p90_ms=2500, tpot_p90_ms=50),
            workload=NS(input_tokens=1000, output_tokens=200), kv_offload=NS(to_offload=lambda: None),
        )
        return ModelFacts(config=config, pool=pool, arch=None, plan=NS(chosen=NS(layout=layout, fits=False)))

    def pool(name: str, price: float | None) -> NS:
        return NS(name=name, node_usd_per_hour=price, gpu=NS(gpus=8), min_node_count=1)

    shared, alone, contract = pool("shared", 16.0), pool("alone", 16.0), pool("contract", None)
    observed = {
        m.name: m
        for m in observed_models(
            [
                facts("a", shared, tp=2, dp=1, rpn=2),  # 4 GPUs per node
                facts("b", shared, tp=1, dp=2, rpn=2),  # 4 GPUs per node
                facts("c", alone, tp=8, dp=1, rpn=1),
                facts("d", contract, tp=4, dp=1, rpn=2),
            ]
        )
    }
    assert (observed["a"].pool, observed["a"].usd_per_node_hour, observed["a"].pool_gpu_share) == (
        "shared",
        16.0,
        0.5,
    )
    assert observed["b"].pool_gpu_share == 0.5
    assert observed["c"].pool_gpu_share == 1.0 and observed["c"].usd_per_gpu_hour == 2.0
    assert observed["d"].usd_per_node_hour is None and not observed["d"].billed
    assert observed["a"].deployment == "a-engine"
