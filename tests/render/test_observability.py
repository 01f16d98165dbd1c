"""Rendered observability manifests: Helm values, PodMonitors, dashboards, core-object schemas."""

from __future__ import annotations

import json
import re

import kubernetes_validate
import pytest
import yaml

from infra.durations import duration_days
from infra.render.observability import (
    DASHBOARD_DIR,
    DASHBOARD_LABEL,
    GpuRuntimeFacts,
    MonitoringSettings,
    ObservedModel,
    render_dashboard_configmaps,
    render_kube_prometheus_stack_values,
    render_namespace,
    render_pod_monitors,
)

K8S_VERSION = "1.33"
MODELS = [
    ObservedModel("qwen3-235b", "qwen3", "inference", 2000, 50, 4, 4, 3.2, deployment="qwen3-235b-engine"),
    ObservedModel("llama-8b", "llama", "small", 1000, 25, 1, 2, deployment="llama-8b-engine"),
]
SYSTEM = {"doks.digitalocean.com/node-pool": "system"}


def monitors(gpu: GpuRuntimeFacts | None = None, **settings) -> dict[str, dict]:
    rendered = render_pod_monitors(MODELS, gpu or GpuRuntimeFacts(), MonitoringSettings(**settings))
    return {m["metadata"]["name"]: m for m in rendered}


# --- core objects validate against the Kubernetes 1.33 schema ---------------------------------


def test_core_objects_validate_against_kubernetes_schema():
    objs = [render_namespace("monitoring"), *render_dashboard_configmaps("monitoring")]
    assert len(objs) == 5  # the namespace and four dashboards
    for obj in objs:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_schema_validation_is_not_a_no_op():
    bad = render_dashboard_configmaps("monitoring")[0]
    bad["data"] = {"x.json": {"not": "a string"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


# --- dashboards -------------------------------------------------------------------------------


def test_four_dashboards_with_the_sidecar_label_and_unique_uids():
    cms = render_dashboard_configmaps("monitoring")
    titles = set()
    uids = set()
    for cm in cms:
        assert cm["metadata"]["labels"][DASHBOARD_LABEL] == "1"
        ((name, text),) = cm["data"].items()
        board = json.loads(text)
        titles.add(board["title"])
        uids.add(board["uid"])
        assert len(text.encode()) < 900_000  # ConfigMaps are limited to 1 MiB
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids))
        for p in board["panels"]:
            assert p["datasource"]["uid"] == "${datasource}"  # works whatever the datasource uid
    assert titles == {"Inference SLOs", "GPU fleet", "Cost", "Planner: predicted vs measured"}
    assert len(uids) == 4


def test_slo_dashboard_draws_the_slo_lines():
    board = json.loads((DASHBOARD_DIR / "inference-slos.json").read_text())
    exprs = " ".join(t["expr"] for p in board["panels"] for t in p["targets"])
    assert "model:slo_ttft_p90_limit_seconds" in exprs and "model:slo_tpot_p90_limit_seconds" in exprs
    assert "model:vllm_goodput_requests_per_second:rate5m" in exprs


def test_broken_dashboard_json_is_refused(tmp_path):
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(json.JSONDecodeError):
        render_dashboard_configmaps("monitoring", tmp_path)


# --- kube-prometheus-stack values ---------------------------------------------------------------


def test_values_schedule_on_the_system_pool_and_size_the_volume():
    values = render_kube_prometheus_stack_values(
        MonitoringSettings(retention="30d", storage_gib=250, system_node_selector=SYSTEM)
    )
    spec = values["prometheus"]["prometheusSpec"]
    assert spec["retention"] == "30d"
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == "do-block-storage"
    assert claim["accessModes"] == ["ReadWriteOnce"]
    assert claim["resources"]["requests"]["storage"] == "250Gi"
    assert int(spec["retentionSize"].removesuffix("GB")) < 250 * 1.073741824  # GB below the GiB volume
    for path in (
        values["prometheusOperator"],
        values["alertmanager"]["alertmanagerSpec"],
        values["grafana"],
        values["kube-state-metrics"],
        spec,
        values["prometheusOperator"]["admissionWebhooks"]["patch"],
    ):
        assert path["nodeSelector"] == SYSTEM
    # our monitors and rules carry no `release` label: the selectors must take everything
    assert spec["podMonitorSelectorNilUsesHelmValues"] is False
    assert spec["ruleSelectorNilUsesHelmValues"] is False
    # the chart joins the list with "," into --metric-labels-allowlist=<resource>=[<label>,...],...
    assert values["kube-state-metrics"]["metricLabelsAllowlist"] == [
        "pods=[app.kubernetes.io/name,inference-platform/model]",
        "nodes=[doks.digitalocean.com/node-pool]",
    ]


def test_values_hold_no_secret_and_point_to_secret_files():
    values = render_kube_prometheus_stack_values(MonitoringSettings(alert_receiver="webhook"))
    text = yaml.safe_dump(values)
    assert "adminPassword" not in text and "password:" not in text
    webhook = values["alertmanager"]["config"]["receivers"][1]["webhook_configs"][0]
    assert webhook["url_file"] == "/etc/alertmanager/secrets/alertmanager-webhook/url"
    assert values["alertmanager"]["alertmanagerSpec"]["secrets"] == ["alertmanager-webhook"]
    assert values["alertmanager"]["config"]["route"]["receiver"] == "platform"


def test_slack_receiver_uses_the_channel():
    values = render_kube_prometheus_stack_values(
        MonitoringSettings(alert_receiver="slack", alert_slack_channel="#llm")
    )
    slack = values["alertmanager"]["config"]["receivers"][1]["slack_configs"][0]
    assert slack == {
        "api_url_file": "/etc/alertmanager/secrets/alertmanager-webhook/url",
        "send_resolved": True,
        "channel": "#llm",
    }


def test_no_receiver_routes_to_null():
    values = render_kube_prometheus_stack_values(MonitoringSettings())
    assert values["alertmanager"]["config"]["receivers"] == [{"name": "null"}]
    assert "secrets" not in values["alertmanager"]["alertmanagerSpec"]


@pytest.mark.parametrize("text, days", [("15d", 15), ("2w", 14), ("1w3d", 10), ("72h", 3), ("1y", 365)])
def test_prometheus_durations_parse(text, days):
    assert duration_days(text) == days


@pytest.mark.parametrize("text", ["15 days", "1.5d", "3d1w", "0d", "", "d", "15D"])
def test_malformed_durations_are_refused(text):
    with pytest.raises(ValueError, match="Prometheus duration|zero"):
        duration_days(text)


# --- PodMonitors (CRD monitoring.coreos.com/v1 PodMonitor, prometheus-operator v0.88) ---------

ENDPOINT_FIELDS = {
    "port",
    "portNumber",
    "path",
    "interval",
    "honorLabels",
    "relabelings",
    "metricRelabelings",
    "scheme",
    "scrapeTimeout",
}
RELABEL_ACTIONS = {
    "replace",
    "keep",
    "drop",
    "labelmap",
    "labeldrop",
    "labelkeep",
    "hashmod",
    "lowercase",
    "uppercase",
    "keepequal",
    "dropequal",
}


def test_pod_monitor_shape_matches_the_crd():
    for m in monitors().values():
        assert m["apiVersion"] == "monitoring.coreos.com/v1" and m["kind"] == "PodMonitor"
        assert m["metadata"]["namespace"] == "monitoring"
        assert set(m["spec"]) <= {
            "namespaceSelector",
            "selector",
            "podMetricsEndpoints",
            "jobLabel",
            "podTargetLabels",
        }
        assert "selector" in m["spec"]
        for ep in m["spec"]["podMetricsEndpoints"]:
            assert set(ep) <= ENDPOINT_FIELDS
            assert ("port" in ep) != ("portNumber" in ep)
            for r in ep.get("relabelings", []):
                assert r["action"] in RELABEL_ACTIONS
                assert set(r) <= {
                    "action",
                    "sourceLabels",
                    "targetLabel",
                    "regex",
                    "replacement",
                    "separator",
                }


def test_vllm_and_router_monitors_follow_the_label_contract():
    ms = monitors(router_metrics_port="metrics")
    vllm, router = ms["vllm"]["spec"], ms["router"]["spec"]
    assert vllm["namespaceSelector"] == {"matchNames": ["inference", "small"]}
    assert vllm["selector"]["matchLabels"] == {"app.kubernetes.io/name": "vllm"}
    assert router["selector"]["matchLabels"] == {"app.kubernetes.io/name": "router", "app.kubernetes.io/part-of": "inference-platform"}
    assert vllm["podMetricsEndpoints"][0]["port"] == "http"
    assert router["podMetricsEndpoints"][0]["port"] == "metrics"
    targets = {r["targetLabel"]: r["sourceLabels"][0] for r in vllm["podMetricsEndpoints"][0]["relabelings"]}
    # Prometheus sanitises `inference-platform/model` to this meta label; rules read `model`
    assert targets["model"] == "__meta_kubernetes_pod_label_inference_platform_model"
    assert targets["component"] == "__meta_kubernetes_pod_label_app_kubernetes_io_name"


@pytest.mark.parametrize(
    ("mode", "namespace"),
    [("doks-managed", "kube-system"), ("device-plugin", "kube-system"), ("gpu-operator", "kube-amd-gpu")],
)
def test_amd_exporter_monitor_selects_by_port_and_image(mode, namespace):
    spec = monitors(GpuRuntimeFacts(vendor="amd", mode=mode))["amd-device-metrics-exporter"]["spec"]
    assert spec["namespaceSelector"] == {"matchNames": [namespace]}
    ep = spec["podMetricsEndpoints"][0]
    assert ep["portNumber"] == 5000 and ep["path"] == "/metrics" and ep["honorLabels"] is True
    keep = [r for r in ep["relabelings"] if r["action"] == "keep"]
    assert keep and keep[0]["sourceLabels"] == ["__meta_kubernetes_pod_container_image"]
    for image in ("rocm/device-metrics-exporter:v1.5.2", "registry.example/amd/device-metrics-exporter:v1"):
        assert re.fullmatch(keep[0]["regex"], image)
    assert not re.fullmatch(keep[0]["regex"], "rocm/k8s-device-plugin:1.31.0.9")


def test_no_exporter_no_monitor():
    assert "amd-device-metrics-exporter" not in monitors(
        GpuRuntimeFacts(vendor="amd", metrics_exporter=False)
    )
    assert "amd-device-metrics-exporter" not in monitors(GpuRuntimeFacts(vendor="nvidia"))


def test_fast_burn_inhibits_only_the_same_slis_slow_burn():
    rules = render_kube_prometheus_stack_values(MonitoringSettings())["alertmanager"]["config"][
        "inhibit_rules"
    ]
    assert {(r["source_matchers"][0], r["target_matchers"][0]) for r in rules} == {
        ('alertname = "VllmTtftSloFastBurn"', 'alertname = "VllmTtftSloSlowBurn"'),
        ('alertname = "VllmTpotSloFastBurn"', 'alertname = "VllmTpotSloSlowBurn"'),
    }
    assert all(r["equal"] == ["model"] for r in rules)
