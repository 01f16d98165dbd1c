"""The environment's private network and its DigitalOcean project.

The VPC is the blast-radius boundary: the DOKS cluster and the NFS weight cache both join it, so
weights move over the 25 Gbps private network and the NFS share is never reachable from outside.
Its CIDR is create-time only (changing `ip_range` replaces the VPC, and a VPC with members cannot be
deleted), which is why `infra diff` flags it and prod protects it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_digitalocean as digitalocean

APP_TAG = "app:inference-platform"

# DigitalOcean project environments accept exactly these three values.
_PROJECT_ENVIRONMENT = {"dev": "Development", "staging": "Staging", "prod": "Production"}


def standard_tags(environment: str) -> list[str]:
    """Tags every taggable DO resource carries, for cost attribution.

    DO tag names may contain letters, numbers, colons, dashes and underscores (max 255 chars), so
    `env:prod` and `app:inference-platform` are valid as written.
    Source: DO API reference, Tags → create ("Tags may contain letters, numbers, colons, dashes,
    and underscores").
    """
    return [f"env:{environment}", APP_TAG]


@dataclass(frozen=True)
class NetworkArgs:
    """Inputs of the environment's VPC."""

    environment: str  # dev | staging | prod
    region: str  # DO region slug, e.g. "atl1"
    vpc_cidr: str  # RFC 1918 range between /16 and /24; create-time only
    description: str = "inference-platform private network"
    protect: bool = False  # prod: a VPC replacement would orphan the cluster and the NFS share


class Network(pulumi.ComponentResource):
    """A VPC in the stack's region holding the cluster and the NFS weight cache."""

    vpc: digitalocean.Vpc
    vpc_id: pulumi.Output[str]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:network:Network", name, None, opts)
        self.vpc = digitalocean.Vpc(
            f"{name}-vpc",
            name=f"{name}-vpc",
            region=args.region,
            ip_range=args.vpc_cidr,
            description=args.description,
            opts=pulumi.ResourceOptions(parent=self, protect=args.protect),
        )
        self.vpc_id = self.vpc.id
        self.register_outputs({"vpc_id": self.vpc_id})


@dataclass(frozen=True)
class EnvironmentProjectArgs:
    """A DO project grouping the environment's resources in the control panel and on the bill.

    `resources` are DigitalOcean URNs (`do:kubernetes:<id>`, `do:droplet:<id>`, ...), not Pulumi
    URNs: use `KubernetesCluster.cluster_urn`. Assignable types are apps, database clusters,
    domains, droplets, floating IPs, Kubernetes clusters, load balancers, Spaces buckets and
    volumes; VPCs and NFS shares cannot be assigned (the provider exposes no URN for them).
    """

    environment: str
    resources: Sequence[pulumi.Input[str]] = field(default_factory=list)
    description: str = "LLM inference platform (managed by Pulumi)"


class EnvironmentProject(pulumi.ComponentResource):
    """One DO project per environment, named `inference-platform-<env>`."""

    project: digitalocean.Project

    def __init__(self, name: str, args: EnvironmentProjectArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:network:EnvironmentProject", name, None, opts)
        self.project = digitalocean.Project(
            f"{name}-project",
            name=f"inference-platform-{args.environment}",
            description=args.description,
            purpose="Machine learning / AI / Data processing",
            environment=_PROJECT_ENVIRONMENT[args.environment],
            resources=list(args.resources),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"project_id": self.project.id})
