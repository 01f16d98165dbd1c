"""Replica autoscaling on in-flight load and the queue: config defaults and errors, the
ScaledObject and its PromQL, the HPA's arithmetic on it, the plan."""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import shutil
import subprocess

import kubernetes_validate
import pytest
import yaml

from infra.catalog import versions
from infra.config import NS, load_config, load_stack_file
from infra.errors import ConfigError
from infra.render.autoscaling import (
    RUNNING_HEADROOM,
    ScalingSpec,
    hpa_behavior,
    in_flight_query,
    queue_query,
    render_keda_values,
    render_scaled_object,
    scale_up_policy,
)
from infra.render.model_service import deployment_ignore_changes, max_unavailable, render_deployment
from infra.render.observability import prometheus_url
from infra.render.slo_rules import ObservedModel
from infra.stack_plan import plan_stack, running_target, scaling_spec
from tests.conftest import ROOT, apply, need_tool, plan_of, stack_values
from tests.render.test_model_service import make_spec
from tests.render.test_slo_rules import EXTERNAL_METRICS, metric_names

K8S = "1.33.0"
MODEL = ObservedModel(
    "qwen3-235b", "qwen3-235b", "inference", 2000, 50, 4, 4, 2.0, deployment="qwen3-235b-engine"
)
SPEC = ScalingSpec(
    model=MODEL,
    deployment="qwen3-235b-engine",
    min_replicas=4,
    max_replicas=12,
    replicas_per_node=2,
    running_per_replica=117,  # prod qwen3-235b: floor(0.8 × 146.5 running per replica)
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
        (
            lambda v: _model(v).update(autoscaling={"target_running_per_replica": 0}),
            "models[0].autoscaling.target_running_per_replica",
            "0",
        ),
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


def test_scaled_object_spans_the_pool_and_scales_on_in_flight_load_then_the_queue():
    obj = render_scaled_object(SPEC)
    assert (obj["apiVersion"], obj["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    spec = obj["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "qwen3-235b-engine"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (4, 12)
    in_flight, queue = spec["triggers"]
    for trigger in (in_flight, queue):
        assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
        meta = trigger["metadata"]
        assert meta["serverAddress"] == prometheus_url()
        assert meta["ignoreNullValues"] == "false"
        assert all(isinstance(v, str) for v in meta.values())  # KEDA trigger metadata is map[string]string
        assert 'model_name="qwen3-235b"' in meta["query"] and 'namespace="inference"' in meta["query"]
    assert in_flight["metadata"]["query"] == in_flight_query(MODEL)
    assert in_flight["metadata"]["threshold"] == "117"
    assert queue["metadata"]["query"] == queue_query(MODEL)
    assert queue["metadata"]["threshold"] == "4"


def test_non_positive_targets_are_refused():
    with pytest.raises(ValueError, match="targets must be > 0"):
        render_scaled_object(dataclasses.replace(SPEC, running_per_replica=0))


def test_queue_query_parses_and_uses_only_known_metrics():
    assert metric_names(queue_query(MODEL)) == {"vllm:num_requests_waiting"}
    assert metric_names(queue_query(MODEL)) <= EXTERNAL_METRICS.keys()
    assert metric_names(in_flight_query(MODEL)) == {"vllm:num_requests_running", "vllm:num_requests_waiting"}


# --- the queries, evaluated by Prometheus' promtool ---------------------------------------------------

PROMTOOL = shutil.which("promtool")
needs_promtool = apply(need_tool("promtool", "Debian: apt-get install -y prometheus"))
VLLM_LABELS = 'model_name="qwen3-235b", namespace="inference", component="vllm"'


def _series(name: str, pod: str, value: float, labels: str = VLLM_LABELS) -> dict:
    return {"series": f'{name}{{{labels}, pod="{pod}", engine="0"}}', "values": f"{value:g}x5"}


def _promql_case(series: list[dict], expr: str, value: float | None) -> dict:
    """The value `expr` must have at 2m over `series`; None: an empty result (KEDA then errors)."""
    samples = [] if value is None else [{"labels": "{}", "value": value}]
    return {"interval": "1m", "input_series": series, "promql_expr_test": [{"expr": expr, "eval_time": "2m", "exp_samples": samples}]}


def _promtool(tmp_path, cases: list[dict]) -> subprocess.CompletedProcess:
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump({"rule_files": [], "evaluation_interval": "1m", "tests": cases}, sort_keys=False, width=10_000))
    return subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)


@needs_promtool
def test_in_flight_query_sums_running_and_waiting_and_errors_without_vllm_series(tmp_path):
    run, wait = "vllm:num_requests_running", "vllm:num_requests_waiting"
    other = 'model_name="other", namespace="inference", component="vllm"'
    router = 'model_name="qwen3-235b", namespace="inference", component="router"'
    q = in_flight_query(MODEL)
    cases = [
        # two replicas: 100 + 120 running, 3 + 5 queued; other models and the router do not count
        _promql_case(
            [_series(run, "a", 100), _series(run, "b", 120), _series(wait, "a", 3), _series(wait, "b", 5),
             _series(run, "x", 999, other), _series(run, "r", 999, router)],
            q, 228,
        ),
        # a replica without a waiting series still counts its running requests
        _promql_case([_series(run, "a", 100), _series(run, "b", 120), _series(wait, "a", 3)], q, 223),
        # no waiting series at all: the running requests, not an empty result
        _promql_case([_series(run, "a", 100)], q, 100),
        # no vLLM series of this model: empty, so the trigger errors (ignoreNullValues false), never 0
        _promql_case([_series(run, "x", 5, other), {"series": 'up{job="x"}', "values": "1x5"}], q, None),
        _promql_case([{"series": 'up{job="x"}', "values": "1x5"}], queue_query(MODEL), None),
    ]
    result = _promtool(tmp_path, cases)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_case_can_fail(tmp_path):
    # a per-series sum drops a replica without a waiting series: the case above would catch it
    per_series = f"sum(vllm:num_requests_running{{{VLLM_LABELS}}} + vllm:num_requests_waiting{{{VLLM_LABELS}}})"
    series = [_series("vllm:num_requests_running", "a", 100), _series("vllm:num_requests_running", "b", 120),
              _series("vllm:num_requests_waiting", "a", 3)]
    assert _promtool(tmp_path, [_promql_case(series, per_series, 223)]).returncode != 0


# --- the HPA's arithmetic on the triggers -------------------------------------------------------------

HPA_TOLERANCE = 0.1  # kube-controller-manager --horizontal-pod-autoscaler-tolerance (default)


def hpa_desired(scaled_object: dict, current: int, per_replica: dict[str, float]) -> int:
    """The replica count the HPA converges to (after stabilisation) for KEDA's triggers.

    Kubernetes' replica calculator for an External metric with an AverageValue target
    (GetExternalPerPodMetricReplicas): total = the query's value; keep `current` while
    total / (target × current) is within the tolerance of 1, else ceil(total / target). The HPA
    takes the largest proposal over the triggers, clamped to min/max. Each query here is a sum of
    per-metric sums, so its value is Σ over the metrics it selects of per-replica value × current.
    """
    spec = scaled_object["spec"]
    proposals = []
    for trigger in spec["triggers"]:
        assert trigger["metricType"] == "AverageValue"
        target = float(trigger["metadata"]["threshold"])
        total = sum(per_replica.get(name, 0.0) * current for name in metric_names(trigger["metadata"]["query"]))
        ratio = total / (target * current)
        proposals.append(current if abs(1.0 - ratio) <= HPA_TOLERANCE else math.ceil(total / target))
    return min(max(max(proposals), spec["minReplicaCount"]), spec["maxReplicaCount"])


def _queue_only(obj: dict) -> dict:
    """The ScaledObject as it was before in-flight scaling: the queue trigger alone."""
    old = copy.deepcopy(obj)
    old["spec"]["triggers"] = [t for t in old["spec"]["triggers"] if t["metadata"]["query"] == queue_query(MODEL)]
    assert len(old["spec"]["triggers"]) == 1
    return old


def _load(running: float, waiting: float = 0.0) -> dict[str, float]:
    return {"vllm:num_requests_running": running, "vllm:num_requests_waiting": waiting}


def test_a_fleet_loaded_at_the_target_keeps_its_size_where_queue_only_scaling_shrank_it():
    obj = render_scaled_object(SPEC)
    target = SPEC.running_per_replica
    # 12 replicas each carrying the target with no queue (the SLO holds): stay at 12.
    assert hpa_desired(obj, 12, _load(target)) == 12
    assert hpa_desired(obj, 8, _load(target)) == 8
    # The bug: the queue alone wants ceil(0 / 4) replicas, i.e. the floor, from a loaded fleet...
    assert hpa_desired(_queue_only(obj), 12, _load(target)) == 4
    # ...and holding 12 took a standing queue of 4 per replica, 48 requests waiting.
    assert hpa_desired(_queue_only(obj), 12, _load(target, 4)) == 12


def test_in_flight_load_scales_up_before_the_queue_and_down_when_load_falls():
    obj = render_scaled_object(SPEC)
    target = SPEC.running_per_replica
    assert hpa_desired(obj, 8, _load(1.25 * target)) == 10  # scale-up with no queue yet
    assert hpa_desired(obj, 12, _load(0.5 * target)) == 6  # half the load, half the replicas
    assert hpa_desired(obj, 12, _load(0.05 * target)) == 4  # never below the floor
    assert hpa_desired(obj, 6, _load(0.5 * target, 10)) == 12  # a standing queue still adds (trigger 2)
    assert hpa_desired(obj, 12, _load(2 * target)) == 12  # never above the pool


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


def test_keda_runs_on_the_system_pool_and_reads_only_its_own_secrets():
    values = render_keda_values({"doks.digitalocean.com/node-pool": "system"})
    assert values["nodeSelector"] == {"doks.digitalocean.com/node-pool": "system"}
    # issue 30: the chart's default lets KEDA read every Secret in the cluster
    assert values["permissions"] == {"operator": {"restrict": {"secret": True}}, "metricServer": {"restrict": {"secret": True}}}


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


def _prod_facts(autoscaling: dict | None = None):
    values, secrets = stack_values("prod")
    if autoscaling is not None:
        _model(values)["autoscaling"] = autoscaling
    cfg = load_config(values, stack="prod", secret_keys=secrets, base_dir=ROOT)
    return cfg, plan_stack(cfg)


def test_prod_in_flight_target_is_the_headroom_share_of_the_planned_running_requests():
    plan = plan_of("prod")
    model = next(m for m in plan.models if m["name"] == "qwen3-235b")
    _, facts = _prod_facts()
    (facts_model,) = [m for m in facts.models if m.config.name == "qwen3-235b"]
    running = facts_model.plan.chosen.running_per_replica
    assert RUNNING_HEADROOM == 0.8
    expected = math.floor(0.8 * running)
    assert running_target(facts_model) == (expected, "plan")
    # the figure the plan's reason prints ("146 running per replica")
    printed = float(re.search(r"\((\d+) running per replica\)", model["reason"]).group(1))
    assert abs(expected - 0.8 * printed) <= 1
    assert model["replicas"]["autoscaling"] == {
        "target_running_per_replica": expected,
        "target_running_source": "plan",
        "waiting_per_replica": 4.0,
        "scale_down_delay_seconds": 1800,
        "scale_up": {"time_to_ready_seconds": model["time_to_ready"]["scale_up_seconds"], **scale_up_policy(
            model["time_to_ready"]["scale_up_seconds"], 4, 12, 2).to_json()},
    }
    from infra.commands.plan import render_summary

    assert f"replicas 4–12, autoscaled above {expected} requests in flight (from the plan) or 4 queued per replica" in render_summary(plan)
    (scaled,) = [r for r in plan.resources if r["type"] == "kubernetes:keda.sh/v1alpha1:ScaledObject"]
    in_flight, queue = scaled["inputs"]["spec"]["triggers"]
    assert in_flight["metadata"]["threshold"] == str(expected)
    assert metric_names(in_flight["metadata"]["query"]) == {"vllm:num_requests_running", "vllm:num_requests_waiting"}
    assert queue["metadata"]["threshold"] == "4"


def test_explicit_in_flight_target_overrides_the_plan():
    cfg, facts = _prod_facts({"target_running_per_replica": 90})
    model = facts.models[0]
    assert running_target(model) == (90, "config")
    in_flight, _ = render_scaled_object(scaling_spec(model))["spec"]["triggers"]
    assert in_flight["metadata"]["threshold"] == "90"
    assert facts.models_json()[0]["replicas"]["autoscaling"]["target_running_source"] == "config"


def test_in_flight_target_above_what_a_replica_can_run_is_refused():
    _, facts = _prod_facts()
    layout = facts.models[0].layout
    cap = layout.max_num_seqs * layout.dp  # vLLM's max_num_seqs is per engine (DP rank)
    assert running_target(_prod_facts({"target_running_per_replica": cap})[1].models[0]) == (cap, "config")
    with pytest.raises(ConfigError) as err:
        _prod_facts({"target_running_per_replica": cap + 1})
    message = str(err.value)
    assert NS + "models[0].autoscaling.target_running_per_replica" in message
    assert f"{cap + 1} is more than" in message and f"give 1..{cap}" in message
    assert f"max_num_seqs {layout.max_num_seqs}" in message
    assert "Traceback" not in message


def test_stacks_without_autoscaled_models_have_no_keda():
    for stack in ("dev", "staging"):
        types = {r["type"] for r in plan_of(stack).resources}
        assert "kubernetes:keda.sh/v1alpha1:ScaledObject" not in types
        assert not [r for r in plan_of(stack).resources if r["name"].endswith("-keda")]


# --- scale-up sized by the time-to-ready (issue 20) -----------------------------------------------


def test_a_fast_source_waits_out_spikes_and_adds_a_node_at_a_time():
    policy = scale_up_policy(1400, 4, 12, 2)
    assert policy.arrives_in_time and policy.pods_per_period == 2
    assert policy.stabilization_window_seconds == 210  # 10 % of the 2,200 s left in the hour


def test_a_slow_source_asks_for_more_at_once_with_a_shorter_window():
    fast, slow = scale_up_policy(1400, 4, 12, 2), scale_up_policy(3000, 4, 12, 2)
    assert slow.stabilization_window_seconds < fast.stabilization_window_seconds
    assert slow.pods_per_period > fast.pods_per_period
    assert slow.pods_per_period % 2 == 0  # whole nodes


def test_a_replica_slower_than_the_page_window_is_asked_for_in_one_step():
    policy = scale_up_policy(4000, 4, 12, 2)
    assert not policy.arrives_in_time
    assert (policy.stabilization_window_seconds, policy.pods_per_period) == (0, 8)


def test_the_behavior_carries_the_policy():
    up = hpa_behavior(dataclasses.replace(SPEC, time_to_ready_seconds=3000))["scaleUp"]
    policy = scale_up_policy(3000, 4, 12, 2)
    assert up["stabilizationWindowSeconds"] == policy.stabilization_window_seconds
    assert up["policies"] == [{"type": "Pods", "value": policy.pods_per_period, "periodSeconds": 300}]


def test_scaled_objects_validate_against_the_pinned_keda_field_list():
    from infra.render.autoscaling import LWS_TARGET
    from tests import gateway_schemas

    for target in (("apps/v1", "Deployment"), LWS_TARGET):
        obj = render_scaled_object(dataclasses.replace(SPEC, target=target))
        assert obj["spec"]["scaleTargetRef"] == {"apiVersion": target[0], "kind": target[1], "name": SPEC.deployment}
        assert gateway_schemas.errors(obj) == []
    assert gateway_schemas.fixture("ScaledObject")["source"]["tag"] == f"v{versions.KEDA_CHART_VERSION}"
    bad = render_scaled_object(SPEC)
    bad["spec"]["scaleTargetRef"]["group"] = "apps"  # not a field: apiVersion carries the group
    assert gateway_schemas.errors(bad)
