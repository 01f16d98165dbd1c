"""Per-variant rollout rules and LayoutCanaryWorse: shape (pure) and behaviour (promtool)."""

from __future__ import annotations

import yaml

from infra.render.observability import (
    GpuRuntimeFacts,
    MonitoringSettings,
    render_pod_monitors,
    render_prometheus_rules,
)
from infra.render.rollout_rules import RolloutObserved, canary_worse_expr, render_rollout_rule_groups
from infra.render.slo_rules import ObservedModel, recorded_names
from infra.rollout.prometheus import SERIES
from tests.conftest import need_tool
from tests.render.test_rules_promtool import alert, cumulative, run_promtool, run_scenario, values

CHAT = ObservedModel("chat", "chat-served", "inference", 2500, 50, 8, 2, 2.0, pool="mi300x", usd_per_node_hour=16.0,
                     deployment="chat-engine", candidate_gpus_per_replica=4)
ROLLOUT = RolloutObserved(CHAT, current_gpus_per_replica=8, candidate_gpus_per_replica=4)
MINUTES = 60
WARN = {"severity": "warning"}
RECORDS = recorded_names(g for gs in render_rollout_rule_groups((ROLLOUT,), "x").values() for g in gs)


def test_every_series_the_status_command_reads_is_recorded():
    groups = render_rollout_rule_groups((ROLLOUT,), "docs/runbook.md")
    assert set(SERIES.values()) <= recorded_names(g for gs in groups.values() for g in gs)


def test_no_rollout_no_rules():
    assert render_rollout_rule_groups((), "docs/runbook.md") == {}
    objs = render_prometheus_rules([CHAT], GpuRuntimeFacts(vendor="amd"), MonitoringSettings())
    assert not [o for o in objs if "rollout" in o["metadata"]["name"]]


def test_each_variant_is_selected_by_its_label():
    (group,) = render_rollout_rule_groups((ROLLOUT,), "x")["rollout-chat"]
    for rule in group["rules"]:
        assert f'variant="{rule["labels"]["variant"]}"' in rule["expr"], rule["record"]
    gpus = {r["labels"]["variant"]: r["expr"] for r in group["rules"] if r["record"] == "model_variant:vllm_gpus_serving:sum"}
    assert gpus["current"].endswith("* 8") and gpus["candidate"].endswith("* 4")


def test_the_engine_monitor_names_unlabelled_engines_current():
    (vllm,) = [m for m in render_pod_monitors([CHAT], GpuRuntimeFacts(vendor="amd"), MonitoringSettings())
               if m["metadata"]["name"] == "vllm"]
    relabel = vllm["spec"]["podMetricsEndpoints"][0]["relabelings"]
    variant = [r for r in relabel if r["targetLabel"] == "variant"]
    assert [r["regex"] for r in variant] == ["(.+)", ""] and variant[1]["replacement"] == "current"


# --- promtool -------------------------------------------------------------------------------------



def _rules_file(tmp_path):
    objs = render_prometheus_rules([CHAT], GpuRuntimeFacts(vendor="amd"), MonitoringSettings(), rollouts=(ROLLOUT,))
    groups = [g for o in objs for g in o["spec"]["groups"]]
    for g in groups:
        for r in g["rules"]:
            r.pop("annotations", None)
    (tmp_path / "all-bare.yml").write_text(yaml.safe_dump({"groups": groups}))
    for o in objs:
        path = tmp_path / f"{o['metadata']['name']}.yml"
        path.write_text(yaml.safe_dump({"groups": o["spec"]["groups"]}))
        result = run_promtool("check", "rules", str(path))
        assert result.returncode == 0, result.stdout + result.stderr
    return tmp_path


def _variant_series(variant: str, ttft_bad: float, per_min: float) -> list[dict]:
    labels = f'model_name="chat-served", namespace="inference", component="vllm", model="chat", variant="{variant}"'
    out = []
    for le, ok in (("1.0", 1 - ttft_bad), ("2.5", 1 - ttft_bad), ("5.0", 1.0), ("+Inf", 1.0)):
        out.append({"series": f'vllm:time_to_first_token_seconds_bucket{{{labels}, le="{le}"}}',
                    "values": values(cumulative([per_min * ok] * MINUTES))})
    out.append({"series": f"vllm:time_to_first_token_seconds_count{{{labels}}}", "values": values(cumulative([per_min] * MINUTES))})
    for le in ("0.05", "+Inf"):
        out.append({"series": f'vllm:request_time_per_output_token_seconds_bucket{{{labels}, le="{le}"}}',
                    "values": values(cumulative([per_min] * MINUTES))})
    out.append({"series": f"vllm:request_time_per_output_token_seconds_count{{{labels}}}",
                "values": values(cumulative([per_min] * MINUTES))})
    out.append({"series": f'vllm:request_success_total{{{labels}, finished_reason="stop"}}',
                "values": values(cumulative([per_min] * MINUTES))})
    out.append({"series": f'up{{component="vllm", model="chat", variant="{variant}"}}', "values": values([1] * (MINUTES + 1))})
    return out


def _scenario(tmp_path, name, current_bad, candidate_bad, candidate_per_min, fires):
    run_scenario(_rules_file(tmp_path), name, {
        "input_series": _variant_series("current", current_bad, 30) + _variant_series("candidate", candidate_bad, candidate_per_min),
        "alert_rule_test": [alert("40m", "LayoutCanaryWorse", *([{"model": "chat", "variant": "candidate", **WARN}] if fires else []))],
        # every per-variant series has a value for both variants (labels match across the rules)
        "promql_expr_test": [
            {"expr": f"count({record})", "eval_time": "40m", "exp_samples": [{"labels": "{}", "value": 2}]}
            for record in sorted(RECORDS)
        ],
    })


@need_tool("promtool", "Debian: apt-get install -y prometheus")[0]
def test_canary_worse_fires_when_only_the_candidate_is_slow(tmp_path):
    _scenario(tmp_path, "cand-slow", 0.0, 0.8, 10, fires=True)


@need_tool("promtool", "Debian: apt-get install -y prometheus")[0]
def test_canary_worse_is_silent_when_both_variants_are_equally_slow(tmp_path):
    _scenario(tmp_path, "both-slow", 0.8, 0.8, 10, fires=False)


@need_tool("promtool", "Debian: apt-get install -y prometheus")[0]
def test_canary_worse_is_silent_for_a_healthy_candidate(tmp_path):
    _scenario(tmp_path, "cand-ok", 0.02, 0.03, 10, fires=False)


@need_tool("promtool", "Debian: apt-get install -y prometheus")[0]
def test_canary_worse_needs_candidate_traffic(tmp_path):
    _scenario(tmp_path, "cand-thin", 0.0, 0.8, 1, fires=False)  # 60 requests an hour < 100


def test_the_alert_reads_both_windows_and_the_traffic_guard():
    expr = canary_worse_expr()
    assert "rate1h" in expr and "rate5m" in expr and "increase1h" in expr and "unless on(model)" in expr
