"""Prefill/decode disaggregation: KV-transfer model, P/D goodput, and the P/D candidates of a search.

A P/D unit runs N prefill engines (TP A) and M decode engines (TP B). Each side is modelled with
the same calibrated step model as a colocated replica (`performance.Scenarios`), under the traffic
that side sees:

- a prefill engine computes whole prompts and emits one token (vLLM's producer runs the request
  with `max_tokens=1`): a colocated scenario of output length 1, its p90 TTFT the queue plus the
  prompt's compute;
- a decode engine only generates: its prompts arrive as KV, so the scenario's prompt work is one
  token (no chunked-prefill interference term), while its KV cache still holds input + output
  tokens per sequence;
- between them the prompt's KV moves: bytes = KV bytes per token (layers × KV heads × head_dim ×
  dtype, from the memory model) × prompt tokens, split over the ranks of the smaller TP group,
  each rank over its own link, at `TRANSFER_EFFICIENCY` of the link's line rate, plus a fixed
  `CONNECTOR_OVERHEAD_S` per request (handshake / completion notify, and the router's second leg).

Then TTFT p90 = prefill p90 (queue + compute) + transfer + one decode step, TPOT p90 = decode
only. The unit's goodput is the smaller of N × (prefill rate within the TTFT left after transfer
and the decode step) and M × (decode rate within the TPOT SLO and its KV cache): the two pools
are sized separately, and the reason names the side that binds.

Links (stated assumptions, no published MoRI-IO / NIXL bandwidth was found — serving-research
B3): inside a node KV goes GPU to GPU over one xGMI link on AMD (the catalog's per-GPU Infinity
Fabric figure over the node's 7 peers: 448 / 7 = 64 GB/s per direction on MI300X/MI325X) or
NVLink on NVIDIA (the full per-GPU figure through the switch); across nodes over the GPU's fabric
NIC, 400 Gb/s = 50 GB/s line rate (DOKS fabric nodes carry one NIC per GPU, fabric0..7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from infra.catalog.gpus import RDMA_GB_S, GpuSize
from infra.catalog.models import ModelArch
from infra.domain import Layout, PdLayout, Slo, Workload
from infra.planner.candidates import PdCandidate, nodes_for_peak, usd_per_million_output_tokens
from infra.planner.checks import shape_problems
from infra.planner.efficiency import Band, EfficiencyFactors
from infra.planner.memory import MemoryBreakdown, default_max_model_len, memory_per_gpu
from infra.planner.performance import INF, LoadPoints, Scenario, Scenarios

TRANSFER_EFFICIENCY = 0.6  # share of line rate a KV connector reaches (assumed; none published)
CONNECTOR_OVERHEAD_S = 0.010  # per request: handshake/notify round trips, router's second leg (assumed)
PREFILL_TOKEN_BUDGETS = (4096, 8192, 16384)
DECODE_MAX_NUM_SEQS_CAP = 1024

# Which KV connector a vendor's vLLM image ships for P/D (FACTS-serving §B): MoRI-IO is ROCm-only;
# NIXL (UCX) on NVIDIA. Anything else has no supported connector.
CONNECTORS = {"amd": "MoRIIOConnector", "nvidia": "NixlConnector"}


def connector_for(gpu: GpuSize) -> str | None:
    """The KV connector P/D uses on this GPU's vendor, or None when none is supported."""
    return CONNECTORS.get(gpu.vendor)


@dataclass(frozen=True)
class KvTransfer:
    """One request's prompt KV moving from a prefill engine to a decode engine."""

    bytes_total: float  # the whole prompt's KV (all layers, all ranks)
    bytes_per_link: float  # what the busiest link carries
    link: str  # "xgmi" | "nvlink" | "rdma"
    link_gb_s: float  # line rate of one link, one direction
    seconds: float  # at TRANSFER_EFFICIENCY of the line rate, plus CONNECTOR_OVERHEAD_S


def link_for(gpu: GpuSize, spans_nodes: bool) -> tuple[str, float]:
    """(link kind, GB/s of one GPU-to-GPU path) for a KV transfer."""
    if spans_nodes:
        return "rdma", RDMA_GB_S
    acc = gpu.accelerator
    if acc.vendor == "amd":
        return "xgmi", acc.link_gb_s / max(1, gpu.gpus - 1)
    return "nvlink", acc.link_gb_s


def kv_transfer(arch: ModelArch, gpu: GpuSize, pd: PdLayout, prompt_tokens: int) -> KvTransfer:
    """Seconds to move one prompt's KV from prefill to decode: bytes over the smaller TP group's links."""
    kv_dtype = "fp8" if pd.kv_cache_dtype.startswith("fp8") else "auto"
    total = arch.kv_bytes_per_token(kv_dtype, tp=1, context_tokens=prompt_tokens) * prompt_tokens
    ranks = min(pd.prefill_tp, pd.decode_tp)
    per_link = arch.kv_bytes_per_token(kv_dtype, tp=ranks, context_tokens=prompt_tokens) * prompt_tokens
    kind, gb_s = link_for(gpu, pd.spans_nodes)
    seconds = per_link / (gb_s * 1e9 * TRANSFER_EFFICIENCY) + CONNECTOR_OVERHEAD_S
    return KvTransfer(total, per_link, kind, gb_s, seconds)


@dataclass(frozen=True)
class PdPrediction:
    """Goodput and latencies of one P/D unit (per unit unless named per node)."""

    pd: PdLayout
    fits: bool
    problems: tuple[str, ...]
    prefill_memory: MemoryBreakdown
    decode_memory: MemoryBreakdown
    transfer: KvTransfer | None
    prefill_rps_per_instance: float
    decode_rps_per_instance: float
    goodput_rps_per_unit: float
    goodput_rps_per_node: float
    binding: str  # "prefill" | "decode" | "transfer" | "memory" | "layout"
    ttft_p90_s: float
    tpot_p90_s: float
    decode_step_s: float
    decode_running: float
    decode_bottleneck_ms: dict[str, float]


def pd_problems(arch: ModelArch, gpu: GpuSize, pd: PdLayout, *, fabric: bool = False, pool_nodes: int | None = None) -> list[str]:
    """Why this P/D layout cannot run on this GPU and pool (empty when it can)."""
    problems: list[str] = []
    if connector_for(gpu) is None:
        problems.append(f"no KV connector for P/D on {gpu.vendor} GPUs (supported: {', '.join(sorted(CONNECTORS))})")
    for role in ("prefill", "decode"):
        side = pd.side(role)
        if side.tp > gpu.gpus:
            problems.append(f"{role} tp={side.tp} exceeds the {gpu.gpus} GPUs per node of {gpu.slug}")
            continue
        problems += [f"{role}: {p}" for p in shape_problems(arch, gpu, side)]
    if pd.spans_nodes:
        if not fabric:
            problems.append(
                f"{pd.name} needs {pd.unit_gpus} GPUs ({pd.nodes_per_unit} nodes of {gpu.gpus}); a unit spanning nodes "
                "moves KV over RDMA and needs a fabric pool (gpu_pools[].fabric: true on a -fabric- size)"
            )
        if pool_nodes is not None and pd.nodes_per_unit > pool_nodes:
            problems.append(f"{pd.name} spans {pd.nodes_per_unit} nodes; the pool has {pool_nodes}")
        if (span := pd.span_problem()) is not None:
            problems.append(f"{pd.name} {span}")
    elif gpu.gpus % pd.unit_gpus and pd.units_per_node < 1:
        problems.append(f"{pd.name} uses {pd.unit_gpus} GPUs, more than the {gpu.gpus} per node")
    return problems


def _side_scenario(arch, gpu, layout: Layout, workload: Workload, factors: EfficiencyFactors, role: str) -> Scenario:
    if role == "prefill":
        w = Workload(workload.input_tokens, 1, None, workload.prefix_cache_hit_rate)
    else:
        # Prompts arrive as KV: one token of prompt work keeps the step model's arithmetic whole.
        w = Workload(workload.input_tokens, workload.output_tokens, None, 1.0 - 1.0 / max(2, workload.input_tokens))
    return Scenario(arch, gpu.accelerator, gpu.gpus, layout, w, factors)


def predict_pd(
    arch: ModelArch, gpu: GpuSize, workload: Workload, slo: Slo, pds: list[PdLayout], factors: EfficiencyFactors,
    *, fabric: bool = False, pool_nodes: int | None = None, tune: bool = True,
) -> list[PdPrediction]:
    """Goodput of each P/D layout within the SLO (both sides evaluated as one batch of scenarios)."""
    context = workload.input_tokens + workload.output_tokens
    out: list[PdPrediction | None] = []
    runnable = []
    for pd in pds:
        if pd.max_model_len is None:
            pd = pd.with_(max_model_len=default_max_model_len(arch, context))
        problems = pd_problems(arch, gpu, pd, fabric=fabric, pool_nodes=pool_nodes)
        kv = pd.with_(kv_cache_dtype="fp8") if pd.kv_cache_dtype.startswith("fp8") else pd
        pmem = memory_per_gpu(arch, gpu, kv.side("prefill"), workload.input_tokens + 1)
        dmem = memory_per_gpu(arch, gpu, kv.side("decode"), context)
        binding = "layout"
        if not problems and not (pmem.fits and dmem.fits):
            problems += [f"{role}: {m.problem}" for role, m in (("prefill", pmem), ("decode", dmem)) if not m.fits]
            binding = "memory"
        if problems:
            out.append(PdPrediction(pd, False, tuple(problems), pmem, dmem, None, 0.0, 0.0, 0.0, 0.0, binding, INF, INF, INF, 0.0, {}))
            continue
        runnable.append((len(out), pd, kv, pmem, dmem))
        out.append(None)
    if not runnable:
        return out  # type: ignore[return-value]
    # Many layouts share a side: 105 P/D layouts of an 8-GPU node are 5 distinct decode engines and
    # 15 distinct prefill ones. Each distinct engine (side, cap, budget) is evaluated once and its
    # figures handed to every layout that has it — the same numbers, since a scenario's figures do
    # not depend on the others in its batch (docs/planner.md, "Layout search").
    d_sides = [kv.side("decode") for _, _, kv, _, _ in runnable]
    caps = [float(min(dmem.max_concurrency_per_replica, DECODE_MAX_NUM_SEQS_CAP if tune else pd.decode_max_num_seqs))
            for _, pd, _, _, dmem in runnable]
    d_first, d_of = _distinct(list(zip(d_sides, caps, strict=True)))
    decode = Scenarios([_side_scenario(arch, gpu, d_sides[i], workload, factors, "decode") for i in d_first])
    d_rate, d_point, _ = decode.goodput([caps[i] for i in d_first], INF, slo.tpot_p90_ms / 1e3)
    # the first token leaves the decode engine after one of its steps at that load
    d_step = np.where(np.isfinite(d_point.step_s), d_point.step_s, decode.decode_step_s(np.ones(decode.size)))
    d_parts = decode.breakdown(np.maximum(1.0, np.where(d_point.stable, d_point.running, 1.0)))
    d_rate, d_point, d_step = d_rate[d_of], _points_at(d_point, d_of), d_step[d_of]
    d_parts = {k: v[d_of] for k, v in d_parts.items()}
    transfers = [kv_transfer(arch, gpu, kv, workload.input_tokens) for _, _, kv, _, _ in runnable]
    ttft_left = np.asarray([slo.ttft_p90_ms / 1e3 - tr.seconds for tr in transfers]) - d_step
    p_sides = [kv.side("prefill") for _, _, kv, _, _ in runnable]
    p_caps = [float(min(pmem.max_concurrency_per_replica, 256)) for _, _, _, pmem, _ in runnable]
    p_budget = np.maximum(ttft_left, 1e-9)
    p_first, p_of = _distinct(list(zip(p_sides, p_caps, p_budget.tolist(), strict=True)))
    prefill = Scenarios([_side_scenario(arch, gpu, p_sides[i], workload, factors, "prefill") for i in p_first])
    p_rate, p_point, _ = prefill.goodput([p_caps[i] for i in p_first], p_budget[p_first], INF)
    p_rate, p_point = p_rate[p_of], _points_at(p_point, p_of)
    p_rate = np.where(ttft_left > 0, p_rate, 0.0)
    for i, (slot, pd, _kv, pmem, dmem) in enumerate(runnable):
        per_prefill, per_decode = float(p_rate[i]), float(d_rate[i])
        prefill_side = pd.prefill_instances * per_prefill
        decode_side = pd.decode_instances * per_decode
        unit = min(prefill_side, decode_side)
        if ttft_left[i] <= 0:
            binding = "transfer"
        else:
            binding = "prefill" if prefill_side <= decode_side else "decode"
        per_node = unit * pd.units_per_node if not pd.spans_nodes else unit / pd.nodes_per_unit
        if tune:
            running = float(d_point.running[i]) if d_point.stable[i] else 0.0
            seqs = min(DECODE_MAX_NUM_SEQS_CAP, max(1, dmem.max_concurrency_per_replica),
                       max(32, 1 << max(0, math.ceil(math.log2(max(1.0, 2.0 * running))))))
            pd = pd.with_(decode_max_num_seqs=int(seqs))
        ttft = float(p_point.ttft_p90_s[i]) + transfers[i].seconds + float(d_step[i]) if p_point.stable[i] else INF
        out[slot] = PdPrediction(
            pd, True, (), pmem, dmem, transfers[i], per_prefill, per_decode, unit, per_node, binding,
            ttft, float(d_point.tpot_p90_s[i]), float(d_step[i]),
            float(d_point.running[i]) if d_point.stable[i] else 0.0,
            {k: float(v[i]) * 1e3 for k, v in d_parts.items()},
        )
    return out  # type: ignore[return-value]


def _distinct(keys: list) -> tuple[list[int], np.ndarray]:
    """(the index of each distinct key's first occurrence, in order; for every key, the position
    of its distinct key in that list)."""
    position: dict = {}
    firsts: list[int] = []
    of: list[int] = []
    for i, key in enumerate(keys):
        if key not in position:
            position[key] = len(firsts)
            firsts.append(i)
        of.append(position[key])
    return firsts, np.asarray(of, dtype=int)


def _points_at(points: LoadPoints, index: np.ndarray) -> LoadPoints:
    return LoadPoints(*(v[index] for v in points.values()))


def balanced_units(gpu: GpuSize, arch: ModelArch, *, fabric: bool = False) -> list[PdLayout]:
    """The P/D shapes a search tries: prefill and decode TP among the node's divisors, instance
    counts that fill one node, and on a fabric pool the unit over two nodes with one side per node,
    each side one engine of the whole node (p1tp8-d1tp8, with EP p1tp8-ep-d1tp8-ep): the only
    spanning shapes whose engines can each hold their node's fabric NICs (`PdLayout.span_problem`)."""
    n = gpu.gpus
    kv_dtype = "fp8" if gpu.accelerator.supports_fp8 else "auto"
    tps = [t for t in range(1, n + 1) if n % t == 0]
    eps = (False, True) if arch.is_moe else (False,)
    shapes: list[PdLayout] = []
    for ptp in tps:
        for dtp in tps:
            for pn in range(1, n // ptp + 1):
                rest = n - pn * ptp
                if rest <= 0 or rest % dtp:
                    continue
                dn = rest // dtp
                for ep in eps:
                    if ep and (ptp == 1 and dtp == 1):
                        continue
                    shapes.append(PdLayout(pn, ptp, dn, dtp, ep and ptp > 1, ep and dtp > 1, n, kv_cache_dtype=kv_dtype))
    if fabric:
        for ep in eps:
            shapes.append(PdLayout(1, n, 1, n, ep and n > 1, ep and n > 1, n, kv_cache_dtype=kv_dtype))
    seen, unique = set(), []
    for s in shapes:
        if s.name not in seen and not shape_ok(arch, gpu, s):
            continue
        if s.name not in seen:
            seen.add(s.name)
            unique.append(s)
    return unique


def shape_ok(arch: ModelArch, gpu: GpuSize, pd: PdLayout) -> bool:
    return not any(shape_problems(arch, gpu, pd.side(role)) for role in ("prefill", "decode"))


def with_budget(pd: PdLayout, tokens: int) -> PdLayout:
    return replace(pd, prefill_max_num_batched_tokens=tokens)


def pd_reason(p: PdPrediction, slo: Slo, band: Band | None = None) -> str:
    """Why this P/D unit carries what it does, in one paragraph."""
    pd = p.pd
    if not p.fits:
        return f"{pd.name} cannot run: " + "; ".join(p.problems) + "."
    tr = p.transfer
    where = f"over {pd.nodes_per_unit} nodes (RDMA)" if pd.spans_nodes else f"{pd.units_per_node} unit(s) per node"
    head = (
        f"{pd.name}: {pd.prefill_instances} prefill engine(s) of TP{pd.prefill_tp} and {pd.decode_instances} decode "
        f"engine(s) of TP{pd.decode_tp}, {where}; each prompt's KV ({tr.bytes_total / 1e6:.0f} MB, "
        f"{tr.bytes_per_link / 1e6:.0f} MB per link) moves over {tr.link} at {tr.link_gb_s:.0f} GB/s in "
        f"{tr.seconds * 1e3:.1f} ms with connector overhead; room for {p.decode_memory.max_concurrency_per_replica} "
        f"sequences per decode engine."
    )
    if p.goodput_rps_per_unit <= 0:
        if p.binding == "transfer":
            return head + f" Transfer plus a decode step leaves no TTFT budget within {slo.ttft_p90_ms:g} ms."
        side = "prefill" if p.prefill_rps_per_instance <= 0 else "decode"
        return head + f" Even at the lowest load the {side} side misses the SLO."
    side = {
        "prefill": f"the prefill side binds ({pd.prefill_instances} × {p.prefill_rps_per_instance:.2f} req/s within "
        f"the TTFT left after transfer and the first decode step; decode could take {pd.decode_instances} × "
        f"{p.decode_rps_per_instance:.2f})",
        "decode": f"the decode side binds ({pd.decode_instances} × {p.decode_rps_per_instance:.2f} req/s within TPOT "
        f"{slo.tpot_p90_ms:g} ms; prefill could take {pd.prefill_instances} × {p.prefill_rps_per_instance:.2f})",
    }.get(p.binding, p.binding)
    return head + (
        f" At {p.goodput_rps_per_node:.2f} req/s per node: p90 TTFT {p.ttft_p90_s * 1e3:.0f} ms "
        f"(prefill queue + compute, transfer, one decode step of {p.decode_step_s * 1e3:.1f} ms), p90 TPOT "
        f"{p.tpot_p90_s * 1e3:.1f} ms from decode alone (no prompt chunks in its steps); {side}."
    )


__all__ = [
    "CONNECTORS",
    "CONNECTOR_OVERHEAD_S",
    "KvTransfer",
    "PdPrediction",
    "RDMA_GB_S",
    "TRANSFER_EFFICIENCY",
    "balanced_units",
    "connector_for",
    "kv_transfer",
    "link_for",
    "pd_problems",
    "pd_reason",
    "predict_pd",
]


# --------------------------------------------------------------------------- search candidates


def pd_candidates(
    arch: ModelArch, gpu: GpuSize, workload: Workload, slo: Slo, factors: EfficiencyFactors, band: Band,
    price: float | None, *, layouts: list[PdLayout] | None = None, fabric: bool = False, pool_nodes: int | None = None,
    tune: bool = True,
):
    """P/D layouts as search candidates (`search.Candidate`s), ranked with the colocated ones.

    Without `layouts`, every balanced shape of `balanced_units` at each prefill token budget, the
    best budget kept per shape. Nothing when the GPU's vendor has no KV connector.
    """
    if layouts is None:
        if connector_for(gpu) is None:
            return []
        shapes = balanced_units(gpu, arch, fabric=fabric)
        layouts = [with_budget(s, t) for s in shapes for t in PREFILL_TOKEN_BUDGETS]
    preds = predict_pd(arch, gpu, workload, slo, layouts, factors, fabric=fabric, pool_nodes=pool_nodes, tune=tune)
    best: dict[str, PdPrediction] = {}
    for p in preds:
        key = p.pd.name
        held = best.get(key)
        if held is None or p.goodput_rps_per_node > held.goodput_rps_per_node * 1.005:
            best[key] = p
    out = []
    for p in best.values():
        out.append(_candidate(p, gpu, workload, slo, band, price))
    return out


def _candidate(p: PdPrediction, gpu: GpuSize, workload: Workload, slo: Slo, band: Band, price: float | None) -> PdCandidate:
    pd = p.pd
    reason = pd_reason(p, slo)
    if not p.fits:
        return PdCandidate(
            pd, False, p.decode_memory, pd.gpus_per_node_used, 0.0, 0.0, 0.0, 0.0, None, None, None, None, price, None,
            p.binding, "", reason, p.problems, band=band, prediction=p,
        )
    per_node = p.goodput_rps_per_node
    limit = {"prefill": "ttft", "transfer": "ttft", "decode": "tpot"}.get(p.binding, p.binding) if per_node > 0 else "slo"
    parts = p.decode_bottleneck_ms
    bottleneck = max(sorted(parts), key=lambda k: parts[k]) if parts else ""
    if bottleneck == "compute" and parts.get("compute", 0) < parts.get("weights", 0) + parts.get("kv", 0):
        bottleneck = "weights"
    gpus = pd.gpus_per_node_used
    low = per_node * min(1.0, band.low)
    node_price = price
    return PdCandidate(
        layout=pd,
        fits=True,
        memory=p.decode_memory,
        gpus_per_node=gpus,
        goodput_rps_per_replica=p.goodput_rps_per_unit,
        goodput_rps_per_node=per_node,
        output_tokens_per_s_per_gpu=per_node * workload.output_tokens / gpus if gpus else 0.0,
        running_per_replica=p.decode_running,
        step_ms=p.decode_step_s * 1e3 if math.isfinite(p.decode_step_s) else None,
        ttft_p90_ms=p.ttft_p90_s * 1e3 if math.isfinite(p.ttft_p90_s) else None,
        tpot_p90_ms=p.tpot_p90_s * 1e3 if math.isfinite(p.tpot_p90_s) else None,
        nodes_needed=nodes_for_peak(workload.peak_rps, low),
        usd_per_hour=node_price,
        usd_per_million_output_tokens=usd_per_million_output_tokens(node_price, per_node, workload.output_tokens),
        limit=limit,
        bottleneck=bottleneck,
        reason=reason,
        band=band,
        prediction=p,
    )


def pd_verdict(candidates) -> str:
    """One sentence on whether disaggregation wins and why (ranked candidates, best first)."""
    fitting = [c for c in candidates if c.fits and c.goodput_rps_per_node > 0]
    pds = [c for c in fitting if getattr(c.layout, "disaggregated", False)]
    cos = [c for c in fitting if not getattr(c.layout, "disaggregated", False)]
    if not pds:
        return " No P/D layout meets the SLO here."
    if not cos:
        return f" Only P/D layouts meet the SLO; the best is {pds[0].name}."
    # the best P/D layout on paper, held back or not (the choice rules say what held it back)
    pd, co = max(pds, key=lambda c: c.goodput_rps_per_node), cos[0]
    ratio = pd.goodput_rps_per_node / co.goodput_rps_per_node
    p = pd.prediction
    if ratio > 1:
        return (
            f" P/D wins{' on paper' if pd.held_back else ''}: {pd.name} carries {ratio:.2f}× {co.name} because its decode "
            f"steps carry no prompt chunks (p90 TPOT {pd.tpot_p90_ms:.1f} ms vs {co.tpot_p90_ms:.1f} ms) while the KV move "
            f"costs {p.transfer.seconds * 1e3:.0f} ms of the TTFT budget; its {p.binding} side binds"
            + (f"; held back unmeasured: {pd.held_back}." if pd.held_back else ".")
        )
    return (
        f" P/D does not pay here: the best P/D layout {pd.name} carries {ratio:.2f}× {co.name} "
        f"({p.binding} side binds; splitting the node leaves the {p.binding} side fewer GPUs than the "
        "prompt/answer mix needs, and the KV move "
        f"costs {p.transfer.seconds * 1e3:.0f} ms of TTFT)."
    )
