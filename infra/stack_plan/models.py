"""Every model's planned layout: `layout: auto` runs the planner's search, an explicit layout is
predicted; with each model's readiness, sessions, rollout candidate, notes and problems.
"""

from __future__ import annotations

from dataclasses import replace

from infra.catalog.models import resolve_model
from infra.config import NS, StackConfig, gated_models, rollout_autoscaling_notes, zero_replica_notes
from infra.config.allow_lists import stack_exposure
from infra.config.router import client_keys_checked
from infra.errors import Problem
from infra.planner import plan_model, slo_shortfall
from infra.render.slo_rules import slo_bucket_warnings
from infra.rollout_plan import plan_rollout
from infra.session_plan import offload_fit_problems, session_decision
from infra.stack_factors import load_stack_factors, measured_notes
from infra.stack_plan.facts import ModelFacts
from infra.stack_plan.monitoring import observed_models
from infra.stack_plan.notes import api_key_note, pd_notes, sizing_notes, thin_kv_notes
from infra.stack_plan.problems import (
    auto_multi_node_problems,
    does_not_fit,
    rollout_node_problems,
    running_target_problems,
)
from infra.stack_plan.weights import cold_start_notes, readiness_plan


def plan_models(cfg: StackConfig) -> tuple[list[ModelFacts], list[str], list[Problem]]:
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
    telemetry = load_stack_factors(cfg.base_dir, cfg.stack, families={p.gpu.accelerator.family for p in cfg.gpu_pools})
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
            usd_per_hour=pool.node_usd_per_hour, fabric=pool.fabric, pool_nodes=pool.max_node_count, efficiency=efficiency,
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
        problems += running_target_problems(facts, index)
        problems += auto_multi_node_problems(facts, index)
        if not plan.chosen.fits:
            # Deploying it would crash-loop every replica: an error, for `auto` and explicit alike.
            problems.append(does_not_fit(facts, index))
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
        notes += sizing_notes(facts, cfg.stack)
        notes += thin_kv_notes(facts, cfg.stack)
        if explicit is None:
            notes += pd_notes(facts, efficiency)
        if telemetry is not None:
            notes += measured_notes(facts, telemetry)
    models = with_rollouts(models, cfg, efficiency)
    problems += rollout_node_problems(models)
    for index, m in enumerate(models):
        if m.rollout is not None and m.kv_offload is not None:  # the candidate's engines pin the same tier
            problems += offload_fit_problems(f"{NS}models[{index}]", m.pool.gpu, m.rollout.candidate_layout,
                                             m.kv_offload.kind, m.kv_offload.size_gib, " (the rollout candidate's engines)")
    notes += zero_replica_notes(cfg)
    notes += rollout_autoscaling_notes(cfg)
    notes += cold_start_notes(cfg)
    if cfg.observability.enabled and models:
        notes += slo_bucket_warnings(observed_models(models))
    if cfg.missing_secrets:
        notes.append(
            "secrets to set before `pulumi up`: " + ", ".join(f"pulumi config set --secret {k}" for k in cfg.missing_secrets)
        )
    notes.append(api_key_note(cfg.client_keys, front_door=cfg.router.kind != "service", checked=client_keys_checked(cfg.router)))
    exposed = stack_exposure(cfg.environment, cfg.cluster.api_allow_list, cfg.router)
    notes += list(exposed.notes) + [f"to fix before `pulumi up`: {b.path}: {b.message}" for b in exposed.blockers]
    return models, notes, problems


def with_rollouts(models: list[ModelFacts], cfg: StackConfig, efficiency=None) -> list[ModelFacts]:
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
            efficiency=efficiency,
        )
        out.append(replace(m, rollout=facts))
    return out
