"""A model's autoscaling as the plan decides it: the in-flight target per replica, the
ScaledObjects' specs (one per P/D side), and the plan file's `replicas.autoscaling` entry.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from infra.render.autoscaling import (
    DEPLOYMENT_TARGET,
    LWS_TARGET,
    RUNNING_HEADROOM,
    AutoscalingSpec,
    ScalingSpec,
    render_scaled_object,
    scale_up_policy,
)
from infra.render.observability import prometheus_url
from infra.stack_plan.facts import ModelFacts
from infra.stack_plan.monitoring import observed_models


def autoscaling_json(model: ModelFacts) -> dict[str, Any] | None:
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


def autoscaling_spec(prefix: str, models: list[ModelFacts], system_node_selector: dict[str, str]) -> AutoscalingSpec | None:
    """The ScaledObjects of every autoscaled model (one per P/D side); None when no model autoscales."""
    scaled = tuple(
        (m.config.name, render_scaled_object(s)) for m in models if m.config.autoscaling.enabled for s in scaling_specs(m)
    )
    if not scaled:
        return None
    return AutoscalingSpec(name=f"{prefix}-autoscaling", scaled_objects=scaled, system_node_selector=system_node_selector)
