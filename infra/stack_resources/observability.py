"""Observability: kube-prometheus-stack, the scrape monitors, the SLO rules and the dashboards.

Every object comes from `infra.render.observability`. The PodMonitors, PrometheusRules and
dashboards wait for the Helm release, which installs their CRDs (and the Grafana sidecar); the
Secrets come first, because the chart's pods mount them by name.
"""

from __future__ import annotations

from typing import Any

from infra.catalog import versions
from infra.render.observability import (
    ALERT_WEBHOOK_SECRET,
    GRAFANA_ADMIN_SECRET,
    HELM_RELEASE_NAME,
    ObservabilitySpec,
    render_dashboard_configmaps,
    render_kube_prometheus_stack_values,
    render_namespace,
    render_pod_monitors,
    render_prometheus_rules,
)
from infra.resource_graph.graph import GraphBuilder
from infra.resource_graph.values import Ref
from infra.stack_resources.kube import chart_inputs, open_group

HELM_TIMEOUT_S = 900  # CRDs + admission-webhook hook jobs + a PVC on a fresh cluster


def _secret(name: str, namespace: str, string_data: dict[str, Any]) -> tuple[dict, dict]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}}, string_data


def plan_observability(b: GraphBuilder, spec: ObservabilitySpec, *, provider: str, cluster: str, grafana_admin_password: Any,
                       alert_webhook_url: Any, depends_on: list[str]) -> str:  # fmt: skip
    """Prometheus, Alertmanager and Grafana with the platform's monitors, rules and dashboards
    (the group's key). depends_on: what the group waits for (the engines it watches)."""
    settings = spec.settings
    ns = settings.namespace
    group = open_group(b, "inference-platform:observability:Observability", spec.name, provider=provider, deleted_with=cluster,
                       group_depends_on=depends_on)  # fmt: skip
    name = spec.name
    namespace = group.object(f"{name}-ns", render_namespace(ns))
    admin = group.secret(f"{name}-grafana-admin", *_secret(GRAFANA_ADMIN_SECRET, ns, {"admin-user": "admin", "admin-password": grafana_admin_password}),
                         depends_on=[namespace])  # fmt: skip
    release_deps = [namespace, admin]
    if settings.alert_receiver != "none":
        if alert_webhook_url is None:
            raise ValueError(f"alert_receiver {settings.alert_receiver!r} needs alert_webhook_url")
        release_deps.append(group.secret(f"{name}-alert-webhook", *_secret(ALERT_WEBHOOK_SECRET, ns, {"url": alert_webhook_url}),
                                         depends_on=[namespace]))  # fmt: skip
    release = group.release(f"{name}-kube-prometheus-stack", {
        "name": HELM_RELEASE_NAME,
        **chart_inputs(versions.KUBE_PROMETHEUS_STACK_CHART, spec.chart_version, versions.KUBE_PROMETHEUS_STACK_CHART_REPO),
        "namespace": ns, "values": render_kube_prometheus_stack_values(settings), "timeout": HELM_TIMEOUT_S,
        "atomic": False,  # keep a half-installed release inspectable instead of rolling back
    }, depends_on=release_deps, outputs=("status",))  # fmt: skip
    monitors = render_pod_monitors(list(spec.models), spec.gpu, settings)
    rules = render_prometheus_rules(list(spec.models), spec.gpu, settings, spec.thresholds, spec.rollouts)
    for obj in [*monitors, *rules]:
        group.object(f"{name}-{obj['kind'].lower()}-{obj['metadata']['name']}", obj, depends_on=[release])
    for obj in render_dashboard_configmaps(ns):
        group.object(f"{name}-{obj['metadata']['name']}", obj, depends_on=[release])
    b.set_group_outputs(group.key, {"namespace": ns, "release_status": Ref(release, "status"),
                                    "monitors": [m["metadata"]["name"] for m in monitors],
                                    "rules": [r["metadata"]["name"] for r in rules]})  # fmt: skip
    return group.key
