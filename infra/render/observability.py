"""Observability manifests as plain dicts: kube-prometheus-stack values, scrape monitors, rules,
dashboards (no Pulumi; `components/observability.py` turns these into resources).

Scrape contract with the other renderers:
- vLLM pods carry `app.kubernetes.io/name: vllm` and `inference-platform/model: <name>` and serve
  `/metrics` on the container port named `http` (8000).
- The one router's pods carry `app.kubernetes.io/name: router` (no model label: it serves all models);
  their vllm_router_* series come from the `metrics` port.
- The AMD device-metrics exporter serves `/metrics` on container port 5000. Its pod labels differ
  between installs (DOKS add-on in kube-system, the upstream Helm chart's
  `app: <release>-amdgpu-metrics-exporter`, the GPU operator's `app.kubernetes.io/name:
  metrics-exporter`), so its PodMonitor selects by port and container image instead of labels.
  The toolkit never deploys an exporter itself: in `doks-managed` and `device-plugin` mode it is
  the DOKS add-on (cluster flag `amd_gpu_device_metrics_exporter_plugin`, independent of the DOKS
  device plugin), in `gpu-operator` mode the operator's DeviceConfig.
- P/D models (infra/render/pd_service.py): the prefill and decode engines are vLLM pods like any
  other, with `inference-platform/pd-role: prefill|decode`, copied to the `pd_role` target label;
  each model's P/D router carries `app.kubernetes.io/name: vllm-pd-router` and the model label and
  serves vllm_router_* on its `metrics` port (a third PodMonitor, rendered only with P/D models).
The PodMonitors for our pods copy the model label to a `model` target label and the
`app.kubernetes.io/name` label to `component`; the recording rules rely on that.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from infra.catalog import versions
from infra.render.pd_rules import pd_alert_group, pd_recording_group
from infra.render.planner_rules import planner_alert_group, planner_recording_group
from infra.render.prefix_cache_rules import prefix_cache_alert_group, prefix_cache_group
from infra.render.rollout_rules import VARIANT_LABEL, RolloutObserved, render_rollout_rule_groups
from infra.render.slo_alerts import gpu_alert_group, serving_alert_group, slo_alert_group
from infra.render.slo_rules import (
    DEFAULT_THRESHOLDS,
    PD_ROLE_TARGET_LABEL,
    PD_ROUTER_COMPONENT,
    RUNBOOK_DEFAULT,
    AlertThresholds,
    ObservedModel,
    model_recording_group,
    pool_cost_group,
    slo_recording_group,
)

__all__ = [
    "ObservedModel",
    "AlertThresholds",
    "GpuRuntimeFacts",
    "MonitoringSettings",
    "DASHBOARD_DIR",
    "DASHBOARD_LABEL",
    "render_namespace",
    "render_kube_prometheus_stack_values",
    "render_pod_monitors",
    "render_rule_groups",
    "render_prometheus_rules",
    "render_dashboard_configmaps",
]

MONITORING_API = "monitoring.coreos.com/v1"
DASHBOARD_DIR = Path(__file__).resolve().parents[2] / "manifests" / "dashboards"
DASHBOARD_LABEL = "grafana_dashboard"  # the Grafana sidecar's default label key
GRAFANA_ADMIN_SECRET = "grafana-admin"
ALERT_WEBHOOK_SECRET = "alertmanager-webhook"  # key "url"; mounted by alertmanagerSpec.secrets
MANAGED_BY = {
    "app.kubernetes.io/managed-by": "inference-platform",
    "app.kubernetes.io/part-of": "observability",
}

# Where the ROCm device-metrics exporter runs for each GPU runtime mode.
EXPORTER_NAMESPACE_BY_MODE = {
    "doks-managed": "kube-system",  # DOKS cluster flag amd_gpu_device_metrics_exporter_plugin
    # The same DOKS add-on: its flag does not depend on the DOKS device plugin, so it stays on
    # while our own device-plugin DaemonSet replaces DOKS's plugin (components/cluster.py).
    "device-plugin": "kube-system",
    "gpu-operator": "kube-amd-gpu",  # the AMD GPU operator's DeviceConfig namespace
}
# Container images the exporter PodMonitor keeps: the DOKS add-on, the upstream chart and the
# GPU operator all run a `…/device-metrics-exporter:<tag>` image; the device plugin and labeller
# DaemonSets that share kube-system in `device-plugin` mode do not match.
EXPORTER_IMAGE_REGEX = ".*device-metrics-exporter.*"


@dataclass(frozen=True)
class GpuRuntimeFacts:
    """What the GPU runtime installed, as far as scraping is concerned.

    vendor: "amd" | "nvidia"; only AMD has an exporter wired here (NVIDIA DCGM is not).
    mode: the gpu_runtime mode; picks the exporter namespace unless exporter_namespace is given.
    metrics_exporter: whether the ROCm device-metrics exporter is installed at all.
    """

    vendor: str = "amd"
    mode: str = "doks-managed"
    metrics_exporter: bool = True
    exporter_namespace: str | None = None
    exporter_port: int = 5000

    @property
    def scrape_amd_exporter(self) -> bool:
        return self.vendor == "amd" and self.metrics_exporter

    @property
    def resolved_exporter_namespace(self) -> str:
        return self.exporter_namespace or EXPORTER_NAMESPACE_BY_MODE.get(self.mode, "kube-system")


@dataclass(frozen=True)
class MonitoringSettings:
    """The non-secret knobs of the monitoring stack.

    retention: Prometheus TSDB retention (Prometheus duration, e.g. "15d"); must cover the 3-day
        SLO window.
    storage_gib: size of Prometheus' do-block-storage volume.
    system_node_selector: where the stack's pods run (the system pool).
    alert_receiver: "none" | "webhook" | "slack"; the URL lives in the `alertmanager-webhook`
        Secret (key `url`) and never passes through here.
    alert_slack_channel: the Slack channel for alert_receiver "slack".
    runbook_url: base of the runbook links in alert annotations (anchors are appended).
    """

    namespace: str = "monitoring"
    retention: str = "15d"
    storage_gib: int = 100
    system_node_selector: dict[str, str] = field(default_factory=dict)
    alert_receiver: str = "none"
    alert_slack_channel: str | None = None
    runbook_url: str = RUNBOOK_DEFAULT
    scrape_interval: str = "15s"
    # vllm-router serves its own vllm_router_* series on --prometheus-port (container port
    # `metrics`); GET /metrics on its serving port is proxied to one engine (tests/e2e/test_router.py).
    router_metrics_port: str = "metrics"
    grafana_storage_gib: int = 0  # 0: dashboards come from ConfigMaps, no state worth a volume
    # The router's (and the gateway proxies') namespace; engines, P/D routers and pickers live in
    # their models' namespace (ObservedModel.namespace).
    front_door_namespace: str = "inference"
    # Whether a vllm-router runs (router.kind session/prefix/round-robin). Under kind service or
    # gateway there is none, and a `router` PodMonitor would watch pods that never exist.
    router_deployed: bool = True
    # The volumes' StorageClass: DigitalOcean block storage; None: the cluster's default class (an
    # existing cluster, which need not be DigitalOcean's).
    storage_class: str | None = "do-block-storage"
    # Node labels kube-state-metrics exports on kube_node_labels: the billed-cost rules count each
    # GPU pool's nodes by them (its DOKS pool label, or an existing cluster's pool selectors).
    node_label_allowlist: tuple[str, ...] = ("doks.digitalocean.com/node-pool",)


@dataclass(frozen=True)
class ObservabilitySpec:
    """Everything the monitoring component builds, except its two secrets (passed separately)."""

    name: str  # logical name
    settings: MonitoringSettings
    models: tuple[ObservedModel, ...]
    gpu: GpuRuntimeFacts
    thresholds: AlertThresholds = DEFAULT_THRESHOLDS
    chart_version: str = versions.KUBE_PROMETHEUS_STACK_CHART_VERSION
    rollouts: tuple[RolloutObserved, ...] = ()  # models with a candidate layout (models[].rollout)


def _meta(name: str, namespace: str | None = None, labels: dict | None = None) -> dict:
    meta: dict = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**MANAGED_BY, **(labels or {})}
    return meta


def render_namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name)}


# --- kube-prometheus-stack -------------------------------------------------------------------

HELM_RELEASE_NAME = "kps"  # short: the chart prefixes every object name with it


def prometheus_url(namespace: str = "monitoring", release: str = HELM_RELEASE_NAME) -> str:
    """In-cluster URL of the chart's Prometheus, for clients such as KEDA.

    The chart names its objects `<release>-kube-prometheus-stack` (the release name alone when it
    already contains the chart name), cut at 26 characters, and the Prometheus Service
    `<that>-prometheus` on port 9090.
    """
    chart = "kube-prometheus-stack"
    fullname = release if chart in release else f"{release}-{chart}"
    return f"http://{fullname[:26].rstrip('-')}-prometheus.{namespace}.svc:9090"


# DOKS manages the control plane outside the cluster: no kube-controller-manager, kube-scheduler or
# etcd pod exists to scrape. The chart's Services for them would select nothing (the plan's
# invariants refuse that) and its KubeControllerManagerDown / KubeSchedulerDown / etcd alerts would
# fire for ever; `enabled: false` drops the Services, ServiceMonitors and those rule groups.
MANAGED_CONTROL_PLANE_VALUES = {
    "kubeControllerManager": {"enabled": False},
    "kubeScheduler": {"enabled": False},
    "kubeEtcd": {"enabled": False},
}


# Every monitor the chart enables is a scrape the NetworkPolicies allow (issue 35: the chart's
# self-monitors of Prometheus, Alertmanager, their config reloaders, Grafana and the operator; the
# kubelet and cAdvisor, node-exporter and the API server through CiliumNetworkPolicies;
# kube-state-metrics and CoreDNS as pods) — except kube-proxy's: kube-proxy serves its metrics on
# 127.0.0.1:10249 (its `metricsBindAddress` default, which DOKS does not change), so no scrape from
# a Prometheus pod can reach it, under any policy, and the chart's KubeProxyDown would fire for ever.
UNREACHABLE_MONITOR_VALUES = {"kubeProxy": {"enabled": False}}


def render_kube_prometheus_stack_values(settings: MonitoringSettings) -> dict:
    """Helm values for kube-prometheus-stack.

    Secrets stay out: Grafana reads its admin password from the `grafana-admin` Secret
    (`grafana.admin.existingSecret`), Alertmanager reads the webhook URL from a mounted Secret file
    (`url_file`). The values are therefore safe to show in plans and diffs.
    """
    node_selector = dict(settings.system_node_selector)
    return {
        "crds": {"enabled": True},
        **MANAGED_CONTROL_PLANE_VALUES,
        **UNREACHABLE_MONITOR_VALUES,
        "prometheusOperator": {
            "nodeSelector": node_selector,
            "admissionWebhooks": {"patch": {"nodeSelector": node_selector}},
        },
        "prometheus": _prometheus_values(settings, node_selector),
        "alertmanager": _alertmanager_values(settings, node_selector),
        "grafana": _grafana_values(settings, node_selector),
        "kube-state-metrics": {
            "nodeSelector": node_selector,
            # kube_pod_labels / kube_node_labels only carry allow-listed labels. The readiness and
            # restart rules join on the two pod labels (as label_app_kubernetes_io_name,
            # label_inference_platform_model); the billed-cost rules count a GPU pool's nodes by
            # their DOKS pool label (label_doks_digitalocean_com_node_pool). The chart joins the
            # list with "," into --metric-labels-allowlist.
            "metricLabelsAllowlist": [
                "pods=[app.kubernetes.io/name,inference-platform/model]",
                f"nodes=[{','.join(settings.node_label_allowlist)}]",
            ],
        },
    }


def _alert_routing(settings: MonitoringSettings) -> tuple[dict, list[dict]]:
    """(route, receivers): every alert to the configured receiver (webhook or Slack, its URL read
    from a mounted Secret file), or to "null"; the always-firing Watchdog never notifies."""
    webhook_path = f"/etc/alertmanager/secrets/{ALERT_WEBHOOK_SECRET}/url"
    receivers: list[dict] = [{"name": "null"}]
    route: dict = {
        "receiver": "null",
        "group_by": ["alertname", "model", "namespace"],
        "group_wait": "30s",
        "group_interval": "5m",
        "repeat_interval": "4h",
        # The chart's Watchdog alert always fires by design (a heartbeat); never notify on it.
        "routes": [{"receiver": "null", "matchers": ['alertname = "Watchdog"']}],
    }
    if settings.alert_receiver == "webhook":
        receivers.append(
            {"name": "platform", "webhook_configs": [{"url_file": webhook_path, "send_resolved": True}]}
        )
    elif settings.alert_receiver == "slack":
        slack = {"api_url_file": webhook_path, "send_resolved": True}
        if settings.alert_slack_channel:
            slack["channel"] = settings.alert_slack_channel
        receivers.append({"name": "platform", "slack_configs": [slack]})
    elif settings.alert_receiver != "none":
        raise ValueError(f"unknown alert receiver kind {settings.alert_receiver!r}")
    if len(receivers) > 1:
        route["receiver"] = "platform"
    return route, receivers


def _prometheus_values(settings: MonitoringSettings, node_selector: dict) -> dict:
    """Prometheus: retention within its volume, every monitor and rule selected, on the system pool."""
    # Prometheus keeps ~15 % headroom below the volume so compaction never fills the disk.
    retention_size_gb = max(1, int(settings.storage_gib * 1.073741824 * 0.85))
    return {
        "prometheusSpec": {
            "retention": settings.retention,
            "retentionSize": f"{retention_size_gb}GB",
            "scrapeInterval": settings.scrape_interval,
            "nodeSelector": node_selector,
            # Select every PodMonitor/ServiceMonitor/PrometheusRule, not only the chart's own.
            "podMonitorSelectorNilUsesHelmValues": False,
            "serviceMonitorSelectorNilUsesHelmValues": False,
            "ruleSelectorNilUsesHelmValues": False,
            "storageSpec": {
                "volumeClaimTemplate": {
                    "spec": {
                        **({"storageClassName": settings.storage_class} if settings.storage_class else {}),
                        "accessModes": ["ReadWriteOnce"],  # DO block storage is RWO only
                        "resources": {"requests": {"storage": f"{settings.storage_gib}Gi"}},
                    }
                }
            },
        }
    }


def _alertmanager_values(settings: MonitoringSettings, node_selector: dict) -> dict:
    """Alertmanager: the receiver's Secret mounted, the route, and slow burns muted while a fast burn pages."""
    route, receivers = _alert_routing(settings)
    return {
        "alertmanagerSpec": {
            "nodeSelector": node_selector,
            **({"secrets": [ALERT_WEBHOOK_SECRET]} if settings.alert_receiver != "none" else {}),
        },
        "config": {
            "global": {"resolve_timeout": "5m"},
            "route": route,
            "receivers": receivers,
            # While a model's SLI pages (fast burn), its slow-burn ticket adds nothing. Scoped by
            # alert name: `equal` treats a label missing on both sides as equal, so a bare
            # severity rule would let any GPU page mute every warning without a model label.
            "inhibit_rules": [
                {
                    "source_matchers": [f'alertname = "Vllm{sli}SloFastBurn"'],
                    "target_matchers": [f'alertname = "Vllm{sli}SloSlowBurn"'],
                    "equal": ["model"],
                }
                for sli in ("Ttft", "Tpot")
            ],
        },
    }


def _grafana_values(settings: MonitoringSettings, node_selector: dict) -> dict:
    """Grafana: admin from a Secret, namespaced RBAC, dashboards and datasource from ConfigMaps."""
    return {
        "nodeSelector": node_selector,
        "admin": {
            "existingSecret": GRAFANA_ADMIN_SECRET,
            "userKey": "admin-user",
            "passwordKey": "admin-password",
        },
        # Least privilege (issue 30): the chart's defaults give Grafana a ClusterRole reading
        # ConfigMaps *and Secrets* in every namespace for its sidecars. Dashboards and the
        # datasource are ConfigMaps in this namespace: a namespaced Role, ConfigMaps only.
        "rbac": {"namespaced": True},
        "sidecar": {
            "dashboards": {"enabled": True, "label": DASHBOARD_LABEL, "labelValue": "1", "resource": "configmap"},
            "datasources": {"resource": "configmap"},
        },
        "persistence": (
            {
                "enabled": True,
                **({"storageClassName": settings.storage_class} if settings.storage_class else {}),
                "size": f"{settings.grafana_storage_gib}Gi",
            }
            if settings.grafana_storage_gib
            else {"enabled": False}
        ),
    }


# --- scrape monitors -------------------------------------------------------------------------


def _pod_label_relabelings() -> list[dict]:
    return [
        {
            "action": "replace",
            "sourceLabels": ["__meta_kubernetes_pod_label_inference_platform_model"],
            "targetLabel": "model",
        },
        {
            "action": "replace",
            "sourceLabels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name"],
            "targetLabel": "component",
        },
        {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"},
        # Absent on colocated engines (an empty value adds no label).
        {
            "action": "replace",
            "sourceLabels": ["__meta_kubernetes_pod_label_inference_platform_pd_role"],
            "targetLabel": PD_ROLE_TARGET_LABEL,
        },
        # A rollout's candidate engines carry inference-platform/variant: candidate; every other
        # engine is the current variant (labelling the current pods would restart them).
        {
            "action": "replace",
            "sourceLabels": ["__meta_kubernetes_pod_label_inference_platform_variant"],
            "regex": "(.+)",
            "targetLabel": VARIANT_LABEL,
        },
        {
            "action": "replace",
            "sourceLabels": ["__meta_kubernetes_pod_label_inference_platform_variant"],
            "regex": "",
            "replacement": "current",
            "targetLabel": VARIANT_LABEL,
        },
    ]


def _pod_monitor(name: str, namespace: str, spec: dict) -> dict:
    return {
        "apiVersion": MONITORING_API,
        "kind": "PodMonitor",
        "metadata": _meta(name, namespace),
        "spec": spec,
    }


def render_pod_monitors(
    models: Iterable[ObservedModel], gpu: GpuRuntimeFacts, settings: MonitoringSettings
) -> list[dict]:
    """PodMonitors for vLLM, the router, each P/D model's router and (AMD) the device-metrics exporter."""
    models = list(models)
    namespaces = sorted({m.namespace for m in models})
    monitors = []
    if namespaces:
        # The engines carry their model's label; the one router serves every model and carries none.
        selectors = {
            "vllm": {
                "matchLabels": {"app.kubernetes.io/name": "vllm"},
                "matchExpressions": [{"key": "inference-platform/model", "operator": "Exists"}],
            },
            "router": {"matchLabels": {"app.kubernetes.io/name": "router", "app.kubernetes.io/part-of": "inference-platform"}},
        }
        components = [("vllm", "http")]
        if settings.router_deployed:
            components.append(("router", settings.router_metrics_port))
        pd_namespaces = sorted({m.namespace for m in models if m.pd is not None})
        if pd_namespaces:
            selectors[PD_ROUTER_COMPONENT] = {
                "matchLabels": {"app.kubernetes.io/name": PD_ROUTER_COMPONENT},
                "matchExpressions": [{"key": "inference-platform/model", "operator": "Exists"}],
            }
            components.append((PD_ROUTER_COMPONENT, "metrics"))
        for component, port in components:
            monitors.append(
                _pod_monitor(
                    component,
                    settings.namespace,
                    {
                        "namespaceSelector": {
                            "matchNames": {PD_ROUTER_COMPONENT: pd_namespaces, "router": [settings.front_door_namespace]}.get(component, namespaces)
                        },
                        "selector": selectors[component],
                        "podMetricsEndpoints": [
                            {
                                "port": port,
                                "path": "/metrics",
                                "interval": settings.scrape_interval,
                                "relabelings": _pod_label_relabelings(),
                            }
                        ],
                    },
                )
            )
    if gpu.scrape_amd_exporter:
        monitors.append(
            _pod_monitor(
                "amd-device-metrics-exporter",
                settings.namespace,
                {
                    "namespaceSelector": {"matchNames": [gpu.resolved_exporter_namespace]},
                    "selector": {},  # every pod in the namespace; the image relabeling filters
                    "podMetricsEndpoints": [
                        {
                            "portNumber": gpu.exporter_port,
                            "path": "/metrics",
                            "interval": "30s",
                            # The exporter labels a GPU's series with the pod/namespace of the
                            # workload holding it; keep those instead of the exporter's own.
                            "honorLabels": True,
                            "relabelings": [
                                {
                                    "action": "keep",
                                    "sourceLabels": ["__meta_kubernetes_pod_container_image"],
                                    "regex": EXPORTER_IMAGE_REGEX,
                                },
                                {
                                    "action": "replace",
                                    "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                                    "targetLabel": "node",
                                },
                            ],
                        }
                    ],
                },
            )
        )
    return monitors


# --- rules -----------------------------------------------------------------------------------


def render_rule_groups(
    models: Iterable[ObservedModel],
    gpu: GpuRuntimeFacts,
    thresholds: AlertThresholds = DEFAULT_THRESHOLDS,
    runbook_url: str = RUNBOOK_DEFAULT,
    rollouts: tuple[RolloutObserved, ...] = (),
) -> dict[str, list[dict]]:
    """Every rule group, keyed by the PrometheusRule object that carries it."""
    models = list(models)
    out: dict[str, list[dict]] = {}
    for m in models:
        out[f"model-{m.name}"] = [model_recording_group(m), slo_recording_group(m), prefix_cache_group(m)]
        pd = pd_recording_group(m)
        if pd is not None:
            out[f"model-{m.name}"].append(pd)
        planner = planner_recording_group(m)
        if planner is not None:
            out[f"model-{m.name}"].append(planner)
    pools = pool_cost_group(models)
    if pools is not None:
        out["pools"] = [pools]
    alerts = [slo_alert_group(runbook_url), serving_alert_group(models, thresholds, runbook_url),
              prefix_cache_alert_group(models, runbook_url)]
    pd_alerts = pd_alert_group(models, base=thresholds, runbook_base=runbook_url)
    if pd_alerts is not None:
        alerts.append(pd_alerts)
    if gpu.scrape_amd_exporter:
        alerts.append(gpu_alert_group(thresholds, runbook_url))
    drift = planner_alert_group(models, runbook_url)
    if drift is not None:
        alerts.append(drift)
    out["alerts"] = alerts
    out.update(render_rollout_rule_groups(rollouts, runbook_url))
    return out


def render_prometheus_rules(
    models: Iterable[ObservedModel],
    gpu: GpuRuntimeFacts,
    settings: MonitoringSettings,
    thresholds: AlertThresholds = DEFAULT_THRESHOLDS,
    rollouts: tuple[RolloutObserved, ...] = (),
) -> list[dict]:
    """PrometheusRule objects: one per model (its recording rules), one with the GPU pools' cost
    (when a model's pool is priced) and one with all alerts."""
    return [
        {
            "apiVersion": MONITORING_API,
            "kind": "PrometheusRule",
            "metadata": _meta(f"inference-{name}", settings.namespace),
            "spec": {"groups": groups},
        }
        for name, groups in render_rule_groups(models, gpu, thresholds, settings.runbook_url, rollouts).items()
    ]


# --- dashboards ------------------------------------------------------------------------------


def dashboard_files(directory: Path = DASHBOARD_DIR) -> list[Path]:
    return sorted(directory.glob("*.json"))


def render_dashboard_configmaps(namespace: str, directory: Path = DASHBOARD_DIR) -> list[dict]:
    """One ConfigMap per dashboard JSON, labelled for the Grafana sidecar."""
    out = []
    for path in dashboard_files(directory):
        text = path.read_text()
        json.loads(text)  # a broken dashboard fails here, not silently in Grafana
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": _meta(f"dashboard-{path.stem}", namespace, {DASHBOARD_LABEL: "1"}),
                "data": {path.name: text},
            }
        )
    return out
