"""Replica autoscaling on in-flight load and the queue: KEDA's Helm values and one ScaledObject per model.

Why in-flight load: for an `AverageValue` trigger the HPA computes `desired = ceil(total / target)`,
independent of the current replica count, so the metric must be one a loaded fleet keeps high. The
primary trigger is the requests a model has in flight (`vllm:num_requests_running` plus
`vllm:num_requests_waiting`) against `running_per_replica`: the concurrency one replica carries at
the planner's SLO goodput times RUNNING_HEADROOM, so a fleet holds its size at steady load and
grows before the SLO is at risk. Scaling on the queue alone is wrong: a fleet that keeps up has
almost no queue, so `ceil(queued / waiting_per_replica)` falls to the floor and the HPA removes
replicas from a loaded fleet until a queue of `waiting_per_replica` × replicas builds up, which is
what breaks TTFT. The queue stays as the second trigger (the HPA takes the larger of the two): a
sustained queue is the earliest sign of missing capacity when the plan's figure is optimistic.

Scale-up is sized by the time a new replica takes to serve (`time_to_ready_seconds`: node
provisioning, image pull and the model load from its weight source, infra/planner/loading.py).
Capacity asked for now arrives that much later, so the whole step from the floor to the ceiling
must be asked for early enough to arrive within SCALE_UP_BUDGET_SECONDS — the long window of the
fastest SLO page (1 h at 6× burn, infra/render/slo_rules.py), after which an overload that began
with the scale-up has paged. What is left of the budget after the load sets both knobs:

    slack  = budget − time_to_ready
    window = clamp(10 % of slack, 0, 300 s)   stabilisation: ignore spikes over before capacity could arrive,
                                              never longer than a tenth of the slack
    waves  = 1 + floor((slack − window) / SCALE_UP_PERIOD_SECONDS)   steps that still arrive in time
    step   = ceil((max − min replicas) / waves), in whole nodes (replicas_per_node)

A replica that loads in 8 minutes can be added a node at a time after a 3-minute window; one that
needs 50 minutes is asked for at once, in one step to the ceiling, with no window (and the plan
says that autoscaling cannot save such a burst). Scale-down waits `scale_down_delay_seconds` of
low load before removing one replica every ten minutes.

A replica over several nodes is a LeaderWorkerSet group: the ScaledObject targets the
LeaderWorkerSet (LWS_TARGET; its scale subresource counts groups and selects the leaders), the
range and step are in whole groups, and the series are the leaders' (workers are headless and
unscraped), each reporting its whole group, so the per-replica targets are per group.

A P/D model (units within one node) gets one ScaledObject per side, each scaling its side's
Deployment on its own engines' series (`pd_role`, from the pods' `inference-platform/pd-role`):
the prefill side on its queue per prefill engine (prompts waiting for a prefill slot are what
its TTFT share is made of; a prefill engine runs each request for one token, so its in-flight
count says little), the decode side on in-flight requests per decode engine (and its queue) like
a colocated replica. Each side ranges from its engines at min_nodes to as many as the pool's
max_nodes hold next to the other side's floor, in steps of a node's worth of its engines. When Prometheus has no vLLM series, the triggers report an error instead of zero
(`ignoreNullValues: false`): the HPA then holds the current size rather than shrinking a loaded
fleet because its metrics went missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.catalog import versions
from infra.render.model_service import PART_OF
from infra.render.pd_service import PD_ROLE_LABEL
from infra.render.slo_rules import PD_ROLE_TARGET_LABEL, ObservedModel, selector

KEDA_NAMESPACE = "keda"
KEDA_RELEASE_NAME = "keda"
SCALE_UP_PERIOD_SECONDS = 300
SCALE_DOWN_PERIOD_SECONDS = 600
POLLING_INTERVAL_SECONDS = 30
SCALE_UP_BUDGET_SECONDS = 3600  # the 1 h long window of the fastest burn-rate page
SCALE_UP_WINDOW_MAX_SECONDS = 300
SCALE_UP_WINDOW_SHARE = 0.1
# The in-flight target is this fraction of what a replica carries at SLO goodput: scale-up starts
# while the replicas still meet the SLO, not once they miss it.
RUNNING_HEADROOM = 0.8


@dataclass(frozen=True)
class AutoscalingSpec:
    """KEDA and one rendered ScaledObject per autoscaled model, as (model name, object) pairs."""

    name: str  # logical name
    scaled_objects: tuple[tuple[str, dict], ...]
    system_node_selector: dict[str, str]
    chart_version: str = versions.KEDA_CHART_VERSION


# What a ScaledObject scales: (apiVersion, kind). KEDA scales any resource with a /scale
# subresource (keda.sh docs, "Scaling Deployments, StatefulSets & Custom Resources"); the
# LeaderWorkerSet CRD of LWS v0.10.0 has one: specReplicasPath .spec.replicas (groups),
# labelSelectorPath .status.hpaPodSelector (the leader pods).
DEPLOYMENT_TARGET = ("apps/v1", "Deployment")
LWS_TARGET = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")


@dataclass(frozen=True)
class ScalingSpec:
    """One model's autoscaling, in the terms of its Deployment and its metrics.

    model: the platform model (name, served name and namespace select its vLLM series).
    deployment: the name of the workload KEDA scales (a Deployment, or the LeaderWorkerSet of a
        replica over nodes: `target`).
    min_replicas / max_replicas: replicas_per_node × the pool's min_nodes / max_nodes, or for a
        replica over nodes the pool's min_nodes / max_nodes ÷ nodes_per_replica (whole groups).
    replicas_per_node: the most replicas one new node can take (the scale-up step); 1 for a
        replica over nodes (a step of one group brings its nodes_per_replica nodes at once).
    running_per_replica: target average of in-flight (running + queued) requests per replica.
    waiting_per_replica: target average of queued requests per replica.
    scale_down_delay_seconds: quiet time before a replica is removed.
    prometheus_url: where KEDA queries the vLLM metrics.
    """

    model: ObservedModel
    deployment: str
    min_replicas: int
    max_replicas: int
    replicas_per_node: int
    running_per_replica: float
    waiting_per_replica: float
    scale_down_delay_seconds: int
    prometheus_url: str
    time_to_ready_seconds: int = 0  # a new replica on a new node: provisioning + image pull + load
    target: tuple[str, str] = DEPLOYMENT_TARGET  # (apiVersion, kind) of the scaled workload
    side: str | None = None  # a P/D side ("prefill" | "decode"): its engines' series and triggers


def side_matchers(side: str | None) -> tuple[str, ...]:
    """The extra matcher that selects one P/D side's engines (none for a colocated model)."""
    return (f'{PD_ROLE_TARGET_LABEL}="{side}"',) if side else ()


def queue_query(model: ObservedModel, side: str | None = None) -> str:
    """The model's queued requests across its replicas (or one P/D side's engines), as the SLO
    rules select its series."""
    return f"sum(vllm:num_requests_waiting{selector(model, *side_matchers(side))})"


def in_flight_query(model: ObservedModel, side: str | None = None) -> str:
    """The model's running plus queued requests across its replicas.

    Each gauge is summed on its own, so a missing waiting series cannot drop the running ones (a
    per-series `running + waiting` would). Only the waiting sum falls back to 0: with no running
    series at all (no vLLM pod scraped, Prometheus lost them) the result stays empty and the
    trigger errors instead of reading zero load.
    """
    matchers = selector(model, *side_matchers(side))
    return (
        f"sum(vllm:num_requests_running{matchers})"
        f" + (sum(vllm:num_requests_waiting{matchers}) or vector(0))"
    )


def _prometheus_trigger(spec: ScalingSpec, query: str, threshold: float) -> dict:
    return {
        "type": "prometheus",
        "metricType": "AverageValue",
        "metadata": {
            "serverAddress": spec.prometheus_url,
            "query": query,
            # KEDA reads trigger metadata as strings.
            "threshold": f"{threshold:g}",
            "ignoreNullValues": "false",
        },
    }


def render_scaled_object(spec: ScalingSpec) -> dict:
    """A keda.sh/v1alpha1 ScaledObject for the model's Deployment (or LeaderWorkerSet)."""
    if not 0 <= spec.min_replicas <= spec.max_replicas or spec.max_replicas < 1:
        raise ValueError(f"{spec.model.name}: replica range {spec.min_replicas}..{spec.max_replicas} is empty")
    if spec.running_per_replica <= 0 or spec.waiting_per_replica <= 0:
        raise ValueError(
            f"{spec.model.name}: targets must be > 0 (running {spec.running_per_replica:g}, waiting {spec.waiting_per_replica:g})"
        )
    labels = {
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
        "app.kubernetes.io/component": "autoscaling",
        "inference-platform/model": spec.model.name,
    }
    in_flight = _prometheus_trigger(spec, in_flight_query(spec.model, spec.side), spec.running_per_replica)
    queue = _prometheus_trigger(spec, queue_query(spec.model, spec.side), spec.waiting_per_replica)
    # The HPA scales to the larger of the triggers: in-flight load per replica first, the queue
    # second; a prefill side on its queue alone.
    triggers = [queue] if spec.side == "prefill" else [in_flight, queue]
    if spec.side:
        labels[PD_ROLE_LABEL] = spec.side
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": spec.deployment, "namespace": spec.model.namespace, "labels": labels},
        "spec": {
            "scaleTargetRef": {"apiVersion": spec.target[0], "kind": spec.target[1], "name": spec.deployment},
            "minReplicaCount": spec.min_replicas,
            "maxReplicaCount": spec.max_replicas,
            "pollingInterval": POLLING_INTERVAL_SECONDS,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": hpa_behavior(spec)}},
            "triggers": triggers,
        },
    }


@dataclass(frozen=True)
class ScaleUpPolicy:
    """The HPA's scale-up knobs derived from the time-to-ready (see the module docstring)."""

    stabilization_window_seconds: int
    pods_per_period: int
    period_seconds: int
    arrives_in_time: bool  # a replica asked for now serves within the budget

    def to_json(self) -> dict:
        return {
            "stabilization_window_seconds": self.stabilization_window_seconds,
            "pods_per_period": self.pods_per_period,
            "period_seconds": self.period_seconds,
            "arrives_within_budget": self.arrives_in_time,
        }


def scale_up_policy(
    time_to_ready_seconds: int, min_replicas: int, max_replicas: int, replicas_per_node: int
) -> ScaleUpPolicy:
    """Stabilisation window and step so the ceiling is asked for early enough to arrive in time."""
    rpn = max(1, replicas_per_node)
    span = max(rpn, max_replicas - min_replicas)
    slack = SCALE_UP_BUDGET_SECONDS - max(0, time_to_ready_seconds)
    if slack <= 0:
        return ScaleUpPolicy(0, max(rpn, math.ceil(span / rpn) * rpn), SCALE_UP_PERIOD_SECONDS, False)
    window = min(SCALE_UP_WINDOW_MAX_SECONDS, int(SCALE_UP_WINDOW_SHARE * slack) // 15 * 15)
    waves = 1 + (slack - window) // SCALE_UP_PERIOD_SECONDS
    nodes = math.ceil(math.ceil(span / waves) / rpn)
    return ScaleUpPolicy(window, max(1, nodes) * rpn, SCALE_UP_PERIOD_SECONDS, True)


def hpa_behavior(spec: ScalingSpec) -> dict:
    """autoscaling/v2 HorizontalPodAutoscalerBehavior: scale-up sized by the time-to-ready, slow to remove."""
    up = scale_up_policy(spec.time_to_ready_seconds, spec.min_replicas, spec.max_replicas, spec.replicas_per_node)
    return {
        "scaleUp": {
            "stabilizationWindowSeconds": up.stabilization_window_seconds,
            "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": up.pods_per_period, "periodSeconds": up.period_seconds}],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": spec.scale_down_delay_seconds,
            "selectPolicy": "Min",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": SCALE_DOWN_PERIOD_SECONDS}],
        },
    }


def render_keda_values(system_node_selector: dict[str, str]) -> dict:
    """Helm values for the KEDA chart: its operator, metrics server and webhooks on the system pool.

    Secret access restricted to KEDA's own namespace (issue 30; kedacore/charts `permissions.*.
    restrict.secret`, default false = every Secret in the cluster): the ScaledObjects here query
    Prometheus without credentials, so KEDA needs no Secret of any workload."""
    return {
        "nodeSelector": dict(system_node_selector),
        "permissions": {"operator": {"restrict": {"secret": True}}, "metricServer": {"restrict": {"secret": True}}},
    }
