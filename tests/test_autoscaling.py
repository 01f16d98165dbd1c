"""Queue-driven replica autoscaling: config defaults and errors, the ScaledObject, the plan."""

from __future__ import annotations

import dataclasses

import kubernetes_validate
import pytest

from infra.catalog import versions
from infra.config import NS, load_config, load_stack_file
from infra.errors import ConfigError
from infra.render.autoscaling import (
    ScalingSpec,
    hpa_behavior,
    queue_query,
    render_keda_values,
    render_scaled_object,
)
from infra.render.model_service import deployment_ignore_changes, max_unavailable, render_deployment
from infra.render.observability import prometheus_url
from infra.render.slo_rules import ObservedModel
from tests.conftest import ROOT, plan_of, stack_values
from tests.test_model_service import make_spec
from tests.test_observability_rules import EXTERNAL_METRICS, metric_names

K8S = "1.33.0"
MODEL = ObservedModel("qwen3-235b", "qwen3-235b", "inference", 2000, 50, 4, 4, 2.0)
SPEC = ScalingSpec(
    model=MODEL,
    deployment="qwen3-235b-engine",
    min_replicas=4,
    max_replicas=12,
    replicas_per_node=2,
    waiting_per_replica=4.0,
    scale_down_delay_seconds=1800,
    prometheus_url=prometheus_url(),
)


# --- configuration --------------------------------------------------------------------------------


def test_defaults_follow_the_pool_and_observability():
    prod = {m.name: m.autoscaling.enabled for m in load_stack_file("prod", ROOT).models}
    assert prod == {"qwen3-235b": True, "qwen3-30b": False}  # autoscaling pool vs fixed pool
    for stack in ("dev", "staging"):
        assert not any(m.autoscaling.enabled for m in load_stack_file(stack, ROOT).models)


def test_default_is_off_without_observability():
    values, secrets = stack_values("prod")
    values[NS + "observability"] = {"enabled": False}
    cfg = load_config(values, stack="prod", secret_keys=secrets, base_dir=ROOT)
    assert not cfg.models[0].autoscaling.enabled


def _errors(mutate) -> str:
    values, secrets = stack_values("prod")
    mutate(values)
    with pytest.raises(ConfigError) as err:
        load_config(values, stack="prod", secret_keys=secrets, base_dir=ROOT)
    return str(err.value)


def _model(values, i=0) -> dict:
    return values[NS + "models"][i]


@pytest.mark.parametrize(
    ("mutate", "path", "needle"),
    [
        (
            lambda v: _model(v, 1).update(autoscaling={"enabled": True}),
            "models[1].autoscaling.enabled",
            "pool 'mi325x-small' to autoscale",
        ),
        (
            lambda v: (_model(v).update(autoscaling={"enabled": True}), v.__setitem__(NS + "observability", {"enabled": False})),
            "models[0].autoscaling.enabled",
            "needs observability",
        ),
        (
            lambda v: (
                _model(v).update(autoscaling={"enabled": True}, layout={"tp": 4, "ep": True, "replicas_per_node": 1}),
                _model(v, 1).update(pool="mi325x", layout={"tp": 4, "replicas_per_node": 1}),
            ),
            "models[0].autoscaling.enabled",
            "to itself",
        ),
        (lambda v: _model(v).update(autoscaling={"waiting_per_replica": 0}), "models[0].autoscaling.waiting_per_replica", "0"),
        (lambda v: _model(v).update(autoscaling={"scale_down_delay_seconds": 10}), "models[0].autoscaling.scale_down_delay_seconds", "10"),
        (lambda v: _model(v).update(autoscaling={"treshold": 3}), "models[0].autoscaling.treshold", "unknown key"),
    ],
)
def test_bad_autoscaling_config_names_the_key(mutate, path, needle):
    message = _errors(mutate)
    assert NS + path in message and needle in message
    assert "Traceback" not in message


# --- rendering ------------------------------------------------------------------------------------


def test_prometheus_url_follows_the_chart_naming():
    assert prometheus_url() == "http://kps-kube-prometheus-stack-prometheus.monitoring.svc:9090"
    assert prometheus_url("mon", "kube-prometheus-stack") == "http://kube-prometheus-stack-prometheus.mon.svc:9090"
    # the chart cuts its full name at 26 characters
    assert prometheus_url(release="monitoring-prod") == "http://monitoring-prod-kube-prome-prometheus.monitoring.svc:9090"
    # ... and drops a dash left at the cut
    assert prometheus_url(release="monitoring-prod-2026").startswith("http://monitoring-prod-2026-kube-prometheus.")


def test_scaled_object_spans_the_pool_and_scales_on_the_models_queue():
    obj = render_scaled_object(SPEC)
    assert (obj["apiVersion"], obj["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    spec = obj["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "qwen3-235b-engine"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (4, 12)
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    meta = trigger["metadata"]
    assert meta["serverAddress"] == prometheus_url()
    assert meta["threshold"] == "4" and meta["ignoreNullValues"] == "false"
    assert all(isinstance(v, str) for v in meta.values())  # KEDA trigger metadata is map[string]string
    assert 'model_name="qwen3-235b"' in meta["query"] and 'namespace="inference"' in meta["query"]


def test_queue_query_parses_and_uses_only_known_metrics():
    assert metric_names(queue_query(MODEL)) == {"vllm:num_requests_waiting"}
    assert metric_names(queue_query(MODEL)) <= EXTERNAL_METRICS.keys()


def test_behavior_is_a_valid_hpa_v2_behavior_and_is_slow_to_shrink():
    behavior = hpa_behavior(SPEC)
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "check", "namespace": "inference"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "qwen3-235b-engine"},
            "minReplicas": 4,
            "maxReplicas": 12,
            "behavior": behavior,
        },
    }
    kubernetes_validate.validate(hpa, K8S, strict=True)
    assert behavior["scaleUp"]["policies"] == [{"type": "Pods", "value": 2, "periodSeconds": 300}]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 1800
    assert behavior["scaleDown"]["policies"][0]["value"] == 1


def test_empty_replica_range_is_refused():
    with pytest.raises(ValueError, match="replica range 3..2"):
        render_scaled_object(dataclasses.replace(SPEC, min_replicas=3, max_replicas=2))


def test_keda_runs_on_the_system_pool():
    assert render_keda_values({"doks.digitalocean.com/node-pool": "system"}) == {
        "nodeSelector": {"doks.digitalocean.com/node-pool": "system"}
    }


def test_autoscaled_deployment_starts_at_the_floor_and_then_leaves_the_count_to_keda():
    fixed_spec = make_spec(nodes_min=2, nodes_max=6)
    scaled_spec = make_spec(nodes_min=2, nodes_max=6, autoscaled=True)
    fixed, scaled = render_deployment(fixed_spec), render_deployment(scaled_spec)
    # Both declare the floor: a new model loads all its minimum replicas at once, and a model
    # switching to autoscaling never falls to Kubernetes' default of one replica.
    assert fixed["spec"]["replicas"] == scaled["spec"]["replicas"] == 4
    # ...but only the fixed one keeps it: the autoscaled count is ignored after creation.
    assert deployment_ignore_changes(scaled_spec) == ["spec.replicas"]
    assert deployment_ignore_changes(fixed_spec) == []
    # A fixed count is taken back from whoever scaled it (HPA before the switch, kubectl scale).
    assert fixed["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"
    assert "pulumi.com/patchForce" not in scaled["metadata"]["annotations"]
    kubernetes_validate.validate(scaled, K8S, strict=True)
    # rollouts are sized for the largest fleet the autoscaler may have built
    assert scaled["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == max_unavailable(12) == "25%"


# --- the plan ---------------------------------------------------------------------------------------


def test_prod_plan_installs_keda_once_and_waits_for_what_the_scaler_needs():
    plan = plan_of("prod")
    by_type = {}
    for r in plan.resources:
        by_type.setdefault(r["type"], []).append(r)
    (keda,) = [r for r in by_type["kubernetes:helm.sh/v3:Release"] if r["name"].endswith("-keda")]
    assert keda["inputs"]["chart"] == versions.KEDA_CHART and keda["inputs"]["version"] == versions.KEDA_CHART_VERSION
    assert keda["inputs"]["namespace"] == "keda" and keda["inputs"]["createNamespace"] is True
    assert keda["inputs"]["values"]["nodeSelector"] == {"doks.digitalocean.com/node-pool": "prod-doks-system"}
    assert "kubernetes:helm.sh/v3:Release::prod-observability-kube-prometheus-stack" in keda["options"]["dependsOn"]

    (scaled,) = by_type["kubernetes:keda.sh/v1alpha1:ScaledObject"]
    deps = scaled["options"]["dependsOn"]
    assert "kubernetes:helm.sh/v3:Release::prod-autoscaling-keda" in deps  # its CRD
    assert "kubernetes:apps/v1:Deployment::prod-model-qwen3-235b-engine" in deps  # its target
    assert scaled["inputs"]["spec"]["scaleTargetRef"]["name"] == "qwen3-235b-engine"
    assert scaled["options"]["provider"] == "pulumi:providers:kubernetes::prod-doks-k8s"


def test_stacks_without_autoscaled_models_have_no_keda():
    for stack in ("dev", "staging"):
        types = {r["type"] for r in plan_of(stack).resources}
        assert "kubernetes:keda.sh/v1alpha1:ScaledObject" not in types
        assert not [r for r in plan_of(stack).resources if r["name"].endswith("-keda")]
