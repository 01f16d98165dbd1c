"""Observability as planned and as declared under Pulumi mocks: order, secrets, chart pin, parents."""

from __future__ import annotations

from infra.catalog import versions
from infra.declare import Secrets
from infra.render.observability import GpuRuntimeFacts, MonitoringSettings, ObservabilitySpec, ObservedModel
from infra.resource_graph.values import SecretInput
from infra.stack_resources.observability import plan_observability
from tests.stack_resources.conftest import run_graph, with_cluster

GRAFANA_PASSWORD = "grafana-plaintext-pw-41c9"  # noqa: S105 - test fixture
WEBHOOK_URL = "https://hooks.example.test/T000/B000/secret-path-77"

RELEASE = "kubernetes:helm.sh/v3:Release"
SECRET = "kubernetes:core/v1:Secret"
NAMESPACE = "kubernetes:core/v1:Namespace"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
PODMONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
CLUSTER = "digitalocean:index/kubernetesCluster:KubernetesCluster"

MODELS = [
    ObservedModel("qwen3-235b", "qwen3-235b", "inference", 2000, 50, 4, 4, 3.2, deployment="qwen3-235b-engine")
]


def _run(receiver: str = "webhook", gpu: GpuRuntimeFacts | None = None):
    spec = ObservabilitySpec(
        name="obs",
        settings=MonitoringSettings(
            alert_receiver=receiver,
            system_node_selector={"doks.digitalocean.com/node-pool": "system"},
            retention="15d",
            storage_gib=200,
        ),
        models=tuple(MODELS),
        gpu=gpu or GpuRuntimeFacts(vendor="amd", mode="doks-managed"),
    )

    def build(b):
        _, cluster, provider = with_cluster(b)
        return plan_observability(
            b, spec, provider=provider, cluster=cluster, grafana_admin_password=SecretInput("grafana_admin_password"),
            alert_webhook_url=SecretInput("alert_webhook_url") if receiver != "none" else None, depends_on=[],
        )  # fmt: skip

    secrets = Secrets(grafana_admin_password=GRAFANA_PASSWORD, alert_webhook_url=WEBHOOK_URL if receiver != "none" else None)
    return run_graph(build, secrets=secrets).recording


def test_crd_consumers_wait_for_the_release():
    rec = _run()
    release = rec.one(RELEASE)
    consumers = rec.of_type(PODMONITOR) + rec.of_type(RULE) + rec.of_type(CONFIGMAP)
    assert len(rec.of_type(PODMONITOR)) == 3  # vllm, router, amd exporter
    assert len(rec.of_type(RULE)) == 2  # one model + alerts
    assert len(rec.of_type(CONFIGMAP)) == 4  # four dashboards
    for r in consumers:
        assert release.urn in r.dependencies, r.name


def test_release_is_pinned_and_waits_for_namespace_and_secrets():
    rec = _run()
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
    rec = _run()
    assert not rec.plain_text_contains(GRAFANA_PASSWORD)
    assert not rec.plain_text_contains(WEBHOOK_URL)
    assert GRAFANA_PASSWORD in rec.wire_text() and WEBHOOK_URL in rec.wire_text()


def test_no_receiver_no_webhook_secret():
    rec = _run(receiver="none")
    assert [s.inputs["metadata"]["name"] for s in rec.of_type(SECRET)] == ["grafana-admin"]
    assert "secrets" not in rec.one(RELEASE).inputs["values"]["alertmanager"]["alertmanagerSpec"]


def test_every_child_is_parented_and_uses_the_cluster_provider():
    rec = _run()
    group = rec.one("inference-platform:observability:Observability")
    provider = rec.one("pulumi:providers:kubernetes")
    cluster = rec.one(CLUSTER)
    children = [r for r in rec.registrations if r.type.startswith("kubernetes:")]
    assert len(children) == 13  # 12 + the planner-accuracy dashboard
    for r in children:
        assert r.parent == group.urn, r.name
        assert r.provider_urn == provider.urn, r.name
        assert r.deleted_with == cluster.urn, r.name


def test_nvidia_has_no_amd_exporter_monitor():
    rec = _run(gpu=GpuRuntimeFacts(vendor="nvidia"))
    assert {r.inputs["metadata"]["name"] for r in rec.of_type(PODMONITOR)} == {"vllm", "router"}
