"""The stack's NetworkPolicies: default deny in every namespace it owns, plus the flows the plan needs
(and, for flows from or to the nodes and the control plane, CiliumNetworkPolicies).

Thin: the policies come from `infra.render.network_policy` (why each exists: its docstring and
each policy's `inference-platform/why` annotation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.custom_resources import custom_resource
from infra.render.network_policy import NetworkPolicySpec, render_network_policies


@dataclass(frozen=True)
class NetworkPoliciesArgs:
    """spec: the plan's policy facts; depends_on: what every policy waits for (the namespaces the
    stack declares); namespace_depends_on: per namespace, what creates it when a Helm release does
    (`create_namespace`: keda, lws-system) — a policy sent before its namespace exists fails."""

    spec: NetworkPolicySpec
    provider: k8s.Provider | None = None
    depends_on: Sequence[pulumi.Resource] = ()
    namespace_depends_on: Mapping[str, Sequence[pulumi.Resource]] = field(default_factory=dict)
    deleted_with: pulumi.Resource | None = None


class NetworkPolicies(pulumi.ComponentResource):
    policies: list[pulumi.CustomResource]

    def __init__(self, name: str, args: NetworkPoliciesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:security:NetworkPolicies", name, None, opts)
        def child(namespace: str) -> pulumi.ResourceOptions:
            deps = [*args.depends_on, *args.namespace_depends_on.get(namespace, ())]
            return pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=deps, deleted_with=args.deleted_with)

        self.policies = []
        for obj in render_network_policies(args.spec):
            ns, policy = obj["metadata"]["namespace"], obj["metadata"]["name"]
            if obj["kind"] == "NetworkPolicy":
                self.policies.append(k8s.networking.v1.NetworkPolicy(f"{name}-{ns}-{policy}", metadata=obj["metadata"], spec=obj["spec"],
                                                                     opts=child(ns)))
            else:  # CiliumNetworkPolicy: the entity flows (infra/render/cilium_policy.py); DOKS's Cilium owns the CRD
                self.policies.append(custom_resource(f"{name}-{ns}-cnp-{policy}", obj, child(ns)))
        self.register_outputs({})
