"""The fabric cluster's multi-node platform: LeaderWorkerSet, Multus and the fabric NIC attachments.

Declared only when the plan has a fabric pool (`StackPlan.fabric`). Every object comes from
`infra.render.fabric` (pure, schema-tested); this component turns them into typed resources, in
order: the LWS Helm release (it installs its own CRD) and the NetworkAttachmentDefinition CRD
first, then the Multus DaemonSet and, once the CRD exists, the eight attachments. Model services
with a multi-node layout wait for this component (`ModelServiceArgs.engine_depends_on`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.chart_source import chart_args
from components.custom_resources import custom_resource
from infra.catalog import versions
from infra.render import fabric as render
from infra.specs import FabricSpec

_KINDS: dict[tuple[str, str], Any] = {
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): k8s.apiextensions.v1.CustomResourceDefinition,
    ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
}


@dataclass(frozen=True)
class FabricArgs:
    spec: FabricSpec
    provider: k8s.Provider
    depends_on: Sequence[pulumi.Resource] = ()  # the namespace, the fabric pools
    deleted_with: pulumi.Resource | None = None  # the cluster


class Fabric(pulumi.ComponentResource):
    """LWS (Helm), Multus thick plugin, and one host-device attachment per fabric NIC."""

    lws: k8s.helm.v3.Release
    objects: list[pulumi.Resource]

    def __init__(self, name: str, args: FabricArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:fabric:Fabric", name, None, opts)
        spec = args.spec

        def child(depends_on: Sequence[pulumi.Resource] = ()) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(
                parent=self, provider=args.provider, depends_on=[*args.depends_on, *depends_on], deleted_with=args.deleted_with
            )

        self.lws = k8s.helm.v3.Release(
            f"{name}-lws",
            name="lws",
            **chart_args(versions.LWS_CHART, spec.lws_chart_version, versions.LWS_CHART_REPO),
            namespace=versions.LWS_NAMESPACE,
            create_namespace=True,
            values=render.lws_values(image_tag=spec.lws_image_tag),
            opts=child(),
        )
        self.objects = []
        crd = None
        for obj in render.render_multus(spec.fabric_pools, spec.multus_image):
            cls = _KINDS[(obj["apiVersion"], obj["kind"])]
            fields = {("role_ref" if k == "roleRef" else k): v for k, v in obj.items() if k not in ("apiVersion", "kind")}
            resource = cls(f"{name}-{obj['kind'].lower()}-{obj['metadata']['name']}", opts=child(), **fields)
            if obj["kind"] == "CustomResourceDefinition":
                crd = resource
            self.objects.append(resource)
        for nad in render.render_attachments(spec.namespace):
            self.objects.append(
                custom_resource(f"{name}-nad-{nad['metadata']['name']}", nad, child(depends_on=[crd] if crd else []))
            )
        self.register_outputs({"lws_chart_version": spec.lws_chart_version, "multus_image": spec.multus_image})
