"""Replica autoscaling on in-flight load and the queue: KEDA, and a ScaledObject per autoscaled model.

The ScaledObjects come from `infra.render.autoscaling`. KEDA's CRDs arrive with its chart, so every
ScaledObject waits for the release, and for its model's service, so it never targets a Deployment
that does not exist yet.
"""

from __future__ import annotations

from collections.abc import Mapping

from infra.catalog import versions
from infra.render.autoscaling import KEDA_NAMESPACE, KEDA_RELEASE_NAME, AutoscalingSpec, render_keda_values
from infra.resource_graph.graph import GraphBuilder
from infra.stack_resources.kube import chart_inputs, open_group

HELM_TIMEOUT_S = 600


def plan_autoscaling(b: GraphBuilder, spec: AutoscalingSpec, *, provider: str, cluster: str, depends_on: list[str],
                     waits_for: Mapping[str, list[str]]) -> tuple[str, str]:  # fmt: skip
    """KEDA (Helm) → one ScaledObject per autoscaled model: the group's key and the release's.
    depends_on: what every member waits for (the Prometheus that answers KEDA's queries);
    waits_for: model → what its ScaledObject waits for (its model service)."""
    group = open_group(b, "inference-platform:autoscaling:ReplicaAutoscaling", spec.name, provider=provider,
                       depends_on=depends_on, deleted_with=cluster)  # fmt: skip
    release = group.release(f"{spec.name}-keda", {
        "name": KEDA_RELEASE_NAME, **chart_inputs(versions.KEDA_CHART, spec.chart_version, versions.KEDA_CHART_REPO),
        "namespace": KEDA_NAMESPACE, "createNamespace": True, "values": render_keda_values(dict(spec.system_node_selector)),
        "timeout": HELM_TIMEOUT_S,
    })  # fmt: skip
    for model, obj in spec.scaled_objects:
        group.object(f"{spec.name}-{obj['metadata']['name']}", obj, depends_on=[release, *waits_for.get(model, ())])
    b.set_group_outputs(group.key, {"scaled_objects": [o["metadata"]["name"] for _, o in spec.scaled_objects]})
    return group.key, release
