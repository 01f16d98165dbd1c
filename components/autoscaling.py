"""Replica autoscaling on in-flight load and the queue: KEDA, and a ScaledObject per autoscaled model.

Thin: the ScaledObjects and values come from `infra.render.autoscaling`. KEDA's CRDs arrive with
its chart, so every ScaledObject depends on the release; each also depends on its model service so
it never targets a Deployment that does not exist yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.chart_source import chart_args
from components.custom_resources import custom_resource
from infra.catalog import versions
from infra.render.autoscaling import KEDA_NAMESPACE, KEDA_RELEASE_NAME, AutoscalingSpec, render_keda_values

HELM_TIMEOUT_S = 600


@dataclass(frozen=True)
class ReplicaAutoscalingArgs:
    """KEDA and the ScaledObjects as planned, and what each must wait for.

    waits_for: model name → the resources its ScaledObject waits for (its model service).
    provider: the cluster's Kubernetes provider.
    depends_on: what the whole component waits for (the monitoring stack that answers its queries).
    """

    spec: AutoscalingSpec
    waits_for: Mapping[str, Sequence[pulumi.Resource]] = field(default_factory=dict)
    provider: k8s.Provider | None = None
    depends_on: Sequence[pulumi.Resource] = ()
    deleted_with: pulumi.Resource | None = None


class ReplicaAutoscaling(pulumi.ComponentResource):
    """KEDA (Helm) → one ScaledObject per autoscaled model."""

    def __init__(self, name: str, args: ReplicaAutoscalingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:autoscaling:ReplicaAutoscaling", name, None, opts)
        child = pulumi.ResourceOptions(
            parent=self, provider=args.provider, depends_on=list(args.depends_on), deleted_with=args.deleted_with
        )
        self.release = k8s.helm.v3.Release(
            f"{name}-keda",
            k8s.helm.v3.ReleaseArgs(
                name=KEDA_RELEASE_NAME,
                **chart_args(versions.KEDA_CHART, args.spec.chart_version, versions.KEDA_CHART_REPO),
                namespace=KEDA_NAMESPACE,
                create_namespace=True,
                values=render_keda_values(dict(args.spec.system_node_selector)),
                timeout=HELM_TIMEOUT_S,
            ),
            opts=child,
        )
        self.scaled_objects = [
            custom_resource(
                f"{name}-{obj['metadata']['name']}",
                obj,
                pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=[self.release, *args.waits_for.get(model, ())])
                ),
            )
            for model, obj in args.spec.scaled_objects
        ]
        self.register_outputs({"scaled_objects": [o.metadata["name"] for o in self.scaled_objects]})
