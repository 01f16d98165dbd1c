"""Multi-turn sessions and a KV offload tier in the plan: hit rates, goodput with and without.

The hook into the performance model is one number: the workload's `prefix_cache_hit_rate` (the
share of prompt tokens a request need not prefill), which `prefix_cache.prefix_hit` predicts from
the chosen layout's KV capacity, its request rate and the sessions. The rate depends on the
goodput and the goodput on the rate, so the plan is iterated to a fixed point (a few rounds; the
hit rate moves by less than half a point after the second). Every plan is `plan_model`'s own: the
search, its bands and its reasons are untouched.

`kv_offload: auto` turns the tier on where it pays: when the predicted goodput per node with the
tier beats the plan without it by AUTO_MIN_GAIN, sized to the sessions' working set within the
host memory an engine pod has room for (host_memory.offload_room_gib).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from infra.catalog import host_memory
from infra.catalog.gpus import GpuSize
from infra.catalog.host_links import host_link_gb_s
from infra.catalog.models import ModelArch
from infra.domain import KvOffload, Layout, SessionShape, Workload, session_shape
from infra.planner.performance import compute_tflops
from infra.planner.prefix_cache import PrefixHit, prefix_hit, tokens_for_survival
from infra.planner.search import Candidate, ModelPlan

GIB = 1 << 30
# Chance a session's next turn reaches the replica that served its last one, by layout: 1 behind
# a session-sticky or prefix-aware front door, 1 / replicas behind round-robin balancing.
Affinity = Callable[[Layout], float]
# Auto turns the tier on only for at least this much more goodput per node: below it the extra
# pinned memory, copies and moving parts buy too little for the error of the prediction.
AUTO_MIN_GAIN = 0.05
# Auto sizes the tier to hold the working set at which 99 % of reusable histories survive.
AUTO_SURVIVAL_TARGET = 0.99
# Prefill of the history, were it recomputed: the GEMMs at this share of the GPU's dense peak
# (attention excluded, which makes recompute look cheaper and the offload's credit smaller).
PREFILL_COMPUTE_EFFICIENCY = 0.5
FIXED_POINT_ROUNDS = 4

@dataclass(frozen=True)
class SessionPlan:
    """One tier configuration's plan: the hit rates and the plan they produce."""

    offload: KvOffload | None
    hit: PrefixHit
    plan: ModelPlan

    def to_json(self) -> dict:
        chosen = self.plan.chosen
        return {
            "kv_offload": None if self.offload is None else {"kind": self.offload.kind, "size_gib": self.offload.size_gib},
            "layout": chosen.layout.name,
            "hit_rate": self.hit.to_json(),
            "goodput_rps_per_node": round(chosen.goodput_rps_per_node, 3),
            "ttft_p90_ms": None if chosen.ttft_p90_ms is None else round(chosen.ttft_p90_ms, 1),
        }


@dataclass(frozen=True)
class OffloadDecision:
    """What the plan serves with (`chosen`) and the other tier configuration for comparison."""

    requested: str  # none | auto | cpu | lmcache
    chosen: SessionPlan
    without: SessionPlan
    with_offload: SessionPlan | None  # None: the node has no host memory to spare for a tier
    reason: str

    @property
    def offload(self) -> KvOffload | None:
        return self.chosen.offload

    def to_json(self) -> dict:
        return {
            "requested": self.requested,
            "enabled": self.offload is not None,
            "without_offload": self.without.to_json(),
            "with_offload": None if self.with_offload is None else self.with_offload.to_json(),
            "reason": self.reason,
        }


def engines_per_replica(layout: Layout) -> int:
    """Engines with their own KV cache and scheduler in one replica: its data-parallel ranks."""
    return layout.dp


def reload_s_per_token(gpu: GpuSize, candidate: Candidate) -> float:
    """Host-link seconds to bring one token's KV back to a GPU (each rank loads its own shard)."""
    return candidate.memory.kv_bytes_per_token_per_gpu / (host_link_gb_s(gpu.accelerator.model) * 1e9)


def prefill_s_per_token(arch: ModelArch, gpu: GpuSize, layout: Layout) -> float:
    """Seconds a TP group spends recomputing one token of history (GEMMs only)."""
    flops = 2.0 * arch.params_active / layout.tp
    return flops / (compute_tflops(gpu.accelerator, arch) * 1e12 * PREFILL_COMPUTE_EFFICIENCY)


def offload_tokens_per_engine(candidate: Candidate, offload: KvOffload | None) -> float:
    """Tokens one engine's share of the offload tier holds: the share over the KV bytes per token of
    its TP group (lmcache: the pod's one LMCache server is shared by its data-parallel engines)."""
    if offload is None:
        return 0.0
    bytes_per_token = candidate.memory.kv_bytes_per_token_per_gpu * candidate.layout.tp
    share = offload.gib_per_engine(engines_per_replica(candidate.layout))
    return share * GIB / bytes_per_token if bytes_per_token > 0 else 0.0


def hit_for(
    arch: ModelArch, gpu: GpuSize, workload: Workload, shape: SessionShape, candidate: Candidate,
    offload: KvOffload | None, router_affinity: Affinity,
) -> PrefixHit:
    """The hit rates of `candidate`'s engines at its goodput (the load a sized pool runs at)."""
    layout = candidate.layout
    engines = engines_per_replica(layout)
    return prefix_hit(
        shape,
        input_tokens=workload.input_tokens,
        output_tokens=workload.output_tokens,
        gpu_tokens=candidate.memory.kv_tokens_per_replica / engines,
        offload_tokens=offload_tokens_per_engine(candidate, offload),
        rps_per_engine=max(0.0, candidate.goodput_rps_per_replica) / engines,
        # vLLM's data-parallel front end balances engines by load, not by prefix
        affinity=router_affinity(layout) / engines,
        reload_s_per_token=reload_s_per_token(gpu, candidate),
        prefill_s_per_token=prefill_s_per_token(arch, gpu, layout),
        # the pod's one LMCache server serves every rank of the replica the router sent the turn to
        offload_affinity=router_affinity(layout) if offload is not None and offload.kind == "lmcache" else None,
    )


@dataclass(frozen=True)
class Planner:
    """The planner calls the session planning makes, bound by the caller to one model and pool.

    search(w, None): `plan_model`'s full search (`layout: auto`); search(w, layout): the plan for
    an explicit layout, or (auto) the search restricted to that layout's shape.
    evaluate(w, layout): `evaluate_layout`, one layout's predictions without a search.
    explicit: the configured layout, None for auto.
    """

    search: Callable[[Workload, Layout | None], ModelPlan]
    evaluate: Callable[[Workload, Layout], Candidate]
    explicit: Layout | None = None


# The auto search ranks, at their own hit rates, this many of the shapes that lead without one.
SESSION_SHAPES = 12


def _fixed_point(
    evaluate: Callable[[Workload], Candidate], arch: ModelArch, gpu: GpuSize, workload: Workload, shape: SessionShape,
    offload_of: Callable[[Candidate], KvOffload | None], router_affinity: Affinity,
) -> tuple[Candidate, PrefixHit]:
    """One layout at the hit rate its own load predicts (the load moves with the hit rate)."""
    cand = evaluate(replace(workload, prefix_cache_hit_rate=0.0))
    hit = hit_for(arch, gpu, workload, shape, cand, offload_of(cand), router_affinity)
    for _ in range(FIXED_POINT_ROUNDS):
        cand = evaluate(replace(workload, prefix_cache_hit_rate=min(hit.effective, 0.99)))
        again = hit_for(arch, gpu, workload, shape, cand, offload_of(cand), router_affinity)
        settled = abs(again.effective - hit.effective) < 0.005
        hit = again
        if settled:
            break
    return cand, hit


def _base_search(planner: Planner, workload: Workload) -> ModelPlan:
    """The search without session hits, once per planner and workload (both tier plans start from it)."""
    key = (id(planner), workload)
    if key not in _BASE_CACHE:
        _BASE_CACHE.clear()
        _BASE_CACHE[key] = planner.search(replace(workload, prefix_cache_hit_rate=0.0), None)
    return _BASE_CACHE[key]


_BASE_CACHE: dict = {}


def plan_sessions(
    planner: Planner, arch: ModelArch, gpu: GpuSize, workload: Workload, shape: SessionShape,
    offload_of: Callable[[Candidate], KvOffload | None], router_affinity: Affinity,
) -> SessionPlan:
    """Plan with hit rates predicted per layout: an explicit layout at its own; for auto, the
    leading shapes of the search without sessions each at its own (a layout with more KV room
    per engine keeps more histories), the best of them refined by the search for its shape."""
    if planner.explicit is not None:
        layouts = [planner.explicit]
    else:
        base = _base_search(planner, workload)
        layouts = [
            c.layout for c in base.candidates
            if c.fits and not getattr(c.layout, "disaggregated", False) and not c.layout.multi_node
        ][:SESSION_SHAPES] or [base.chosen.layout]
    scored = [
        _fixed_point(lambda w, lay=lay: planner.evaluate(w, lay), arch, gpu, workload, shape, offload_of, router_affinity)
        for lay in layouts
    ]
    scored.sort(key=lambda ch: (-ch[0].goodput_rps_per_node, ch[0].layout.gpus_per_replica, ch[0].name))
    best, hit = scored[0]
    plan = planner.search(replace(workload, prefix_cache_hit_rate=min(hit.effective, 0.99)), best.layout)
    hit = hit_for(arch, gpu, workload, shape, plan.chosen, offload_of(plan.chosen), router_affinity)
    if planner.explicit is None and len(scored) > 1:
        runner, runner_hit = scored[1]
        plan = replace(
            plan,
            candidates=[plan.chosen] + [c for c, _ in scored[1:]],
            reason=(
                f"{plan.reason} With {shape.turns}-turn sessions each layout was ranked at its own predicted "
                f"prefix-cache hit rate: the runner-up {runner.name} at {runner.goodput_rps_per_node:.2f} req/s per "
                f"node ({runner_hit.total:.0%} of prompt tokens from cache)."
            ),
        )
    return SessionPlan(offload_of(plan.chosen), hit, plan)


def offload_room_gib(gpu: GpuSize, layout: Layout, kind: str = "cpu") -> int:
    """The most `kv_offload.size_gib` may be for an engine pod of `layout` on `gpu`: with kind cpu
    each data-parallel engine allocates its own `--kv-offloading-size`, so the pod's room over its
    engines; with kind lmcache the pod's one LMCache server holds one L1 buffer its engines share
    (infra/render/lmcache_server.py), so the pod's whole room."""
    gpus_per_pod = layout.gpus_per_node_used if layout.multi_node else layout.gpus_per_replica
    room = host_memory.offload_room_gib(gpu.ram_gib, gpu.gpus, gpus_per_pod)
    return room if kind == "lmcache" else room // engines_per_replica(layout)


def offload_room_per_engine_gib(gpu: GpuSize, layout: Layout) -> int:
    """Host memory an engine of `layout` may pin for a native (cpu) tier: `offload_room_gib`."""
    return offload_room_gib(gpu, layout, "cpu")


def auto_size_gib(
    gpu: GpuSize, workload: Workload, shape: SessionShape, candidate: Candidate, router_affinity: Affinity
) -> float | None:
    """The tier `auto` offers an engine: the sessions' working set, within the pod's room; None
    when the pod has no room or the GPU cache already holds the working set."""
    layout = candidate.layout
    per_engine_room = offload_room_per_engine_gib(gpu, layout)
    if per_engine_room < 1 or candidate.goodput_rps_per_replica <= 0:
        return None
    touch = candidate.goodput_rps_per_replica / engines_per_replica(layout) * (workload.input_tokens + workload.output_tokens)
    want_tokens = tokens_for_survival(AUTO_SURVIVAL_TARGET, touch, shape.think_time_s)
    gpu_tokens = candidate.memory.kv_tokens_per_replica / engines_per_replica(layout)
    bytes_per_token = candidate.memory.kv_bytes_per_token_per_gpu * layout.tp
    if want_tokens <= gpu_tokens or per_engine_room * GIB / bytes_per_token <= gpu_tokens:
        return None  # the GPU cache holds the working set, or the room holds no more than it (inclusive tier)
    return float(min(per_engine_room, max(1, math.ceil(want_tokens * bytes_per_token / GIB))))


def decide(
    planner: Planner,
    arch: ModelArch,
    gpu: GpuSize,
    workload: Workload,
    *,
    requested: str,
    size_gib: float | None,
    router_affinity: Affinity,
) -> OffloadDecision | None:
    """Plan a multi-turn workload without and with an offload tier and choose; None for
    single-turn traffic (the plan is then `planner.search(workload, planner.explicit)` as before).

    requested: none | auto | cpu | lmcache; size_gib: the configured tier per engine (cpu and
    lmcache), None for auto (sized by `auto_size_gib`). For `none` the tier `auto` would pick is
    still planned, so the plan can say what it would bring.
    """
    shape = session_shape(workload)
    if shape is None:
        return None
    without = plan_sessions(planner, arch, gpu, workload, shape, lambda c: None, router_affinity)
    kind = "cpu" if requested in ("none", "auto") else requested

    def tier(c: Candidate) -> KvOffload | None:
        size = size_gib if size_gib is not None else auto_size_gib(gpu, workload, shape, c, router_affinity)
        return KvOffload(kind, size) if size else None

    size_probe = tier(without.plan.chosen)
    with_offload = (
        plan_sessions(planner, arch, gpu, workload, shape, tier, router_affinity) if size_probe is not None else None
    )
    if with_offload is not None and with_offload.offload is None:
        with_offload = None
    base = without.plan.chosen.goodput_rps_per_node
    gain = (with_offload.plan.chosen.goodput_rps_per_node / base - 1.0) if with_offload and base > 0 else None
    gain_text = f"{gain:+.0%} goodput" if gain is not None else "no goodput to compare"
    if requested in ("cpu", "lmcache"):
        chosen = with_offload or without
        reason = f"kv_offload {requested} as configured ({gain_text} against no tier)"
    elif requested == "auto" and with_offload is not None and gain is not None and gain >= AUTO_MIN_GAIN:
        chosen = with_offload
        reason = f"kv_offload auto: a {with_offload.offload.size_gib:g} GiB CPU tier per engine pays ({gain_text})"
    elif requested == "auto":
        chosen = without
        reason = (
            f"kv_offload auto: left off ({gain_text}, below the {AUTO_MIN_GAIN:.0%} it must bring)"
            if with_offload is not None
            else "kv_offload auto: left off (the GPU cache already holds the sessions' working set, or the host memory a pod can spare holds no more than it)"
        )
    else:
        chosen = without
        reason = (
            f"kv_offload none: a {with_offload.offload.size_gib:g} GiB CPU tier per engine would bring {gain_text}"
            if with_offload is not None
            else "kv_offload none: a CPU tier would add nothing here"
        )
    return OffloadDecision(requested, chosen, without, with_offload, reason)
