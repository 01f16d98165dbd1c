"""Replica autoscaling on the request queue: KEDA's Helm values and one ScaledObject per model.

Why the queue: vLLM admits requests into the running batch until KV cache or `max-num-seqs` runs
out; what it cannot admit waits in `vllm:num_requests_waiting`. A sustained queue is the earliest
sign that TTFT is about to break its SLO, and unlike GPU utilisation (always high under load) it
says how much capacity is missing: KEDA's `AverageValue` target gives
`desired = ceil(queued / waiting_per_replica)`.

Why slow: a new replica on a new GPU node takes the autoscaler's node provisioning plus a model
load (tens of minutes for a 240 GB model), so scale-up adds at most one node's worth of replicas per
five minutes and scale-down waits `scale_down_delay_seconds` of quiet before removing one replica
every ten minutes. When Prometheus cannot answer, the trigger reports an error instead of zero
(`ignoreNullValues: false`): the HPA then holds the current size rather than shrinking a loaded
fleet because its metrics went missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.render.model_service import PART_OF
from infra.render.slo_rules import ObservedModel, selector

KEDA_NAMESPACE = "keda"
KEDA_RELEASE_NAME = "keda"
SCALE_UP_PERIOD_SECONDS = 300
SCALE_DOWN_PERIOD_SECONDS = 600
POLLING_INTERVAL_SECONDS = 30


@dataclass(frozen=True)
class ScalingSpec:
    """One model's autoscaling, in the terms of its Deployment and its metrics.

    model: the platform model (name, served name and namespace select its vLLM series).
    deployment: the Deployment KEDA scales.
    min_replicas / max_replicas: replicas_per_node × the pool's min_nodes / max_nodes.
    replicas_per_node: the most replicas one new node can take (the scale-up step).
    waiting_per_replica: target average of queued requests per replica.
    scale_down_delay_seconds: quiet time before a replica is removed.
    prometheus_url: where KEDA queries the queue metric.
    """

    model: ObservedModel
    deployment: str
    min_replicas: int
    max_replicas: int
    replicas_per_node: int
    waiting_per_replica: float
    scale_down_delay_seconds: int
    prometheus_url: str


def queue_query(model: ObservedModel) -> str:
    """The model's queued requests across its replicas, as the SLO rules select its series."""
    return f"sum(vllm:num_requests_waiting{selector(model)})"


def render_scaled_object(spec: ScalingSpec) -> dict:
    """A keda.sh/v1alpha1 ScaledObject for the model's Deployment."""
    if not 0 <= spec.min_replicas <= spec.max_replicas or spec.max_replicas < 1:
        raise ValueError(f"{spec.model.name}: replica range {spec.min_replicas}..{spec.max_replicas} is empty")
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {
            "name": spec.deployment,
            "namespace": spec.model.namespace,
            "labels": {
                "app.kubernetes.io/part-of": PART_OF,
                "app.kubernetes.io/managed-by": "pulumi",
                "app.kubernetes.io/component": "autoscaling",
                "inference-platform/model": spec.model.name,
            },
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": spec.deployment},
            "minReplicaCount": spec.min_replicas,
            "maxReplicaCount": spec.max_replicas,
            "pollingInterval": POLLING_INTERVAL_SECONDS,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": hpa_behavior(spec)}},
            "triggers": [
                {
                    "type": "prometheus",
                    "metricType": "AverageValue",
                    "metadata": {
                        "serverAddress": spec.prometheus_url,
                        "query": queue_query(spec.model),
                        # KEDA reads trigger metadata as strings.
                        "threshold": f"{spec.waiting_per_replica:g}",
                        "ignoreNullValues": "false",
                    },
                }
            ],
        },
    }


def hpa_behavior(spec: ScalingSpec) -> dict:
    """autoscaling/v2 HorizontalPodAutoscalerBehavior: quick to add a node's worth, slow to remove."""
    return {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": spec.replicas_per_node, "periodSeconds": SCALE_UP_PERIOD_SECONDS}],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": spec.scale_down_delay_seconds,
            "selectPolicy": "Min",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": SCALE_DOWN_PERIOD_SECONDS}],
        },
    }


def render_keda_values(system_node_selector: dict[str, str]) -> dict:
    """Helm values for the KEDA chart: its operator, metrics server and webhooks on the system pool."""
    return {"nodeSelector": dict(system_node_selector)}
