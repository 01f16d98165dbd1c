"""Step times of one vLLM replica, and the latency and throughput they imply at a given load.

The engine advances all running sequences one token per step and mixes in chunks of waiting
prompts (chunked prefill). One step on one GPU costs

    engine overhead (per step + per running sequence, one scheduler per engine / DP rank)
  + max(memory time, compute time)        roofline: bytes read / achieved bandwidth vs FLOPs / achieved peak
  + per-layer floor × layers              kernel launches, norms, sync bubbles
  + collectives × layers                  TP all-reduce (2 per layer), DP/EP gather+scatter on MoE layers,
                                          each a latency that grows with group size plus bytes / link bandwidth

Bytes read are the weights a step touches — all dense weights, and for MoE the expected number of
distinct experts the batch activates (uniform routing: E·(1-(1-k/E)^n)), with the busiest EP rank
setting the pace — plus the KV cache of every running sequence. Memory-bound GEMMs lose bandwidth
when a GPU's slice is thin (few output columns per GPU): efficiency w / (w + w½).

Load is handled with a mean-field model: at arrival rate λ the GPUs spend a fraction of their time
on prefill (λ · prompt tokens · cost per prefill token), which stretches every decode step; the
number of running sequences follows Little's law, n = λ · (TTFT + (O-1) · TPOT); a new prompt waits
for the current step, then for prefill work queued ahead of it (an M/D/1 approximation), then runs
in chunks of the free `max_num_batched_tokens` budget. Goodput is the largest λ whose p90 TTFT and
p90 TPOT stay within the SLO and whose n fits the KV cache and `max_num_seqs`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.catalog.gpus import GpuSize
from infra.catalog.models import ModelArch
from infra.domain import Layout, Workload
from infra.planner.efficiency import EfficiencyFactors
from infra.planner.memory import weight_bytes_per_gpu

INF = float("inf")


def slice_efficiency(width: float, half_width: float) -> float:
    """Share of bandwidth a memory-bound GEMM keeps when each GPU computes `width` output columns."""
    return width / (width + half_width) if half_width > 0 else 1.0


@dataclass(frozen=True)
class StepBreakdown:
    """Where the time of one decode step goes (seconds), for explanations."""

    overhead_s: float
    weights_s: float
    kv_s: float
    compute_s: float
    floor_s: float
    comm_s: float

    @property
    def total_s(self) -> float:
        return self.overhead_s + max(self.weights_s + self.kv_s, self.compute_s) + self.floor_s + self.comm_s


def _dense_bytes_read_per_step(arch: ModelArch, tp: int, dp: int) -> float:
    """Non-expert weight bytes one GPU reads every step: all it holds except the input embedding
    (a lookup of a few rows), unless the embedding doubles as the LM head."""
    held = weight_bytes_per_gpu(arch, tp, dp) - arch.routed_expert_weight_bytes / (tp * dp)
    if arch.tie_word_embeddings:
        return held
    return held - arch.vocab_size * arch.hidden_size * 2.0 / tp


class ReplicaModel:
    """Precomputed per-step costs of one replica of `layout` serving `workload` on `gpu`."""

    __slots__ = (
        "arch",
        "gpu",
        "layout",
        "eff",
        "tp",
        "dp",
        "g",
        "input_tokens",
        "prefill_tokens",
        "output_tokens",
        "ctx_mean",
        "budget_tokens",
        "dense_s",
        "expert_full_s",
        "expert_local",
        "ep",
        "n_experts",
        "k_experts",
        "kv_s_per_seq",
        "flop_s_per_token",
        "attn_flop_s_per_seq",
        "prefill_s_per_token",
        "prefill_s_single",
        "prefill_dense_s",
        "prefill_expert_s",
        "comm_fixed_s",
        "comm_s_per_token",
        "floor_s",
        "step_overhead_s",
        "seq_overhead_s",
        "tpot_p90",
        "bw",
    )

    def __init__(
        self, arch: ModelArch, gpu: GpuSize, layout: Layout, workload: Workload, eff: EfficiencyFactors
    ):
        acc = gpu.accelerator
        self.arch, self.gpu, self.layout, self.eff = arch, gpu, layout, eff
        tp, dp = layout.tp, layout.dp
        g = tp * dp
        self.tp, self.dp, self.g = tp, dp, g
        self.input_tokens = workload.input_tokens
        self.prefill_tokens = max(1.0, workload.input_tokens * (1.0 - workload.prefix_cache_hit_rate))
        self.output_tokens = max(1, workload.output_tokens)
        # Mean context a decoding sequence attends over (prompt plus half the completion).
        self.ctx_mean = workload.input_tokens + workload.output_tokens / 2.0
        self.budget_tokens = layout.max_num_batched_tokens
        bw = acc.hbm_bandwidth_tb_s * 1e12
        self.bw = bw

        # -- memory time per step (seconds) ------------------------------------------------------
        dense_bytes = _dense_bytes_read_per_step(arch, tp, dp)
        dense_width = (arch.intermediate_size if not arch.is_moe else arch.hidden_size) / tp
        self.dense_s = max(0.0, dense_bytes) / (
            bw * eff.hbm_efficiency * slice_efficiency(dense_width, eff.slice_half_width)
        )
        self.ep = layout.ep and arch.is_moe
        self.n_experts = arch.num_experts
        self.k_experts = arch.num_experts_per_tok
        if arch.is_moe:
            expert_bytes = arch.expert_params * arch.expert_bytes_per_param * arch.num_moe_layers
            width = arch.moe_intermediate_size if self.ep else arch.moe_intermediate_size / g
            eff_bw = bw * eff.moe_hbm_efficiency * slice_efficiency(width, eff.slice_half_width)
            # seconds for one GPU to read one expert (all MoE layers)
            self.expert_full_s = expert_bytes / eff_bw
            self.expert_local = arch.num_experts / g  # experts per GPU under EP
        else:
            self.expert_full_s = 0.0
            self.expert_local = 0.0
        kv_per_token = arch.kv_bytes_per_token(
            layout.kv_cache_dtype, tp=tp, context_tokens=int(self.ctx_mean)
        )
        self.kv_s_per_seq = (
            self.ctx_mean * kv_per_token / (bw * eff.hbm_efficiency)
        )  # per sequence on its rank

        # -- compute time ---------------------------------------------------------------------------
        peak = (
            (acc.fp8_tflops if arch.compute_dtype == "fp8" else acc.bf16_tflops)
            * 1e12
            * eff.compute_efficiency
        )
        peak_attn = acc.bf16_tflops * 1e12 * eff.compute_efficiency
        linear_active = arch.params_active - arch.vocab_size * arch.hidden_size  # input embedding is free
        lm_head = arch.vocab_size * arch.hidden_size
        expert_active = arch.num_moe_layers * arch.num_experts_per_tok * arch.expert_params
        dense_active = linear_active - expert_active  # attention, dense MLPs, shared experts, LM head
        # Routed-expert GEMMs are small and ragged (n·k/E tokens per expert): their own efficiency.
        peak_moe = peak / eff.compute_efficiency * eff.moe_compute_efficiency
        # Thin per-GPU slices waste GEMM tiles: the same width penalty as for bandwidth.
        peak = peak * slice_efficiency(dense_width, eff.slice_half_width)
        if arch.is_moe:
            expert_width = arch.moe_intermediate_size if self.ep else arch.moe_intermediate_size / g
            peak_moe = peak_moe * slice_efficiency(expert_width, eff.slice_half_width)
        if arch.attention == "mla":
            attn_width = arch.num_attention_heads * (arch.kv_lora_rank + arch.qk_rope_head_dim)
        else:
            attn_width = arch.num_attention_heads * arch.head_dim
        attn_per_ctx = 4.0 * arch.num_layers * attn_width  # QK^T and PV, per token attended
        self.flop_s_per_token = (2.0 * dense_active / peak + 2.0 * expert_active / peak_moe) / g
        self.attn_flop_s_per_seq = attn_per_ctx * self.ctx_mean / g / peak_attn
        # Prefill: no LM head except the last token; causal attention over half the prompt on average.
        prefill_dense = 2.0 * (dense_active - lm_head) / peak
        prefill_expert = 2.0 * expert_active / peak_moe
        prefill_attn = attn_per_ctx * (workload.input_tokens / 2.0) / peak_attn
        # A prompt runs its attention and dense layers on its own DP rank's tp GPUs; routed experts
        # are spread over all g GPUs. DP ranks meet at every MoE layer, so a rank prefilling alone
        # holds the others up: prefill only spreads over as many ranks as prompts arrive per step.
        self.prefill_dense_s = (prefill_dense + prefill_attn) / tp
        self.prefill_expert_s = prefill_expert / g
        self.prefill_s_single = self.prefill_dense_s + self.prefill_expert_s
        self.prefill_s_per_token = self.prefill_dense_s / dp + self.prefill_expert_s  # best case

        # -- collectives ------------------------------------------------------------------------------
        node = gpu.gpus
        link = acc.link_gb_s * 1e9 * eff.link_efficiency

        def group_bw(n: int) -> float:
            # AMD nodes are a full mesh: a group of n GPUs uses n-1 of a GPU's node-1 links.
            # NVIDIA nodes switch all link bandwidth to any peer.
            if acc.vendor == "amd" and node > 1:
                return link * min(1.0, (n - 1) / (node - 1))
            return link

        def latency(n: int) -> float:
            # a fixed launch cost plus one synchronisation hop per peer in the group
            return (eff.collective_latency_us + eff.collective_latency_per_peer_us * (n - 1)) * 1e-6

        hidden_bytes = arch.hidden_size * 2.0
        fixed = 0.0
        per_token = 0.0
        layers = arch.num_layers
        moe_layers = arch.num_moe_layers
        if tp > 1:
            # attention output all-reduce on every layer; MLP all-reduce unless DP gathers experts
            n_ar = layers + (layers - (moe_layers if dp > 1 else 0))
            fixed += n_ar * latency(tp)
            per_token += n_ar * 2.0 * (tp - 1) / tp * hidden_bytes / group_bw(tp) / dp
        if dp > 1 and arch.is_moe:
            # all-gather tokens before, reduce-scatter after each MoE layer across all g GPUs
            fixed += 2 * moe_layers * latency(g)
            per_token += 2 * moe_layers * (g - 1) / g * hidden_bytes / group_bw(g)
        self.comm_fixed_s = fixed
        self.comm_s_per_token = per_token
        self.floor_s = layers * eff.layer_overhead_us * 1e-6
        self.step_overhead_s = eff.step_overhead_ms * 1e-3
        self.seq_overhead_s = eff.seq_overhead_us * 1e-6
        self.tpot_p90 = eff.tpot_p90_factor

    # --- step times --------------------------------------------------------------------------------
    def experts_read_s(self, n: float) -> float:
        """Seconds to read the routed experts a batch of n tokens touches, on the busiest GPU."""
        if not self.n_experts or n <= 0:
            return 0.0
        e, k = self.n_experts, self.k_experts
        touched_share = 1.0 - (1.0 - k / e) ** n  # probability that a given expert is used
        if self.ep and self.g > 1:
            # EP: each GPU holds `local` whole experts; the GPU with the most touched experts sets the pace
            local = self.expert_local
            mean = local * touched_share
            sd = math.sqrt(local * touched_share * (1.0 - touched_share))
            busiest = min(local, mean + sd * math.sqrt(2.0 * math.log(self.g)))
            return self.expert_full_s * busiest
        # TP-sliced: every GPU reads its 1/g slice of every touched expert
        return self.expert_full_s * e * touched_share / self.g

    def parts(self, n: float) -> tuple[float, float, float, float]:
        """(fixed time A, memory time M, decode compute time F, comm per token) for n running sequences."""
        n_rank = n / self.dp
        memory = self.dense_s + self.experts_read_s(n) + n_rank * self.kv_s_per_seq
        compute = n * self.flop_s_per_token + n * self.attn_flop_s_per_seq
        fixed = self.step_overhead_s + self.seq_overhead_s * n_rank + self.floor_s + self.comm_fixed_s
        fixed += n * self.comm_s_per_token
        return fixed, memory, compute, self.comm_s_per_token

    def breakdown(self, n: float) -> StepBreakdown:
        n_rank = n / self.dp
        return StepBreakdown(
            overhead_s=self.step_overhead_s + self.seq_overhead_s * n_rank,
            weights_s=self.dense_s + self.experts_read_s(n),
            kv_s=n_rank * self.kv_s_per_seq,
            compute_s=n * (self.flop_s_per_token + self.attn_flop_s_per_seq),
            floor_s=self.floor_s,
            comm_s=self.comm_fixed_s + n * self.comm_s_per_token,
        )

    def decode_step_s(self, n: float) -> float:
        a, m, f, _ = self.parts(n)
        return a + max(m, f)

    def prefill_cost_s(self, n: float, rate_rps: float, decode_s: float | None = None) -> float:
        """GPU seconds per prefill token of the replica at this arrival rate (DP imbalance included)."""
        if self.dp == 1:
            return self.prefill_s_single
        prompts_per_step = rate_rps * (self.decode_step_s(n) if decode_s is None else decode_s)
        return self.prefill_dense_s / min(self.dp, max(1.0, prompts_per_step)) + self.prefill_expert_s

    def state(self, n: float, rate_rps: float) -> tuple[float, float, float]:
        """(mean step time, mean TTFT, p90 TTFT) with n running sequences at an arrival rate; INF when
        the prefill work cannot keep up with arrivals or does not fit the per-step token budget.

        The step time solves t = A + c·r·t + max(M, F + f·r·t), r being prefill tokens per second:
        prompt work stretches every decode step. TTFT is the wait for the running step, an M/D/1
        wait behind prefill work queued ahead (about half the M/M/1 wait at the same utilisation),
        and the prompt's own chunks of the free token budget.
        """
        a, m, f_dec, c = self.parts(n)
        decode = a + max(m, f_dec)
        r = rate_rps * self.prefill_tokens
        f = self.prefill_cost_s(n, rate_rps, decode)
        d2 = 1.0 - (c + f) * r
        if d2 <= 0.0:
            return INF, INF, INF
        t = max((a + m) / (1.0 - c * r), (a + f_dec) / d2)
        n_rank = n / self.dp
        if r * t / self.dp > self.budget_tokens - n_rank:
            return INF, INF, INF
        chunk = max(1.0, self.budget_tokens - n_rank)
        service = math.ceil(self.prefill_tokens / chunk) * decode + self.prefill_tokens * (
            self.prefill_s_single + c
        )
        rho = r * (f + c)
        if rho >= 1.0:
            return INF, INF, INF
        wait_mean = 0.5 * service * rho / (1.0 - rho)
        wait_p90 = 0.5 * service * math.log(10.0 * rho) / (1.0 - rho) if rho > 0.1 else 0.0
        return t, 0.5 * t + service + wait_mean, 0.9 * t + service + wait_p90

    def mean_step_s(self, n: float, prefill_tokens_per_s: float) -> float:
        """Mean step time with n decoding sequences while prompts arrive at the given token rate."""
        return self.state(n, prefill_tokens_per_s / self.prefill_tokens)[0]

    # --- latency at a load -------------------------------------------------------------------------
    def at_rate(self, rate_rps: float, n_max: float) -> LoadPoint:
        """Steady state at an open-loop arrival rate (requests/s per replica): iterate Little's law
        n = λ·(TTFT + (O-1)·TPOT) from n = 0; unstable when n outgrows n_max or work outgrows the GPUs."""
        o = self.output_tokens
        n = 0.0
        t, ttft, ttft90 = self.state(0.0, rate_rps)
        for _ in range(40):
            if t == INF:
                return LoadPoint.unstable(rate_rps)
            n_new = rate_rps * (ttft + (o - 1) * t)
            if n_new > n_max:
                return LoadPoint.unstable(rate_rps, n_new)
            converged = abs(n_new - n) <= 1e-3 * max(1.0, n_new)
            n = n_new
            t, ttft, ttft90 = self.state(n, rate_rps)
            if converged:
                break
        else:
            return LoadPoint.unstable(rate_rps, n)
        if t == INF:
            return LoadPoint.unstable(rate_rps, n)
        return LoadPoint(rate_rps, n, t, ttft, ttft90, t, t * self.tpot_p90, rate_rps * o, True)

    def closed_loop(self, concurrency: float, n_max: float) -> LoadPoint:
        """Benchmark-style steady state: `concurrency` clients each send a new request when the last ends.

        Requests beyond what the engine can run (KV capacity, max_num_seqs) wait in its queue.
        """
        o = self.output_tokens
        running = min(concurrency, n_max)
        if running <= 0:
            return LoadPoint.unstable(0.0)
        rate = running / (o * self.decode_step_s(running))
        for _ in range(60):
            t, ttft, _ = self.state(running, rate)
            if t == INF:
                rate *= 0.8
                continue
            new_rate = running / (ttft + (o - 1) * t)
            if abs(new_rate - rate) <= 1e-4 * rate:
                rate = new_rate
                break
            rate = 0.5 * (rate + new_rate)
        t, ttft, ttft90 = self.state(running, rate)
        if t == INF:
            return LoadPoint.unstable(rate, running)
        queued = max(0.0, concurrency - running)
        queue_wait = queued / rate if rate > 0 else INF
        return LoadPoint(
            rate, running, t, ttft + queue_wait, ttft90 + queue_wait, t, t * self.tpot_p90, rate * o, True
        )

    def physical_ceiling_tokens_per_s(self, n: float) -> float:
        """Output tokens/s one replica could reach with n sequences at 100% of datasheet bandwidth and
        compute and no overheads: the roofline no prediction may exceed."""
        acc = self.gpu.accelerator
        arch = self.arch
        tp, g = self.tp, self.g
        dense = _dense_bytes_read_per_step(arch, tp, self.dp)
        if arch.is_moe:
            share = 1.0 - (1.0 - arch.num_experts_per_tok / arch.num_experts) ** n
            experts = arch.routed_expert_weight_bytes / g * share
        else:
            experts = 0.0
        kv = (
            (n / self.dp)
            * self.ctx_mean
            * arch.kv_bytes_per_token(self.layout.kv_cache_dtype, tp=tp, context_tokens=int(self.ctx_mean))
        )
        memory_s = (dense + experts + kv) / (acc.hbm_bandwidth_tb_s * 1e12)
        peak = (acc.fp8_tflops if arch.compute_dtype == "fp8" else acc.bf16_tflops) * 1e12
        linear_active = arch.params_active - arch.vocab_size * arch.hidden_size
        compute_s = 2.0 * linear_active * n / g / peak
        return n / max(memory_s, compute_s)


@dataclass(frozen=True)
class LoadPoint:
    """Predicted steady state of one replica at one load."""

    rate_rps: float
    running: float
    step_s: float
    ttft_mean_s: float
    ttft_p90_s: float
    tpot_mean_s: float
    tpot_p90_s: float
    output_tokens_per_s: float
    stable: bool

    @staticmethod
    def unstable(rate_rps: float, running: float = INF) -> LoadPoint:
        return LoadPoint(rate_rps, running, INF, INF, INF, INF, INF, 0.0, False)


def goodput(
    model: ReplicaModel, n_max: float, ttft_p90_s: float, tpot_p90_s: float
) -> tuple[float, LoadPoint, str]:
    """Largest requests/s per replica within the SLO, its load point, and the constraint that binds.

    Constraints: p90 TTFT, p90 TPOT, and the running sequences fitting n_max (KV cache, max_num_seqs).
    """

    def check(rate: float) -> tuple[bool, LoadPoint, str]:
        point = model.at_rate(rate, n_max)
        if not point.stable:
            return False, point, "capacity" if point.running > n_max else "throughput"
        if point.tpot_p90_s > tpot_p90_s:
            return False, point, "tpot"
        if point.ttft_p90_s > ttft_p90_s:
            return False, point, "ttft"
        return True, point, ""

    # Upper bound: decode alone at full concurrency, or prefill alone saturating the GPUs.
    t_full = model.decode_step_s(n_max)
    hi = min(
        n_max / (model.output_tokens * t_full),
        1.0 / (model.prefill_tokens * (model.prefill_s_per_token + model.comm_s_per_token)),
    )
    lo = 0.0
    ok, best, why = check(hi * 1e-6)
    if not ok:
        return 0.0, best, why
    limit = "throughput"  # if no probe fails, the GPUs saturate before either latency limit
    for _ in range(24):
        mid = 0.5 * (lo + hi)
        ok, point, why = check(mid)
        if ok:
            lo, best = mid, point
        else:
            hi, limit = mid, why
        if hi - lo <= 1e-3 * hi:
            break
    return lo, best, limit
