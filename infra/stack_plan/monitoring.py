"""The models as the monitoring sees them: names, SLOs, replica counts, GPU prices and shares,
P/D sides and rollouts, for the SLO rules, dashboards and alerts.
"""

from __future__ import annotations

from infra.config import StackConfig
from infra.render import pd_service
from infra.render.model_service import deployment_name
from infra.render.observability import GpuRuntimeFacts, MonitoringSettings, ObservabilitySpec
from infra.render.planner_prediction import prediction_of
from infra.render.rollout_rules import RolloutObserved
from infra.render.slo_rules import ObservedModel, PdObserved
from infra.stack_plan.facts import ModelFacts
from infra.stack_plan.namespaces import ENGINES_NAMESPACE, INFERENCE_NAMESPACE
from infra.stack_plan.services import model_service_spec


def observed_models(models: list[ModelFacts] | tuple[ModelFacts, ...], cfg: StackConfig | None = None) -> list[ObservedModel]:
    """The models as the monitoring sees them. A model's share of its pool's billed cost is its
    GPUs per node over those of every model in `models` on the same pool (layouts are fixed, so
    the share is a constant; a pool with one model → 1.0). `cfg` of an existing-cluster stack:
    each pool's nodes are counted by its node selector."""
    existing = cfg is not None and cfg.existing_cluster
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
                namespace=ENGINES_NAMESPACE,
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
                pool_selector=cfg.pool_selector(m.pool) if existing else None,
                pool_gpu_share=m.layout.gpus_per_node_used / pool_gpus[m.pool.name],
                deployment=pd.decode_deployment if pd is not None else deployment_name(model_service_spec(m, None)),
                workload="statefulset" if m.layout.multi_node else "deployment",
                predicted_ready_seconds=m.readiness.rollout_s if m.readiness is not None else None,
                pd=pd,
                prefix_cache_planned_hit=m.sessions.chosen.hit.total if m.sessions is not None else None,
                kv_offload_backend=m.kv_offload.backend if m.kv_offload is not None else None,
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


def rollouts_observed(models: list[ModelFacts]) -> tuple[RolloutObserved, ...]:
    observed = {o.name: o for o in observed_models(models)}
    return tuple(
        RolloutObserved(observed[m.config.name], m.layout.gpus_per_replica, m.rollout.candidate_layout.gpus_per_replica)
        for m in models
        if m.rollout is not None
    )


def gpu_runtime_facts(cfg: StackConfig) -> GpuRuntimeFacts:
    amd = any(p.gpu.vendor == "amd" for p in cfg.gpu_pools)
    return GpuRuntimeFacts(vendor="amd" if amd else "nvidia", mode=cfg.gpu_runtime.mode, metrics_exporter=amd)


def observability_spec(cfg: StackConfig, models: list[ModelFacts], system_node_selector: dict[str, str]) -> ObservabilitySpec | None:
    """Prometheus, Grafana and the SLO rules and alerts of every model (observability.enabled), else None."""
    if not cfg.observability.enabled:
        return None
    obs = cfg.observability
    return ObservabilitySpec(
        name=f"{cfg.stack}-observability",
        settings=MonitoringSettings(
            retention=obs.retention,
            storage_gib=obs.storage_gib,
            system_node_selector=system_node_selector,
            alert_receiver=obs.alert_receiver.kind,
            alert_slack_channel=obs.alert_receiver.channel,
            runbook_url=obs.runbook_url,
            front_door_namespace=INFERENCE_NAMESPACE,
            router_deployed=cfg.router.kind not in ("service", "gateway"),
            **(_existing_cluster_settings(cfg) if cfg.existing_cluster else {}),
        ),
        models=tuple(observed_models(models, cfg)),
        gpu=gpu_runtime_facts(cfg),
        rollouts=rollouts_observed(models),
    )


def _existing_cluster_settings(cfg: StackConfig) -> dict:
    """An existing cluster: volumes of its default StorageClass (it need not have DigitalOcean's),
    and its pools' selector labels exported for the billed-cost rules."""
    labels = sorted({key for pool in cfg.gpu_pools for key in cfg.pool_selector(pool)})
    return {"storage_class": None, "node_label_allowlist": tuple(labels)}
