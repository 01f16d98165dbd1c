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
from dataclasses import dataclass, field, replace

from infra.catalog.gpus import GpuSize
from infra.catalog.models import ModelArch
from infra.domain import Layout, Slo, Workload
from infra.planner.checks import check_layout, shape_problems
from infra.planner.efficiency import Band, EfficiencyTable, load_efficiency
from infra.planner.memory import MemoryBreakdown, default_max_model_len, memory_per_gpu
from infra.planner.performance import INF, LoadPoint, Scenario, Scenarios

HEADROOM = 1.2  # nodes are sized for peak_rps × 1.2, so the p90 SLO holds through bursts
BATCHED_TOKEN_OPTIONS = (4096, 8192, 16384)
MAX_NUM_SEQS_CAP = 1024  # per engine (DP rank): beyond this vLLM's per-step CPU work dominates
# Goodputs per node within 0.5% count as equal: the planner is not that precise. Cost per million
# output tokens is the pool's node price / goodput per node, the same price for every candidate,
# so within a tie it differs by < 0.5% too and counts as equal; the tie goes to fewer GPUs per
# replica (more, smaller replicas: a failure takes out less), then the smaller token budget.
GOODPUT_TIE = 0.005
# The chosen layout leads the runner-up by less than this: the reason says the order rests on the
# efficiency priors, not on a margin the performance model can vouch for.
NEAR_TIE = 0.05
REFINE_SHAPES = 4  # leading shapes whose token budget is tuned

_LIMIT_TEXT = {
    "ttft": "p90 TTFT reaches the SLO first (prefill queueing)",
    "tpot": "p90 TPOT reaches the SLO first (decode step time)",
    "capacity": "running sequences hit the KV-cache / max_num_seqs limit first",
    "throughput": "the GPUs saturate (prefill plus decode work) before either latency limit",
}
_BOTTLENECK_TEXT = {
    "weights": "reading weights (HBM bandwidth)",
    "kv": "reading the KV cache (HBM bandwidth)",
    "compute": "compute",
    "comm": "collective communication",
    "overhead": "engine overhead (scheduler, sampling, kernel launches)",
}


@dataclass(frozen=True)
class ClosedLoop:
    """Prediction at a fixed number of concurrent clients per node (benchmark comparison mode)."""

    concurrency: int
    total_tokens_per_s_per_node: float
    output_tokens_per_s_per_node: float
    ttft_mean_ms: float
    tpot_mean_ms: float
    ttft_p90_ms: float
    tpot_p90_ms: float


@dataclass(frozen=True)
class Candidate:
    """One layout with its memory breakdown, predictions at goodput, cost and reason."""

    layout: Layout
    fits: bool
    memory: MemoryBreakdown
    gpus_per_node: int
    goodput_rps_per_replica: float
    goodput_rps_per_node: float
    output_tokens_per_s_per_gpu: float
    running_per_replica: float
    step_ms: float | None
    ttft_p90_ms: float | None
    tpot_p90_ms: float | None
    nodes_needed: int | None
    usd_per_hour: float | None
    usd_per_million_output_tokens: float | None
    limit: str  # memory | layout | ttft | tpot | capacity | throughput | slo
    bottleneck: str  # weights | kv | compute | comm | overhead | "" when it does not fit
    reason: str
    problems: tuple[str, ...] = ()
    closed_loop: ClosedLoop | None = None
    # measured ÷ predicted goodput where the planner was tested on sources it was not fitted to
    band: Band = Band(1.0, 1.0)

    @property
    def name(self) -> str:
        return self.layout.name

    @property
    def goodput_low_rps_per_node(self) -> float:
        """The conservative end of the band: what sizes a pool until the layout is measured."""
        return self.goodput_rps_per_node * min(1.0, self.band.low)

    @property
    def goodput_high_rps_per_node(self) -> float:
        return self.goodput_rps_per_node * max(1.0, self.band.high)

    @property
    def short_reason(self) -> str:
        """A few words for tables: what limits this candidate."""
        if not self.fits:
            return "does not fit in memory" if self.limit == "memory" else "invalid layout"
        if self.goodput_rps_per_node <= 0:
            return f"misses the SLO at any load ({self.bottleneck})"
        limit = {
            "ttft": "TTFT-bound",
            "tpot": "TPOT-bound",
            "capacity": "KV/seq cap",
            "throughput": "saturated",
        }
        text = f"{limit.get(self.limit, self.limit)}, step mostly {self.bottleneck}"
        if self.layout.multi_node:
            text += f", {self.layout.nodes_per_replica} nodes over RDMA"
        return text

    def to_json(self) -> dict:
        lay = self.layout
        out = {
            "name": lay.name,
            **lay.fields(),
            "fits": self.fits,
            "goodput_rps_per_node": _r(self.goodput_rps_per_node, 3),
            "goodput_band_rps_per_node": [_r(self.goodput_low_rps_per_node, 3), _r(self.goodput_high_rps_per_node, 3)],
            "output_tokens_per_s_per_gpu": _r(self.output_tokens_per_s_per_gpu, 1),
            "ttft_p90_ms": _r(self.ttft_p90_ms, 1),
            "tpot_p90_ms": _r(self.tpot_p90_ms, 2),
            "nodes_needed": self.nodes_needed,
            "usd_per_hour": _r(self.usd_per_hour, 2),
            "usd_per_million_output_tokens": _r(self.usd_per_million_output_tokens, 3),
            "limit": self.limit,
            "bottleneck": self.bottleneck,
            "reason": self.reason,
            "memory_gb_per_gpu": self.memory.to_json(),
            "kv_tokens_per_replica": self.memory.kv_tokens_per_replica,
            "max_concurrency_per_replica": self.memory.max_concurrency_per_replica,
            "running_per_replica": _r(self.running_per_replica, 1),
        }
        if self.problems:
            out["problems"] = list(self.problems)
        if self.closed_loop:
            cl = self.closed_loop
            out.update(
                {
                    "concurrency": cl.concurrency,
                    "total_tokens_per_s_per_node": _r(cl.total_tokens_per_s_per_node, 1),
                    "output_tokens_per_s_per_node": _r(cl.output_tokens_per_s_per_node, 1),
                    "ttft_mean_ms": _r(cl.ttft_mean_ms, 1),
                    "tpot_mean_ms": _r(cl.tpot_mean_ms, 2),
                    "ttft_p90_ms": _r(cl.ttft_p90_ms, 1),
                    "tpot_p90_ms": _r(cl.tpot_p90_ms, 2),
                }
            )
        return out


@dataclass(frozen=True)
class PdCandidate(Candidate):
    """A prefill/decode-disaggregated candidate (`layout` is a `PdLayout`; one unit = one replica).
    Built by `disaggregation.pd_candidates`; it carries the P/D prediction for JSON and reasons."""

    prediction: object = None  # disaggregation.PdPrediction

    @property
    def short_reason(self) -> str:
        p = self.prediction
        if not self.fits or p is None or self.goodput_rps_per_node <= 0:
            return super().short_reason
        return f"P/D, {p.binding} side binds, KV {p.transfer.seconds * 1e3:.0f} ms over {p.transfer.link}"

    def to_json(self) -> dict:
        out = super().to_json()
        p = self.prediction
        if p is not None and p.transfer is not None:
            out["disaggregation"] = {
                "binding": p.binding,
                "prefill_rps_per_instance": _r(p.prefill_rps_per_instance, 3),
                "decode_rps_per_instance": _r(p.decode_rps_per_instance, 3),
                "kv_transfer_ms": _r(p.transfer.seconds * 1e3, 2),
                "kv_transfer_link": p.transfer.link,
                "kv_bytes_per_request": int(p.transfer.bytes_total),
            }
        return out


@dataclass(frozen=True)
class ModelPlan:
    """The chosen layout, every candidate (best first) and why."""

    model_id: str
    gpu_slug: str
    chosen: Candidate
    candidates: list[Candidate] = field(default_factory=list)
    reason: str = ""

    def to_json(self) -> dict:
        return {
            "model": self.model_id,
            "gpu": self.gpu_slug,
            "chosen": self.chosen.to_json(),
            "reason": self.reason,
            "candidates": [c.to_json() for c in self.candidates],
        }


def _r(value: float | None, digits: int) -> float | None:
    if value is None or value == INF or value != value:
        return None
    return round(float(value), digits)


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


def multi_node_text(layout: Layout, gpu: GpuSize, b: dict, band: Band) -> str:
    """What a replica over nodes adds to its reason: which collectives leave the node, their share
    of a step, and the widened band."""
    from infra.catalog.gpus import RDMA_GB_S

    what = (
        f"EP dispatch/combine (all-to-all) among {layout.dp} DP ranks"
        if layout.ep
        else f"the TP{layout.tp} all-reduce"
    )
    step = b["overhead"] + b["weights"] + b["kv"] + b["comm"] + b["compute"]
    share = b["comm"] / step if step > 0 else 0.0
    return (
        f" Across {layout.nodes_per_replica} nodes {what} crosses the RDMA fabric ({RDMA_GB_S:g} GB/s NIC per GPU): "
        f"collectives are {share:.0%} of a decode step. Band widened to ×{band.low:.2f}–×{band.high:.2f}: "
        "no multi-node measurement is in the calibration data."
    )


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


def nodes_for_peak(peak_rps: float | None, goodput_rps_per_node: float) -> int | None:
    """Nodes that carry `peak_rps` with HEADROOM at this goodput per node; None without a peak or
    a goodput. One formula for predicted and measured goodput, so the two sizings compare."""
    if peak_rps is None or goodput_rps_per_node <= 0:
        return None
    return max(1, math.ceil(peak_rps * HEADROOM / goodput_rps_per_node - 1e-9))


def _whole_replicas(nodes: int | None, nodes_per_replica: int) -> int | None:
    """Nodes rounded up to whole replicas of a layout that spans nodes_per_replica nodes."""
    return None if nodes is None else -(-nodes // nodes_per_replica) * nodes_per_replica


def usd_per_million_output_tokens(
    usd_per_node_hour: float | None, goodput_rps_per_node: float, output_tokens: int
) -> float | None:
    """What a node costs per million output tokens at this goodput; None without a price or a goodput.
    One formula for predicted and measured goodput, like `nodes_for_peak`."""
    if usd_per_node_hour is None or goodput_rps_per_node <= 0:
        return None
    return usd_per_node_hour / (goodput_rps_per_node * output_tokens * 3600.0) * 1e6


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
        self.eff = table.for_family(gpu.accelerator.family)
        self.band = table.band(gpu.accelerator.family, arch.is_moe)
        self.context_tokens = workload.input_tokens + workload.output_tokens


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
        reason = _reason(layout, mem, arch, model.input_tokens[i], rate, point, limit, bottleneck, breakdown, slo)
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
            nodes_needed=_whole_replicas(nodes_for_peak(workload.peak_rps, low), layout.nodes_per_replica),
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
    eff = table.for_family(gpu.accelerator.family)
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


def _reason(layout, mem, arch, input_tokens, rate, point: LoadPoint, limit, bottleneck, b: dict, slo) -> str:
    g = layout.gpus_per_replica
    spread = (
        f"one replica of {g} GPUs over {layout.nodes_per_replica} nodes" if layout.multi_node
        else f"{layout.replicas_per_node} replica(s) of {g} GPU(s)"
    )
    head = (
        f"{layout.name}: {spread}; per GPU {mem.weights_gb:.1f} GB weights "
        f"and {mem.kv_cache_gb:.1f} GB KV cache ({mem.kv_bytes_per_token_per_gpu / 1024:.0f} KiB/token"
        f"{', KV heads replicated across TP ranks' if arch.attention == 'gqa' and layout.tp > arch.num_kv_heads else ''}"
        f"{', MLA latent on every TP rank' if arch.attention == 'mla' and layout.tp > 1 else ''}), room for "
        f"{mem.max_concurrency_per_replica} sequences of {mem.context_tokens} tokens per replica."
    )
    if rate <= 0:
        return head + " " + _miss_text(int(input_tokens), point, limit, bottleneck, slo)
    total = b["overhead"] + b["weights"] + b["kv"] + b["comm"]
    prefill_ms = max(0.0, point.step_s - total) * 1e3
    return head + (
        f" At {rate * layout.replicas_per_node_share:.2f} req/s per node ({point.running:.0f} running per replica) a step "
        f"takes {point.step_s * 1e3:.1f} ms: decode mostly {_BOTTLENECK_TEXT[bottleneck]} "
        f"(overhead {1e3 * b['overhead']:.1f}, weights {1e3 * b['weights']:.1f}, KV {1e3 * b['kv']:.1f}, "
        f"compute {1e3 * b['compute']:.1f}, collectives {1e3 * b['comm']:.1f} ms) plus {prefill_ms:.1f} ms of "
        f"interleaved prompt chunks; {_LIMIT_TEXT.get(limit, limit)}."
    )


def _miss_text(input_tokens: int, point: LoadPoint, limit: str, bottleneck: str, slo: Slo) -> str:
    """Which objective the lowest load already breaks, with the figures from that same load point:
    a TTFT miss blamed on TPOT sends the user to relax the wrong objective."""
    if not point.stable:
        return f"Even at the lowest load it cannot serve within the SLO: {_LIMIT_TEXT.get(limit, limit)}."
    ttft, tpot = point.ttft_p90_s * 1e3, point.tpot_p90_s * 1e3
    missed, kept = [], []
    if ttft > slo.ttft_p90_ms:
        missed.append(
            f"p90 TTFT about {ttft:.0f} ms vs {slo.ttft_p90_ms:g} ms (queueing plus prefill of a "
            f"{input_tokens}-token prompt)"
        )
    else:
        kept.append(f"p90 TTFT {ttft:.0f} ms is within {slo.ttft_p90_ms:g} ms")
    if tpot > slo.tpot_p90_ms:
        missed.append(
            f"p90 TPOT about {tpot:.1f} ms vs {slo.tpot_p90_ms:g} ms (decode step mostly {_BOTTLENECK_TEXT[bottleneck]})"
        )
    else:
        kept.append(f"p90 TPOT {tpot:.1f} ms is within {slo.tpot_p90_ms:g} ms")
    return "Even at the lowest load a request misses the SLO: " + "; ".join(missed + kept) + "."


def slo_shortfall(plan: ModelPlan, slo: Slo) -> str | None:
    """Why no candidate of `plan` serves any load within `slo`, with the lowest p90s they reach.

    None when a candidate does, or when none fits in memory (that is a different problem, with
    its own message). The lowest p90 TTFT and TPOT may come from different layouts: each bounds
    how far its objective must be relaxed, so both are named, and the layouts that reach them.
    """
    fitting = [c for c in plan.candidates if c.fits]
    if not fitting or any(c.goodput_rps_per_node > 0 for c in fitting):
        return None
    single = len(plan.candidates) == 1
    who = f"layout {fitting[0].name} of" if single else "any layout of"
    head = (
        f"p90 TTFT {slo.ttft_p90_ms:g} ms / TPOT {slo.tpot_p90_ms:g} ms cannot be met by {who} "
        f"{plan.model_id} on {plan.gpu_slug}"
    )
    stable = [c for c in fitting if c.ttft_p90_ms is not None and c.tpot_p90_ms is not None]
    if not stable:
        return f"{head}: {fitting[0].short_reason}"
    best_ttft = min(stable, key=lambda c: (c.ttft_p90_ms, c.name))
    best_tpot = min(stable, key=lambda c: (c.tpot_p90_ms, c.name))
    relax = []
    if best_ttft.ttft_p90_ms > slo.ttft_p90_ms:
        relax.append(f"ttft_p90_ms to at least {_ceil_ms(best_ttft.ttft_p90_ms)}")
    if best_tpot.tpot_p90_ms > slo.tpot_p90_ms:
        relax.append(f"tpot_p90_ms to at least {_ceil_ms(best_tpot.tpot_p90_ms)}")
    if relax:
        advice = "relax " + " and ".join(relax)
    else:
        # Each objective alone is reachable, but no single layout reaches both.
        advice = (
            f"no single layout meets both; relax ttft_p90_ms to at least {_ceil_ms(best_tpot.ttft_p90_ms)} "
            f"or tpot_p90_ms to at least {_ceil_ms(best_ttft.tpot_p90_ms)}"
        )
    if single:
        reached = f"p90 TTFT is {best_ttft.ttft_p90_ms:.0f} ms and p90 TPOT {best_tpot.tpot_p90_ms:.1f} ms"
    else:
        reached = (
            f"the best p90 TTFT is {best_ttft.ttft_p90_ms:.0f} ms ({best_ttft.name}) and the best p90 TPOT "
            f"{best_tpot.tpot_p90_ms:.1f} ms ({best_tpot.name})"
        )
    return f"{head}: even at the lowest load {reached}; {advice}"


def _ceil_ms(value: float) -> str:
    return f"{math.ceil(value)} ms" if value >= 10 else f"{math.ceil(value * 10) / 10:g} ms"


def _rank_key(c: Candidate):
    return (
        0 if c.fits else 1,
        -c.goodput_rps_per_node,
        c.usd_per_million_output_tokens if c.usd_per_million_output_tokens is not None else INF,
        c.layout.gpus_per_replica,
        c.layout.max_num_batched_tokens,
        c.name,
    )


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
) -> ModelPlan:
    """Plan one model on one GPU size.

    layout None searches every shape (`layout: auto`); an explicit layout is validated and
    annotated with the same predictions (its batch limits are kept). tp/ep/dp/replicas_per_node
    restrict the search; `concurrency` adds a closed-loop prediction at that many clients per node.
    `disaggregation` adds prefill/decode candidates (`planner.disaggregation`; units across nodes
    only with `fabric`); a `PdLayout` as `layout` is evaluated as such.
    """
    ctx = _Context(arch, gpu, workload, slo, usd_per_hour, efficiency)
    if layout is not None and getattr(layout, "disaggregated", False):
        from infra.planner.disaggregation import pd_candidates

        cand = pd_candidates(arch, gpu, workload, slo, ctx.eff, ctx.band, ctx.price, layouts=[layout], fabric=fabric,
                             pool_nodes=pool_nodes, tune=False)[0]
        best = plan_model(arch, gpu, workload, slo, usd_per_hour=usd_per_hour, efficiency=efficiency).chosen
        reason = ("explicit layout: " if cand.fits and cand.goodput_rps_per_node > 0 else "") + cand.reason
        if best.fits and best.goodput_rps_per_node > 0:
            reason += f" (the best colocated layout {best.name} carries {best.goodput_rps_per_node:.2f} req/s per node)"
        return ModelPlan(arch.id, gpu.slug, cand, [cand], reason)
    if layout is not None:
        cand = evaluate_layout(
            arch, gpu, workload, slo, layout, usd_per_hour=usd_per_hour, concurrency=concurrency, efficiency=efficiency
        )
        reason = cand.reason
        if cand.fits and cand.goodput_rps_per_replica > 0:
            reason = "explicit layout: " + reason
        best = plan_model(arch, gpu, workload, slo, usd_per_hour=usd_per_hour, efficiency=efficiency).chosen
        if best.fits and best.goodput_rps_per_node > 0 and best.name != cand.name:
            ratio = (
                best.goodput_rps_per_node / cand.goodput_rps_per_node
                if cand.goodput_rps_per_node > 0
                else None
            )
            reason += (
                f" (layout: auto would choose {best.name} at {best.goodput_rps_per_node:.2f} req/s per node"
                + (f", {ratio:.2f}× this layout)" if ratio else ")")
            )
        return ModelPlan(arch.id, gpu.slug, cand, [cand], reason)

    kv_dtype = "fp8" if gpu.accelerator.supports_fp8 else "auto"
    shapes = [
        (s_tp, s_ep, s_dp, s_r)
        for s_tp, s_ep, s_dp, s_r in enumerate_shapes(arch, gpu)
        if (tp is None or s_tp == tp)
        and (ep is None or s_ep == ep)
        and (dp is None or s_dp == dp)
        and (replicas_per_node is None or s_r == replicas_per_node)
    ]

    def layouts(shape_list, tokens: int) -> list[Layout]:
        return [
            Layout(tp=s_tp, ep=s_ep, dp=s_dp, replicas_per_node=s_r, max_num_batched_tokens=tokens, kv_cache_dtype=kv_dtype)
            for s_tp, s_ep, s_dp, s_r in shape_list
        ]

    # Every shape at the middle token budget; the other budgets only for the leading shapes (a
    # budget moves TTFT and activation memory, rarely the order of shapes).
    first = dict(zip(shapes, _evaluate_many(ctx, layouts(shapes, BATCHED_TOKEN_OPTIONS[1]), tune_max_num_seqs=True,
                                            concurrency=concurrency), strict=True))
    leading = [sh for sh in sorted(shapes, key=lambda sh: _rank_key(first[sh]))[:REFINE_SHAPES] if first[sh].fits]
    others = [t for t in BATCHED_TOKEN_OPTIONS if t != BATCHED_TOKEN_OPTIONS[1]]
    refined = {
        tokens: dict(zip(leading, _evaluate_many(ctx, layouts(leading, tokens), tune_max_num_seqs=True,
                                                 concurrency=concurrency), strict=True))
        for tokens in others
    }
    candidates: list[Candidate] = []
    for shape in shapes:
        best = first[shape]
        if shape in leading:
            for tokens in others:
                cand = refined[tokens][shape]
                if _better(cand, best, prefer_smaller=tokens < best.layout.max_num_batched_tokens):
                    best = cand
        candidates.append(best)
    unrestricted = tp is None and ep is None and dp is None and replicas_per_node is None
    if fabric and gpu.fabric and unrestricted:
        # A replica over several nodes when no single node holds the model, or when wide EP could
        # win (a MoE model: more experts' GPUs per replica, more KV room per GPU).
        fits_one_node = any(c.fits for c in candidates)
        if not fits_one_node or arch.is_moe:
            wide = multi_node_shapes(arch, gpu, pool_nodes)
            candidates += _evaluate_many(
                ctx,
                [
                    Layout(tp=s_tp, ep=s_ep, dp=s_dp, nodes_per_replica=s_n, max_num_batched_tokens=BATCHED_TOKEN_OPTIONS[1],
                           kv_cache_dtype=kv_dtype)
                    for s_tp, s_ep, s_dp, s_n in wide
                ],
                tune_max_num_seqs=True,
                concurrency=concurrency,
            )
    if not candidates:
        raise_no_shape(arch, gpu, tp, ep, dp, replicas_per_node)
    if disaggregation and unrestricted:
        from infra.planner.disaggregation import pd_candidates

        candidates += pd_candidates(arch, gpu, workload, slo, ctx.eff, ctx.band, ctx.price, fabric=fabric, pool_nodes=pool_nodes)
    candidates = _break_ties(sorted(candidates, key=_rank_key))
    plan = ModelPlan(arch.id, gpu.slug, candidates[0], candidates)
    reason = _plan_reason(plan, slo, arch.is_moe)
    if disaggregation:
        from infra.planner.disaggregation import pd_verdict

        reason += pd_verdict(candidates)
    return replace(plan, reason=reason)


def _break_ties(ranked: list[Candidate]) -> list[Candidate]:
    """Apply GOODPUT_TIE to the top of the exact ranking: of the candidates within 0.5% of the best
    goodput (and so within 0.5% of its cost per million tokens), the one with fewer GPUs per
    replica, then the smaller token budget, then the name goes first. Only the first place moves:
    a tolerance is not transitive, so it cannot define a whole order."""
    top = ranked[0] if ranked else None
    if top is None or not top.fits or top.goodput_rps_per_node <= 0:
        return ranked
    tied = [c for c in ranked if c.fits and c.goodput_rps_per_node >= top.goodput_rps_per_node * (1 - GOODPUT_TIE)]
    first = min(tied, key=lambda c: (c.layout.gpus_per_replica, c.layout.max_num_batched_tokens, c.name))
    return [first, *(c for c in ranked if c is not first)]


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


def _plan_reason(plan: ModelPlan, slo: Slo, is_moe: bool = False) -> str:
    chosen, candidates = plan.chosen, plan.candidates
    if not chosen.fits:
        return f"no layout fits: {chosen.reason}"
    shortfall = slo_shortfall(plan, slo)  # the chosen (best) candidate serves no load within the SLO
    if shortfall:
        return shortfall
    others = [c for c in candidates[1:] if c.fits]
    vs = ""
    if others:
        ru = others[0]
        if ru.goodput_rps_per_node > 0:
            vs = (
                f" ({chosen.goodput_rps_per_node / ru.goodput_rps_per_node:.2f}× the runner-up {ru.name} at "
                f"{ru.goodput_rps_per_node:.2f} req/s)"
            )
            if chosen.goodput_rps_per_node < ru.goodput_rps_per_node * (1 + NEAR_TIE):
                # A lead this small is within what the efficiency priors can be off by.
                prior = "moe_hbm_efficiency" if is_moe else "hbm_efficiency"
                vs += (
                    f"; within {NEAR_TIE:.0%} of {ru.name}: the order rests on efficiency priors ({prior}) — "
                    "measure both with `infra bench`"
                )
        else:
            vs = f" (the runner-up {ru.name} cannot meet the SLO)"
        single = [
            c
            for c in others
            if c.layout.replicas_per_node == 1 and c.layout.dp == 1 and c.layout.tp == chosen.gpus_per_node
        ]
        if (
            single
            and single[0] is not ru
            and chosen.name != single[0].name
            and single[0].goodput_rps_per_node > 0
        ):
            vs += f"; one {single[0].name} engine per node would carry {single[0].goodput_rps_per_node:.2f} req/s"
    vs += _multi_node_verdict(chosen, others)
    return (
        f"chose {chosen.name}: {chosen.goodput_rps_per_node:.2f} req/s per node within p90 TTFT "
        f"{slo.ttft_p90_ms:g} ms and TPOT {slo.tpot_p90_ms:g} ms{vs}. {chosen.reason}"
    )


def _multi_node_verdict(chosen: Candidate, others: list[Candidate]) -> str:
    """Why a replica over several nodes was or was not chosen (empty when none was a candidate)."""
    single = [c for c in others if not c.layout.multi_node and c.goodput_rps_per_node > 0]
    wide = [c for c in others if c.layout.multi_node and c.goodput_rps_per_node > 0]
    if chosen.layout.multi_node:
        if not single:
            return "; no layout within one node holds the model and meets the SLO, so a replica spans nodes"
        best = single[0]
        return (
            f"; wide EP over {chosen.layout.nodes_per_replica} nodes carries {chosen.goodput_rps_per_node / best.goodput_rps_per_node:.2f}× "
            f"the best single-node layout {best.name} per node"
        )
    if wide:
        best = wide[0]
        return (
            f"; the best multi-node layout {best.name} carries {best.goodput_rps_per_node:.2f} req/s per node: its collectives "
            "cross the RDMA fabric (its reason has the step breakdown)"
        )
    return ""
