"""The stack's NetworkPolicies: default deny in every namespace it owns, plus the flows the plan needs
(and, for flows from or to the nodes and the control plane, CiliumNetworkPolicies).

The policies come from `infra.render.network_policy` (why each exists: its docstring and each
policy's `inference-platform/why` annotation). Each waits for the namespace it lives in: the
controllers' namespaces exist once what installs them does (a Helm release's `create_namespace`:
keda, lws-system, ...), and a policy sent before its namespace exists fails.
"""

from __future__ import annotations

from collections.abc import Mapping

from infra.render.network_policy import NetworkPolicySpec, render_network_policies
from infra.resource_graph.graph import GraphBuilder
from infra.stack_resources.kube import open_group


def plan_network_policies(b: GraphBuilder, spec: NetworkPolicySpec, *, name: str, provider: str, cluster: str, depends_on: list[str],
                          namespace_depends_on: Mapping[str, list[str]]) -> str:  # fmt: skip
    """Every policy inside group `NetworkPolicies` (its key)."""
    group = open_group(b, "inference-platform:security:NetworkPolicies", name, provider=provider, deleted_with=cluster)
    for obj in render_network_policies(spec):
        ns, policy = obj["metadata"]["namespace"], obj["metadata"]["name"]
        # A CiliumNetworkPolicy (the entity flows, infra/render/cilium_policy.py; DOKS's Cilium owns
        # its CRD) is named apart from a NetworkPolicy of the same name.
        logical = f"{name}-{ns}-{policy}" if obj["kind"] == "NetworkPolicy" else f"{name}-{ns}-cnp-{policy}"
        group.object(logical, obj, depends_on=[*depends_on, *namespace_depends_on.get(ns, ())])
    return group.key
