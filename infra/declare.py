"""Turn a StackPlan into Pulumi resources: the only code that instantiates components.

Nothing is decided here. Every spec comes from `plan_stack`; this function wires the specs to
the Pulumi handles each component needs (the VPC id, the cluster's Kubernetes provider, the
secrets, what to wait for), in dependency order: network → cluster → GPU pools → GPU runtime →
namespaces (the front door's and the engines') and weight cache → the fabric (fabric pools only) → model services → the router → observability → the gateway →
autoscaling → NetworkPolicies (after the releases that create the controllers' namespaces) → project.
The real program (`infra/__main__.py`) and the offline plan (`infra plan`, under the mock
runtime) both call it with the same plan value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components.autoscaling import ReplicaAutoscaling, ReplicaAutoscalingArgs
from components.cluster import DoksCluster, DoksClusterArgs
from components.fabric import Fabric, FabricArgs
from components.gateway import InferenceGateway, InferenceGatewayArgs
from components.gpu_pool import GpuNodePool, GpuNodePoolArgs
from components.gpu_runtime import GpuRuntime, GpuRuntimeArgs
from components.model_cache import ModelCache, ModelCacheArgs
from components.model_service import ModelService, ModelServiceArgs
from components.network import EnvironmentProject, EnvironmentProjectArgs, Network
from components.network_policies import NetworkPolicies, NetworkPoliciesArgs
from components.observability import Observability, ObservabilityArgs
from components.router import Router, RouterArgs
from components.warm_start import ImagePrepull, ImagePrepullArgs
from components.weight_bucket import WeightBucket, WeightBucketArgs
from infra.stack_plan import StackPlan


@dataclass(frozen=True)
class Secrets:
    """The stack's secret config values as Pulumi secret Outputs (None when not set)."""

    huggingface_token: Any = None
    api_key: Any = None
    grafana_admin_password: Any = None
    alert_webhook_url: Any = None


def client_api_key(plan: StackPlan, secrets: Secrets) -> Any:
    """The key every serving path checks: the stack's `api_key` secret, or one generated once and
    kept (a secret) in the stack's state — so no environment serves without a key (issue 30)."""
    if secrets.api_key is not None:
        return secrets.api_key
    generated = random.RandomPassword(f"{plan.stack}-api-key", length=48, special=False)
    return generated.result


@dataclass(frozen=True)
class Foundation:
    """What every later component stands on: the VPC, the cluster (its provider), the GPU pools by
    pool name, the GPU runtime (its operator releases), the `inference` namespace (the front door)
    and the engines' namespace."""

    network: Network
    cluster: DoksCluster
    pools: dict[str, GpuNodePool]
    runtime: GpuRuntime
    namespace: Any
    engines_namespace: Any


def declare(plan: StackPlan, secrets: Secrets) -> dict[str, Any]:
    """Declare every component of the plan, in dependency order; returns the stack outputs."""
    for note in plan.notes:
        pulumi.log.info(note)
    base = declare_foundation(plan)
    weight_deps = declare_weights(plan, base)
    fabric = declare_fabric(plan, base)
    api_key = client_api_key(plan, secrets)
    services = declare_model_services(plan, base, secrets, api_key, weight_deps, fabric)
    router = None
    if plan.gateway is None:  # router.kind gateway: the gateway below is every model's front door
        router = Router(
            f"{plan.stack}-router",
            # Not deleted_with the cluster: its Service of type LoadBalancer must be deleted on
            # destroy so that DOKS removes the DO load balancer (docs/architecture.md).
            RouterArgs(spec=plan.router, provider=base.cluster.provider, depends_on=[base.namespace, *services]),
        )
    monitoring = declare_observability(plan, base, secrets, services)
    gateway = None
    if plan.gateway is not None:
        gateway = InferenceGateway(
            plan.gateway.name,
            # Not deleted_with the cluster: its Service of type LoadBalancer must be deleted on destroy.
            InferenceGatewayArgs(
                spec=plan.gateway, api_key=api_key, provider=base.cluster.provider,
                depends_on=[base.namespace, base.engines_namespace, *services],
                monitoring=monitoring,
            ),
        )
    autoscaling = declare_autoscaling(plan, base, services, monitoring)
    declare_network_policies(plan, base, monitoring, autoscaling=autoscaling, gateway=gateway, fabric=fabric)
    EnvironmentProject(plan.project.name, EnvironmentProjectArgs(spec=plan.project, resources=[base.cluster.cluster.cluster_urn]))
    return stack_outputs(plan, base, api_key, services, router, gateway)


def declare_foundation(plan: StackPlan) -> Foundation:
    """Network → cluster → GPU pools → GPU runtime → the two serving namespaces."""
    network = Network(plan.network.name, plan.network)
    cluster = DoksCluster(plan.cluster.name, DoksClusterArgs(spec=plan.cluster, vpc_id=network.vpc_id))
    pools = {
        spec.pool_name: GpuNodePool(
            spec.name, GpuNodePoolArgs(spec=spec, cluster_id=cluster.cluster_id), pulumi.ResourceOptions(protect=spec.protect)
        )
        for spec in plan.pools
    }
    runtime = GpuRuntime(
        plan.gpu_runtime.name,
        GpuRuntimeArgs(
            spec=plan.gpu_runtime, provider=cluster.provider, depends_on=list(pools.values()), deleted_with=cluster.cluster
        ),
    )
    k8s_opts = pulumi.ResourceOptions(provider=cluster.provider, deleted_with=cluster.cluster)
    namespace, engines = (
        k8s.core.v1.Namespace(f"{plan.stack}-ns-{ns['metadata']['name']}", metadata=ns["metadata"], opts=k8s_opts)
        for ns in (plan.namespace, plan.engines_namespace)
    )
    return Foundation(network=network, cluster=cluster, pools=pools, runtime=runtime, namespace=namespace, engines_namespace=engines)


def declare_weights(plan: StackPlan, base: Foundation) -> list[pulumi.Resource]:
    """The NFS weight cache, the Spaces weight bucket and the image pre-pull DaemonSets (issue 20),
    whichever the plan has: what every engine waits for."""
    cluster, namespace = base.cluster, base.engines_namespace  # the cache's claim and Spaces keys live beside the engines
    cache = None
    if plan.model_cache is not None:
        cache = ModelCache(
            plan.model_cache.name,
            ModelCacheArgs(spec=plan.model_cache, vpc_id=base.network.vpc_id, provider=cluster.provider, depends_on=[namespace]),
        )
    bucket = None
    if plan.weight_bucket is not None:
        bucket = WeightBucket(
            plan.weight_bucket.name,
            WeightBucketArgs(spec=plan.weight_bucket, provider=cluster.provider, depends_on=[namespace]),
        )
    prepull = None
    if plan.prepull is not None:
        prepull = ImagePrepull(
            plan.prepull.name,
            ImagePrepullArgs(
                spec=plan.prepull, provider=cluster.provider, depends_on=[base.namespace, *base.pools.values()],
                deleted_with=cluster.cluster,
            ),
        )
    return [r for r in (cache, bucket, prepull) if r is not None]


def declare_fabric(plan: StackPlan, base: Foundation) -> Fabric | None:
    """LWS, Multus and the fabric NIC attachments, on a cluster with a fabric pool."""
    if plan.fabric is None:
        return None
    return Fabric(
        plan.fabric.name,
        FabricArgs(
            spec=plan.fabric, provider=base.cluster.provider, depends_on=[base.engines_namespace, *base.pools.values()],
            deleted_with=base.cluster.cluster,
        ),
    )


def declare_model_services(
    plan: StackPlan, base: Foundation, secrets: Secrets, api_key: Any, weight_deps: list[pulumi.Resource], fabric: Fabric | None
) -> list[ModelService]:
    """Every model's engines (and rollout candidate), after its pool, the weights and the fabric its NICs need."""
    services = []
    for model, service_spec in zip(plan.models, plan.services, strict=True):
        service = ModelService(
            f"{plan.stack}-model-{service_spec.name}",
            ModelServiceArgs(
                spec=service_spec,
                candidate=plan.candidate(service_spec.name),
                provider=base.cluster.provider,
                hf_token=secrets.huggingface_token,
                api_key=api_key,
                depends_on=[base.engines_namespace, base.pools[model.pool.name], *weight_deps],
                engine_depends_on=[fabric] if fabric is not None and service_spec.layout.fabric_nics else [],
            ),
            pulumi.ResourceOptions(deleted_with=base.cluster.cluster),
        )
        services.append(service)
    return services


def declare_observability(
    plan: StackPlan, base: Foundation, secrets: Secrets, services: list[ModelService]
) -> Observability | None:
    """Prometheus, Grafana, the SLO rules and alerts, once the engines they watch exist."""
    if plan.observability is None:
        return None
    return Observability(
        plan.observability.name,
        ObservabilityArgs(
            spec=plan.observability,
            provider=base.cluster.provider,
            grafana_admin_password=secrets.grafana_admin_password,
            alert_webhook_url=secrets.alert_webhook_url,
            deleted_with=base.cluster.cluster,
        ),
        pulumi.ResourceOptions(depends_on=services),
    )


def declare_autoscaling(
    plan: StackPlan, base: Foundation, services: list[ModelService], monitoring: Observability | None
) -> ReplicaAutoscaling | None:
    """The ScaledObjects, each waiting for its model's engines, after the Prometheus they query."""
    if plan.autoscaling is None:
        return None
    by_model = {s.spec.name: s for s in services}
    return ReplicaAutoscaling(
        plan.autoscaling.name,
        ReplicaAutoscalingArgs(
            spec=plan.autoscaling,
            waits_for={model: [by_model[model]] for model, _ in plan.autoscaling.scaled_objects},
            provider=base.cluster.provider,
            depends_on=[monitoring] if monitoring else [],
            deleted_with=base.cluster.cluster,
        ),
    )


def declare_network_policies(
    plan: StackPlan, base: Foundation, monitoring: Observability | None, *, autoscaling: ReplicaAutoscaling | None,
    gateway: InferenceGateway | None, fabric: Fabric | None,
) -> None:
    """Default deny and the flows the plan needs (issue 30), each policy after the namespace it
    lives in: the controllers' namespaces exist once what installs them does (Helm `create_namespace`)."""
    if plan.network_policies is None:
        return
    np = plan.network_policies
    runtime = base.runtime
    made_by = ((np.keda_namespace, autoscaling and autoscaling.release), (np.gateway_controller_namespace, gateway and gateway.controller),
               (np.lws_namespace, fabric and fabric.lws), (np.gpu_operator_namespace, runtime.gpu_operator),
               (np.cert_manager_namespace, runtime.cert_manager))  # fmt: skip
    creators = {ns: [creator] for ns, creator in made_by if ns is not None and creator is not None}
    NetworkPolicies(
        f"{plan.stack}-netpol",
        NetworkPoliciesArgs(
            spec=plan.network_policies,
            provider=base.cluster.provider,
            depends_on=[base.namespace, base.engines_namespace, *([monitoring] if monitoring else [])],
            namespace_depends_on=creators,
            deleted_with=base.cluster.cluster,
        ),
    )


def stack_outputs(
    plan: StackPlan, base: Foundation, api_key: Any, services: list[ModelService], router: Router | None,
    gateway: InferenceGateway | None,
) -> dict[str, Any]:
    """The stack outputs: where the cluster and the front door are, the layouts, the (secret) API key."""
    cluster = base.cluster
    return {
        "environment": plan.config.environment,
        "region": plan.config.region,
        "vpc_id": base.network.vpc_id,
        "cluster_id": cluster.cluster_id,
        "kubernetes_version": cluster.version,
        "kubeconfig": cluster.kubeconfig,
        "layouts": {m.config.name: m.layout.name for m in plan.models},
        # The key clients send (`pulumi stack output api_key --show-secrets`); a secret output.
        "api_key": pulumi.Output.secret(api_key),
        "endpoints": {s.spec.name: s.endpoint for s in services},
        "front_door": (
            {"url": router.endpoint, "public_address": router.public_address}
            if router is not None
            else {"url": gateway.endpoint if gateway is not None else None}
        ),
    }
