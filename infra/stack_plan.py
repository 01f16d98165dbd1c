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

from infra.catalog import versions
from infra.catalog.cpu_sizes import CPU_PRICES_AS_OF, CPU_USD_PER_MONTH, HA_CONTROL_PLANE_USD_PER_MONTH
from infra.catalog.epp import preset_weights
from infra.catalog.gpus import GPU_SIZES, HOURS_PER_MONTH
from infra.catalog.models import ModelArch, resolve_model
from infra.catalog.vllm_flags import VLLM_PORT
from infra.config import (
    NS,
    PROJECT,
    GpuPoolConfig,
    ModelConfig,
    StackConfig,
    gated_models,
    install_gateway_api_crds,
    zero_replica_notes,
)
from infra.config.cluster import control_plane_exposure
from infra.domain import KvOffload, Layout, Provenance
from infra.errors import ConfigError, Problem
from infra.front_door import FrontDoor, public_base_url
from infra.layout_fit import require_layouts_fit
from infra.planner import (
    ModelPlan,
    ReadinessPlan,
    WeightSource,
    plan_model,
    plan_readiness,
    slo_shortfall,
)
from infra.planner.choice import MIN_KV_SHARE, held_back_reason
from infra.planner.kv_offload import OffloadDecision
from infra.planner.search import NEAR_TIE, nodes_for_peak, sizes_that_fit, usd_per_million_output_tokens
from infra.render import pd_service
from infra.render.autoscaling import (
    DEPLOYMENT_TARGET,
    LWS_TARGET,
    RUNNING_HEADROOM,
    AutoscalingSpec,
    ScalingSpec,
    render_scaled_object,
    scale_up_policy,
)
from infra.render.epp import FAILURE_MODES, PoolSpec, selection_conflicts
from infra.render.gateway import GatewaySpec, gateway_front_door, route_timeout_seconds
from infra.render.model_cache import MODEL_CACHE_PVC_NAME
from infra.render.model_service import (
    CacheSpec,
    ModelServiceSpec,
    api_key_secret_name,
    deployment_name,
    hf_token_secret_name,
    render_deployment,
    render_namespace,
)
from infra.render.network_policy import NetworkPolicySpec, network_policy_spec
from infra.render.observability import GpuRuntimeFacts, MonitoringSettings, ObservabilitySpec, prometheus_url
from infra.render.planner_prediction import prediction_of
from infra.render.rollout_rules import RolloutObserved
from infra.render.router import POLICY_WHY, RoutedModel, RouterSpec, router_timeout_seconds
from infra.render.slo_rules import ObservedModel, PdObserved, slo_bucket_warnings
from infra.render.warm_start import (
    SPACES_READ_SECRET,
    SPACES_WRITE_SECRET,
    PrepullSpec,
    SpacesWeights,
    render_prepull_daemonset,
)
from infra.rollout_plan import RolloutFacts, candidate_service_spec, plan_rollout
from infra.session_plan import offload_fit_problems, session_decision
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
    gpu_addon_flags,
    standard_tags,
)
from infra.stack_factors import load_stack_factors, measured_notes

INFERENCE_NAMESPACE = "inference"
# Measured below this share of the prediction: the factors are off enough to mislead the search.
CALIBRATE_BELOW = 0.7


@dataclass(frozen=True)
class ModelFacts:
    """One model's resolved layout, the planner's view of it, and its measurement if any."""

    config: ModelConfig
    pool: GpuPoolConfig
    arch: ModelArch
    plan: ModelPlan
    measured: Provenance | None = None  # the layout's provenance, when it carries a goodput
    readiness: ReadinessPlan | None = None  # time-to-ready from the weight source (planner/loading.py)
    sessions: OffloadDecision | None = None  # multi-turn hit rates, with and without a KV offload tier

    @property
    def kv_offload(self) -> KvOffload | None:
        """The host-memory KV tier the engines run with: configured (cpu, lmcache) or chosen (auto)."""
        if self.sessions is not None:
            return self.sessions.offload
        return self.config.kv_offload.to_offload()
    rollout: RolloutFacts | None = None  # models[].rollout: the candidate beside this layout

    @property
    def layout(self) -> Layout:
        return self.plan.chosen.layout

    @property
    def goodput_rps_per_node(self) -> float:
        """What sizes the pool: the measurement when there is one, else the prediction."""
        if self.measured is not None:
            return float(self.measured.measured_goodput_rps)
        return self.plan.chosen.goodput_rps_per_node

    @property
    def nodes_needed(self) -> int | None:
        """The one figure every view shows: from the measurement, else the planner's (sized on the
        band's low end in whole replicas, as the model line says)."""
        if self.measured is None:
            return self.plan.chosen.nodes_needed
        return nodes_for_peak(self.config.workload.peak_rps, self.goodput_rps_per_node)

    def measured_json(self) -> dict[str, Any] | None:
        """The measurement next to (never in place of) the prediction in the plan's models[]."""
        if self.measured is None:
            return None
        mg = self.measured
        measured = float(mg.measured_goodput_rps)
        predicted = self.plan.chosen.goodput_rps_per_node
        usd_per_m = usd_per_million_output_tokens(self.pool.node_usd_per_hour, measured, self.config.workload.output_tokens)
        return {
            "goodput_rps_per_node": round(measured, 3),
            "measured_at": mg.measured_at,
            "vllm_version": mg.vllm_version,
            "image": mg.image,
            "predicted_at_measurement_rps": mg.predicted_goodput_rps,
            "vs_predicted": round(measured / predicted, 3) if predicted > 0 else None,
            "nodes_needed": self.nodes_needed,
            "usd_per_million_output_tokens": None if usd_per_m is None else round(usd_per_m, 3),
        }


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
    network: NetworkSpec
    cluster: ClusterSpec
    pools: tuple[GpuPoolSpec, ...]
    gpu_runtime: GpuRuntimeSpec
    namespace: dict[str, Any]  # the inference namespace object
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

    @property
    def stack(self) -> str:
        return self.config.stack

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
                    "autoscaling": _autoscaling_json(m),
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
        if sys_month is None:
            unknown.append(f"system pool ({cfg.cluster.system_pool.size}: not in the CPU price list)")
        else:
            hourly = sys_month / HOURS_PER_MONTH * cfg.cluster.system_pool.nodes
            lines.append(("system_pool", hourly, hourly, cpu_basis))
        if cfg.cluster.ha:
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


# --------------------------------------------------------------------------- planning


def plan_stack(cfg: StackConfig, *, allow_problems: bool = False) -> StackPlan:
    """Decide the whole stack (pure). Raises one ConfigError with every planning problem, unless
    `allow_problems`, which keeps them in `plan.problems` (for `infra bench`). A layout that does not
    fit its model or node is refused first, whatever `allow_problems` says: nothing can be planned
    (or benchmarked) on it."""
    require_layouts_fit(cfg, source=f"stacks/Pulumi.{cfg.stack}.yaml")
    models, notes, problems = _plan_models(cfg)
    if problems and not allow_problems:
        raise ConfigError(problems, source=f"stacks/Pulumi.{cfg.stack}.yaml")
    prefix = cfg.stack
    env = cfg.environment
    tags = tuple(standard_tags(env))
    protect = cfg.protect
    cluster = ClusterSpec(
        name=f"{prefix}-doks",
        region=cfg.region,
        version=cfg.cluster.version,
        version_key=f"{NS}cluster.version",
        system_pool_size=cfg.cluster.system_pool.size,
        system_pool_nodes=cfg.cluster.system_pool.nodes,
        ha=bool(cfg.cluster.ha),
        auto_upgrade=cfg.cluster.auto_upgrade,
        surge_upgrade=cfg.cluster.surge_upgrade,
        maintenance_day=cfg.cluster.maintenance.day,
        maintenance_start_time=cfg.cluster.maintenance.start_time,
        control_plane_allowed_cidrs=tuple(cfg.cluster.control_plane_allowed_cidrs),
        cluster_subnet=cfg.network.cluster_subnet,
        service_subnet=cfg.network.service_subnet,
        kubeconfig_expire_seconds=cfg.cluster.kubeconfig_expire_seconds,
        # prod keeps its volumes and load balancers on destroy (docs/architecture.md: manual cleanup).
        destroy_all_associated_resources=env != "prod",
        gpu_flags=gpu_addon_flags({p.gpu.vendor for p in cfg.gpu_pools}, cfg.gpu_runtime.mode, bool(cfg.observability.enabled)),
        protect=protect,
        tags=tags,
    )
    extra_nodes = {p.name: sum(m.rollout.extra_nodes for m in models if m.rollout and m.pool.name == p.name) for p in cfg.gpu_pools}
    pools = tuple(
        GpuPoolSpec(
            name=f"{prefix}-pool-{pool.name}",
            pool_name=pool.name,
            gpu=pool.gpu,
            node_count=_plus(pool.nodes, extra_nodes[pool.name]),
            min_nodes=_plus(pool.min_nodes, extra_nodes[pool.name]),
            max_nodes=_plus(pool.max_nodes, extra_nodes[pool.name]),
            partition_mode=pool.partition_mode,
            labels=dict(pool.labels),
            tags=tags,
            protect=protect,
        )
        for pool in cfg.gpu_pools
    )
    cache = None
    if cfg.model_cache.kind == "nfs":
        cache = ModelCacheSpec(
            name=f"{prefix}-weights",
            region=cfg.region,
            size_gib=cfg.model_cache.size_gib,
            tier=cfg.model_cache.tier,
            namespace=INFERENCE_NAMESPACE,
            protect=protect,
            tags=tags,
        )
    cache_pvc = MODEL_CACHE_PVC_NAME if cache else None
    bucket, weights = weight_bucket_spec(cfg)
    # The offline plan and `pulumi up` store a secret that is set, or required (offline: a placeholder).
    secrets = cfg.secrets_set | set(cfg.secrets_required)
    services = tuple(
        model_service_spec(
            m, cache_pvc, secrets=secrets, weights=weights, compile_cache="shared" if cache_pvc else "node",
            key_path=f"{NS}models[{[c.name for c in cfg.models].index(m.config.name)}]",
        )
        for m in models
    )
    candidates = tuple(
        candidate_service_spec(service, m.config, m.rollout) for m, service in zip(models, services, strict=True) if m.rollout
    )
    router = router_spec(cfg, models, services, cluster.system_node_selector)
    if router.uses_router and router.public and not router.allowed_source_cidrs:
        notes = [*notes, (
            "router.public without allowed_source_cidrs: vllm-router 0.1.17's admin routes (/workers, "
            "/flush_cache) have no authentication; restrict the load balancer to your clients' CIDRs "
            "(docs/serving.md#authentication)"
        )]
    observability = None
    if cfg.observability.enabled:
        obs = cfg.observability
        observability = ObservabilitySpec(
            name=f"{prefix}-observability",
            settings=MonitoringSettings(
                retention=obs.retention,
                storage_gib=obs.storage_gib,
                system_node_selector=cluster.system_node_selector,
                alert_receiver=obs.alert_receiver.kind,
                alert_slack_channel=obs.alert_receiver.channel,
                runbook_url=obs.runbook_url,
            ),
            models=tuple(observed_models(models)),
            gpu=gpu_runtime_facts(cfg),
            rollouts=rollouts_observed(models),
        )
    gateway = gateway_spec(cfg, services, cluster.system_node_selector, observability.settings if observability else None)
    scaled = tuple(
        (m.config.name, render_scaled_object(s)) for m in models if m.config.autoscaling.enabled for s in scaling_specs(m)
    )
    autoscaling = (
        AutoscalingSpec(name=f"{prefix}-autoscaling", scaled_objects=scaled, system_node_selector=cluster.system_node_selector)
        if scaled
        else None
    )
    if cfg.environment == "prod":
        notes = [*notes, *tag_only_image_notes(services, router)]
    return StackPlan(
        config=cfg,
        models=tuple(models),
        notes=tuple(notes),
        network=NetworkSpec(name=f"{prefix}-net", region=cfg.region, vpc_cidr=cfg.network.vpc_cidr, protect=protect),
        cluster=cluster,
        pools=pools,
        gpu_runtime=GpuRuntimeSpec(
            name=f"{prefix}-gpu-runtime",
            mode=cfg.gpu_runtime.mode,
            amd_pools=tuple(p.name for p in cfg.gpu_pools if p.gpu.vendor == "amd"),
            disable_numa_balancing=cfg.gpu_runtime.disable_numa_balancing,
            metrics_exporter=bool(cfg.observability.enabled),
        ),
        namespace=render_namespace(INFERENCE_NAMESPACE),
        model_cache=cache,
        services=services,
        router=router,
        front_door=gateway_front_door(gateway) if gateway is not None else front_door(router, services),
        observability=observability,
        autoscaling=autoscaling,
        project=ProjectSpec(name=f"{prefix}-project", project_name=project_name(cfg.stack), environment=env),
        problems=tuple(problems),
        weight_bucket=bucket,
        prepull=image_prepull_spec(prefix, services + candidates),  # a candidate image is pre-pulled too
        gateway=gateway,
        fabric=fabric_spec(prefix, cfg),
        network_policies=network_policy_spec(
            namespace=INFERENCE_NAMESPACE, vpc_cidr=cfg.network.vpc_cidr, services=services, router=router, gateway=gateway,
            observability=observability, keda=autoscaling is not None,
        ),  # fmt: skip
        candidates=candidates,
    )


def _plus(count: int | None, extra: int) -> int | None:
    return None if count is None else count + extra


def fabric_spec(prefix: str, cfg: StackConfig) -> FabricSpec | None:
    """LWS, Multus and the NIC attachments, on clusters with a fabric pool only."""
    fabric = tuple(p.name for p in cfg.gpu_pools if p.fabric)
    if not fabric:
        return None
    return FabricSpec(name=f"{prefix}-fabric", fabric_pools=fabric, namespace=INFERENCE_NAMESPACE)


def project_name(stack: str) -> str:
    """The DigitalOcean project of a stack: `inference-platform-<stack>`.

    DO project names are unique per account, so the name follows the stack, not the environment
    (two `dev` stacks of one account would otherwise claim the same project). The shipped stacks are
    named after their environments, so their project names are unchanged.
    """
    return f"{PROJECT}-{stack}"


def _plan_models(cfg: StackConfig) -> tuple[list[ModelFacts], list[str], list[Problem]]:
    """Resolve every model's layout (`layout: auto` runs the planner's search), with the notes and
    problems of all models.

    An SLO no layout can meet is a problem, not a plan with goodput 0: deploying it would serve
    every request late. An explicit layout that misses the SLO is the user's choice (perhaps
    measured): it gets a note saying what it costs instead.
    """
    models: list[ModelFacts] = []
    notes: list[str] = []
    problems: list[Problem] = []
    gated = {m.name for m in gated_models(cfg.models)}
    # The stack's own factors, fitted from its cluster (`infra tune calibrate --prometheus --write`).
    telemetry = load_stack_factors(cfg.base_dir, cfg.stack)
    efficiency = telemetry.table() if telemetry is not None else None
    if telemetry is not None:
        notes.append(telemetry.describe())
    for index, model in enumerate(cfg.models):
        pool = cfg.pool(model.pool)
        arch = resolve_model(model.source, str(cfg.hf_config_path(model)) if model.hf_config else None)
        explicit = model.layout.to_layout(pool.gpu.gpus) if model.layout is not None else None
        slo = model.slo.to_slo()
        sessions = session_decision(
            arch, pool.gpu, model.workload.to_workload(), slo, explicit, kv_offload=model.kv_offload.kind,
            size_gib=model.kv_offload.size_gib, router_kind=cfg.router.kind, min_nodes=pool.min_node_count,
            usd_per_hour=pool.node_usd_per_hour, fabric=pool.fabric, pool_nodes=pool.max_node_count,
        )
        plan = sessions.chosen.plan if sessions is not None else plan_model(
            arch, pool.gpu, model.workload.to_workload(), slo, explicit, usd_per_hour=pool.node_usd_per_hour,
            fabric=pool.fabric, pool_nodes=pool.max_node_count, bench_prefix=f"infra bench {cfg.stack} {model.name}",
            efficiency=efficiency,
        )
        provenance = model.layout.provenance if model.layout is not None else None
        facts = ModelFacts(
            config=model, pool=pool, arch=arch, plan=plan, measured=provenance if provenance and provenance.measured else None,
            sessions=sessions,
        )
        facts = replace(facts, readiness=readiness_plan(cfg, facts, provenance))
        models.append(facts)
        problems += _running_target_problems(facts, index)
        problems += _auto_multi_node_problems(facts, index)
        if not plan.chosen.fits:
            # Deploying it would crash-loop every replica: an error, for `auto` and explicit alike.
            problems.append(_does_not_fit(facts, index))
            continue
        problems += offload_fit_problems(f"{NS}models[{index}]", pool.gpu, facts.layout, model.kv_offload.kind,
                                         model.kv_offload.size_gib)
        if sessions is not None:
            notes.append(f"model {model.name}: {sessions.reason}")
        if model.name in gated and "huggingface_token" not in cfg.secrets_set:
            notes.append(
                f"model {model.name}: {model.source} is a gated Hugging Face repo; the weight download needs the "
                "huggingface_token secret of an account that accepted its terms on the model page, or the "
                "prefetch fails with 401 (`pulumi config set --secret huggingface_token ...`)"
            )
        shortfall = slo_shortfall(plan, slo)
        if shortfall and explicit is None:
            problems.append(Problem(f"{NS}models[{index}].slo", shortfall))
        elif shortfall:
            notes.append(f"model {model.name}: {shortfall}; as configured it serves no load within the SLO")
        notes += _sizing_notes(facts, cfg.stack)
        notes += thin_kv_notes(facts, cfg.stack)
        if explicit is None:
            notes += pd_notes(facts, efficiency)
        if telemetry is not None:
            notes += measured_notes(facts, telemetry)
    models = with_rollouts(models, cfg)
    for index, m in enumerate(models):
        if m.rollout is not None and m.kv_offload is not None:  # the candidate's engines pin the same tier
            problems += offload_fit_problems(f"{NS}models[{index}]", m.pool.gpu, m.rollout.candidate_layout,
                                             m.kv_offload.kind, m.kv_offload.size_gib)
    notes += zero_replica_notes(cfg)
    notes += cold_start_notes(cfg)
    if cfg.observability.enabled and models:
        notes += slo_bucket_warnings(observed_models(models))
    if cfg.missing_secrets:
        notes.append(
            "secrets to set before `pulumi up`: " + ", ".join(f"pulumi config set --secret {k}" for k in cfg.missing_secrets)
        )
    notes.append(api_key_note("api_key" in cfg.secrets_set))
    _, blockers, api_notes = control_plane_exposure(cfg.environment, [str(c) for c in cfg.cluster.control_plane_allowed_cidrs])
    notes += api_notes + [f"to fix before `pulumi up`: {b.path}: {b.message}" for b in blockers]
    return models, notes, problems


def tag_only_image_notes(services: tuple[ModelServiceSpec, ...], router: RouterSpec) -> list[str]:
    """prod: images pinned by tag only (a tag can be moved under you; a digest cannot). Every
    image key accepts `image@sha256:<digest>` (issue 30)."""
    images = {s.resolved_image for s in services}
    if router.uses_router:
        images.add(router.image or versions.ROUTER_BASE_IMAGE)
    tag_only = sorted(i for i in images if "@sha256:" not in i)
    if not tag_only:
        return []
    return [f"prod: images pinned by tag only: {', '.join(tag_only)}; pin by digest with models[].image / router.image = <image>@sha256:<digest>"]


def api_key_note(given: bool) -> str:
    """How clients get the key every serving path checks (issue 30)."""
    source = "the stack's api_key secret" if given else "none set: `pulumi up` generates one (pulumi-random, a secret in the stack's state)"
    return f"API key on every serving path ({source}); clients send `Authorization: Bearer <key>`; read it with `pulumi stack output api_key --show-secrets`"


def with_rollouts(models: list[ModelFacts], cfg: StackConfig) -> list[ModelFacts]:
    """Each model with a rollout gets its candidate planned (after every model: the candidate
    takes the GPUs the pool's models leave free before extra nodes are added)."""
    out = []
    for m in models:
        if m.config.rollout is None or not m.plan.chosen.fits:
            out.append(m)
            continue
        used = sum(o.layout.gpus_per_node_used for o in models if o.pool.name == m.pool.name)
        facts = plan_rollout(
            m.config, m.arch, m.pool.gpu, m.layout, pool_nodes=m.pool.min_node_count, used_per_node=used,
            usd_per_node_hour=m.pool.node_usd_per_hour, fabric=m.pool.fabric, pool_max_nodes=m.pool.max_node_count,
        )
        out.append(replace(m, rollout=facts))
    return out


def rollouts_observed(models: list[ModelFacts]) -> tuple[RolloutObserved, ...]:
    observed = {o.name: o for o in observed_models(models)}
    return tuple(
        RolloutObserved(observed[m.config.name], m.layout.gpus_per_replica, m.rollout.candidate_layout.gpus_per_replica)
        for m in models
        if m.rollout is not None
    )


def _auto_multi_node_problems(m: ModelFacts, index: int) -> list[Problem]:
    """`layout: auto` chose a replica over several nodes (a fabric pool): the pool must hold whole
    replicas, as the config requires of an explicit one."""
    layout = m.plan.chosen.layout
    if m.config.layout is not None or not layout.multi_node:
        return []
    n = layout.nodes_per_replica
    problems = []
    if m.pool.min_node_count % n or m.pool.max_node_count % n:
        problems.append(
            Problem(
                f"{NS}models[{index}].layout",
                f"auto chose {layout.name} (one replica over {n} nodes), but pool {m.pool.name!r} has "
                f"{m.pool.min_node_count}..{m.pool.max_node_count} nodes; give the pool multiples of {n} nodes, or an explicit layout",
            )
        )
    return problems


def pd_notes(m: ModelFacts, efficiency=None) -> list[str]:
    """`layout: auto` plans colocated layouts; when a prefill/decode layout would carry clearly more
    (beyond the near-tie margin), say so: switching is the user's call (a second router, a KV
    connector, no autoscaling for a unit over nodes — docs/serving.md)."""
    from infra.planner.disaggregation import pd_candidates
    from infra.planner.efficiency import load_efficiency

    chosen = m.plan.chosen
    if not chosen.fits or chosen.goodput_rps_per_node <= 0:
        return []
    table = efficiency if efficiency is not None else load_efficiency()
    gpu = m.pool.gpu
    pds = pd_candidates(
        m.arch, gpu, m.config.workload.to_workload(), m.config.slo.to_slo(), table.for_family(gpu.accelerator.family, moe=m.arch.is_moe),
        table.band(gpu.accelerator.family, m.arch.is_moe), m.pool.node_usd_per_hour, fabric=m.pool.fabric,
        pool_nodes=m.pool.max_node_count,
    )
    best = min((c for c in pds if c.fits), key=lambda c: (-c.goodput_rps_per_node, c.name), default=None)
    if best is None or best.goodput_rps_per_node <= chosen.goodput_rps_per_node * (1 + NEAR_TIE):
        return []
    ratio = best.goodput_rps_per_node / chosen.goodput_rps_per_node
    workload, slo = m.config.workload.to_workload(), m.config.slo.to_slo()
    thin = held_back_reason(best, workload, slo)
    advice = (
        f"but {thin}, so it is not advised unmeasured (planner/choice.py): bench it first"
        if thin
        else f"set layout: {best.name} to serve it disaggregated (docs/serving.md, P/D), and measure both"
    )
    return [
        f"model {m.config.name}: prefill/decode layout {best.name} would carry {best.goodput_rps_per_node:.2f} req/s per node, "
        f"{ratio:.2f}× {chosen.name} ({best.short_reason}); {advice} with `infra bench`"
    ]


def _does_not_fit(m: ModelFacts, index: int) -> Problem:
    """No layout of the model fits its pool's GPUs: say why, and name the sizes it would fit on (the
    pool's vendor first, smallest first)."""
    gpu = m.pool.gpu
    options = sorted(
        (s for s in GPU_SIZES.values() if not s.fabric and s.slug != gpu.slug),
        key=lambda s: (s.vendor != gpu.vendor, s.hbm_gb_total, s.slug),
    )
    fitting = [s.slug for s in sizes_that_fit(m.arch, m.config.workload.to_workload(), options)]
    if fitting:
        elsewhere = (
            f"it fits on {', '.join(fitting[:3])}{' and others' if len(fitting) > 3 else ''}: give gpu pool "
            f"{m.pool.name!r} such a size, or serve the model from a pool that has one"
        )
    else:
        spanning = multi_node_fit(m.arch, m.config.workload.to_workload())
        elsewhere = (
            f"no single node of any GPU size holds it, but one replica over {spanning[1]} nodes of {spanning[0]} does: "
            f"give pool {m.pool.name!r} that size with fabric: true and a layout with nodes_per_replica (docs/serving.md, "
            "multi-node replicas), or choose a smaller or quantized checkpoint"
            if spanning and not (m.pool.fabric and m.pool.gpu.slug == spanning[0])
            else "no GPU size in the catalog holds it; choose a smaller or quantized checkpoint"
        )
    # The candidate closest to fitting (most memory left), not the ranking's first: tp1-r8 of a 670 GB
    # model says less than tp8-r1 does about how far off the pool is.
    chosen = m.plan.chosen if m.config.layout is not None else max(m.plan.candidates, key=lambda c: (c.memory.kv_cache_gb, c.name))
    why = "; ".join(chosen.problems) or chosen.reason
    if m.config.layout is None:
        return Problem(
            f"{NS}models[{index}].pool",
            f"layout: auto found no layout of {m.arch.id} that fits on {gpu.slug} ({gpu.gpus}× {gpu.accelerator.model}): "
            f"{why}; {elsewhere}",
        )
    return Problem(f"{NS}models[{index}].layout", f"{chosen.name} does not fit: {why}; {elsewhere}")


def multi_node_fit(arch, workload) -> tuple[str, int] | None:
    """The smallest (fabric size, nodes) over which one replica of `arch` fits in memory, if any:
    memory arithmetic only, for the error of a model that no single node holds."""
    from infra.planner.memory import default_max_model_len, memory_per_gpu
    from infra.planner.search import multi_node_shapes

    context = workload.input_tokens + workload.output_tokens
    fits = []
    for gpu in (s for s in GPU_SIZES.values() if s.fabric):
        kv = "fp8" if gpu.accelerator.supports_fp8 else "auto"
        for tp, ep, dp, nodes in multi_node_shapes(arch, gpu, None):
            layout = Layout(tp=tp, ep=ep, dp=dp, nodes_per_replica=nodes, kv_cache_dtype=kv,
                            max_model_len=default_max_model_len(arch, context))
            if memory_per_gpu(arch, gpu, layout, context).fits:
                fits.append((nodes, gpu.hbm_gb_total, gpu.slug))
    if not fits:
        return None
    nodes, _hbm, slug = min(fits)
    return slug, nodes


# Below this share of the memory budget left for KV cache, a layout's fit rests on the memory
# model's estimate of everything else: `layout: auto` does not choose such a layout unmeasured
# (planner/choice.py, the same margin); an explicit one gets this note.
THIN_KV_SHARE = MIN_KV_SHARE


def thin_kv_notes(m: ModelFacts, stack: str) -> list[str]:
    """A chosen, unmeasured layout whose KV cache is a sliver of the GPU's memory: say how thin, and
    name the best layout with room to spare, so the bench compares the two before production."""
    chosen = m.plan.chosen
    memory = chosen.memory
    if m.measured is not None or not chosen.fits or memory.budget_gb <= 0:
        return []
    share = memory.kv_cache_gb / memory.budget_gb
    if share >= THIN_KV_SHARE:
        return []
    roomy = next(
        (c for c in m.plan.candidates
         if c.fits and c is not chosen and c.goodput_rps_per_node > 0
         and c.memory.kv_cache_gb / c.memory.budget_gb >= THIN_KV_SHARE),
        None,
    )
    alternative = (
        f"; the best layout with room, {roomy.layout.name}, predicts {roomy.goodput_rps_per_node:.2f} req/s/node "
        f"with {roomy.memory.kv_cache_gb:.0f} GB of KV per GPU. Bench both: `infra bench {stack} {m.config.name} "
        f"--layouts {chosen.layout.name},{roomy.layout.name}`"
        if roomy is not None
        else ""
    )
    return [
        f"model {m.config.name}: {chosen.layout.name} leaves {memory.kv_cache_gb:.1f} GB of the "
        f"{memory.budget_gb:.0f} GB budget per GPU for KV cache ({share:.0%}); its fit rests on the memory "
        f"model's estimate of everything else, and a few GB more in the real engine leave no room{alternative}"
    ]


def _sizing_notes(m: ModelFacts, stack: str) -> list[str]:
    """A peak beyond the pool, and a measurement that contradicts the prediction."""
    notes = []
    name, pool, peak = m.config.name, m.pool, m.config.workload.peak_rps
    needed = m.nodes_needed
    if peak and needed and needed > pool.max_node_count:
        notes.append(
            f"model {name}: peak {peak:g} req/s needs {needed} nodes of {pool.name} at the "
            + (f"measured goodput ({m.goodput_rps_per_node:.2f} req/s/node); " if m.measured else
               f"predicted goodput's low end ({m.plan.chosen.goodput_low_rps_per_node:.2f} req/s/node); ")
            + f"the pool allows at most {pool.max_node_count}"
        )
    if m.measured is None:
        return notes
    predicted = m.plan.chosen.goodput_rps_per_node
    measured = float(m.measured.measured_goodput_rps)
    if predicted > 0 and measured < CALIBRATE_BELOW * predicted:
        notes.append(
            f"model {name}: measured goodput {measured:.2f} req/s/node ({m.measured.label()}) is "
            f"{measured / predicted:.2f}× the planner's {predicted:.2f} for {m.layout.name}; the pool is sized from "
            f"the measurement. Re-fit the {pool.gpu.accelerator.family} factors: "
            f"`infra tune calibrate <results> --stack {stack} --model {name}` (docs/tuning.md §6)"
        )
    changes = m.measured.changed_conditions(m.config.slo.to_slo(), m.config.workload.to_workload(), pool.gpu.slug)
    if changes:
        notes.append(
            f"model {name}: the measured goodput of {m.layout.name} ({m.measured.label()}) was measured under "
            f"other conditions ({'; '.join(changes)}); it still sizes the pool. Re-run infra bench: "
            f"`infra bench {stack} {name}`, then `infra tune ingest <results> --stack {stack} --model {name} --write`"
        )
    return notes


def _gpu_price_basis(pool: GpuPoolConfig) -> str:
    """Where a GPU pool's hourly price comes from, with its date: `infra plan` prints it."""
    if pool.usd_per_hour is not None:
        return "gpu_pools[].usd_per_hour"
    kind = "spot price" if pool.gpu.spot else "list price"
    return f"catalog {kind} of {pool.gpu.price_as_of or 'unknown date'}"


def _autoscaling_json(model: ModelFacts) -> dict[str, Any] | None:
    auto = model.config.autoscaling
    if not auto.enabled:
        return None
    target, source = running_target(model)
    specs = scaling_specs(model)
    out = {
        "target_running_per_replica": target,
        "target_running_source": source,
        "waiting_per_replica": auto.waiting_per_replica,
        "scale_down_delay_seconds": auto.scale_down_delay_seconds,
        "scale_up": _scale_up_json(specs[-1]),
    }
    if len(specs) > 1:
        # P/D: per decode engine / per prefill engine; each side its own range and steps.
        out["sides"] = {
            s.side: {
                "deployment": s.deployment,
                "min_engines": s.min_replicas,
                "max_engines": s.max_replicas,
                "scales_on": "queue" if s.side == "prefill" else "in_flight",
                "scale_up": _scale_up_json(s),
            }
            for s in specs
        }
    return out


def _scale_up_json(spec: ScalingSpec) -> dict[str, Any]:
    """The HPA scale-up policy a ScaledObject carries, sized by the model's time-to-ready."""
    policy = scale_up_policy(spec.time_to_ready_seconds, spec.min_replicas, spec.max_replicas, spec.replicas_per_node)
    return {"time_to_ready_seconds": spec.time_to_ready_seconds, **policy.to_json()}


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


# --------------------------------------------------------------------------- component specs


def observed_models(models: list[ModelFacts] | tuple[ModelFacts, ...]) -> list[ObservedModel]:
    """The models as the monitoring sees them. A model's share of its pool's billed cost is its
    GPUs per node over those of every model in `models` on the same pool (layouts are fixed, so
    the share is a constant; a pool with one model → 1.0)."""
    pool_gpus: dict[str, int] = {}
    for m in models:
        pool_gpus[m.pool.name] = pool_gpus.get(m.pool.name, 0) + m.layout.gpus_per_node_used
    out = []
    for m in models:
        price = m.pool.node_usd_per_hour
        pd = pd_observed(m)
        out.append(
            ObservedModel(
                name=m.config.name,
                served_model_name=m.config.api_model_name,
                namespace=INFERENCE_NAMESPACE,
                ttft_p90_ms=m.config.slo.ttft_p90_ms,
                tpot_p90_ms=m.config.slo.tpot_p90_ms,
                gpus_per_replica=m.layout.gpus_per_replica,
                # A rollout's candidate engines are the model's too (its Service, its ready pods).
                replicas=(
                    pd.prefill_engines + pd.decode_engines
                    if pd is not None
                    else m.layout.replicas_for_nodes(m.pool.min_node_count) + (m.rollout.split.candidate_replicas if m.rollout else 0)
                ),
                usd_per_gpu_hour=(price / m.pool.gpu.gpus) if price is not None else None,
                pool=m.pool.name,
                usd_per_node_hour=price,
                pool_gpu_share=m.layout.gpus_per_node_used / pool_gpus[m.pool.name],
                deployment=pd.decode_deployment if pd is not None else deployment_name(model_service_spec(m, None)),
                workload="statefulset" if m.layout.multi_node else "deployment",
                predicted_ready_seconds=m.readiness.rollout_s if m.readiness is not None else None,
                pd=pd,
                prefix_cache_planned_hit=m.sessions.chosen.hit.total if m.sessions is not None else None,
                kv_offload=m.kv_offload is not None,
                prediction=prediction_of(m.plan.chosen, m.config.workload.input_tokens, m.config.workload.output_tokens),
                candidate_gpus_per_replica=m.rollout.candidate_layout.gpus_per_replica if m.rollout else None,
            )
        )
    return out


def pd_observed(model: ModelFacts) -> PdObserved | None:
    """The sides of a P/D model as the monitoring sees them (names from infra/render/pd_service.py);
    None for a colocated layout."""
    if not getattr(model.layout, "disaggregated", False):
        return None
    spec = model_service_spec(model, None)
    pd = pd_service.PdServiceSpec(spec, spec.layout, units=spec.replicas)
    return PdObserved(
        connector=pd.connector or "none",
        prefill_deployment=pd_service.side_name(pd, "prefill"),
        decode_deployment=pd_service.side_name(pd, "decode"),
        router_deployment=pd_service.router_spec(pd).name,
        prefill_engines=pd.pd.prefill_instances * pd.units,
        decode_engines=pd.pd.decode_instances * pd.units,
        prefill_tp=pd.pd.prefill_tp,
        decode_tp=pd.pd.decode_tp,
        decode_max_num_seqs=pd.pd.decode_max_num_seqs,
    )


def running_target(model: ModelFacts) -> tuple[int, str]:
    """(target in-flight requests per replica, "config" | "plan") for the autoscaler's main trigger.

    Unset in the config: RUNNING_HEADROOM × the requests one replica has running at the planner's
    SLO goodput (the "N running per replica" of the plan's reason), at least 1; a layout that
    meets the SLO at no load thus scales up on any load.
    """
    explicit = model.config.autoscaling.target_running_per_replica
    if explicit is not None:
        return explicit, "config"
    return max(1, math.floor(RUNNING_HEADROOM * model.plan.chosen.running_per_replica)), "plan"


def _running_target_problems(model: ModelFacts, index: int) -> list[Problem]:
    """An explicit in-flight target no replica of the layout can reach: vLLM runs at most
    max_num_seqs per engine (DP rank), so the HPA would never see it and never scale up."""
    explicit = model.config.autoscaling.target_running_per_replica
    layout = model.layout
    cap = layout.max_num_seqs * layout.dp
    if explicit is None or explicit <= cap:
        return []
    group = f" (one group over {layout.nodes_per_replica} nodes)" if layout.multi_node else ""
    what = "a decode engine" if getattr(layout, "disaggregated", False) else "a replica"
    return [
        Problem(
            f"{NS}models[{index}].autoscaling.target_running_per_replica",
            f"{explicit} is more than {what} of layout {layout.name}{group} can run: max_num_seqs {layout.max_num_seqs}"
            f" × dp {layout.dp} = {cap}; give 1..{cap}, or leave it unset to derive it from the plan",
        )
    ]


def scaling_spec(model: ModelFacts) -> ScalingSpec:
    """A model's autoscaling on in-flight load and the queue between its pool's node bounds.

    A replica over several nodes is one LeaderWorkerSet group of nodes_per_replica nodes: KEDA
    scales the LeaderWorkerSet (its scale subresource counts groups) between min_nodes and
    max_nodes in whole groups, one group at least per step; its vLLM series come from the leaders
    only (`component="vllm"`), each reporting its group's requests, so the per-replica targets
    count the whole group as the plan does (running requests over all its DP ranks)."""
    (observed,) = observed_models([model])
    layout = model.layout
    auto = model.config.autoscaling
    return ScalingSpec(
        model=observed,
        deployment=observed.deployment,
        min_replicas=layout.replicas_for_nodes(model.pool.min_node_count),
        max_replicas=layout.replicas_for_nodes(model.pool.max_node_count),
        replicas_per_node=layout.replicas_per_node,
        target=LWS_TARGET if layout.multi_node else DEPLOYMENT_TARGET,
        running_per_replica=running_target(model)[0],
        waiting_per_replica=auto.waiting_per_replica,
        scale_down_delay_seconds=auto.scale_down_delay_seconds,
        prometheus_url=prometheus_url(),
        time_to_ready_seconds=model.readiness.scale_up_s if model.readiness is not None else 0,
    )


def scaling_specs(model: ModelFacts) -> list[ScalingSpec]:
    """The model's ScaledObjects: one, or for a P/D model one per side (units within one node).

    A side scales its own Deployment: the prefill side on its queue per prefill engine, the decode
    side on in-flight requests per decode engine (the plan's running requests per decode engine ×
    RUNNING_HEADROOM, as for a colocated replica). Its floor is its engines at min_nodes; its
    ceiling the engines of its TP the pool's max_nodes hold next to the other side's floor (P/D
    engines never ask for more GPUs than the pool has); a step adds a node's worth of its engines.
    """
    base = scaling_spec(model)
    pd = base.model.pd
    if pd is None:
        return [base]
    layout = model.layout
    gpus = model.pool.gpu.gpus
    units = layout.replicas_for_nodes(model.pool.min_node_count)
    pool_gpus = model.pool.max_node_count * gpus
    sides = {
        "prefill": (layout.prefill_instances, layout.prefill_tp, pd.prefill_deployment),
        "decode": (layout.decode_instances, layout.decode_tp, pd.decode_deployment),
    }
    out = []
    for role, other in (("prefill", "decode"), ("decode", "prefill")):
        instances, tp, deployment = sides[role]
        other_instances, other_tp, _ = sides[other]
        floor = instances * units
        ceiling = max(floor, (pool_gpus - other_instances * units * other_tp) // tp)
        out.append(
            replace(base, deployment=deployment, min_replicas=floor, max_replicas=ceiling, replicas_per_node=max(1, gpus // tp), side=role)
        )
    return out


def gpu_runtime_facts(cfg: StackConfig) -> GpuRuntimeFacts:
    amd = any(p.gpu.vendor == "amd" for p in cfg.gpu_pools)
    return GpuRuntimeFacts(vendor="amd" if amd else "nvidia", mode=cfg.gpu_runtime.mode, metrics_exporter=amd)


def model_service_spec(
    model: ModelFacts,
    cache_pvc: str | None,
    *,
    secrets: frozenset[str] | set[str] = frozenset(),
    weights: SpacesWeights | None = None,
    compile_cache: str | None = None,
    key_path: str = "",
) -> ModelServiceSpec:
    """Config + planned layout → the model-service renderer's input.

    `secrets`: the secret keys the stack stores; each becomes a Kubernetes Secret the pods read.
    `weights`: the Spaces bucket (model_cache.kind spaces); `compile_cache`: "shared" (NFS) or
    "node". The startup probe's budget is the readiness plan's: every replica of the first
    rollout loading at once, caches cold.
    """
    layout = model.layout
    load_s = model.readiness.probe_budget_s if model.readiness is not None else 600
    return ModelServiceSpec(
        name=model.config.name,
        source=model.config.source,
        revision=model.config.revision,
        served_model_name=model.config.api_model_name,
        layout=layout,
        nodes_min=model.pool.min_node_count,
        nodes_max=model.pool.max_node_count,
        gpu=model.pool.gpu,
        pool_name=model.pool.name,
        namespace=INFERENCE_NAMESPACE,
        image=model.config.image,
        extra_args=tuple(model.config.extra_args),
        env=dict(model.config.env),
        cache=CacheSpec(pvc_name=cache_pvc) if cache_pvc else None,
        hf_token_secret=hf_token_secret_name(model.config.name) if "huggingface_token" in secrets else None,
        # issue 30: every engine checks a key in every environment (the stack's, or a generated one)
        api_key_secret=api_key_secret_name(model.config.name),
        estimated_load_seconds=load_s,
        max_model_len=layout.max_model_len,
        moe=bool(model.arch.is_moe),
        autoscaled=bool(model.config.autoscaling.enabled),
        weights=weights,
        compile_cache=compile_cache,
        kv_offload=model.kv_offload,
        key_path=key_path,
    )


def router_spec(cfg: StackConfig, models: list[ModelFacts], services: tuple[ModelServiceSpec, ...],
                node_selector: dict[str, str]) -> RouterSpec:
    """The environment's one router, serving every model. The engines' API-key Secrets all hold the
    stack's one `api_key`; the router reads the first model's (its Deployment waits for them all).
    Under router.kind gateway no router is declared (the gateway is the front door): kind service."""
    r = cfg.router
    keys = [s.api_key_secret for s in services if s.api_key_secret]
    if r.kind == "gateway":
        return RouterSpec(models=tuple(RoutedModel(s.name, s.served_model_name) for s in services), kind="service",
                          namespace=INFERENCE_NAMESPACE)
    return RouterSpec(
        models=tuple(RoutedModel(s.name, s.served_model_name) for s in services),
        kind=r.kind,
        replicas=r.replicas,
        namespace=INFERENCE_NAMESPACE,
        public=r.public,
        tls_certificate_id=r.tls_certificate_id,
        allowed_source_cidrs=tuple(r.allowed_source_cidrs),
        api_key_secret=keys[0] if keys else None,
        image=r.image,
        request_timeout_s=router_timeout_seconds(
            [(m.config.slo.ttft_p90_ms, m.config.slo.tpot_p90_ms, m.config.workload.output_tokens) for m in models]
        ),
        node_selector=dict(node_selector),
    )


def front_door(router: RouterSpec, services: tuple[ModelServiceSpec, ...]) -> FrontDoor:
    """Where clients go: the router's Service (and load balancer), or each model's Service."""
    served = tuple(sorted(s.served_model_name for s in services))
    if router.uses_router:
        urls: tuple[str, ...] = (f"{router.internal_url}/v1",)
        routing = f"vllm-router {router.policy}, by the request's model"
    else:
        urls = tuple(f"http://{s.name}.{s.namespace}.svc.cluster.local:{VLLM_PORT}/v1" for s in services)
        routing = "kube-proxy (per connection)"
    public = f"{public_base_url(bool(router.tls_certificate_id))}/v1" if router.public else None
    return FrontDoor(kind=router.kind, urls=urls, public_url=public, models=served, routing=routing,
                     why=POLICY_WHY[router.kind])


# --------------------------------------------------------------------------- cold start (issue 20)


def weight_source(cfg: StackConfig) -> WeightSource:
    """Where the stack's replicas read weights from, in the load model's terms."""
    mc = cfg.model_cache
    kind = {"nfs": "nfs", "spaces": "spaces", "none": "huggingface"}[mc.kind]
    return WeightSource(kind, nfs_tier=mc.tier, streamer_concurrency=mc.streamer_concurrency)


def readiness_plan(cfg: StackConfig, model: ModelFacts, provenance: Provenance | None) -> ReadinessPlan:
    """The load model for this model's layout and source; a bench measurement of the same source
    (provenance ready_seconds + weights_source) replaces its new-replica figure."""
    source = weight_source(cfg)
    measured = None
    if provenance is not None and provenance.ready_seconds is not None and provenance.weights_source == source.kind:
        measured = float(provenance.ready_seconds)
    layout = model.layout
    return plan_readiness(
        model.arch,
        source,
        gpus_per_replica=layout.gpus_per_replica,
        replicas_per_node=layout.replicas_per_node,
        first_rollout_replicas=layout.replicas_for_nodes(model.pool.min_node_count),
        measured_ready_seconds=measured,
        nodes_per_replica=layout.nodes_per_replica if layout.multi_node else 1,
    )


def weight_bucket_spec(cfg: StackConfig) -> tuple[WeightBucketSpec | None, SpacesWeights | None]:
    """The Spaces bucket and how replicas reach it; (None, None) unless model_cache.kind is spaces."""
    mc = cfg.model_cache
    if mc.kind != "spaces" or mc.bucket is None:
        return None, None
    spec = WeightBucketSpec(
        name=f"{cfg.stack}-weights",
        bucket=mc.bucket,
        region=cfg.spaces_region,
        namespace=INFERENCE_NAMESPACE,
        read_secret=SPACES_READ_SECRET,
        write_secret=SPACES_WRITE_SECRET,
        protect=cfg.protect,
    )
    weights = SpacesWeights(
        bucket=mc.bucket, region=cfg.spaces_region, prefix=mc.prefix, concurrency=mc.streamer_concurrency
    )
    return spec, weights


def image_prepull_spec(prefix: str, services: tuple[ModelServiceSpec, ...]) -> ImagePrepullSpec | None:
    """One pre-pull DaemonSet per GPU pool that serves a model, with the images its models run."""
    by_pool: dict[str, tuple[str, set[str]]] = {}
    for s in services:
        taint, images = by_pool.setdefault(s.pool_name, (s.gpu.taint_key, set()))
        images.add(s.resolved_image)
    if not by_pool:
        return None
    daemonsets = tuple(
        render_prepull_daemonset(PrepullSpec(pool_name=pool, images=tuple(sorted(images)), taint_key=taint, namespace=INFERENCE_NAMESPACE))
        for pool, (taint, images) in sorted(by_pool.items())
    )
    return ImagePrepullSpec(name=f"{prefix}-image-prepull", daemonsets=daemonsets)


def cold_start_notes(cfg: StackConfig) -> list[str]:
    """What the Spaces source still needs (the time-to-ready itself is in each model's entry)."""
    notes: list[str] = []
    if cfg.model_cache.kind != "spaces":
        return notes
    if not cfg.spaces_credentials_set:
        notes.append(
            "model_cache.kind spaces: the DigitalOcean provider creates the bucket with a Spaces key: "
            "`pulumi config set digitalocean:spacesAccessId ...` and `pulumi config set --secret "
            "digitalocean:spacesSecretKey ...` (or SPACES_ACCESS_KEY_ID / SPACES_SECRET_ACCESS_KEY) before `pulumi up`"
        )
    for m in cfg.models:
        if m.image and versions.vllm_version_of_image(m.image) is None:
            notes.append(
                f"model {m.name}: cannot tell the vLLM version of image {m.image!r}; streaming from Spaces needs "
                f"vLLM ≥ {versions.VLLM_RUNAI_STREAMER_MIN_VERSION} with the runai-model-streamer s3 extra"
            )
    return notes


# --------------------------------------------------------------------------- gateway (issue 17)


def gateway_pool_specs(cfg: StackConfig, services: tuple[ModelServiceSpec, ...], system_node_selector: dict[str, str]) -> tuple[PoolSpec, ...]:
    """Every model's InferencePool + endpoint picker + route, from router.gateway and its SLO."""
    gw = cfg.router.gateway
    weights = dict(gw.scorers) if gw.scorers else preset_weights(gw.routing)
    scorers = tuple(weights.items())  # the preset's (or the config's) order
    by_name = {m.name: m for m in cfg.models}
    pools = []
    for s in services:
        model = by_name[s.name]
        pools.append(
            PoolSpec(
                model=s.name,
                served_model_name=s.served_model_name,
                scorers=scorers,
                gateway_name="inference-gateway",
                namespace=INFERENCE_NAMESPACE,
                session_header=cfg.router.session_header,
                failure_mode=FAILURE_MODES[gw.failure_mode],
                request_timeout_seconds=route_timeout_seconds(model.slo.ttft_p90_ms, model.slo.tpot_p90_ms, model.workload.output_tokens),
                objectives=tuple((o.name, o.priority) for o in gw.objectives if o.model == s.name),
                system_node_selector=dict(system_node_selector),
            )
        )
    return tuple(pools)


def gateway_spec(
    cfg: StackConfig,
    services: tuple[ModelServiceSpec, ...],
    system_node_selector: dict[str, str],
    monitoring: MonitoringSettings | None,
) -> GatewaySpec | None:
    """The environment's gateway under router.kind gateway (else None). Raises ConfigError when a
    model's pool would select another model's engine pods."""
    if cfg.router.kind != "gateway":
        return None
    r = cfg.router
    pools = gateway_pool_specs(cfg, services, system_node_selector)
    pod_labels = {s.name: render_deployment(s)["spec"]["template"]["metadata"]["labels"] for s in services}
    index = {m.name: i for i, m in enumerate(cfg.models)}
    problems = [
        Problem(
            f"{NS}models[{index[model]}].name",
            f"{model!r}: its InferencePool's selector would also select the engine pods of models[{index[other]}] "
            f"({other!r}); every model needs its own engine labels (names must be unique)",
        )
        for model, other in selection_conflicts(pools, pod_labels)
    ]
    if problems:
        raise ConfigError(problems, source=f"stacks/Pulumi.{cfg.stack}.yaml")
    checks_keys = r.gateway.authentication == "api-key"  # the stack's key, or the generated one
    # The engines check the key in every case (issue 30): the gateway always sends it upstream.
    return GatewaySpec(
        name=f"{cfg.stack}-gateway",
        pools=pools,
        namespace=INFERENCE_NAMESPACE,
        replicas=r.replicas,
        public=r.public,
        tls_certificate_id=r.tls_certificate_id,
        allowed_source_cidrs=tuple(r.allowed_source_cidrs),
        api_key_secret="inference-gateway-api-key",
        checks_client_keys=checks_keys,
        install_gateway_api_crds=install_gateway_api_crds(r.gateway, cfg.network),
        system_node_selector=dict(system_node_selector),
        monitoring=monitoring,
    )
