"""SLO attainment of a finite benchmark run: the share of N requests, sent at a fixed rate, that meet
a TTFT limit and a per-request inter-token-latency (ITL) limit.

The search ranks layouts by steady-state goodput (p90 TTFT and mean-over-the-request TPOT). A short
published run such as the vLLM MoRI-IO blog's (100 requests at 0.5–10 req/s, "TTFT < 1 s and
ITL < 50 ms") is neither steady nor judged on TPOT: its requests are scored one by one, and an
inter-token gap counts on its own. What separates colocated from disaggregated engines there is the
*stall*: a colocated engine runs a new prompt's chunk inside a decode step, so every running
sequence sees one long gap per prompt that arrives while it decodes; a decode engine of a P/D unit
never does. This module replays such a run with the planner's step times (same calibrated
`Scenarios`), deterministic arrivals every 1/rate, round-robin over replicas / prefill engines:

- colocated: a replica serves prompts first come first served, each taking a decode step plus its
  chunk's compute; a request's first token ends its prompt's step; while it decodes (output ×
  step time, plus the stalls) every other prompt its replica runs is a stall of that length;
- P/D: prefill engines serve prompts first come first served; the KV moves (`kv_transfer`); the
  decode engine takes the request when one of its `max_num_seqs` slots is free, else it waits for
  the earliest finish; its steps carry no prompt work.

A request meets the ITL limit when at most `ITL_TAIL_SHARE` of its gaps exceed it (its p99 ITL is
within the limit: the blog does not say which per-request statistic it used; any tail statistic
stricter than the stall share gives the same order). It meets the TTFT limit when its first token
comes within the limit.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from infra.catalog.gpus import GpuSize
from infra.catalog.models import ModelArch
from infra.domain import Layout, PdLayout, Workload
from infra.planner.disaggregation import kv_transfer
from infra.planner.efficiency import EfficiencyFactors
from infra.planner.performance import Scenario, Scenarios

ITL_TAIL_SHARE = 0.01


@dataclass(frozen=True)
class Attainment:
    """The outcome of one replayed run."""

    requests: int
    rate_rps: float
    met: int  # requests meeting both limits
    met_ttft: int
    met_itl: int
    step_ms: float  # decode step at the run's concurrency
    stall_ms: float  # a colocated step that carries a prompt chunk (0 for P/D)

    @property
    def share(self) -> float:
        return self.met / self.requests


def _scenario(arch, gpu, layout: Layout, workload: Workload, factors) -> Scenarios:
    return Scenarios([Scenario(arch, gpu.accelerator, gpu.gpus, layout, workload, factors)])


def colocated_attainment(
    arch: ModelArch, gpu: GpuSize, layout: Layout, workload: Workload, factors: EfficiencyFactors,
    *, requests: int, rate_rps: float, ttft_s: float, itl_s: float,
) -> Attainment:
    """Replay `requests` at `rate_rps` on one node of colocated replicas of `layout`."""
    s = _scenario(arch, gpu, layout, workload, factors)
    replicas = layout.replicas_per_node
    per_replica = -(-requests // replicas)
    slots = layout.max_num_seqs * layout.dp
    running = min(slots, per_replica)
    step = float(s.decode_step_s(running)[0])
    tokens = float(s.prefill_tokens[0])
    chunks = -(-int(tokens) // layout.max_num_batched_tokens)
    chunk_compute = tokens * float(s.prefill_single_s[0] + s.comm_s_per_token[0])
    stall = step + chunk_compute / chunks
    prompt_service = chunks * step + chunk_compute
    out = workload.output_tokens
    met = met_ttft = met_itl = 0
    for r in range(replicas):
        arrivals = [i / rate_rps for i in range(r, requests, replicas)]
        free = 0.0
        starts, firsts = [], []
        for a in arrivals:
            start = max(a, free)
            free = start + prompt_service
            starts.append(start)
            firsts.append(free)
        for k, a in enumerate(arrivals):
            first = firsts[k]
            # decoding spans out × step plus the stalls inside it; stalls = prompts run in the window
            end = first + out * step
            stalls = 0
            for _ in range(4):  # the stalls lengthen the window, which may take in more prompts
                lo = bisect.bisect_right(starts, first)
                hi = bisect.bisect_left(starts, end)
                stalls = max(0, hi - lo)
                end = first + out * step + stalls * (stall - step)
            ok_ttft = first - a <= ttft_s
            long_gaps = stalls if stall > itl_s else 0
            ok_itl = step <= itl_s and long_gaps <= ITL_TAIL_SHARE * out
            met_ttft += ok_ttft
            met_itl += ok_itl
            met += ok_ttft and ok_itl
    return Attainment(requests, rate_rps, met, met_ttft, met_itl, step * 1e3, stall * 1e3)


def pd_attainment(
    arch: ModelArch, gpu: GpuSize, pd: PdLayout, workload: Workload, factors: EfficiencyFactors,
    *, requests: int, rate_rps: float, ttft_s: float, itl_s: float,
) -> Attainment:
    """Replay `requests` at `rate_rps` on one P/D unit."""
    kv = pd.with_(kv_cache_dtype="fp8") if pd.kv_cache_dtype.startswith("fp8") else pd
    pre = _scenario(arch, gpu, kv.side("prefill"), Workload(workload.input_tokens, 1, None, workload.prefix_cache_hit_rate), factors)
    dec = _scenario(arch, gpu, kv.side("decode"), workload, factors)
    slots = pd.decode_instances * pd.decode_max_num_seqs
    running = min(pd.decode_max_num_seqs, -(-requests // pd.decode_instances))
    step = float(dec.decode_step_s(running)[0])
    tokens = float(pre.prefill_tokens[0])
    chunks = -(-int(tokens) // pd.prefill_max_num_batched_tokens)
    p_step = float(pre.decode_step_s(1)[0])
    prompt_service = chunks * p_step + tokens * float(pre.prefill_single_s[0] + pre.comm_s_per_token[0])
    transfer = kv_transfer(arch, gpu, kv, workload.input_tokens).seconds
    out = workload.output_tokens
    free = [0.0] * pd.prefill_instances
    finishes: list[float] = []  # decode finish times of admitted requests (sorted)
    met = met_ttft = met_itl = 0
    for i in range(requests):
        a = i / rate_rps
        e = i % pd.prefill_instances
        start = max(a, free[e])
        free[e] = start + prompt_service
        ready = free[e] + transfer
        busy = [f for f in finishes if f > ready]
        admit = ready if len(busy) < slots else sorted(busy)[len(busy) - slots]
        first = admit + step
        bisect.insort(finishes, first + (out - 1) * step)
        ok_ttft = first - a <= ttft_s
        ok_itl = step <= itl_s
        met_ttft += ok_ttft
        met_itl += ok_itl
        met += ok_ttft and ok_itl
    return Attainment(requests, rate_rps, met, met_ttft, met_itl, step * 1e3, 0.0)


__all__ = ["Attainment", "ITL_TAIL_SHARE", "colocated_attainment", "pd_attainment"]
