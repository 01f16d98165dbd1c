"""The stack's NetworkPolicies: default deny in every namespace it owns, plus the flows the plan needs.

Thin: the policies come from `infra.render.network_policy` (why each exists: its docstring and
each policy's `inference-platform/why` annotation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.render.network_policy import NetworkPolicySpec, render_network_policies


@dataclass(frozen=True)
class NetworkPoliciesArgs:
    """spec: the plan's policy facts; depends_on: the namespaces the policies live in."""

    spec: NetworkPolicySpec
    provider: k8s.Provider | None = None
    depends_on: Sequence[pulumi.Resource] = ()
    deleted_with: pulumi.Resource | None = None


class NetworkPolicies(pulumi.ComponentResource):
    policies: list[k8s.networking.v1.NetworkPolicy]

    def __init__(self, name: str, args: NetworkPoliciesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:security:NetworkPolicies", name, None, opts)
        child = pulumi.ResourceOptions(
            parent=self, provider=args.provider, depends_on=list(args.depends_on), deleted_with=args.deleted_with
        )
        self.policies = [
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{obj['metadata']['namespace']}-{obj['metadata']['name']}",
                metadata=obj["metadata"],
                spec=obj["spec"],
                opts=child,
            )
            for obj in render_network_policies(args.spec)
        ]
        self.register_outputs({})
