"""No silent ignores: every key the user wrote takes effect, or is refused, or is noted with why.

Read from what the user wrote (pydantic's `model_fields_set`: keys given in the stack file, not
defaults) against what the plan decided. A key that cannot take effect in this plan is an error
naming why (autoscaling settings on a model that does not autoscale); a consequence the user may
not see is a note (an autoscaling pool nothing scales).
"""

from __future__ import annotations

from infra.config.router import session_header_in_effect
from infra.errors import Problem
from infra.invariants.keypaths import KeyPaths
from infra.stack_plan import StackPlan


def _why_autoscaling_off(plan: StackPlan, index: int) -> str:
    cfg = plan.config
    model = cfg.models[index]
    pool = cfg.pool(model.pool)
    if not cfg.observability.enabled:
        return "observability is off (KEDA reads the queue from Prometheus)"
    if pool.min_node_count >= pool.max_node_count:
        return f"pool {pool.name!r} has a fixed node count"
    if sum(1 for m in cfg.models if m.pool == model.pool) > 1:
        return f"pool {pool.name!r} is shared with other models"
    return "autoscaling.enabled is false or its layout grows in whole units only"


def _section_rules(plan: StackPlan) -> list[tuple[str, object, tuple[str, ...], str | None]]:
    """(section key, its config, keys that would be ignored, why — None when they take effect)."""
    cfg = plan.config
    router, obs = cfg.router, cfg.observability
    amd = any(p.gpu.vendor == "amd" for p in cfg.gpu_pools)
    return [
        ("router", router, ("session_header",),
         None if session_header_in_effect(router) else
         "applies only with router.kind session, or router.kind gateway with router.gateway.routing session (or "
         f"session-affinity-scorer in router.gateway.scorers); kind is {router.kind!r}"
         + (f", routing {router.gateway.routing!r}" if router.kind == "gateway" else "")),
        ("router", router, ("replicas", "public", "allowed_source_cidrs", "image"),
         None if router.kind != "service" else "router.kind service runs no router (each model is reached at its own Service)"),
        ("router", router, ("image",),
         None if router.kind != "gateway" else "router.kind gateway runs Agentgateway, not the vLLM router image"),
        # Under kind service the rule above already names it (no router at all).
        ("router", router, ("allowed_source_cidrs",),
         None if router.public or router.kind == "service" else
         "the allow-list is the public load balancer's (loadBalancerSourceRanges) and router.public is false"),
        ("observability", obs, ("retention", "storage_gib", "alert_receiver", "runbook_url"),
         None if obs.enabled else "observability is off (observability.enabled)"),
        # While observability is off the rule above already names alert_receiver as a whole.
        ("observability.alert_receiver", obs.alert_receiver, ("channel",),
         None if obs.alert_receiver.kind == "slack" or not obs.enabled else
         f"the channel is a Slack receiver's (alert_receiver.kind is {obs.alert_receiver.kind!r})"),
        ("gpu_runtime", cfg.gpu_runtime, ("disable_numa_balancing",),
         None if amd else "the NUMA-balancing tuning runs on AMD GPU nodes only, and no pool is AMD"),
    ]


def check_ignores(plan: StackPlan, paths: KeyPaths) -> tuple[list[Problem], list[str]]:
    """Autoscaling settings on a model that does not autoscale are refused (the plan would drop them
    without a word); an autoscaling pool whose pods nothing scales is noted (its maximum in the
    cost table is never reached by itself)."""
    problems, notes = [], []
    for section, config, keys, why in _section_rules(plan):
        if why is None:
            continue
        for key in keys:
            # An explicit empty value (`allowed_source_cidrs: []`, `channel: null`) asks for nothing.
            if key in config.model_fields_set and getattr(config, key) not in (None, []):
                problems.append(Problem(paths.section(f"{section}.{key}"), f"takes no effect: {why}; remove it"))
    for i, model in enumerate(plan.config.models):
        if "think_time_s" in model.workload.model_fields_set and model.workload.turns_per_session == 1:
            problems.append(Problem(paths.model(model.name, "workload.think_time_s") or "", (
                "takes no effect: it is the time between a conversation's turns, and workload.turns_per_session "
                "is 1 (single prompts); set turns_per_session above 1 or remove it")))
        auto = model.autoscaling
        # `enabled` is resolved by the config (so always "set"); the other keys are set only when written.
        written = sorted(k for k in auto.model_fields_set if k != "enabled")
        if auto.enabled or not written or model.name in plan.config.rollout_suspends_autoscaling:
            continue  # suspended by a rollout: the settings apply again after it (a plan note says so)
        problems.append(Problem(paths.model(model.name, f"autoscaling.{written[0]}") or "", (
            f"takes no effect: replica autoscaling is off for {model.name} because {_why_autoscaling_off(plan, i)}; "
            "fix that or remove the autoscaling settings (allowed: autoscaling settings only where the model autoscales)")))
    for pool in plan.config.gpu_pools:
        if pool.min_node_count >= pool.max_node_count:
            continue
        users = [m for m in plan.config.models if m.pool == pool.name]
        if users and not any(m.autoscaling.enabled for m in users):
            notes.append(
                f"pool {pool.name}: nothing scales its pods (replica autoscaling is off for "
                f"{', '.join(m.name for m in users)}), so it stays at min_nodes {pool.min_node_count}; the cost "
                f"table's maximum ({pool.max_node_count} nodes) is only reached by hand"
            )
    return problems, notes
