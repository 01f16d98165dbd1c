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

from infra.specs import NetworkSpec, ProjectSpec

# DigitalOcean project environments accept exactly these three values.
_PROJECT_ENVIRONMENT = {"dev": "Development", "staging": "Staging", "prod": "Production"}


class Network(pulumi.ComponentResource):
    """A VPC in the stack's region holding the cluster and the NFS weight cache."""

    vpc: digitalocean.Vpc
    vpc_id: pulumi.Output[str]

    def __init__(self, name: str, args: NetworkSpec, opts: pulumi.ResourceOptions | None = None):
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
    """The project to create and the resources to assign to it.

    `resources` are DigitalOcean URNs (`do:kubernetes:<id>`, `do:droplet:<id>`, ...), not Pulumi
    URNs: use `KubernetesCluster.cluster_urn`. Assignable types are apps, database clusters,
    domains, droplets, floating IPs, Kubernetes clusters, load balancers, Spaces buckets and
    volumes; VPCs and NFS shares cannot be assigned (the provider exposes no URN for them).
    """

    spec: ProjectSpec
    resources: Sequence[pulumi.Input[str]] = field(default_factory=list)


class EnvironmentProject(pulumi.ComponentResource):
    """One DO project per stack (DO project names are unique per account)."""

    project: digitalocean.Project

    def __init__(self, name: str, args: EnvironmentProjectArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:network:EnvironmentProject", name, None, opts)
        self.project = digitalocean.Project(
            f"{name}-project",
            name=args.spec.project_name,
            description=args.spec.description,
            purpose="Machine learning / AI / Data processing",
            environment=_PROJECT_ENVIRONMENT[args.spec.environment],
            resources=list(args.resources),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"project_id": self.project.id})
