"""P/D observability without promtool: what is rendered for stacks with and without P/D models."""

from __future__ import annotations

from dataclasses import replace

from infra.render.observability import (
    GpuRuntimeFacts,
    MonitoringSettings,
    render_pod_monitors,
    render_rule_groups,
)
from infra.render.slo_rules import alert_names, recorded_names
from tests.render.test_pd_rules_promtool import COLOCATED, MORIIO, NIXL

PD_ALERTS = {"VllmPdPrefillBottleneck", "VllmPdDecodeBottleneck", "VllmPdRouterLegErrors", "VllmPdRouterDown",
             "VllmPdPrefillDown"}  # fmt: skip


def _groups(models):
    return [g for gs in render_rule_groups(models, GpuRuntimeFacts()).values() for g in gs]


def test_a_stack_without_pd_renders_no_pd_rules_alerts_or_router_monitor():
    other = replace(COLOCATED, name="other", deployment="other-engine")
    groups = _groups([COLOCATED, other])
    assert not any(g["name"].startswith("inference-platform.pd") for g in groups)
    assert not any(g["name"] == "inference-platform.alerts.pd" for g in groups)
    assert not any("Pd" in a for a in alert_names(groups))
    assert not any(r.startswith("model_side:") or "pd_" in r for r in recorded_names(groups))
    monitors = render_pod_monitors([COLOCATED], GpuRuntimeFacts(), MonitoringSettings())
    assert "vllm-pd-router" not in {m["metadata"]["name"] for m in monitors}


def test_moriio_gets_side_and_router_rules_but_no_transfer_series():
    groups = _groups([MORIIO, COLOCATED])
    assert PD_ALERTS <= set(alert_names(groups))
    assert "VllmPdKvTransferFailures" not in alert_names(groups)  # MoRI-IO exports no transfer metrics
    recorded = recorded_names(groups)
    assert {"model_side:vllm_requests_waiting:sum", "model_side:vllm_ttft_seconds:p90",
            "model:pd_router_leg_errors:ratio_rate5m"} <= recorded  # fmt: skip
    assert "model:vllm_kv_transfer_failures:ratio_rate5m" not in recorded
    exprs = " ".join(r["expr"] for g in groups for r in g["rules"])
    assert "nixl" not in exprs


def test_nixl_gets_the_transfer_series_and_alert():
    groups = _groups([NIXL])
    assert "VllmPdKvTransferFailures" in alert_names(groups)
    exprs = " ".join(r["expr"] for g in groups for r in g["rules"])
    assert "vllm:nixl_xfer_time_seconds_bucket" in exprs and "vllm:nixl_num_failed_transfers_total" in exprs


def test_colocated_rules_do_not_change_with_a_pd_model_beside_them():
    alone = {g["name"]: g for g in _groups([COLOCATED])}
    beside = {g["name"]: g for g in _groups([COLOCATED, MORIIO])}
    for name in ("inference-platform.model.chat", "inference-platform.slo.chat"):
        assert alone[name] == beside[name]
    assert "pd_role" not in str(alone)


def test_pd_sli_selectors_read_one_side_each():
    slo = next(g for g in _groups([MORIIO]) if g["name"] == "inference-platform.slo.pd")
    for r in slo["rules"]:
        if "time_to_first_token" in r["expr"]:
            assert 'pd_role="prefill"' in r["expr"] and 'pd_role="decode"' not in r["expr"], r["record"]
        if "time_per_output_token" in r["expr"]:
            assert 'pd_role="decode"' in r["expr"] and 'pd_role="prefill"' not in r["expr"], r["record"]


def test_pod_monitors_label_the_side_and_scrape_each_pd_router():
    monitors = {m["metadata"]["name"]: m for m in render_pod_monitors([MORIIO, COLOCATED], GpuRuntimeFacts(),
                                                                        MonitoringSettings())}  # fmt: skip
    vllm = monitors["vllm"]["spec"]["podMetricsEndpoints"][0]["relabelings"]
    assert {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_label_inference_platform_pd_role"],
            "targetLabel": "pd_role"} in vllm  # fmt: skip
    router = monitors["vllm-pd-router"]["spec"]
    assert router["selector"]["matchLabels"] == {"app.kubernetes.io/name": "vllm-pd-router"}
    assert router["podMetricsEndpoints"][0]["port"] == "metrics"
    assert router["namespaceSelector"] == {"matchNames": ["inference"]}


def test_the_pd_renderer_labels_match_what_the_monitors_select():
    """The pod labels pd_service renders are the ones the PodMonitors select and relabel."""
    from infra.render import pd_router, pd_service

    assert pd_service.PD_ROLE_LABEL == "inference-platform/pd-role"  # → __meta_…_inference_platform_pd_role
    labels = pd_router.selector_pods(pd_router.PdRouterSpec("m", "ns", "moriio", {}, {}, None, 8000))
    assert labels["app.kubernetes.io/name"] == "vllm-pd-router" and labels["inference-platform/model"] == "m"


def test_a_staging_pd_variant_observes_both_sides():
    from infra.stack_plan import observed_models, plan_stack
    from tests.config.test_pd_config import _load, _staging

    (observed,) = observed_models(plan_stack(_load(*_staging("p1tp4-ep-d1tp4-ep"))).models)
    assert observed.pd is not None and observed.pd.connector == "MoRIIOConnector"
    assert observed.deployment == observed.pd.decode_deployment == "qwen3-235b-engine-decode"
    assert observed.pd.prefill_deployment == "qwen3-235b-engine-prefill"
    assert observed.pd.router_deployment == "qwen3-235b-pd-router"
    assert observed.replicas == observed.pd.prefill_engines + observed.pd.decode_engines


def test_the_dashboard_row_repeats_per_pd_model_and_reads_recorded_series():
    import json
    import re

    from infra.render.observability import DASHBOARD_DIR

    board = json.loads((DASHBOARD_DIR / "inference-slos.json").read_text())
    (row,) = [p for p in board["panels"] if p["type"] == "row" and p.get("repeat") == "pd_model"]
    variable = next(v for v in board["templating"]["list"] if v["name"] == "pd_model")
    recorded = recorded_names(_groups([MORIIO, NIXL]))
    assert variable["definition"] == "label_values(model_side:vllm_engines_up:sum, model)"
    for panel in row["panels"]:
        for target in panel["targets"]:
            (name,) = re.findall(r"^([a-z0-9_:]+)\{", target["expr"])
            assert name in recorded, (panel["title"], name)
