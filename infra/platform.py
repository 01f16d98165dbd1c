"""Composition root: turns a validated StackConfig into the platform's components.

This is the only place that knows both the configuration and the components. It resolves every
model's layout with the planner first (pure, no Pulumi), then declares the components in dependency
order: network → cluster → GPU pools → GPU runtime → weight cache → model services → routers →
observability. The planning facts (layouts, reasons, cost) are kept in `PlatformFacts` for the
offline plan and the stack outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.catalog.cpu_sizes import CPU_PRICES_AS_OF, CPU_USD_PER_MONTH, HA_CONTROL_PLANE_USD_PER_MONTH
from infra.catalog.gpus import HOURS_PER_MONTH
from infra.config import NS, GpuPoolConfig, ModelConfig, StackConfig, zero_replica_notes
from infra.errors import ConfigError, Problem
from infra.planner.measured import CALIBRATE_BELOW, MeasuredGoodput, measured_goodput
from infra.planner.search import nodes_for_peak, usd_per_million_output_tokens

# Set by `build_platform`; the offline runner reads it after the program ran.
LAST_FACTS: PlatformFacts | None = None

INFERENCE_NAMESPACE = "inference"


@dataclass
class ModelFacts:
    """One model's resolved layout and the planner's view of it."""

    config: ModelConfig
    pool: GpuPoolConfig
    arch: Any
    plan: Any  # infra.planner.ModelPlan
    measured: MeasuredGoodput | None = None  # from the layout's provenance (`infra tune ingest --write`)

    @property
    def layout(self):
        return self.plan.chosen.layout

    @property
    def goodput_rps_per_node(self) -> float:
        """What sizes the pool: the measurement when there is one, else the prediction."""
        return self.measured.goodput_rps_per_node if self.measured else self.plan.chosen.goodput_rps_per_node

    @property
    def nodes_needed(self) -> int | None:
        return nodes_for_peak(self.config.workload.peak_rps, self.goodput_rps_per_node)

    def measured_json(self) -> dict[str, Any] | None:
        """The measurement next to (never in place of) the prediction in the plan's models[]."""
        if self.measured is None:
            return None
        mg = self.measured
        predicted = self.plan.chosen.goodput_rps_per_node
        usd_per_m = usd_per_million_output_tokens(
            self.pool.node_usd_per_hour, mg.goodput_rps_per_node, self.config.workload.output_tokens
        )
        return {
            "goodput_rps_per_node": round(mg.goodput_rps_per_node, 3),
            "measured_at": mg.measured_at,
            "vllm_version": mg.vllm_version,
            "image": mg.image,
            "predicted_at_measurement_rps": mg.predicted_at_measurement_rps,
            "vs_predicted": round(mg.goodput_rps_per_node / predicted, 3) if predicted > 0 else None,
            "nodes_needed": self.nodes_needed,
            "usd_per_million_output_tokens": None if usd_per_m is None else round(usd_per_m, 3),
        }


@dataclass
class PlatformFacts:
    """What the program decided, as plain data: for the offline plan's summary and the outputs."""

    config: StackConfig
    models: list[ModelFacts] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Config problems found while planning (an SLO no layout meets, ...): deploying would be wrong,
    # but `infra bench` still measures such models; `check` raises them where the program is built.
    problems: list[Problem] = field(default_factory=list)

    def check(self) -> None:
        """Raise the planning problems of every model together, as one ConfigError."""
        if self.problems:
            raise ConfigError(self.problems, source=f"stacks/Pulumi.{self.config.stack}.yaml")

    def models_json(self) -> list[dict[str, Any]]:
        out = []
        for m in self.models:
            chosen = m.plan.chosen
            layout = chosen.layout
            out.append(
                {
                    "name": m.config.name,
                    "source": m.config.source,
                    "pool": m.pool.name,
                    "layout_source": "auto" if m.config.layout is None else "explicit",
                    "layout": {
                        "name": layout.name,
                        "tp": layout.tp,
                        "ep": layout.ep,
                        "dp": layout.dp,
                        "replicas_per_node": layout.replicas_per_node,
                        "max_num_seqs": layout.max_num_seqs,
                        "max_num_batched_tokens": layout.max_num_batched_tokens,
                        "gpu_memory_utilization": layout.gpu_memory_utilization,
                        "kv_cache_dtype": layout.kv_cache_dtype,
                        "max_model_len": layout.max_model_len,
                    },
                    "replicas": {
                        "min": layout.replicas_per_node * m.pool.min_node_count,
                        "max": layout.replicas_per_node * m.pool.max_node_count,
                        "autoscaling": _autoscaling_json(m),
                    },
                    "predicted": _rounded(chosen.to_json()),
                    "reason": m.plan.reason,
                    "alternatives": [c.layout.name for c in m.plan.candidates[1:4] if c.fits],
                }
            )
            if m.measured is not None:
                out[-1]["measured"] = _rounded(m.measured_json())
        return out

    def pools_json(self) -> list[dict[str, Any]]:
        out = []
        for p in self.config.gpu_pools:
            out.append(
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
                }
            )
        return out

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
    return {
        "target_running_per_replica": target,
        "target_running_source": source,
        "waiting_per_replica": auto.waiting_per_replica,
        "scale_down_delay_seconds": auto.scale_down_delay_seconds,
    }


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


def plan_models(cfg: StackConfig, base_dir: Path | None = None) -> PlatformFacts:
    """Resolve every model's layout (pure: no Pulumi). `layout: auto` runs the planner's search.

    An SLO no layout can meet is a config error, not a plan with goodput 0: deploying it would
    serve every request late. Such problems of all models are collected in `facts.problems`
    (raised by `facts.check()` where the program is built), so `infra bench` can still measure.
    """
    from infra.catalog.models import resolve_model
    from infra.planner import plan_model, slo_shortfall

    facts = PlatformFacts(config=cfg)
    problems = facts.problems
    for model in cfg.models:
        pool = cfg.pool(model.pool)
        hf_path = None
        if model.hf_config:
            hf_path = Path(model.hf_config)
            if not hf_path.is_absolute() and base_dir is not None:
                hf_path = base_dir / hf_path
        arch = resolve_model(model.source, str(hf_path) if hf_path else None)
        explicit = model.layout.to_layout() if model.layout is not None else None
        slo = model.slo.to_slo()
        plan = plan_model(
            arch,
            pool.gpu,
            model.workload.to_workload(),
            slo,
            explicit,
            usd_per_hour=pool.node_usd_per_hour,
        )
        measured, bad = measured_goodput(model.layout.provenance if model.layout is not None else None)
        problems += [Problem(f"{NS}models[{model.name}].layout.provenance.{key}", msg) for key, msg in bad]
        facts.models.append(ModelFacts(config=model, pool=pool, arch=arch, plan=plan, measured=measured))
        chosen = plan.chosen
        problems += _running_target_problems(facts.models[-1])
        if not chosen.fits:
            facts.notes.append(f"model {model.name}: the layout {chosen.layout.name} does not fit in GPU memory")
        shortfall = slo_shortfall(plan, slo)
        if shortfall and explicit is None:
            problems.append(Problem(f"{NS}models[{model.name}].slo", shortfall))
        elif shortfall:
            # The user chose this layout (perhaps measured): say what it costs, do not overrule it.
            facts.notes.append(f"model {model.name}: {shortfall}; as configured it serves no load within the SLO")
        facts.notes += _sizing_notes(facts.models[-1], cfg.stack)
    facts.notes += zero_replica_notes(cfg)
    if cfg.observability.enabled and facts.models:
        from infra.render.slo_rules import slo_bucket_warnings

        facts.notes += slo_bucket_warnings(observed_models(facts))
    if cfg.missing_secrets:
        facts.notes.append(
            "secrets to set before `pulumi up`: " + ", ".join(f"pulumi config set --secret {k}" for k in cfg.missing_secrets)
        )
    return facts


def _sizing_notes(m: ModelFacts, stack: str) -> list[str]:
    """A peak beyond the pool, and a measurement that contradicts the prediction."""
    notes = []
    name, pool, peak = m.config.name, m.pool, m.config.workload.peak_rps
    needed = m.nodes_needed
    if peak and needed and needed > pool.max_node_count:
        notes.append(
            f"model {name}: peak {peak:g} req/s needs {needed} nodes of {pool.name} at the "
            f"{'measured' if m.measured else 'predicted'} goodput ({m.goodput_rps_per_node:.2f} req/s/node); "
            f"the pool allows at most {pool.max_node_count}"
        )
    predicted = m.plan.chosen.goodput_rps_per_node
    if m.measured and predicted > 0 and m.measured.goodput_rps_per_node < CALIBRATE_BELOW * predicted:
        measured = m.measured.goodput_rps_per_node
        notes.append(
            f"model {name}: measured goodput {measured:.2f} req/s/node ({m.measured.label()}) is "
            f"{measured / predicted:.2f}× the planner's {predicted:.2f} for {m.layout.name}; the pool is sized from "
            f"the measurement. Re-fit the {pool.gpu.accelerator.family} factors: "
            f"`infra tune calibrate <results> --stack {stack} --model {name}` (docs/tuning.md §6)"
        )
    if m.measured:
        changes = m.measured.changed_conditions(
            (m.config.slo.ttft_p90_ms, m.config.slo.tpot_p90_ms),
            (m.config.workload.input_tokens, m.config.workload.output_tokens),
            pool.gpu.slug,
        )
        if changes:
            notes.append(
                f"model {name}: the measured goodput of {m.layout.name} ({m.measured.label()}) was measured under "
                f"other conditions ({'; '.join(changes)}); it still sizes the pool. Re-run infra bench: "
                f"`infra bench {stack} {name}`, then `infra tune ingest <results> --stack {stack} --model {name} --write`"
            )
    return notes


@dataclass
class Secrets:
    """The stack's secret config values as Pulumi secret Outputs (None when not set)."""

    huggingface_token: Any = None
    api_key: Any = None
    grafana_admin_password: Any = None
    alert_webhook_url: Any = None


def build_platform(cfg: StackConfig, secrets: Secrets, base_dir: Path | None = None) -> dict[str, Any]:
    """Declare every component of the stack; returns the stack outputs."""
    import pulumi
    import pulumi_kubernetes as k8s

    from components.autoscaling import ReplicaAutoscaling, ReplicaAutoscalingArgs
    from components.cluster import DoksCluster, DoksClusterArgs, gpu_addon_flags
    from components.gpu_pool import GpuNodePool, GpuNodePoolArgs
    from components.gpu_runtime import GpuRuntime, GpuRuntimeArgs
    from components.model_cache import ModelCache, ModelCacheArgs
    from components.model_service import ModelService, ModelServiceArgs
    from components.network import (
        EnvironmentProject,
        EnvironmentProjectArgs,
        Network,
        NetworkArgs,
        standard_tags,
    )
    from components.observability import Observability, ObservabilityArgs
    from components.router import Router, RouterArgs
    from infra.render.autoscaling import render_scaled_object
    from infra.render.model_service import render_namespace

    global LAST_FACTS
    try:
        facts = plan_models(cfg, base_dir)
        facts.check()
    except ConfigError as err:
        raise _run_error(err) from None
    LAST_FACTS = facts

    env = cfg.environment
    prefix = f"{env}"
    tags = standard_tags(env)
    protect = cfg.protect

    network = Network(
        f"{prefix}-net",
        NetworkArgs(environment=env, region=cfg.region, vpc_cidr=cfg.network.vpc_cidr, protect=protect),
    )
    flags = gpu_addon_flags(
        {p.gpu.vendor for p in cfg.gpu_pools}, cfg.gpu_runtime.mode, bool(cfg.observability.enabled)
    )
    cluster = DoksCluster(
        f"{prefix}-doks",
        DoksClusterArgs(
            environment=env,
            region=cfg.region,
            version=cfg.cluster.version,
            vpc_id=network.vpc_id,
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
            gpu_flags=flags,
            protect=protect,
            tags=tuple(tags),
        ),
    )
    pools = {}
    for pool in cfg.gpu_pools:
        pools[pool.name] = GpuNodePool(
            f"{prefix}-pool-{pool.name}",
            GpuNodePoolArgs(
                cluster_id=cluster.cluster_id,
                pool_name=pool.name,
                gpu=pool.gpu,
                node_count=pool.nodes,
                min_nodes=pool.min_nodes,
                max_nodes=pool.max_nodes,
                partition_mode=pool.partition_mode,
                labels=pool.labels,
                tags=tuple(tags),
            ),
            pulumi.ResourceOptions(protect=protect),
        )
    amd_pools = [p.name for p in cfg.gpu_pools if p.gpu.vendor == "amd"]
    GpuRuntime(
        f"{prefix}-gpu-runtime",
        GpuRuntimeArgs(
            mode=cfg.gpu_runtime.mode,
            provider=cluster.provider,
            amd_pools=amd_pools,
            disable_numa_balancing=cfg.gpu_runtime.disable_numa_balancing,
            metrics_exporter=bool(cfg.observability.enabled),
            depends_on=list(pools.values()),
            deleted_with=cluster.cluster,
        ),
    )
    k8s_opts = pulumi.ResourceOptions(provider=cluster.provider, deleted_with=cluster.cluster)
    ns_obj = render_namespace(INFERENCE_NAMESPACE)
    namespace = k8s.core.v1.Namespace(
        f"{prefix}-ns-{INFERENCE_NAMESPACE}", metadata=ns_obj["metadata"], opts=k8s_opts
    )
    cache = None
    if cfg.model_cache.kind == "nfs":
        cache = ModelCache(
            f"{prefix}-weights",
            ModelCacheArgs(
                region=cfg.region,
                vpc_id=network.vpc_id,
                size_gib=cfg.model_cache.size_gib,
                tier=cfg.model_cache.tier,
                namespace=INFERENCE_NAMESPACE,
                provider=cluster.provider,
                protect=protect,
                tags=tuple(tags),
                depends_on=[namespace],
            ),
        )
    services = []
    for model in facts.models:
        service = ModelService(
            f"{prefix}-model-{model.config.name}",
            ModelServiceArgs(
                spec=model_service_spec(model, cache.pvc_name if cache else None, concurrent_loaders=_loaders(model)),
                provider=cluster.provider,
                hf_token=secrets.huggingface_token,
                api_key=secrets.api_key,
                depends_on=[namespace, pools[model.pool.name]] + ([cache] if cache else []),
            ),
            pulumi.ResourceOptions(deleted_with=cluster.cluster),
        )
        services.append(service)
        Router(
            f"{prefix}-router-{model.config.name}",
            # Not deleted_with the cluster: its Service of type LoadBalancer must be deleted on
            # destroy so that DOKS removes the DO load balancer (docs/architecture.md).
            RouterArgs(spec=router_spec(cfg, model, service.spec.api_key_secret), provider=cluster.provider, depends_on=[service]),
        )
    monitoring = None
    if cfg.observability.enabled:
        obs = cfg.observability
        monitoring = Observability(
            f"{prefix}-observability",
            ObservabilityArgs(
                provider=cluster.provider,
                grafana_admin_password=secrets.grafana_admin_password,
                models=observed_models(facts),
                gpu=gpu_runtime_facts(cfg),
                retention=obs.retention,
                storage_gib=obs.storage_gib,
                alert_receiver=obs.alert_receiver.kind,
                alert_webhook_url=secrets.alert_webhook_url,
                alert_slack_channel=obs.alert_receiver.channel,
                system_node_selector={"doks.digitalocean.com/node-pool": cluster.system_pool_name},
                runbook_url=obs.runbook_url,
                deleted_with=cluster.cluster,
            ),
            pulumi.ResourceOptions(depends_on=services),
        )
    scaling = [
        (render_scaled_object(scaling_spec(cfg, m)), [svc])
        for m, svc in zip(facts.models, services, strict=True)
        if m.config.autoscaling.enabled
    ]
    if scaling:
        ReplicaAutoscaling(
            f"{prefix}-autoscaling",
            ReplicaAutoscalingArgs(
                scaled_objects=scaling,
                system_node_selector={"doks.digitalocean.com/node-pool": cluster.system_pool_name},
                provider=cluster.provider,
                depends_on=[monitoring] if monitoring else [],
                deleted_with=cluster.cluster,
            ),
        )
    EnvironmentProject(
        f"{prefix}-project",
        EnvironmentProjectArgs(environment=env, resources=[cluster.cluster.cluster_urn]),
    )

    outputs: dict[str, Any] = {
        "environment": env,
        "region": cfg.region,
        "vpc_id": network.vpc_id,
        "cluster_id": cluster.cluster_id,
        "kubernetes_version": cluster.version,
        "kubeconfig": cluster.kubeconfig,
        "layouts": {m.config.name: m.layout.name for m in facts.models},
        "endpoints": {m.config.name: svc.endpoint for m, svc in zip(facts.models, services, strict=True)},
    }
    return outputs


def _run_error(err: ConfigError) -> ConfigError:
    """The same problems as an error both callers print as lines, without a traceback: the Pulumi
    language host does so for a RunError, `infra plan` (mock runtime) for a UserError."""
    from components.cluster import ConfigRunError

    return ConfigRunError(err.problems, source=err.source)


def observed_models(facts: PlatformFacts) -> list:
    """What the monitoring needs to know of each model (pure)."""
    return observed_models_of(facts.models)


def observed_models_of(models: list[ModelFacts]) -> list:
    """The models as the monitoring sees them. A model's share of its pool's billed cost is its
    GPUs per node over those of every model in `models` on the same pool (layouts are fixed, so
    the share is a constant; a pool with one model → 1.0)."""
    from infra.render.model_service import deployment_name
    from infra.render.slo_rules import ObservedModel

    pool_gpus: dict[str, int] = {}
    for m in models:
        pool_gpus[m.pool.name] = pool_gpus.get(m.pool.name, 0) + m.layout.gpus_per_node_used
    out = []
    for m in models:
        price = m.pool.node_usd_per_hour
        out.append(
            ObservedModel(
                name=m.config.name,
                served_model_name=m.config.api_model_name,
                namespace=INFERENCE_NAMESPACE,
                ttft_p90_ms=m.config.slo.ttft_p90_ms,
                tpot_p90_ms=m.config.slo.tpot_p90_ms,
                gpus_per_replica=m.layout.gpus_per_replica,
                replicas=m.layout.replicas_per_node * m.pool.min_node_count,
                usd_per_gpu_hour=(price / m.pool.gpu.gpus) if price is not None else None,
                pool=m.pool.name,
                usd_per_node_hour=price,
                pool_gpu_share=m.layout.gpus_per_node_used / pool_gpus[m.pool.name],
                deployment=deployment_name(model_service_spec(m, None)),
            )
        )
    return out


def running_target(model: ModelFacts) -> tuple[int, str]:
    """(target in-flight requests per replica, "config" | "plan") for the autoscaler's main trigger.

    Unset in the config: RUNNING_HEADROOM × the requests one replica has running at the planner's
    SLO goodput (the "N running per replica" of the plan's reason), at least 1; a layout that
    meets the SLO at no load thus scales up on any load.
    """
    from infra.render.autoscaling import RUNNING_HEADROOM

    explicit = model.config.autoscaling.target_running_per_replica
    if explicit is not None:
        return explicit, "config"
    return max(1, math.floor(RUNNING_HEADROOM * model.plan.chosen.running_per_replica)), "plan"


def _running_target_problems(model: ModelFacts) -> list[Problem]:
    """An explicit in-flight target no replica of the layout can reach: vLLM runs at most
    max_num_seqs per engine (DP rank), so the HPA would never see it and never scale up."""
    explicit = model.config.autoscaling.target_running_per_replica
    layout = model.layout
    cap = layout.max_num_seqs * layout.dp
    if explicit is None or explicit <= cap:
        return []
    return [
        Problem(
            f"{NS}models[{model.config.name}].autoscaling.target_running_per_replica",
            f"{explicit} is more than a replica of layout {layout.name} can run: max_num_seqs {layout.max_num_seqs}"
            f" × dp {layout.dp} = {cap}; give 1..{cap}, or leave it unset to derive it from the plan",
        )
    ]


def scaling_spec(cfg: StackConfig, model: ModelFacts):
    """A model's autoscaling on in-flight load and the queue between its pool's node bounds (pure)."""
    from infra.render.autoscaling import ScalingSpec
    from infra.render.observability import prometheus_url

    (observed,) = observed_models_of([model])
    rpn = model.layout.replicas_per_node
    auto = model.config.autoscaling
    return ScalingSpec(
        model=observed,
        deployment=observed.deployment,
        min_replicas=rpn * model.pool.min_node_count,
        max_replicas=rpn * model.pool.max_node_count,
        replicas_per_node=rpn,
        running_per_replica=running_target(model)[0],
        waiting_per_replica=auto.waiting_per_replica,
        scale_down_delay_seconds=auto.scale_down_delay_seconds,
        prometheus_url=prometheus_url(),
    )


def gpu_runtime_facts(cfg: StackConfig):
    from infra.render.observability import GpuRuntimeFacts

    amd = any(p.gpu.vendor == "amd" for p in cfg.gpu_pools)
    return GpuRuntimeFacts(vendor="amd" if amd else "nvidia", mode=cfg.gpu_runtime.mode, metrics_exporter=amd)


def _loaders(model: ModelFacts) -> int:
    """Replicas that load weights from the shared cache at once during a rollout (maxUnavailable)."""
    return 1


def model_service_spec(model: ModelFacts, cache_pvc: str | None, *, concurrent_loaders: int = 1):
    """Config + planned layout → the model-service renderer's input (pure)."""
    from infra.planner import estimated_load_seconds
    from infra.render.model_service import CacheSpec, ModelServiceSpec

    layout = model.layout
    load_s = estimated_load_seconds(
        model.arch,
        source="nfs" if cache_pvc else "huggingface",
        concurrent_loaders=concurrent_loaders,
        gpus_per_replica=layout.gpus_per_replica,
    )
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
        estimated_load_seconds=load_s,
        max_model_len=layout.max_model_len,
        moe=bool(model.arch.is_moe),
        autoscaled=bool(model.config.autoscaling.enabled),
    )


def router_spec(cfg: StackConfig, model: ModelFacts, api_key_secret: str | None):
    """Config → the router renderer's input (pure)."""
    from infra.render.router import RouterSpec

    r = cfg.router
    return RouterSpec(
        model=model.config.name,
        kind=r.kind,
        session_header=r.session_header,
        replicas=r.replicas,
        namespace=INFERENCE_NAMESPACE,
        public=r.public,
        tls_certificate_id=r.tls_certificate_id,
        allowed_source_cidrs=tuple(r.allowed_source_cidrs),
        api_key_secret=api_key_secret,
    )
