"""The model problems `plan_stack` raises by key path: a layout that fits nowhere (with the sizes
it would fit on), an `auto` multi-node layout the pool cannot hold whole, an in-flight autoscaling
target no replica can reach.
"""

from __future__ import annotations

from infra.catalog.gpus import GPU_SIZES
from infra.config import NS
from infra.domain import Layout
from infra.errors import Problem
from infra.planner.search import sizes_that_fit
from infra.stack_plan.facts import ModelFacts


def auto_multi_node_problems(m: ModelFacts, index: int) -> list[Problem]:
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


def does_not_fit(m: ModelFacts, index: int) -> Problem:
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
            if spanning and not (m.pool.fabric and m.pool.gpu.slug == spanning[0]) and m.pool.node_selector is None
            else f"no single node of any GPU size holds it, and a replica over {spanning[1]} nodes of {spanning[0]} needs "
            "DigitalOcean's fabric pools, which existing-cluster mode (cluster.existing) does not have; choose a smaller or "
            "quantized checkpoint"
            if spanning and m.pool.node_selector is not None
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


def running_target_problems(model: ModelFacts, index: int) -> list[Problem]:
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


def rollout_node_problems(models: list[ModelFacts]) -> list[Problem]:
    """Rollout candidates' extra nodes join their model's pool for the rollout (stack_plan/cluster.py
    `pool_specs`): the grown pool must stay within its node limit (64 for a fabric size, 512 for
    any DOKS pool), or DOKS refuses the node count mid-`pulumi up`. Reported at the first rollout
    on the pool."""
    from infra.config.pools import node_limit

    problems = []
    by_pool: dict[str, list[tuple[int, ModelFacts]]] = {}
    for index, m in enumerate(models):
        if m.rollout is not None and m.rollout.extra_nodes:
            by_pool.setdefault(m.pool.name, []).append((index, m))
    for rollouts in by_pool.values():
        index, first = rollouts[0]
        pool = first.pool
        extra = sum(m.rollout.extra_nodes for _, m in rollouts)
        limit, what = node_limit(pool.gpu)
        if pool.max_node_count + extra > limit:
            models = ", ".join(f"models[{i}] {m.rollout.extra_nodes}" for i, m in rollouts)
            problems.append(Problem(f"{NS}models[{index}].rollout.weight", (
                f"{first.config.rollout.weight} % needs {extra} extra node(s) of pool {pool.name!r} for the candidate's engines "
                f"({models}), which takes the pool from {pool.max_node_count} to {pool.max_node_count + extra} nodes, past {limit}, "
                f"{what}; give a lower weight, a candidate layout that fits the GPUs the pool leaves free, or fewer pool nodes")))
    return problems
