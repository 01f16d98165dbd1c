"""Observability: kube-prometheus-stack, scrape monitors, SLO rules and dashboards.

A thin Pulumi wrapper around the pure renderers in `infra.render.observability`: every manifest is
a dict built there, this module only declares resources and their order. The PodMonitors,
PrometheusRules and dashboards depend on the Helm release because the release installs the CRDs
(and the Grafana sidecar) they need.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.chart_source import chart_args
from components.custom_resources import custom_resource, qualified_name
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
from infra.render.secret_keys import with_keys

HELM_TIMEOUT_S = 900  # CRDs + admission-webhook hook jobs + a PVC on a fresh cluster


@dataclass(frozen=True)
class ObservabilityArgs:
    """The monitoring stack as planned, and its secrets.

    provider: the cluster's Kubernetes provider.
    grafana_admin_password: a Pulumi secret; lands only in a Kubernetes Secret.
    alert_webhook_url: a Pulumi secret, required unless `spec.settings.alert_receiver` is "none".
    """

    spec: ObservabilitySpec
    provider: k8s.Provider
    grafana_admin_password: pulumi.Input[str]
    alert_webhook_url: pulumi.Input[str] | None = None
    deleted_with: pulumi.Resource | None = None  # the cluster: skip per-object deletes on teardown


class Observability(pulumi.ComponentResource):
    """Prometheus, Alertmanager and Grafana with the platform's monitors, SLO rules and dashboards."""

    namespace: k8s.core.v1.Namespace
    grafana_admin: k8s.core.v1.Secret
    release: k8s.helm.v3.Release
    monitors: list[k8s.apiextensions.CustomResource]
    rules: list[k8s.apiextensions.CustomResource]
    dashboards: list[k8s.core.v1.ConfigMap]

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:observability:Observability", name, None, opts)
        spec = args.spec
        settings = spec.settings
        child = pulumi.ResourceOptions(parent=self, provider=args.provider, deleted_with=args.deleted_with)
        ns = settings.namespace

        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns", metadata=render_namespace(ns)["metadata"], opts=child
        )
        in_ns = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.namespace]))

        # Secrets first: the chart's pods mount them by name.
        self.grafana_admin = k8s.core.v1.Secret(
            f"{name}-grafana-admin",
            metadata=with_keys({"name": GRAFANA_ADMIN_SECRET, "namespace": ns}, ["admin-user", "admin-password"]),
            string_data={
                "admin-user": "admin",
                "admin-password": pulumi.Output.secret(args.grafana_admin_password),
            },
            opts=in_ns,
        )
        release_deps: list[pulumi.Resource] = [self.namespace, self.grafana_admin]
        if settings.alert_receiver != "none":
            if args.alert_webhook_url is None:
                raise ValueError(f"alert_receiver {settings.alert_receiver!r} needs alert_webhook_url")
            webhook = k8s.core.v1.Secret(
                f"{name}-alert-webhook",
                metadata=with_keys({"name": ALERT_WEBHOOK_SECRET, "namespace": ns}, ["url"]),
                string_data={"url": pulumi.Output.secret(args.alert_webhook_url)},
                opts=in_ns,
            )
            release_deps.append(webhook)

        self.release = k8s.helm.v3.Release(
            f"{name}-kube-prometheus-stack",
            k8s.helm.v3.ReleaseArgs(
                name=HELM_RELEASE_NAME,
                **chart_args(versions.KUBE_PROMETHEUS_STACK_CHART, spec.chart_version, versions.KUBE_PROMETHEUS_STACK_CHART_REPO),
                namespace=ns,
                values=render_kube_prometheus_stack_values(settings),
                timeout=HELM_TIMEOUT_S,
                atomic=False,  # keep a half-installed release inspectable instead of rolling back
            ),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=release_deps)),
        )

        after_release = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.release]))
        self.monitors = [
            self._custom_resource(name, obj, after_release)
            for obj in render_pod_monitors(list(spec.models), spec.gpu, settings)
        ]
        self.rules = [
            self._custom_resource(name, obj, after_release)
            for obj in render_prometheus_rules(list(spec.models), spec.gpu, settings, spec.thresholds, spec.rollouts)
        ]
        self.dashboards = [
            k8s.core.v1.ConfigMap(
                f"{name}-{obj['metadata']['name']}",
                metadata=obj["metadata"],
                data=obj["data"],
                opts=after_release,
            )
            for obj in render_dashboard_configmaps(ns)
        ]

        self.register_outputs(
            {
                "namespace": ns,
                "release_status": self.release.status,
                "monitors": [m.metadata["name"] for m in self.monitors],
                "rules": [r.metadata["name"] for r in self.rules],
            }
        )

    @staticmethod
    def _custom_resource(
        name: str, obj: dict, opts: pulumi.ResourceOptions
    ) -> k8s.apiextensions.CustomResource:
        return custom_resource(qualified_name(name, obj), obj, opts)
