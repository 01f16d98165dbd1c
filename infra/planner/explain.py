"""Why: the sentences a plan carries — per candidate (what limits it, where a step's time goes),
per model (why the chosen layout, what the runner-up and the multi-node and held-back layouts
would give), and why no layout serves any load within an SLO (`slo_shortfall`).
"""

from __future__ import annotations

import math

from infra.catalog.gpus import GpuSize
from infra.domain import Layout, Slo
from infra.planner.candidates import Candidate, ModelPlan
from infra.planner.choice import NEAR_TIE
from infra.planner.efficiency import Band
from infra.planner.performance import LoadPoint

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


def candidate_reason(layout, mem, arch, input_tokens, rate, point: LoadPoint, limit, bottleneck, b: dict, slo) -> str:
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


def plan_reason(plan: ModelPlan, slo: Slo, is_moe: bool = False, gives_up: str = "") -> str:
    """Why the search chose its first candidate: its goodput, the runner-up, one engine per node,
    the multi-node verdict and `gives_up` (the held-back layouts, `choice.given_up`)."""
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
    vs += _multi_node_verdict(chosen, others) + gives_up
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


def explicit_reason(cand: Candidate, best: Candidate) -> str:
    """The reason of an explicit layout: its own, and what `layout: auto` would choose instead."""
    served = cand.fits and cand.goodput_rps_per_node > 0
    reason = ("explicit layout: " if served else "") + cand.reason
    if not (best.fits and best.goodput_rps_per_node > 0):
        return reason
    if getattr(cand.layout, "disaggregated", False):
        return reason + f" (the best colocated layout {best.name} carries {best.goodput_rps_per_node:.2f} req/s per node)"
    if best.name == cand.name:
        return reason
    ratio = best.goodput_rps_per_node / cand.goodput_rps_per_node if cand.goodput_rps_per_node > 0 else None
    return reason + (
        f" (layout: auto would choose {best.name} at {best.goodput_rps_per_node:.2f} req/s per node"
        + (f", {ratio:.2f}× this layout)" if ratio else ")")
    )
