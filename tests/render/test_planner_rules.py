"""Measured-vs-predicted rules and PlannerPredictionDrift: PromQL names, and promtool scenarios.

The scenarios feed the planner group its inputs directly (the model group's GPUs serving, goodput,
served rate and the SLO group's good ratios are given as series) so each case states exactly the
load and SLO state it is about; the full rule set is checked with `promtool check rules` and the
name test of tests/render/test_slo_rules.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from infra.render.observability import GpuRuntimeFacts, render_rule_groups
from infra.render.planner_prediction import PlannerPrediction
from infra.render.planner_rules import (
    DRIFT_ALERT,
    MEANINGFUL_LOAD_SHARE,
    planner_alert_group,
    planner_recording_group,
)
from infra.render.slo_rules import PdObserved, recorded_names
from tests.conftest import apply, need_tool
from tests.render.test_rules_promtool import CHAT, alert, run_promtool, run_scenario, vllm_labels
from tests.render.test_slo_rules import EXTERNAL_METRICS, metric_names

PREDICTION = PlannerPrediction(
    goodput_rps_per_node=10.0, band_low=0.8, band_high=1.2, output_tokens_per_s_per_node=2000.0,
    in_flight_per_node=40.0, step_s=0.03, prompt_tokens=1000, output_tokens=200, gpus_per_node=8,
)
MODEL = replace(CHAT, prediction=PREDICTION)  # 8 GPUs per replica: one replica = one node
PD_MODEL = replace(
    MODEL, name="pd", served_model_name="pd",
    pd=PdObserved("NixlConnector", "pd-prefill", "pd-decode", "pd-router", 1, 1, 4, 4, 64),
)  # fmt: skip
MINUTES = 100


def test_no_prediction_no_planner_rules():
    assert planner_recording_group(CHAT) is None
    assert planner_alert_group([CHAT], "docs/runbook.md") is None


def test_no_drift_alert_during_a_layout_rollout():
    assert planner_alert_group([replace(MODEL, candidate_gpus_per_replica=4)], "docs/runbook.md") is None


def test_every_name_is_recorded_or_exported_by_vllm():
    groups = [g for gs in render_rule_groups([MODEL, PD_MODEL], GpuRuntimeFacts(vendor="amd")).values() for g in gs]
    recorded = recorded_names(groups)
    for group in groups:
        if "planner" not in group["name"]:
            continue
        for rule in group["rules"]:
            assert not metric_names(rule["expr"]) - recorded - EXTERNAL_METRICS.keys(), rule
    planner = planner_recording_group(MODEL)
    assert planner["name"] == "inference-platform.planner.chat"
    names = {r["record"] for r in planner["rules"]}
    assert {"model:planner_prediction_ratio", "model:planner_measured_step_seconds:mean_rate5m",
            "model:planner_predicted_goodput_requests_per_s:per_node"} <= names  # fmt: skip
    sides = {r["record"] for r in planner_recording_group(PD_MODEL)["rules"] if r["record"].startswith("model_side:")}
    assert sides == {"model_side:planner_measured_output_tokens_per_s:sum", "model_side:planner_measured_step_seconds:mean_rate5m"}


def test_the_band_is_rendered_as_three_constant_series():
    rules = planner_recording_group(MODEL)["rules"]
    band = {r["labels"]["band"]: r["expr"] for r in rules if r["record"] == "model:planner_predicted_goodput_requests_per_s:per_node"}
    assert band == {"low": "vector(8)", "expected": "vector(10)", "high": "vector(12)"}


# The promtool scenarios skip without promtool (and fail under INFRA_REQUIRE_TOOLS=1), like
# tests/render/test_rules_promtool.py; the pure rule checks above run everywhere.
PROMTOOL = apply(need_tool("promtool", "Debian: apt-get install -y prometheus"))


@pytest.fixture(scope="module")
def planner_rules_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("planner-rules")
    groups = [planner_recording_group(MODEL), planner_alert_group([MODEL], "docs/runbook.md")]
    (d / "planner.yml").write_text(yaml.safe_dump({"groups": groups}))
    for g in groups:
        for r in g["rules"]:
            r.pop("annotations", None)
    (d / "all-bare.yml").write_text(yaml.safe_dump({"groups": groups}))
    return d


@PROMTOOL
def test_promtool_checks_the_planner_groups(planner_rules_dir):
    result = run_promtool("check", "rules", str(planner_rules_dir / "planner.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def _const(name: str, value: float, labels: str = 'model="chat"') -> dict:
    return {"series": f"{name}{{{labels}}}", "values": f"{value:g}x{MINUTES}"}


def _load(nodes: int, served_rps: float, ttft_good: float = 0.97, tpot_good: float = 0.97) -> list[dict]:
    """`nodes` nodes serving, `served_rps` requests/s finished (stop) in total, SLO good ratios."""
    per_min = served_rps * 60
    success = f'vllm:request_success_total{{{vllm_labels(MODEL)}, finished_reason="stop"}}'
    return [
        _const("model:vllm_gpus_serving:sum", nodes * PREDICTION.gpus_per_node),
        {"series": success, "values": f"0+{per_min:g}x{MINUTES}"},
        _const("model:vllm_served_requests_per_second:rate5m", served_rps),
        _const("model:vllm_goodput_requests_per_second:rate5m", served_rps * min(ttft_good, tpot_good)),
        _const("model:vllm_ttft_slo_good:ratio_rate5m", ttft_good),
        _const("model:vllm_tpot_slo_good:ratio_rate5m", tpot_good),
    ]


BELOW = {"severity": "warning", "model": "chat", "direction": "below"}
ABOVE = {"severity": "warning", "model": "chat", "direction": "above"}


@PROMTOOL
def test_ratio_and_per_node_series(planner_rules_dir):
    run_scenario(
        planner_rules_dir,
        "ratio",
        {
            "input_series": _load(nodes=2, served_rps=12.0),
            "promql_expr_test": [
                {"expr": "round(model:planner_measured_requests_per_s:per_node, 0.01)", "eval_time": "20m",
                 "exp_samples": [{"labels": '{model="chat"}', "value": 6.0}]},
                {"expr": "round(model:planner_prediction_ratio, 0.01)", "eval_time": "20m",
                 "exp_samples": [{"labels": '{model="chat"}', "value": 0.6}]},
            ],
        },
    )  # fmt: skip


@PROMTOOL
def test_drift_below_fires_after_an_hour_of_slo_misses_under_the_band(planner_rules_dir):
    # 2 nodes at 6 req/s each (band low end: 8) and 80 % of first tokens within the limit
    run_scenario(
        planner_rules_dir,
        "below",
        {
            "input_series": _load(nodes=2, served_rps=12.0, ttft_good=0.8),
            "alert_rule_test": [alert("50m", DRIFT_ALERT), alert("75m", DRIFT_ALERT, BELOW)],
        },
    )


@PROMTOOL
def test_drift_above_fires_when_the_slo_holds_beyond_the_band(planner_rules_dir):
    run_scenario(
        planner_rules_dir,
        "above",
        {"input_series": _load(nodes=1, served_rps=14.0), "alert_rule_test": [alert("75m", DRIFT_ALERT, ABOVE)]},
    )


@PROMTOOL
@pytest.mark.parametrize(
    "load",
    [
        pytest.param(_load(nodes=2, served_rps=12.0), id="headroom: under the band, SLO met"),
        pytest.param(_load(nodes=1, served_rps=10.0, ttft_good=0.5), id="in the band, SLO missed"),
        pytest.param(_load(nodes=4, served_rps=4.0 * 8 * MEANINGFUL_LOAD_SHARE * 0.9, ttft_good=0.5), id="trickle"),
        pytest.param(_load(nodes=1, served_rps=14.0, tpot_good=0.85), id="above the band but missing the SLO"),
    ],
)
def test_drift_silent(planner_rules_dir, load, request):
    name = "silent-" + request.node.callspec.id.split(":")[0].replace(" ", "-").replace(",", "")
    run_scenario(planner_rules_dir, name, {"input_series": load, "alert_rule_test": [alert("75m", DRIFT_ALERT)]})
