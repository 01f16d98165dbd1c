"""The Observability component under Pulumi mocks: order, secrets, chart pin, parents."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.observability import Observability, ObservabilityArgs
from infra.catalog import versions
from infra.mock_runtime import run_program
from infra.render.observability import GpuRuntimeFacts, MonitoringSettings, ObservabilitySpec, ObservedModel

GRAFANA_PASSWORD = "grafana-plaintext-pw-41c9"  # noqa: S105 - test fixture
WEBHOOK_URL = "https://hooks.example.test/T000/B000/secret-path-77"

RELEASE = "kubernetes:helm.sh/v3:Release"
SECRET = "kubernetes:core/v1:Secret"
NAMESPACE = "kubernetes:core/v1:Namespace"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
PODMONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"

MODELS = [
    ObservedModel("qwen3-235b", "qwen3-235b", "inference", 2000, 50, 4, 4, 3.2, deployment="qwen3-235b-engine")
]


def program(receiver: str = "webhook", gpu: GpuRuntimeFacts | None = None):
    def run():
        provider = k8s.Provider("cluster-k8s", kubeconfig="unused", cluster_identifier="c-1")
        cluster = k8s.core.v1.Namespace(
            "stand-in-for-the-cluster", opts=pulumi.ResourceOptions(provider=provider)
        )
        return Observability(
            "obs",
            ObservabilityArgs(
                spec=ObservabilitySpec(
                    name="obs",
                    settings=MonitoringSettings(
                        alert_receiver=receiver,
                        system_node_selector={"doks.digitalocean.com/node-pool": "system"},
                        retention="15d",
                        storage_gib=200,
                    ),
                    models=tuple(MODELS),
                    gpu=gpu or GpuRuntimeFacts(vendor="amd", mode="doks-managed"),
                ),
                provider=provider,
                grafana_admin_password=pulumi.Output.secret(GRAFANA_PASSWORD),
                alert_webhook_url=pulumi.Output.secret(WEBHOOK_URL) if receiver != "none" else None,
                deleted_with=cluster,
            ),
        )

    return run


def test_crd_consumers_wait_for_the_release():
    rec = run_program(program())
    release = rec.one(RELEASE)
    consumers = rec.of_type(PODMONITOR) + rec.of_type(RULE) + rec.of_type(CONFIGMAP)
    assert len(rec.of_type(PODMONITOR)) == 3  # vllm, router, amd exporter
    assert len(rec.of_type(RULE)) == 2  # one model + alerts
    assert len(rec.of_type(CONFIGMAP)) == 4  # four dashboards
    for r in consumers:
        assert release.urn in r.dependencies, r.name


def test_release_is_pinned_and_waits_for_namespace_and_secrets():
    rec = run_program(program())
    release = rec.one(RELEASE)
    assert release.inputs["chart"] == versions.KUBE_PROMETHEUS_STACK_CHART
    assert release.inputs["version"] == versions.KUBE_PROMETHEUS_STACK_CHART_VERSION
    assert release.inputs["repositoryOpts"]["repo"] == versions.KUBE_PROMETHEUS_STACK_CHART_REPO
    assert release.inputs["namespace"] == "monitoring"
    needed = {rec.one(NAMESPACE, "obs-ns").urn} | {s.urn for s in rec.of_type(SECRET)}
    assert len(needed) == 3 and needed <= set(release.dependencies)
    values = release.inputs["values"]
    assert values["prometheus"]["prometheusSpec"]["retention"] == "15d"
    assert values["grafana"]["admin"]["existingSecret"] == "grafana-admin"


def test_secrets_never_in_plain_text():
    rec = run_program(program())
    assert not rec.plain_text_contains(GRAFANA_PASSWORD)
    assert not rec.plain_text_contains(WEBHOOK_URL)
    assert GRAFANA_PASSWORD in rec.wire_text() and WEBHOOK_URL in rec.wire_text()


def test_no_receiver_no_webhook_secret():
    rec = run_program(program(receiver="none"))
    assert [s.inputs["metadata"]["name"] for s in rec.of_type(SECRET)] == ["grafana-admin"]
    assert "secrets" not in rec.one(RELEASE).inputs["values"]["alertmanager"]["alertmanagerSpec"]


def test_every_child_is_parented_and_uses_the_cluster_provider():
    rec = run_program(program())
    component = rec.one("inference-platform:observability:Observability")
    provider = rec.one("pulumi:providers:kubernetes")
    cluster = rec.one(NAMESPACE, "stand-in-for-the-cluster")
    children = [r for r in rec.registrations if r.type.startswith("kubernetes:") and r is not cluster]
    assert len(children) == 13  # 12 + the planner-accuracy dashboard
    for r in children:
        assert r.parent == component.urn, r.name
        assert r.provider_urn == provider.urn, r.name
        assert r.deleted_with == cluster.urn, r.name


def test_nvidia_has_no_amd_exporter_monitor():
    rec = run_program(program(gpu=GpuRuntimeFacts(vendor="nvidia")))
    assert {r.inputs["metadata"]["name"] for r in rec.of_type(PODMONITOR)} == {"vllm", "router"}
