"""A fabric cluster's multi-node platform: LeaderWorkerSet, Multus and the fabric NIC attachments.

Planned only when the plan has a fabric pool (`StackPlan.fabric`); every object comes from
`infra.render.fabric`. Order: the LWS Helm release (it installs its own CRD) and the
NetworkAttachmentDefinition CRD first, then the Multus DaemonSet and, once the CRD exists, the
eight attachments. Model services with a multi-node layout wait for this group.
"""

from __future__ import annotations

from infra.catalog import versions
from infra.render import fabric as render
from infra.resource_graph.graph import GraphBuilder
from infra.specs import FabricSpec
from infra.stack_resources.kube import chart_inputs, open_group


def plan_fabric(b: GraphBuilder, spec: FabricSpec, provider: str, depends_on: list[str], cluster: str) -> tuple[str, str]:
    """The fabric group's key and the LWS release's (the controllers' namespace comes with it)."""
    group = open_group(b, "inference-platform:fabric:Fabric", spec.name, provider=provider, depends_on=depends_on, deleted_with=cluster)
    lws = group.release(f"{spec.name}-lws", {
        "name": "lws", **chart_inputs(versions.LWS_CHART, spec.lws_chart_version, versions.LWS_CHART_REPO),
        "namespace": versions.LWS_NAMESPACE, "createNamespace": True, "values": render.lws_values(image_tag=spec.lws_image_tag),
    })  # fmt: skip
    crd = None
    for obj in render.render_multus(spec.fabric_pools, spec.multus_image):
        key = group.object(f"{spec.name}-{obj['kind'].lower()}-{obj['metadata']['name']}", obj)
        if obj["kind"] == "CustomResourceDefinition":
            crd = key
    for nad in render.render_attachments(spec.namespace):
        group.object(f"{spec.name}-nad-{nad['metadata']['name']}", nad, depends_on=[crd] if crd else [])
    b.set_group_outputs(group.key, {"lws_chart_version": spec.lws_chart_version, "multus_image": spec.multus_image})
    return group.key, lws
