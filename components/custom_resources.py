"""One way to declare a rendered custom resource (LeaderWorkerSet, ScaledObject, PodMonitor, ...).

The renderers in infra/render/ return plain dicts; every component that declares one of them as a
`CustomResource` passes its top-level fields through unchanged (spec, and data-only kinds' other
fields), so the object Pulumi sends is the object the schema tests validated.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s


def custom_resource(resource_name: str, obj: dict, opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    """`obj` (a rendered Kubernetes object of a custom kind) as a Pulumi resource named `resource_name`."""
    fields = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    return k8s.apiextensions.CustomResource(
        resource_name, api_version=obj["apiVersion"], kind=obj["kind"], metadata=obj["metadata"], opts=opts, **fields
    )


def qualified_name(component_name: str, obj: dict) -> str:
    """`<component>-<kind>-<object name>`: unique per kind inside a component."""
    return f"{component_name}-{obj['kind'].lower()}-{obj['metadata']['name']}"
