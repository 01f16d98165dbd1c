"""Every resource of a stack, planned in dependency order: `stack_resources(plan) -> ResourceGraph`.

The order is the order `pulumi up` needs: network → cluster (with its Kubernetes provider) → GPU
pools → GPU runtime → the two serving namespaces → weights (NFS cache, Spaces bucket, image
pre-pull) → the fabric (fabric pools only) → the keys → model services → the router → observability
→ the gateway → autoscaling → NetworkPolicies (after the releases that create the controllers'
namespaces) → the DO project. Each planning module says what its resources wait for; nothing is
decided here that `plan_stack` did not decide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infra.config.client_keys import DEFAULT_KEY_NAME
from infra.resource_graph.graph import GraphBuilder, ResourceGraph
from infra.resource_graph.values import Ref, Secret
from infra.stack_resources.autoscaling import plan_autoscaling
from infra.stack_resources.fabric import plan_fabric
from infra.stack_resources.foundation import (
    plan_cluster,
    plan_existing_cluster,
    plan_gpu_pool,
    plan_gpu_runtime,
    plan_namespaces,
    plan_network,
    plan_project,
)
from infra.stack_resources.front_door import plan_gateway, plan_router
from infra.stack_resources.keys import client_keys, engine_key, stack_secret
from infra.stack_resources.model_services import endpoint, plan_model_service
from infra.stack_resources.network_policies import plan_network_policies
from infra.stack_resources.observability import plan_observability
from infra.stack_resources.weights import plan_image_prepull, plan_model_cache, plan_weight_bucket

if TYPE_CHECKING:
    from infra.stack_plan.plan import StackPlan


def stack_resources(plan: StackPlan) -> ResourceGraph:
    """The stack's resources and outputs as planned (pure: no Pulumi, no cloud)."""
    graph = ResourceGraph()
    b = GraphBuilder(graph)
    cfg = plan.config
    stored = set(cfg.secrets_set) | set(cfg.secrets_required)
    # An existing cluster (cluster.existing): no VPC, cluster, node pool or project, and no
    # `deletedWith` — nothing deletes the objects with a cluster the stack does not destroy, so
    # `pulumi destroy` deletes each one.
    vpc = cluster = None
    if plan.cluster.existing is None:
        vpc = plan_network(b, plan.network)
        cluster, provider = plan_cluster(b, plan.cluster, vpc)
    else:
        provider = plan_existing_cluster(b, plan.cluster)
    pools = {spec.pool_name: plan_gpu_pool(b, spec, cluster) for spec in plan.pools if spec.managed and cluster is not None}
    runtime, cert_manager, gpu_operator = plan_gpu_runtime(b, plan.gpu_runtime, provider, list(pools.values()), cluster)
    namespace, engines_ns = plan_namespaces(b, plan.stack, [plan.namespace, plan.engines_namespace], provider, cluster)

    # The weights every engine waits for; the cache's claim and the Spaces keys live beside the engines.
    weights = []
    if plan.model_cache is not None:
        weights.append(plan_model_cache(b, plan.model_cache, vpc, provider, engines_ns))
    if plan.weight_bucket is not None:
        weights.append(plan_weight_bucket(b, plan.weight_bucket, provider, engines_ns))
    if plan.prepull is not None:
        weights.append(plan_image_prepull(b, plan.prepull, provider, [namespace, *pools.values()], cluster))
    fabric = lws = None
    if plan.fabric is not None:
        fabric, lws = plan_fabric(b, plan.fabric, provider, [engines_ns, *pools.values()], cluster)

    keys = client_keys(b, plan.stack, cfg.client_keys.names, stored, cfg.client_keys.generated)
    upstream = engine_key(b, plan.stack, plan.has_front_door, given="engine_key" in cfg.secrets_set)
    # Behind a front door the engines check the engine key; without one (router.kind service) the
    # client key (the config allows only one then).
    engines_check = upstream if upstream is not None else next(iter(keys.values()))
    services = [
        plan_model_service(
            b, service, candidate=plan.candidate(service.name), provider=provider, cluster=cluster,
            hf_token=stack_secret("huggingface_token", stored), api_key=engines_check,
            depends_on=[engines_ns, *([pools[model.pool.name]] if model.pool.name in pools else []), *weights],
            engine_depends_on=[fabric] if fabric is not None and service.layout.fabric_nics else [],
            name=f"{plan.stack}-model-{service.name}",
        )  # fmt: skip
        for model, service in zip(plan.models, plan.services, strict=True)
    ]
    front: dict[str, Any] = {"url": None}
    if plan.gateway is None:  # router.kind gateway: the gateway below is every model's front door
        _, router = plan_router(b, plan.router, client_keys=keys, engine_key=upstream, provider=provider,
                                depends_on=[namespace, *services], name=f"{plan.stack}-router")  # fmt: skip
        front = {"url": router["endpoint"], "public_address": router["public_address"]}
    monitoring = None
    if plan.observability is not None:
        monitoring = plan_observability(
            b, plan.observability, provider=provider, cluster=cluster,
            grafana_admin_password=stack_secret("grafana_admin_password", stored),
            alert_webhook_url=stack_secret("alert_webhook_url", stored), depends_on=services,
        )  # fmt: skip
    gateway_controller = None
    if plan.gateway is not None:
        _, gateway_controller = plan_gateway(
            b, plan.gateway, client_keys=keys, engine_key=upstream, provider=provider,
            depends_on=[namespace, engines_ns, *services], monitoring=monitoring, name=plan.gateway.name,
        )  # fmt: skip
        front = {"url": plan.gateway.endpoint}
    keda = None
    if plan.autoscaling is not None:
        by_model = {s.name: key for s, key in zip(plan.services, services, strict=True)}
        _, keda = plan_autoscaling(
            b, plan.autoscaling, provider=provider, cluster=cluster, depends_on=[monitoring] if monitoring else [],
            waits_for={model: [by_model[model]] for model, _ in plan.autoscaling.scaled_objects},
        )  # fmt: skip
    if plan.network_policies is not None:
        np = plan.network_policies
        made_by = ((np.keda_namespace, keda), (np.gateway_controller_namespace, gateway_controller), (np.lws_namespace, lws),
                   (np.gpu_operator_namespace, gpu_operator), (np.cert_manager_namespace, cert_manager))  # fmt: skip
        plan_network_policies(
            b, np, name=f"{plan.stack}-netpol", provider=provider, cluster=cluster,
            depends_on=[namespace, engines_ns, *([monitoring] if monitoring else [])],
            namespace_depends_on={ns: [creator] for ns, creator in made_by if ns is not None and creator is not None},
        )  # fmt: skip
    if cluster is not None:
        plan_project(b, plan.project, cluster)
    graph.outputs = stack_outputs(plan, vpc, cluster, graph[provider].inputs["kubeconfig"], keys, front)
    return graph


def stack_outputs(plan: StackPlan, vpc: str | None, cluster: str | None, kubeconfig: Any, keys: dict[str, Any],
                  front: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The stack outputs: where the cluster and the front door are, the layouts, the key names and
    the (secret) key named `default`; the kubeconfig is the provider's (a secret). An existing
    cluster's outputs name no VPC or cluster, and never its kubeconfig (the user's own secret)."""
    created = {} if cluster is None else {
        "vpc_id": Ref(vpc, "id"),
        "cluster_id": Ref(cluster, "id"),
        "kubernetes_version": Ref(cluster, "version"),
        "kubeconfig": kubeconfig,
    }
    return {
        "environment": plan.config.environment,
        "region": plan.config.region,
        **created,
        "layouts": {m.config.name: m.layout.name for m in plan.models},
        # The key named `default` (`pulumi stack output api_key --show-secrets`); a secret output.
        **({"api_key": Secret(keys[DEFAULT_KEY_NAME])} if DEFAULT_KEY_NAME in keys else {}),
        "api_key_names": sorted(keys),
        "endpoints": {s.name: endpoint(s) for s in plan.services},
        "front_door": front,
    }
