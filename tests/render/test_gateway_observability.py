"""Gateway monitoring: PromQL parses, every metric name is one of the pinned versions' (or recorded
here), alerts link to runbook sections, promtool accepts the rules and the alerts fire when they
should."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml

from infra.catalog.epp import preset_weights
from infra.render.epp import PoolSpec
from infra.render.gateway import GatewaySpec
from infra.render.gateway_observability import (
    GATEWAY_METRICS,
    render_gateway_dashboard,
    render_gateway_pod_monitors,
    render_gateway_prometheus_rule,
    render_gateway_rule_groups,
)
from infra.render.observability import MonitoringSettings
from tests.conftest import ROOT, need_tool
from tests.render.test_slo_rules import grafana_expr_to_promql, metric_names

SPEC = GatewaySpec(
    name="t",
    pools=tuple(
        PoolSpec(model=m, served_model_name=f"org/{m}", scorers=tuple(preset_weights("prefix").items()), gateway_name="inference-gateway")
        for m in ("chat", "code")
    ),
)


def _exprs() -> list[tuple[str, str]]:
    out = [(r.get("record") or r["alert"], r["expr"]) for g in render_gateway_rule_groups(SPEC) for r in g["rules"]]
    board = render_gateway_dashboard(SPEC)
    out += [(p["title"], grafana_expr_to_promql(t["expr"])) for p in board["panels"] for t in p.get("targets", [])]
    return out


def test_every_query_parses_and_reads_known_metrics():
    recorded = {r["record"] for g in render_gateway_rule_groups(SPEC) for r in g["rules"] if "record" in r}
    for where, expr in _exprs():
        for name in metric_names(expr):
            assert name in GATEWAY_METRICS or name in recorded, (where, name)


def test_a_row_per_model_with_the_four_panels():
    panels = render_gateway_dashboard(SPEC)["panels"]
    rows = [p["title"] for p in panels if p["type"] == "row"]
    assert rows == ["chat (org/chat)", "code (org/code)", "Gateway"]
    titles = [p["title"] for p in panels if p["type"] != "row"]
    assert titles.count("Picks per engine") == 2 and titles.count("Prefix-hit share") == 2
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    json.dumps(render_gateway_dashboard(SPEC))


def test_alerts_link_to_runbook_sections():
    runbook = (ROOT / "docs" / "runbook.md").read_text()
    anchors = {h.strip().lower() for h in re.findall(r"^## (\S+)\s*$", runbook, flags=re.M)}
    alerts = [r for g in render_gateway_rule_groups(SPEC) for r in g["rules"] if "alert" in r]
    assert {a["alert"] for a in alerts} == {"EndpointPickerDown", "InferencePoolNoReadyEndpoints", "InferenceGatewayDown"}
    for a in alerts:
        assert a["annotations"]["runbook_url"].split("#", 1)[1] in anchors, a["alert"]


def test_monitors_select_the_pickers_and_proxies():
    epp, proxy = render_gateway_pod_monitors(SPEC, MonitoringSettings())
    assert epp["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "epp"}
    assert epp["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    (expr,) = proxy["spec"]["selector"]["matchExpressions"]
    assert expr["key"] == "gateway.networking.k8s.io/gateway-class-name" and expr["values"] == ["inference-platform"]


# --- promtool -----------------------------------------------------------------------------------

PROMTOOL = shutil.which("promtool")


def _needs_promtool(fn):
    for mark in need_tool("promtool", "Debian: apt-get install -y prometheus"):
        fn = mark(fn)
    return fn


@pytest.fixture
def rules_file(tmp_path):
    path = tmp_path / "gateway-rules.yaml"
    path.write_text(yaml.safe_dump(render_gateway_prometheus_rule(SPEC, MonitoringSettings())["spec"]))
    return path


@_needs_promtool
def test_promtool_checks_the_rules(rules_file):
    result = subprocess.run([PROMTOOL, "check", "rules", str(rules_file)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _series(name: str, labels: dict, values: str) -> dict:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


@_needs_promtool
def test_alerts_fire_when_the_picker_is_down_or_the_pool_is_empty(rules_file, tmp_path):
    """chat: picker scraped and its pool empty; code: picker target gone; gateway: up."""
    tests = {
        "rule_files": [str(rules_file)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    _series("up", {"model": "chat", "component": "epp", "job": "e"}, "1x20"),
                    _series("llm_d_epp_ready_endpoints", {"model": "chat", "component": "epp", "name": "chat"}, "0x20"),
                    _series("up", {"model": "code", "component": "epp", "job": "e"}, "0x20"),
                    _series("llm_d_epp_ready_endpoints", {"model": "code", "component": "epp", "name": "code"}, "2x20"),
                    _series("up", {"component": "gateway", "job": "g"}, "1x20"),
                ],
                "alert_rule_test": [
                    {"eval_time": "10m", "alertname": "InferencePoolNoReadyEndpoints", "exp_alerts": [
                        {"exp_labels": {"severity": "critical", "model": "chat"},
                         "exp_annotations": {"summary": "chat: no ready engine in its InferencePool",
                                             "description": "The InferencePool chat has had no ready vLLM engine for 5 minutes: every request for org/chat fails at the gateway.",
                                             "runbook_url": "docs/runbook.md#inferencepoolnoreadyendpoints"}}]},
                    {"eval_time": "10m", "alertname": "EndpointPickerDown", "exp_alerts": [
                        {"exp_labels": {"severity": "critical", "model": "code"},
                         "exp_annotations": {"summary": "code: endpoint picker down",
                                             "description": "The endpoint picker of code (code-epp) has not been scraped for 3 minutes. With failure mode FailOpen the gateway forwards the model's requests without scoring.",
                                             "runbook_url": "docs/runbook.md#endpointpickerdown"}}]},
                    {"eval_time": "10m", "alertname": "InferenceGatewayDown", "exp_alerts": []},
                ],
            }
        ],
    }  # fmt: skip
    path = tmp_path / "gateway-tests.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    result = subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
