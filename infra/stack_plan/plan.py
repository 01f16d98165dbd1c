"""Decide everything about a stack, as a plain value: `plan_stack(config) -> StackPlan`.

Pure Python, importable without Pulumi. From the validated config it resolves every model's
layout with the planner, sizes the pools, prices the stack, collects the notes a reader should
see, and builds every component's spec (`infra.specs`, the renderers' specs). Every problem it
finds — an SLO no layout meets, an autoscaling target no replica reaches — is raised together as
one `ConfigError`. `declare(plan, secrets)` then only turns the specs into resources; `infra plan`
prints, diffs and records the same value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from infra.catalog.cpu_sizes import CPU_PRICES_AS_OF, CPU_USD_PER_MONTH, HA_CONTROL_PLANE_USD_PER_MONTH
from infra.catalog.gpus import HOURS_PER_MONTH
from infra.config import GpuPoolConfig, StackConfig
from infra.config.router import client_keys_checked
from infra.errors import ConfigError, Problem
from infra.front_door import FrontDoor
from infra.layout_fit import require_layouts_fit
from infra.render.autoscaling import AutoscalingSpec
from infra.render.gateway import GatewaySpec, gateway_front_door
from infra.render.model_cache import MODEL_CACHE_PVC_NAME
from infra.render.model_service import ModelServiceSpec, render_namespace
from infra.render.network_policy import NetworkPolicySpec, network_policy_spec
from infra.render.observability import ObservabilitySpec
from infra.render.router import RouterSpec
from infra.resource_graph.graph import ResourceGraph
from infra.rollout_plan import candidate_service_spec
from infra.specs import (
    ClusterSpec,
    FabricSpec,
    GpuPoolSpec,
    GpuRuntimeSpec,
    ImagePrepullSpec,
    ModelCacheSpec,
    NetworkSpec,
    ProjectSpec,
    WeightBucketSpec,
)
from infra.stack_plan.autoscaling import autoscaling_json, autoscaling_spec
from infra.stack_plan.cluster import (
    cluster_spec,
    fabric_spec,
    gpu_runtime_spec,
    pool_specs,
    project_name,
)
from infra.stack_plan.facts import ModelFacts
from infra.stack_plan.gateway import gateway_spec
from infra.stack_plan.models import plan_models
from infra.stack_plan.monitoring import (
    observability_spec,
)
from infra.stack_plan.namespaces import ENGINES_NAMESPACE, INFERENCE_NAMESPACE
from infra.stack_plan.notes import (
    admin_switch_notes,
    existing_cluster_notes,
    lmcache_image_notes,
    open_front_door_notes,
    override_notes,
)
from infra.stack_plan.router import front_door, router_spec
from infra.stack_plan.services import image_prepull_spec, model_service_specs
from infra.stack_plan.weights import model_cache_spec, weight_bucket_spec
from infra.stack_resources.stack import stack_resources


@dataclass(frozen=True)
class StackPlan:
    """Everything the program will declare and why, as plain data.

    `models` carry the planner's decisions; the specs are what each component builds, in the
    order `declare` instantiates them. `problems` is empty unless the plan was made with
    `allow_problems=True` (benchmarks measure a model whose SLO no layout is predicted to meet).
    """

    config: StackConfig
    models: tuple[ModelFacts, ...]
    notes: tuple[str, ...]
    network: NetworkSpec | None  # None: cluster.existing (no VPC)
    cluster: ClusterSpec
    pools: tuple[GpuPoolSpec, ...]
    gpu_runtime: GpuRuntimeSpec
    namespace: dict[str, Any]  # the `inference` namespace object: the front door, Pod Security restricted
    model_cache: ModelCacheSpec | None
    services: tuple[ModelServiceSpec, ...]  # one per model, same order
    router: RouterSpec  # the one router of the environment (kind service: renders nothing)
    front_door: FrontDoor
    observability: ObservabilitySpec | None
    autoscaling: AutoscalingSpec | None
    project: ProjectSpec
    problems: tuple[Problem, ...] = field(default=())
    weight_bucket: WeightBucketSpec | None = None  # model_cache.kind spaces
    prepull: ImagePrepullSpec | None = None  # image pre-pull DaemonSets on the GPU pools
    gateway: GatewaySpec | None = None  # router.kind gateway (issue 17): replaces the router
    fabric: FabricSpec | None = None  # a fabric pool: LWS, Multus and the fabric NIC attachments
    network_policies: NetworkPolicySpec | None = None  # default-deny + the flows the plan needs (issue 30)
    candidates: tuple[ModelServiceSpec, ...] = ()  # rollout candidates' engines (models[].rollout)
    # the engines' namespace object: Pod Security privileged (ROCm), audit/warn baseline
    engines_namespace: dict[str, Any] = field(default_factory=lambda: render_namespace(ENGINES_NAMESPACE, "privileged"))
    # every resource the stack creates, rendered, with the stack's outputs (infra/stack_resources/)
    resources: ResourceGraph = field(default_factory=ResourceGraph)

    @property
    def stack(self) -> str:
        return self.config.stack

    @property
    def has_front_door(self) -> bool:
        """A router or gateway checks the client keys; the engines behind it check the engine key."""
        return self.gateway is not None or self.router.uses_router

    def model(self, name: str) -> ModelFacts:
        return next(m for m in self.models if m.config.name == name)

    def service(self, name: str) -> ModelServiceSpec:
        return next(s for s in self.services if s.name == name)

    def candidate(self, name: str) -> ModelServiceSpec | None:
        return next((s for s in self.candidates if s.name == name), None)

    def rollout_nodes(self, pool: str) -> int:
        """Nodes the pool gets on top of its configured count for rollout candidates."""
        return sum(m.rollout.extra_nodes for m in self.models if m.rollout is not None and m.pool.name == pool)

    # --- the plan file's views ----------------------------------------------------------------

    def models_json(self) -> list[dict[str, Any]]:
        out = []
        for m in self.models:
            chosen = m.plan.chosen
            layout = chosen.layout
            entry = {
                "name": m.config.name,
                "source": m.config.source,
                "pool": m.pool.name,
                "layout_source": "auto" if m.config.layout is None else "explicit",
                "layout": {"name": layout.name, **layout.fields()},
                "replicas": {
                    "min": layout.replicas_for_nodes(m.pool.min_node_count),
                    "max": layout.replicas_for_nodes(m.pool.max_node_count),
                    "autoscaling": autoscaling_json(m),
                },
                "predicted": _rounded(chosen.to_json()),
                "reason": m.plan.reason,
                "alternatives": [c.layout.name for c in m.plan.candidates[1:4] if c.fits],
            }
            if m.plan.choice_rules:
                entry["choice_rules"] = m.plan.choice_rules
            if m.measured is not None:
                entry["measured"] = _rounded(m.measured_json())
            if m.readiness is not None:
                entry["time_to_ready"] = m.readiness.to_json()
            if m.sessions is not None:
                entry["prefix_cache"] = _rounded(m.sessions.to_json())
            if m.kv_offload is not None:
                entry["kv_offload"] = {"kind": m.kv_offload.kind, "size_gib": m.kv_offload.size_gib}
            if m.rollout is not None:
                entry["rollout"] = m.rollout.to_json(m.config.name)
            out.append(entry)
        return out

    def pools_json(self) -> list[dict[str, Any]]:
        return [
            {
                "name": p.name,
                "size": p.size,
                "gpus_per_node": p.gpu.gpus,
                "gpu": p.gpu.accelerator.model,
                "autoscale": p.autoscale,
                "min_nodes": p.min_node_count,
                "max_nodes": p.max_node_count,
                "usd_per_node_hour": p.node_usd_per_hour,
                "price_source": "config" if p.usd_per_hour is not None else ("catalog" if p.gpu.usd_per_hour else "unknown"),
                "price_as_of": None if p.usd_per_hour is not None else p.gpu.price_as_of,
                **({"rollout_nodes": self.rollout_nodes(p.name)} if self.rollout_nodes(p.name) else {}),
                **({"node_selector": dict(p.node_selector or {})} if self.config.existing_cluster else {}),
            }
            for p in self.config.gpu_pools
        ]

    def cost_json(self) -> dict[str, Any]:
        """Hourly and monthly cost at the pools' minimum and maximum sizes."""
        cfg = self.config
        lines = []
        unknown = []
        for p in cfg.gpu_pools:
            price = p.node_usd_per_hour
            if price is None:
                unknown.append(f"gpu pool {p.name} ({p.size}: contract price; set gpu_pools[].usd_per_hour)")
                continue
            lines.append(("gpu:" + p.name, price * p.min_node_count, price * p.max_node_count, _gpu_price_basis(p)))
        for m in self.models:
            if m.rollout is not None and m.rollout.extra_nodes and m.rollout.usd_per_hour_extra is not None:
                extra = m.rollout.usd_per_hour_extra
                lines.append((f"rollout:{m.config.name}", extra, extra, f"{m.rollout.extra_nodes} extra {m.pool.name} node(s) for the candidate"))
        sys_month = CPU_USD_PER_MONTH.get(cfg.cluster.system_pool.size)
        cpu_basis = f"CPU list price of {CPU_PRICES_AS_OF}" if CPU_PRICES_AS_OF else "CPU list price, date not recorded"
        if cfg.existing_cluster:  # the existing cluster's control plane and system nodes are its owner's bill
            unknown.append("the existing cluster's control plane and system nodes (not created by this stack)")
        elif sys_month is None:
            unknown.append(f"system pool ({cfg.cluster.system_pool.size}: not in the CPU price list)")
        else:
            hourly = sys_month / HOURS_PER_MONTH * cfg.cluster.system_pool.nodes
            lines.append(("system_pool", hourly, hourly, cpu_basis))
        if cfg.cluster.ha and not cfg.existing_cluster:
            ha = HA_CONTROL_PLANE_USD_PER_MONTH / HOURS_PER_MONTH
            lines.append(("ha_control_plane", ha, ha, cpu_basis.replace("CPU", "DOKS", 1)))
        if cfg.model_cache.kind == "nfs":
            unknown.append("NFS weight cache (priced per GiB by DO; not included)")
        elif cfg.model_cache.kind == "spaces":
            unknown.append("Spaces weight bucket (priced per GiB stored and transferred by DO; not included)")
        return {
            "currency": "USD",
            "hours_per_month": HOURS_PER_MONTH,
            "items": [
                {"item": name, "usd_per_hour_min": round(lo, 2), "usd_per_hour_max": round(hi, 2), "price": basis}
                for name, lo, hi, basis in lines
            ],
            "usd_per_hour_min": round(sum(line[1] for line in lines), 2),
            "usd_per_hour_max": round(sum(line[2] for line in lines), 2),
            "usd_per_month_min": round(sum(line[1] for line in lines) * HOURS_PER_MONTH, 0),
            "usd_per_month_max": round(sum(line[2] for line in lines) * HOURS_PER_MONTH, 0),
            "not_included": unknown,
        }


def plan_stack(cfg: StackConfig, *, allow_problems: bool = False) -> StackPlan:
    """Decide the whole stack (pure). Raises one ConfigError with every planning problem, unless
    `allow_problems`, which keeps them in `plan.problems` (for `infra bench`). A layout that does not
    fit its model or node is refused first, whatever `allow_problems` says: nothing can be planned
    (or benchmarked) on it."""
    require_layouts_fit(cfg, source=f"stacks/Pulumi.{cfg.stack}.yaml")
    models, notes, problems = plan_models(cfg)
    if problems and not allow_problems:
        raise ConfigError(problems, source=f"stacks/Pulumi.{cfg.stack}.yaml")
    prefix = cfg.stack
    cluster = cluster_spec(cfg)
    pools = pool_specs(cfg, models)
    cache = model_cache_spec(cfg)
    cache_pvc = MODEL_CACHE_PVC_NAME if cache else None
    bucket, weights = weight_bucket_spec(cfg)
    services = model_service_specs(cfg, models, cache_pvc, weights)
    candidates = tuple(
        candidate_service_spec(service, m.config, m.rollout) for m, service in zip(models, services, strict=True) if m.rollout
    )
    router = router_spec(cfg, models, services, cluster.system_node_selector)
    notes = [*notes, *open_front_door_notes(cfg.router), *override_notes(cfg), *lmcache_image_notes(cfg), *admin_switch_notes(cfg),
             *existing_cluster_notes(cfg)]
    observability = observability_spec(cfg, models, cluster.system_node_selector)
    gateway = gateway_spec(cfg, services, cluster.system_node_selector, observability.settings if observability else None)
    autoscaling = autoscaling_spec(prefix, models, cluster.system_node_selector)
    fabric = fabric_spec(prefix, cfg)
    plan = StackPlan(
        config=cfg,
        models=tuple(models),
        notes=tuple(notes),
        network=NetworkSpec(name=f"{prefix}-net", region=cfg.region, vpc_cidr=cfg.network.vpc_cidr, protect=cfg.protect) if cfg.network else None,
        cluster=cluster,
        pools=pools,
        gpu_runtime=gpu_runtime_spec(cfg),
        namespace=render_namespace(INFERENCE_NAMESPACE, "restricted"),
        engines_namespace=render_namespace(ENGINES_NAMESPACE, "privileged"),
        model_cache=cache,
        services=services,
        router=router,
        front_door=replace(gateway_front_door(gateway) if gateway is not None else front_door(router, services),
                           client_keys=cfg.client_keys.names if client_keys_checked(cfg.router) else ()),
        observability=observability,
        autoscaling=autoscaling,
        project=ProjectSpec(name=f"{prefix}-project", project_name=project_name(cfg.stack), environment=cfg.environment),
        problems=tuple(problems),
        weight_bucket=bucket,
        prepull=image_prepull_spec(prefix, services + candidates),  # a candidate image is pre-pulled too
        gateway=gateway,
        fabric=fabric,
        network_policies=network_policy_spec(
            namespace=INFERENCE_NAMESPACE, engines_namespace=ENGINES_NAMESPACE, vpc_cidr=cfg.network.vpc_cidr if cfg.network else None, services=services, router=router, gateway=gateway,
            observability=observability, keda=autoscaling is not None, lws=fabric is not None,
            gpu_operator=cfg.gpu_runtime.mode == "gpu-operator" and any(p.gpu.vendor == "amd" for p in cfg.gpu_pools),
        ),  # fmt: skip
        candidates=candidates,
    )
    return replace(plan, resources=stack_resources(plan))


def _gpu_price_basis(pool: GpuPoolConfig) -> str:
    """Where a GPU pool's hourly price comes from, with its date: `infra plan` prints it."""
    if pool.usd_per_hour is not None:
        return "gpu_pools[].usd_per_hour"
    kind = "spot price" if pool.gpu.spot else "list price"
    return f"catalog {kind} of {pool.gpu.price_as_of or 'unknown date'}"


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        if math.isinf(value) or math.isnan(value):
            return None
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


