"""Layout search: enumerate TP / EP / DP / replicas and batch limits, rank by goodput per node.

For each parallel shape that the model's heads and the node's GPUs allow, the node is filled with
as many replicas as fit (an idle GPU never raises goodput per node), each batch-token budget is
tried, the memory model decides what fits, and the performance model finds the highest request
rate whose p90 TTFT and TPOT meet the SLO. Candidates are ranked by goodput per node, then cost
per million output tokens, then fewer GPUs per replica, then name — a total order, so identical
inputs give identical plans.
"""

from __future__ import annotations

import math
from dataclasses import replace

from infra.catalog.gpus import GpuSize
from infra.catalog.models import ModelArch
from infra.domain import Layout, Slo, Workload
from infra.planner.candidates import (
    HEADROOM,
    Candidate,
    ClosedLoop,
    ModelPlan,
    PdCandidate,
    nodes_for_peak,
    usd_per_million_output_tokens,
    whole_replicas,
)
from infra.planner.checks import check_layout, shape_problems
from infra.planner.choice import (
    DEFAULT_RULES,
    GOODPUT_TIE,
    NEAR_TIE,
    assess,
    break_ties,
    given_up,
    rank_key,
    with_bench_commands,
)
from infra.planner.disaggregation import pd_candidates, pd_verdict
from infra.planner.efficiency import Band, EfficiencyTable, load_efficiency
from infra.planner.explain import (
    candidate_reason,
    explicit_reason,
    multi_node_text,
    plan_reason,
    slo_shortfall,
)
from infra.planner.memory import MemoryBreakdown, default_max_model_len, memory_per_gpu
from infra.planner.performance import Scenario, Scenarios

BATCHED_TOKEN_OPTIONS = (4096, 8192, 16384)
MAX_NUM_SEQS_CAP = 1024  # per engine (DP rank): beyond this vLLM's per-step CPU work dominates
REFINE_SHAPES = 4  # leading shapes whose token budget is tuned


def _pow2_at_least(x: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1.0, x))))


def enumerate_shapes(arch: ModelArch, gpu: GpuSize) -> list[tuple[int, bool, int, int]]:
    """(tp, ep, dp, replicas_per_node) shapes that the node and the model's heads allow, node filled."""
    n = gpu.gpus
    shapes = []
    for group in (g for g in range(1, n + 1) if n % g == 0):
        for tp in (t for t in range(1, group + 1) if group % t == 0):
            dp = group // tp
            for ep in (False, True) if arch.is_moe and group > 1 else (False,):
                shape = Layout(tp=tp, ep=ep, dp=dp, replicas_per_node=n // group)
                if not shape_problems(arch, gpu, shape):
                    shapes.append((tp, ep, dp, n // group))
    return shapes


# Nodes one replica may span in a search: wide EP over 2 or 4 nodes is where published multi-node
# vLLM/SGLang DeepSeek deployments sit; beyond that the all-to-all over the NIC dominates a step.
MULTI_NODE_COUNTS = (2, 4)
# Widening of the uncertainty band for a replica that spans nodes: the calibration set holds no
# multi-node measurement, so the RDMA collective model is a stated assumption, not a fit.
MULTI_NODE_BAND_LOW, MULTI_NODE_BAND_HIGH = 0.7, 1.2


def multi_node_shapes(arch: ModelArch, gpu: GpuSize, pool_nodes: int | None) -> list[tuple[int, bool, int, int]]:
    """(tp, ep, dp, nodes_per_replica) of replicas over MULTI_NODE_COUNTS whole nodes of a fabric
    size (at most the pool's nodes): with ep, dp ranks of every TP size a node divides into; without
    ep, one TP group over all the GPUs."""
    n = gpu.gpus
    shapes = []
    for nodes in MULTI_NODE_COUNTS:
        if pool_nodes is not None and nodes > pool_nodes:
            continue
        options = [(n * nodes, False, 1)]
        if arch.is_moe:
            options += [(tp, True, n * nodes // tp) for tp in range(1, n + 1) if n % tp == 0]
        for tp, ep, dp in options:
            if not shape_problems(arch, gpu, Layout(tp=tp, ep=ep, dp=dp, nodes_per_replica=nodes)):
                shapes.append((tp, ep, dp, nodes))
    return shapes


def multi_node_band(band: Band) -> Band:
    """The band of a replica that spans nodes: widened, no multi-node calibration data."""
    return Band(band.low * MULTI_NODE_BAND_LOW, band.high * MULTI_NODE_BAND_HIGH, band.rows, band.sources)



def sizes_that_fit(arch: ModelArch, workload: Workload, sizes: list[GpuSize]) -> list[GpuSize]:
    """The GPU sizes among `sizes` on which some layout of `arch` fits in memory for `workload`
    (memory arithmetic only, no performance search: cheap enough to ask of the whole catalog when
    a model fits nowhere on its pool). Same order as `sizes`."""
    context = workload.input_tokens + workload.output_tokens
    fitting = []
    for gpu in sizes:
        kv_dtype = "fp8" if gpu.accelerator.supports_fp8 else "auto"
        for tp, ep, dp, _replicas in enumerate_shapes(arch, gpu):
            # One replica of the widest shape is the most room a node can give a model.
            layout = Layout(
                tp=tp, ep=ep, dp=dp, replicas_per_node=1, kv_cache_dtype=kv_dtype, max_num_batched_tokens=BATCHED_TOKEN_OPTIONS[0]
            )
            layout = layout.with_(max_model_len=default_max_model_len(arch, context))
            if memory_per_gpu(arch, gpu, layout, context).fits:
                fitting.append(gpu)
                break
    return fitting



def _bottleneck(parts: dict[str, float]) -> str:
    """What a decode step spends most of its time on, from `Scenarios.breakdown` at one index."""
    memory = parts["weights"] + parts["kv"]
    named = {
        "overhead": parts["overhead"],
        "comm": parts["comm"],
        "weights": parts["weights"] if memory >= parts["compute"] else 0.0,
        "kv": parts["kv"] if memory >= parts["compute"] else 0.0,
        "compute": parts["compute"] if parts["compute"] > memory else 0.0,
    }
    return max(sorted(named), key=lambda k: named[k])


def _price(gpu: GpuSize, usd_per_hour: float | None) -> float | None:
    return usd_per_hour if usd_per_hour is not None else gpu.usd_per_hour


class _Context:
    """What every candidate of one plan shares."""

    def __init__(self, arch, gpu, workload, slo, usd_per_hour, efficiency):
        self.arch, self.gpu, self.workload, self.slo = arch, gpu, workload, slo
        self.price = _price(gpu, usd_per_hour)
        table = efficiency if efficiency is not None else load_efficiency()
        self.eff = table.for_family(gpu.accelerator.family, moe=arch.is_moe)
        self.band = table.band(gpu.accelerator.family, arch.is_moe)
        self.context_tokens = workload.input_tokens + workload.output_tokens
        self.kv_dtype = "fp8" if gpu.accelerator.supports_fp8 else "auto"


def _unfit(ctx: _Context, layout: Layout, problems: list[str], mem: MemoryBreakdown) -> Candidate:
    memory_only = not mem.fits and all(mem.problem in p for p in problems)
    limit = "memory" if memory_only else "layout"
    reason = f"{layout.name} cannot run: " + "; ".join(problems or [mem.problem]) + "."
    return Candidate(
        layout, False, mem, layout.gpus_per_node_used, 0.0, 0.0, 0.0, 0.0, None, None, None, None,
        ctx.price, None, limit, "", reason, tuple(problems or [mem.problem]), band=ctx.band,
    )


def _evaluate_many(
    ctx: _Context, layouts: list[Layout], *, tune_max_num_seqs: bool, concurrency: int | None
) -> list[Candidate]:
    """Every layout's memory fit, goodput within the SLO, load point and reason, the fitting ones
    evaluated together as one batch of scenarios."""
    arch, gpu, workload, slo = ctx.arch, ctx.gpu, ctx.workload, ctx.slo
    out: list[Candidate | None] = []
    runnable: list[tuple[int, Layout, MemoryBreakdown]] = []
    for layout in layouts:
        if layout.max_model_len is None:
            layout = layout.with_(max_model_len=default_max_model_len(arch, ctx.context_tokens))
        problems = check_layout(arch, gpu, layout)
        mem = memory_per_gpu(arch, gpu, _kv_normalised(layout), ctx.context_tokens)
        if problems or not mem.fits:
            out.append(_unfit(ctx, layout, problems, mem))
        else:
            runnable.append((len(out), layout, mem))
            out.append(None)
    if not runnable:
        return out  # type: ignore[return-value]
    model = Scenarios(
        [Scenario(arch, gpu.accelerator, gpu.gpus, _kv_normalised(lay), workload, ctx.eff) for _, lay, _ in runnable]
    )
    caps = [
        float(min(mem.max_concurrency_per_replica, (MAX_NUM_SEQS_CAP if tune_max_num_seqs else lay.max_num_seqs) * lay.dp))
        for _, lay, mem in runnable
    ]
    rates, points, limits = model.goodput(caps, slo.ttft_p90_ms / 1e3, slo.tpot_p90_ms / 1e3)
    running = [points.running[i] if points.stable[i] else 0.0 for i in range(model.size)]
    parts = model.breakdown([max(1.0, r) for r in running])
    closed = None
    if concurrency is not None:
        closed = model.closed_loop([concurrency / lay.replicas_per_node_share for _, lay, _ in runnable], caps)
    for i, (slot, layout, mem) in enumerate(runnable):
        point = points.at(i)
        rate = float(rates[i])
        limit = str(limits[i])
        if tune_max_num_seqs:
            per_rank = point.running / layout.dp if point.stable else 0.0
            kv_per_rank = max(1, mem.max_concurrency_per_replica // layout.dp)
            # Twice the mean running sequences (bursts), as a power of two, within the KV cache and the cap.
            seqs = min(MAX_NUM_SEQS_CAP, kv_per_rank, max(32, _pow2_at_least(2.0 * per_rank)))
            layout = layout.with_(max_num_seqs=int(seqs))
        r = layout.replicas_per_node_share
        per_node = rate * r
        gpus_used = layout.gpus_per_node_used
        out_tok_gpu = per_node * workload.output_tokens / gpus_used if gpus_used else 0.0
        breakdown = {k: float(v[i]) for k, v in parts.items()}
        bottleneck = _bottleneck(breakdown)
        cl = None
        if closed is not None:
            cl = ClosedLoop(
                concurrency=concurrency,
                total_tokens_per_s_per_node=float(closed.rate_rps[i]) * ctx.context_tokens * r,
                output_tokens_per_s_per_node=float(closed.output_tokens_per_s[i]) * r,
                ttft_mean_ms=float(closed.ttft_mean_s[i]) * 1e3,
                tpot_mean_ms=float(closed.tpot_mean_s[i]) * 1e3,
                ttft_p90_ms=float(closed.ttft_p90_s[i]) * 1e3,
                tpot_p90_ms=float(closed.tpot_p90_s[i]) * 1e3,
            )
        band = multi_node_band(ctx.band) if layout.multi_node else ctx.band
        reason = candidate_reason(layout, mem, arch, model.input_tokens[i], rate, point, limit, bottleneck, breakdown, slo)
        if layout.multi_node:
            reason += multi_node_text(layout, gpu, breakdown, band)
        if rate <= 0:
            limit = "slo"
        low = per_node * min(1.0, band.low)
        out[slot] = Candidate(
            layout=layout,
            fits=True,
            memory=mem,
            gpus_per_node=gpus_used,
            goodput_rps_per_replica=rate,
            goodput_rps_per_node=per_node,
            output_tokens_per_s_per_gpu=out_tok_gpu,
            running_per_replica=point.running if point.stable else 0.0,
            step_ms=point.step_s * 1e3 if point.stable else None,
            ttft_p90_ms=point.ttft_p90_s * 1e3 if point.stable else None,
            tpot_p90_ms=point.tpot_p90_s * 1e3 if point.stable else None,
            # Until the layout is measured, a pool is sized on the conservative end of the band.
            nodes_needed=whole_replicas(nodes_for_peak(workload.peak_rps, low), layout.nodes_per_replica),
            usd_per_hour=ctx.price,
            usd_per_million_output_tokens=usd_per_million_output_tokens(ctx.price, per_node, workload.output_tokens),
            limit=limit,
            bottleneck=bottleneck,
            reason=reason,
            closed_loop=cl,
            band=band,
        )
    return out  # type: ignore[return-value]


def predict_closed_loop(
    arch: ModelArch,
    gpu: GpuSize,
    layout: Layout,
    workload: Workload,
    concurrency: int,
    efficiency: EfficiencyTable | None = None,
) -> ClosedLoop | None:
    """Closed-loop prediction for one explicit layout at `concurrency` clients per node, split evenly
    over its replicas (what `infra layout --concurrency` uses). None if it cannot run."""
    table = efficiency if efficiency is not None else load_efficiency()
    eff = table.for_family(gpu.accelerator.family, moe=arch.is_moe)
    context = workload.input_tokens + workload.output_tokens
    if layout.max_model_len is None:
        layout = layout.with_(max_model_len=min(default_max_model_len(arch, context), arch.max_context))
    lay = _kv_normalised(layout)
    mem = memory_per_gpu(arch, gpu, lay, context)
    if not mem.fits:
        return None
    model = Scenarios([Scenario(arch, gpu.accelerator, gpu.gpus, lay, workload, eff)])
    r = layout.replicas_per_node_share
    n_max = float(min(mem.max_concurrency_per_replica, layout.max_num_seqs * layout.dp))
    cl = model.closed_loop(concurrency / r, n_max).at(0)
    return ClosedLoop(
        concurrency=concurrency,
        total_tokens_per_s_per_node=cl.rate_rps * context * r,
        output_tokens_per_s_per_node=cl.output_tokens_per_s * r,
        ttft_mean_ms=cl.ttft_mean_s * 1e3,
        tpot_mean_ms=cl.tpot_mean_s * 1e3,
        ttft_p90_ms=cl.ttft_p90_s * 1e3,
        tpot_p90_ms=cl.tpot_p90_s * 1e3,
    )


def _kv_normalised(layout: Layout) -> Layout:
    return layout.with_(kv_cache_dtype="fp8") if layout.kv_cache_dtype.startswith("fp8") else layout


def evaluate_layout(
    arch: ModelArch,
    gpu: GpuSize,
    workload: Workload,
    slo: Slo,
    layout: Layout,
    *,
    usd_per_hour: float | None = None,
    concurrency: int | None = None,
    efficiency: EfficiencyTable | None = None,
) -> Candidate:
    """Predictions for exactly this layout (its batch limits kept), without searching the others.

    What `infra tune calibrate` calls many times while fitting factors: the comparison with the
    search's winner that `plan_model` adds for explicit layouts would dominate its cost.
    """
    ctx = _Context(arch, gpu, workload, slo, usd_per_hour, efficiency)
    return _evaluate_many(ctx, [layout], tune_max_num_seqs=False, concurrency=concurrency)[0]


def evaluate_layouts(
    arch: ModelArch,
    gpu: GpuSize,
    workload: Workload,
    slo: Slo,
    layouts: list[Layout],
    *,
    usd_per_hour: float | None = None,
    efficiency: EfficiencyTable | None = None,
) -> list[Candidate]:
    """`evaluate_layout` for several layouts of one model at once (one batch of scenarios): what a
    fit that compares many measured layouts calls at every step."""
    ctx = _Context(arch, gpu, workload, slo, usd_per_hour, efficiency)
    return _evaluate_many(ctx, list(layouts), tune_max_num_seqs=False, concurrency=None)


def plan_model(
    arch: ModelArch,
    gpu: GpuSize,
    workload: Workload,
    slo: Slo,
    layout: Layout | None = None,
    *,
    usd_per_hour: float | None = None,
    tp: int | None = None,
    ep: bool | None = None,
    dp: int | None = None,
    replicas_per_node: int | None = None,
    concurrency: int | None = None,
    efficiency: EfficiencyTable | None = None,
    disaggregation: bool = False,
    fabric: bool = False,
    pool_nodes: int | None = None,
    bench_prefix: str = "infra bench STACK MODEL",
) -> ModelPlan:
    """Plan one model on one GPU size.

    layout None searches every shape (`layout: auto`); an explicit layout is validated and
    annotated with the same predictions (its batch limits are kept). tp/ep/dp/replicas_per_node
    restrict the search; `concurrency` adds a closed-loop prediction at that many clients per node.
    `disaggregation` adds prefill/decode candidates (`planner.disaggregation`; units across nodes
    only with `fabric`); a `PdLayout` as `layout` is evaluated as such. `bench_prefix` starts the
    `infra bench` command a held-back layout names (`choice.py`).
    """
    ctx = _Context(arch, gpu, workload, slo, usd_per_hour, efficiency)
    if layout is not None:
        if getattr(layout, "disaggregated", False):
            cand = pd_candidates(arch, gpu, workload, slo, ctx.eff, ctx.band, ctx.price, layouts=[layout], fabric=fabric,
                                 pool_nodes=pool_nodes, tune=False)[0]
        else:
            cand = _evaluate_many(ctx, [layout], tune_max_num_seqs=False, concurrency=concurrency)[0]
        best = plan_model(arch, gpu, workload, slo, usd_per_hour=usd_per_hour, efficiency=efficiency).chosen
        return ModelPlan(arch.id, gpu.slug, cand, [cand], explicit_reason(cand, best))
    shapes = [
        (s_tp, s_ep, s_dp, s_r)
        for s_tp, s_ep, s_dp, s_r in enumerate_shapes(arch, gpu)
        if (tp is None or s_tp == tp)
        and (ep is None or s_ep == ep)
        and (dp is None or s_dp == dp)
        and (replicas_per_node is None or s_r == replicas_per_node)
    ]
    candidates = _single_node_candidates(ctx, shapes, concurrency)
    unrestricted = tp is None and ep is None and dp is None and replicas_per_node is None
    if fabric and gpu.fabric and unrestricted:
        candidates += _multi_node_candidates(ctx, candidates, pool_nodes, concurrency)
    if not candidates:
        raise_no_shape(arch, gpu, tp, ep, dp, replicas_per_node)
    if disaggregation and unrestricted:
        pds = pd_candidates(arch, gpu, workload, slo, ctx.eff, ctx.band, ctx.price, fabric=fabric, pool_nodes=pool_nodes)
        candidates += assess(pds, workload, slo)
    ranked = with_bench_commands(break_ties(sorted(candidates, key=rank_key)), bench_prefix)
    plan = ModelPlan(arch.id, gpu.slug, ranked[0], ranked, choice_rules=DEFAULT_RULES.to_json())
    reason = plan_reason(plan, slo, arch.is_moe, given_up(ranked))
    if disaggregation:
        reason += pd_verdict(ranked)
    return replace(plan, reason=reason)


def _single_node_candidates(ctx: _Context, shapes: list[tuple[int, bool, int, int]], concurrency: int | None) -> list[Candidate]:
    """Every shape at the middle token budget; the other budgets only for the leading shapes (a
    budget moves TTFT and activation memory, rarely the order of shapes), in one second batch.
    One candidate per shape, its best budget, assessed by the choice rules."""
    middle = BATCHED_TOKEN_OPTIONS[1]
    others = [t for t in BATCHED_TOKEN_OPTIONS if t != middle]
    first = dict(zip(shapes, assess(_evaluate_many(ctx, _shape_layouts(ctx, shapes, middle), tune_max_num_seqs=True,
                                                   concurrency=concurrency), ctx.workload, ctx.slo), strict=True))
    leading = [sh for sh in sorted(shapes, key=lambda sh: rank_key(first[sh]))[:REFINE_SHAPES] if first[sh].fits]
    batch = [lay for tokens in others for lay in _shape_layouts(ctx, leading, tokens)]
    evaluated = assess(_evaluate_many(ctx, batch, tune_max_num_seqs=True, concurrency=concurrency), ctx.workload, ctx.slo)
    refined = {tokens: dict(zip(leading, evaluated[i * len(leading):(i + 1) * len(leading)], strict=True))
               for i, tokens in enumerate(others)}
    candidates: list[Candidate] = []
    for shape in shapes:
        best = first[shape]
        if shape in leading:
            for tokens in others:
                cand = refined[tokens][shape]
                if _better(cand, best, prefer_smaller=tokens < best.layout.max_num_batched_tokens):
                    best = cand
        candidates.append(best)
    return candidates


def _shape_layouts(ctx: _Context, shapes: list[tuple[int, bool, int, int]], tokens: int) -> list[Layout]:
    return [
        Layout(tp=s_tp, ep=s_ep, dp=s_dp, replicas_per_node=s_r, max_num_batched_tokens=tokens, kv_cache_dtype=ctx.kv_dtype)
        for s_tp, s_ep, s_dp, s_r in shapes
    ]


def _multi_node_candidates(ctx: _Context, single: list[Candidate], pool_nodes: int | None, concurrency: int | None) -> list[Candidate]:
    """Replicas over several nodes when no single node holds the model, or when wide EP could win
    (a MoE model: more experts' GPUs per replica, more KV room per GPU)."""
    if any(c.fits for c in single) and not ctx.arch.is_moe:
        return []
    wide = [
        Layout(tp=s_tp, ep=s_ep, dp=s_dp, nodes_per_replica=s_n, max_num_batched_tokens=BATCHED_TOKEN_OPTIONS[1],
               kv_cache_dtype=ctx.kv_dtype)
        for s_tp, s_ep, s_dp, s_n in multi_node_shapes(ctx.arch, ctx.gpu, pool_nodes)
    ]
    return assess(_evaluate_many(ctx, wide, tune_max_num_seqs=True, concurrency=concurrency), ctx.workload, ctx.slo)


def _better(a: Candidate, b: Candidate, *, prefer_smaller: bool) -> bool:
    """Within one shape: fits first, then goodput; goodputs within 0.5% are a tie, which the smaller
    token budget wins (less activation memory, shorter prefill stalls)."""
    if a.fits != b.fits:
        return a.fits
    if a.goodput_rps_per_node > b.goodput_rps_per_node * (1 + GOODPUT_TIE):
        return True
    return prefer_smaller and a.goodput_rps_per_node >= b.goodput_rps_per_node * (1 - GOODPUT_TIE)


def raise_no_shape(arch, gpu, tp, ep, dp, r):
    from infra.errors import UserError

    raise UserError(
        f"no layout of {arch.id} on {gpu.slug} matches tp={tp} ep={ep} dp={dp} replicas_per_node={r}; "
        f"tp must divide {gpu.gpus} and the model's heads, tp × dp × replicas must fill the node"
    )




__all__ = [
    "GOODPUT_TIE", "HEADROOM", "NEAR_TIE", "Candidate", "ClosedLoop", "ModelPlan", "PdCandidate", "enumerate_shapes",
    "evaluate_layout", "evaluate_layouts", "multi_node_shapes", "nodes_for_peak", "plan_model", "predict_closed_loop",
    "sizes_that_fit", "slo_shortfall", "usd_per_million_output_tokens",
]
