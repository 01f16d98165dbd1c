"""Monitoring of `router.kind: gateway`: PodMonitors, recording rules, alerts and a dashboard.

Metric names are those of the pinned versions (infra/catalog/versions.py), checked in source:
- the endpoint picker (llm-d/llm-d-router @ v0.10.0, pkg/epp/metrics/llm_d_router_metrics.go,
  subsystem `llm_d_epp`; the `inference_*` names are deprecated duplicates and not used here):
  `llm_d_epp_request_total{model_name,target_model_name}`,
  `llm_d_epp_scheduler_e2e_duration_seconds` (histogram, no labels),
  `llm_d_epp_scheduler_attempts_total{status,target_model_name,endpoint_name,namespace,port}`
  (one per pick, the chosen engine pod in `endpoint_name`; metrics.go `RecordSchedulerAttempt`),
  `llm_d_epp_ready_endpoints{name}` (the pool's ready engines), and
  `llm_d_epp_prefix_indexer_hit_ratio` (histogram of matched/total prompt prefix,
  pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/metrics.go);
- the gateway proxy (agentgateway/agentgateway @ v1.4.1, crates/agentgateway/src/telemetry/
  metrics.rs, registry prefix `agentgateway` in crates/core/src/metrics.rs):
  `agentgateway_requests_total{gateway,route,status,...}` on the proxy pods' `metrics` port.

Each model has its own endpoint picker, so the scrape's `model` label (from the EPP pod's
`inference-platform/model` label, as for vLLM) says which model a series belongs to.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from infra.render.epp import EPP_APP, PoolSpec
from infra.render.gateway import GATEWAY_CLASS, GatewaySpec
from infra.render.model_service import LABEL_MODEL
from infra.render.observability import DASHBOARD_LABEL, MANAGED_BY, MONITORING_API, MonitoringSettings
from infra.render.slo_rules import RUNBOOK_DEFAULT, quoted

EPP_METRICS_PORT_NAME = "metrics"
PROXY_METRICS_PORT_NAME = "metrics"  # the proxy pods' port 15020 (chart templates/monitoring.yaml)
GATEWAY_CLASS_LABEL = "gateway.networking.k8s.io/gateway-class-name"

# Every metric the gateway's rules and dashboard read, with where it was confirmed.
EPP_SOURCE = "llm-d/llm-d-router v0.10.0 pkg/epp/metrics/llm_d_router_metrics.go"
PREFIX_SOURCE = "llm-d/llm-d-router v0.10.0 pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/metrics.go"
AGW_SOURCE = "agentgateway/agentgateway v1.4.1 crates/agentgateway/src/telemetry/metrics.rs (counter: _total)"
GATEWAY_METRICS: dict[str, str] = {
    "llm_d_epp_request_total": EPP_SOURCE,
    "llm_d_epp_request_error_total": EPP_SOURCE,
    "llm_d_epp_scheduler_e2e_duration_seconds_bucket": EPP_SOURCE,
    "llm_d_epp_scheduler_attempts_total": EPP_SOURCE,
    "llm_d_epp_ready_endpoints": EPP_SOURCE,
    "llm_d_epp_prefix_indexer_hit_ratio_sum": PREFIX_SOURCE,
    "llm_d_epp_prefix_indexer_hit_ratio_count": PREFIX_SOURCE,
    "agentgateway_requests_total": AGW_SOURCE,
    "up": "Prometheus: synthetic per-target series",
}

DASHBOARD_NAME = "inference-gateway"


def _meta(name: str, namespace: str, labels: dict | None = None) -> dict:
    return {"name": name, "namespace": namespace, "labels": {**MANAGED_BY, **(labels or {})}}


def render_gateway_pod_monitors(spec: GatewaySpec, settings: MonitoringSettings) -> list[dict]:
    """The endpoint pickers (every model's, one monitor) and the gateway proxies."""
    relabel = [
        {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_label_inference_platform_model"], "targetLabel": "model"},
        {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name"], "targetLabel": "component"},
        {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"},
    ]
    epp = {
        "namespaceSelector": {"matchNames": sorted({p.namespace for p in spec.pools}) or [spec.namespace]},
        "selector": {
            "matchLabels": {"app.kubernetes.io/name": EPP_APP},
            "matchExpressions": [{"key": LABEL_MODEL, "operator": "Exists"}],
        },
        "podMetricsEndpoints": [
            {"port": EPP_METRICS_PORT_NAME, "path": "/metrics", "interval": settings.scrape_interval, "relabelings": relabel}
        ],
    }
    proxy = {
        "namespaceSelector": {"matchNames": [spec.namespace]},
        "selector": {"matchExpressions": [{"key": GATEWAY_CLASS_LABEL, "operator": "In", "values": [GATEWAY_CLASS]}]},
        "podMetricsEndpoints": [
            {
                "port": PROXY_METRICS_PORT_NAME,
                "path": "/metrics",
                "interval": settings.scrape_interval,
                "relabelings": [
                    {"action": "replace", "replacement": "gateway", "targetLabel": "component"},
                    {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"},
                ],
            }
        ],
    }
    return [
        {"apiVersion": MONITORING_API, "kind": "PodMonitor", "metadata": _meta("endpoint-picker", settings.namespace), "spec": epp},
        {"apiVersion": MONITORING_API, "kind": "PodMonitor", "metadata": _meta("inference-gateway", settings.namespace), "spec": proxy},
    ]


# --- rules -------------------------------------------------------------------------------------


def _sel(pool: PoolSpec, *extra: str) -> str:
    return "{" + ", ".join([f"model={quoted(pool.model)}", 'component="epp"', *extra]) + "}"


def pool_recording_group(pool: PoolSpec) -> dict:
    """One model's endpoint-picker series, recorded with its `model` label."""
    s = _sel(pool)
    success = _sel(pool, 'status="success"')
    labels = {"model": pool.model}
    rules = [
        ("model:epp_requests:rate5m", f"sum(rate(llm_d_epp_request_total{s}[5m]))"),
        ("model:epp_request_errors:rate5m", f"sum(rate(llm_d_epp_request_error_total{s}[5m]))"),
        (
            "model:epp_scheduling_seconds:p90",
            f"histogram_quantile(0.9, sum by (le) (rate(llm_d_epp_scheduler_e2e_duration_seconds_bucket{s}[5m])))",
        ),
        (
            "model:epp_picks:rate5m",
            f"sum by (endpoint_name) (rate(llm_d_epp_scheduler_attempts_total{success}[5m]))",
        ),
        (
            "model:epp_prefix_hit_ratio:avg5m",
            f"sum(rate(llm_d_epp_prefix_indexer_hit_ratio_sum{s}[5m])) / sum(rate(llm_d_epp_prefix_indexer_hit_ratio_count{s}[5m]))",
        ),
        ("model:epp_ready_endpoints:max", f"max(llm_d_epp_ready_endpoints{s})"),
        ("model:epp_up:max", f"max(up{s})"),
    ]
    return {
        "name": f"inference-platform.gateway.{pool.model}",
        "rules": [{"record": record, "expr": expr, "labels": labels} for record, expr in rules],
    }


def _alert(name: str, expr: str, for_: str, summary: str, description: str, runbook: str, severity: str = "critical") -> dict:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "description": description, "runbook_url": f"{runbook}#{name.lower()}"},
    }


def gateway_alert_group(pools: Iterable[PoolSpec], runbook: str = RUNBOOK_DEFAULT) -> dict:
    """The endpoint picker down, a pool with no ready engine, the gateway proxies down."""
    rules = []
    for pool in pools:
        m = quoted(pool.model)
        rules.append(
            _alert(
                "EndpointPickerDown",
                # absent: the picker's pod is gone (no target at all), not only failing its scrape.
                f'(max(up{{model={m}, component="epp"}}) or on() vector(0)) == 0',
                "3m",
                f"{pool.model}: endpoint picker down",
                f"The endpoint picker of {pool.model} ({pool.epp_name}) has not been scraped for 3 minutes. With failure "
                f"mode {pool.failure_mode} the gateway "
                + ("forwards the model's requests without scoring." if pool.failure_mode == "FailOpen" else "rejects the model's requests."),
                runbook,
            )
            | {"labels": {"severity": "critical", "model": pool.model}}
        )
        rules.append(
            _alert(
                "InferencePoolNoReadyEndpoints",
                f'max(llm_d_epp_ready_endpoints{{model={m}, component="epp"}}) == 0',
                "5m",
                f"{pool.model}: no ready engine in its InferencePool",
                f"The InferencePool {pool.name} has had no ready vLLM engine for 5 minutes: every request for "
                f"{pool.served_model_name} fails at the gateway.",
                runbook,
            )
            | {"labels": {"severity": "critical", "model": pool.model}}
        )
    rules.append(
        _alert(
            "InferenceGatewayDown",
            '(max(up{component="gateway"}) or on() vector(0)) == 0',
            "3m",
            "inference gateway down",
            "No gateway proxy pod has been scraped for 3 minutes: every model's endpoint is unreachable.",
            runbook,
        )
    )
    return {"name": "inference-platform.alerts.gateway", "rules": rules}


def render_gateway_rule_groups(spec: GatewaySpec, runbook: str = RUNBOOK_DEFAULT) -> list[dict]:
    return [*(pool_recording_group(p) for p in spec.pools), gateway_alert_group(spec.pools, runbook)]


def render_gateway_prometheus_rule(spec: GatewaySpec, settings: MonitoringSettings) -> dict:
    return {
        "apiVersion": MONITORING_API,
        "kind": "PrometheusRule",
        "metadata": _meta("inference-gateway", settings.namespace),
        "spec": {"groups": render_gateway_rule_groups(spec, settings.runbook_url)},
    }


# --- dashboard -----------------------------------------------------------------------------------

_DS = {"type": "prometheus", "uid": "${datasource}"}


def _panel(pid: int, title: str, expr: str, legend: str, unit: str, x: int, y: int, description: str) -> dict:
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": _DS,
        "gridPos": {"x": x, "y": y, "w": 6, "h": 8},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"datasource": _DS, "expr": expr, "legendFormat": legend, "refId": "A"}],
    }


def render_gateway_dashboard(spec: GatewaySpec) -> dict:
    """One row per model (request rate, scheduling latency, picks per engine, prefix-hit share),
    then the gateway's own requests by status."""
    panels: list[dict] = []
    pid = 1
    y = 0
    for pool in spec.pools:
        m = quoted(pool.model)
        panels.append({"id": pid, "type": "row", "title": f"{pool.model} ({pool.served_model_name})", "collapsed": False,
                       "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})
        pid += 1
        y += 1
        for x, (title, expr, legend, unit, why) in enumerate(
            (
                ("Requests", f"model:epp_requests:rate5m{{model={m}}}", "req/s", "reqps", "Requests the endpoint picker scheduled per second."),
                ("Scheduling latency p90", f"model:epp_scheduling_seconds:p90{{model={m}}}", "p90", "s", "Time the picker takes to choose an engine."),
                ("Picks per engine", f"model:epp_picks:rate5m{{model={m}}}", "{{endpoint_name}}", "reqps", "Requests sent to each engine pod: a skew is prefix or session affinity at work."),
                ("Prefix-hit share", f"model:epp_prefix_hit_ratio:avg5m{{model={m}}}", "hit share", "percentunit", "Average share of a prompt's prefix the picker found cached on the engine it chose."),
            )
        ):
            panels.append(_panel(pid, title, expr, legend, unit, 6 * x, y, why))
            pid += 1
        y += 8
    panels.append({"id": pid, "type": "row", "title": "Gateway", "collapsed": False, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})
    pid += 1
    panels.append(
        _panel(pid, "Gateway requests by status", 'sum by (status) (rate(agentgateway_requests_total{component="gateway"}[5m]))',
               "{{status}}", "reqps", 0, y + 1, "Every request the gateway proxies answered, by HTTP status (401: API key refused).")
        | {"gridPos": {"x": 0, "y": y + 1, "w": 24, "h": 8}}
    )
    return {
        "uid": DASHBOARD_NAME,
        "title": "Inference gateway",
        "description": "router.kind gateway: per model, the endpoint picker's requests, scheduling latency, picks per engine and prefix-cache hit share; the gateway's requests by status.",
        "tags": ["inference-platform", "gateway"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": False,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [{"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus", "current": {}, "hide": 0}]},
        "annotations": {"list": []},
        "panels": panels,
    }


def render_gateway_dashboard_configmap(spec: GatewaySpec, settings: MonitoringSettings) -> dict:
    text = json.dumps(render_gateway_dashboard(spec), indent=1, sort_keys=True)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(f"dashboard-{DASHBOARD_NAME}", settings.namespace, {DASHBOARD_LABEL: "1"}),
        "data": {f"{DASHBOARD_NAME}.json": text},
    }
