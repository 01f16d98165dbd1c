"""Step times of vLLM replicas, and the latency and throughput they imply at a load.

Many scenarios (model × GPU × layout × workload × calibrated factors) are evaluated at once as
numpy arrays: the layout search scores every candidate shape in one pass and the calibration fits
hundreds of published measurements in seconds. Every figure is per replica unless named otherwise.

One decode step of a replica with n running sequences (n/dp per data-parallel rank) costs

    engine overhead        c0 + c1 · n/dp              one scheduler per engine (DP rank): CPU work,
                                                       sampling, input preparation
  + layer floor            layers × f                  kernel launches, norms, sync bubbles
  + TP all-reduce          2 per layer × (α + β·(tp-1)) + bytes / link    latency grows with the group
  + EP/DP dispatch         2 per MoE layer × (α + β·(g-1)) + bytes / link (DP ranks meet at every MoE layer)
                                                       a replica over several nodes (nodes_per_replica):
                                                       the share of a collective's peers on other nodes
                                                       moves over the GPU's RDMA NIC (RDMA_GB_S at
                                                       RDMA_COLLECTIVE_EFFICIENCY) while the rest
                                                       moves over xGMI/NVLink at the same time, so the
                                                       slower of the two paths sets the time, plus
                                                       RDMA_LATENCY_US per collective that leaves the node
  + dense GEMMs            max(weights read, FLOPs)     attention projections, dense MLPs, shared
                                                       experts, LM head: bytes / (HBM · η_w · slice)
  + attention              max(KV read, FLOPs)          every running sequence reads its KV cache:
                                                       n/dp · context · KV bytes / (HBM · η_kv)
  + routed experts         max(experts read, FLOPs)     the distinct experts the batch touches
                                                       (uniform routing), the busiest EP rank setting
                                                       the pace; grouped-GEMM FLOPs at an efficiency
                                                       that falls with tokens per expert: m / (m + m½)

Each phase is a kernel sequence of its own, so phases add and each takes the larger of its memory
and compute time. A thin per-GPU slice of a matrix (high TP) wastes bandwidth and GEMM tiles:
efficiency × w / (w + w½) for w output columns per GPU. KV heads are replicated once TP exceeds
them (an MLA latent on every rank): more TP reads more KV per sequence, not less.

Prompts run in chunks of the free `max_num_batched_tokens` budget mixed into decode steps (vLLM's
chunked prefill). At arrival rate λ the prompt work stretches every step: t = max((A + D)/(1 − c·r),
(A + F + ...)/(1 − (c + f)·r)) for r prompt tokens/s, f the compute seconds per prompt token, c the
collective seconds per token. A prompt waits for the running step, then (M/D/1) for the prompt work
queued ahead, then runs its own chunks. Little's law ties the running sequences to the rate:
n = λ · (TTFT + (O − 1) · t). Goodput is the largest λ whose p90 TTFT and p90 TPOT meet the SLO and
whose n fits the KV cache and `max_num_seqs`; a closed loop of C clients (a benchmark) is the λ at
which n = min(C, capacity), found by bisection, so it always has a finite answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from infra.catalog.gpus import RDMA_GB_S, Accelerator
from infra.catalog.models import ModelArch
from infra.domain import Layout, Workload
from infra.planner.efficiency import EfficiencyFactors
from infra.planner.memory import weight_bytes_per_gpu

INF = float("inf")
# How output lengths vary between the requests of a benchmark (benchmarks/data/SOURCES.md `output_lengths`):
# `equal` is exactly equal lengths (a random dataset at range ratio 1.0 with --ignore-eos), `fixed` also
# allows the near-equal lengths of range ratio ≥ 0.8.
OUTPUT_SPREADS = ("fixed", "equal", "uniform", "sharegpt")
EQUAL_LENGTHS = ("fixed", "equal")  # a burst of these has no thinning tail
# A collective that leaves the node (stated assumptions, not calibrated: no multi-node measurement
# is in the calibration set): all-to-all dispatch/combine and ring all-reduce reach this share of
# the NIC's line rate, and pay this much more fixed latency (NIC doorbell, fabric hop) per call.
RDMA_COLLECTIVE_EFFICIENCY = 0.5
RDMA_LATENCY_US = 15.0
_BISECT = 40  # bisection steps: 2^-40 of the bracket, far below any figure we print
# Goodput search: at most this many halvings of the rate bracket, stopping at this share of it;
# the halvings are evaluated this many at a time (see `Scenarios.goodput`).
_GOODPUT_STEPS = 24
_GOODPUT_TOLERANCE = 1e-3
_ROUND_DEPTH = 5


def slice_efficiency(width: float, half_width: float) -> float:
    """Share of bandwidth a memory-bound GEMM keeps when each GPU computes `width` output columns."""
    return width / (width + half_width) if half_width > 0 else 1.0


def compute_tflops(acc: Accelerator, arch: ModelArch) -> float:
    """Dense peak TFLOPS of the GEMMs the engine runs: FP8 weights on FP8 tensor cores (w8a8); 4-bit
    weights on FP4 cores where the GPU has them (MI355X, B200), else dequantised to BF16."""
    if arch.compute_dtype == "fp8" and acc.supports_fp8:
        return acc.fp8_tflops
    if arch.weight_dtype in ("mxfp4", "nvfp4") and acc.fp4_tflops:
        return acc.fp4_tflops
    return acc.bf16_tflops


def _dense_bytes_read_per_step(arch: ModelArch, tp: int, dp: int) -> float:
    """Non-expert weight bytes one GPU reads every step: all it holds except the input embedding
    (a lookup of a few rows), unless the embedding doubles as the LM head."""
    held = weight_bytes_per_gpu(arch, tp, dp) - arch.routed_expert_weight_bytes / (tp * dp)
    if arch.tie_word_embeddings:
        return held
    return held - arch.vocab_size * arch.hidden_size * 2.0 / tp


@dataclass(frozen=True)
class Scenario:
    """One replica to model: what runs, where, under which traffic, with which factors.

    node_gpus: GPUs of the node the replica lives on (AMD nodes are a full mesh: a group of n GPUs
    uses n-1 of a GPU's node-1 links).
    """

    arch: ModelArch
    accelerator: Accelerator
    node_gpus: int
    layout: Layout
    workload: Workload
    factors: EfficiencyFactors


class Scenarios:
    """Per-step costs of many replicas, as arrays, and the load points they imply.

    Construction splits what a scenario *is* (bytes, FLOPs, token counts: `_shape`) from how
    efficiently its GPU family runs it (the factors, `_with_factors`), so the calibration can try
    new factors on the same scenarios without rebuilding them (`with_factors`).
    """

    def __init__(self, items: Sequence[Scenario]):
        self.items = list(items)
        self.size = len(self.items)
        self._raw = _columns([_shape(it) for it in self.items])
        self._apply(_columns([asdict(it.factors) for it in self.items]))

    def with_factors(self, factors: dict[str, np.ndarray]) -> Scenarios:
        """The same scenarios under other factors (arrays or scalars per factor name)."""
        clone = object.__new__(Scenarios)
        clone.items, clone.size, clone._raw = self.items, self.size, self._raw
        base = _columns([asdict(it.factors) for it in self.items]) if not hasattr(self, "_factors") else self._factors
        clone._apply({k: np.broadcast_to(np.asarray(factors.get(k, v), dtype=float), (self.size,)) for k, v in base.items()})
        return clone

    def take(self, index) -> Scenarios:
        """The scenarios at `index` (an index array or a boolean mask), sharing nothing mutable."""
        idx = np.arange(self.size)[index]
        clone = object.__new__(Scenarios)
        clone.items = [self.items[i] for i in idx]
        clone.size = len(idx)
        clone._raw = {k: v[idx] for k, v in self._raw.items()}
        clone._apply({k: v[idx] for k, v in self._factors.items()})
        return clone

    def _apply(self, f: dict[str, np.ndarray]) -> None:
        self._factors = f
        for name, values in self._raw.items():
            setattr(self, name, values)
        for name, values in _with_factors(self._raw, f).items():
            setattr(self, name, values)

    # --- one decode step ---------------------------------------------------------------------------
    def experts_read_s(self, n):
        """Seconds to read the routed experts a batch of n tokens touches, on the busiest GPU."""
        n = np.asarray(n, dtype=float)
        e = np.maximum(self.n_experts, 1.0)
        share = np.where(self.n_experts > 0, 1.0 - (1.0 - self.k_experts / e) ** np.maximum(n, 0.0), 0.0)
        local = self.expert_local
        mean = local * share
        sd = np.sqrt(np.maximum(local * share * (1.0 - share), 0.0))
        busiest = np.minimum(local, mean + sd * np.sqrt(2.0 * np.log(np.maximum(self.g, 1.0))))
        ep_time = self.expert_full_s * busiest
        sliced_time = self.expert_full_s * self.n_experts * share / self.g
        return np.where(self.ep_sharded > 0, ep_time, sliced_time)

    def experts_compute_s(self, n):
        """Grouped-GEMM seconds of n tokens' routed experts: tokens per touched expert m set the
        kernel's efficiency (m / (m + m½)); few tokens per expert run far below peak."""
        n = np.asarray(n, dtype=float)
        e = np.maximum(self.n_experts, 1.0)
        share = 1.0 - (1.0 - self.k_experts / e) ** np.maximum(n, 1e-9)
        touched = np.maximum(self.n_experts * share, 1e-9)
        m = n * self.k_experts / touched
        with np.errstate(divide="ignore", invalid="ignore"):
            eff = np.where(self.moe_tokens_half > 0, m / (m + self.moe_tokens_half), 1.0)
        time = n * self.expert_flop_s_per_token / np.maximum(eff, 1e-9)
        return np.where((self.n_experts > 0) & (n > 0), time, 0.0)

    def parts(self, n):
        """(fixed A, decode time D, decode compute F, collective seconds per token c) at n running."""
        n = np.asarray(n, dtype=float)
        n_rank = n / self.dp
        dense = np.maximum(self.dense_s, n_rank * self.dense_flop_s_per_token)
        attention = np.maximum(n_rank * self.kv_s_per_seq, n_rank * self.attn_flop_s_per_seq)
        experts_compute = self.experts_compute_s(n)
        experts = np.maximum(self.experts_read_s(n), experts_compute)
        fixed = self.step_overhead_s + self.seq_overhead_s * n_rank + self.floor_s + self.comm_fixed_s
        fixed = fixed + n * self.comm_s_per_token
        compute = n_rank * (self.dense_flop_s_per_token + self.attn_flop_s_per_seq) + experts_compute
        return fixed, dense + attention + experts, compute, self.comm_s_per_token

    def decode_step_s(self, n):
        fixed, decode, _, _ = self.parts(n)
        return fixed + decode

    def breakdown(self, n) -> dict[str, np.ndarray]:
        """Where a decode step's time goes (seconds), for explanations."""
        n = np.asarray(n, dtype=float)
        n_rank = n / self.dp
        return {
            "overhead": self.step_overhead_s + self.seq_overhead_s * n_rank + self.floor_s,
            "weights": np.maximum(self.dense_s, n_rank * self.dense_flop_s_per_token)
            + np.maximum(self.experts_read_s(n), self.experts_compute_s(n)),
            "kv": np.maximum(n_rank * self.kv_s_per_seq, n_rank * self.attn_flop_s_per_seq),
            "compute": n_rank * (self.dense_flop_s_per_token + self.attn_flop_s_per_seq) + self.experts_compute_s(n),
            "comm": self.comm_fixed_s + n * self.comm_s_per_token,
        }

    # --- prompts ------------------------------------------------------------------------------------
    def prefill_cost_s(self, rate, decode_s):
        """Seconds of replica time per prompt token at this arrival rate (DP imbalance included): a
        prompt's attention and dense layers run on one DP rank, so prefill only spreads over as many
        ranks as prompts arrive per step."""
        prompts_per_step = np.asarray(rate, dtype=float) * decode_s
        spread = np.minimum(self.dp, np.maximum(1.0, prompts_per_step))
        return self.prefill_dense_s / spread + self.prefill_expert_s

    def state(self, n, rate):
        """(mean step time, mean TTFT, p90 TTFT) with n running sequences at an arrival rate; inf
        where the prompt work outgrows the GPUs or the per-step token budget."""
        n = np.asarray(n, dtype=float)
        rate = np.asarray(rate, dtype=float)
        a, d, f_dec, c = self.parts(n)
        decode = a + d
        r = rate * self.prefill_tokens
        f = self.prefill_cost_s(rate, decode)
        with np.errstate(divide="ignore", invalid="ignore"):
            d1 = 1.0 - c * r
            d2 = 1.0 - (c + f) * r
            t = np.maximum((a + d) / d1, (a + f_dec) / d2)
            n_rank = n / self.dp
            budget_ok = r * t / self.dp <= self.budget_tokens - n_rank
            chunk = np.maximum(1.0, self.budget_tokens - n_rank)
            service = np.ceil(self.prefill_tokens / chunk) * decode + self.prefill_tokens * (self.prefill_single_s + c)
            rho = r * (f + c)
            wait_mean = 0.5 * service * rho / (1.0 - rho)
            wait_p90 = np.where(rho > 0.1, 0.5 * service * np.log(np.maximum(10.0 * rho, 1.0)) / (1.0 - rho), 0.0)
        ok = (d1 > 0) & (d2 > 0) & (rho < 1.0) & budget_ok
        t = np.where(ok, t, INF)
        ttft = np.where(ok, 0.5 * t + service + wait_mean, INF)
        ttft90 = np.where(ok, 0.9 * t + service + wait_p90, INF)
        return t, ttft, ttft90

    def rate_limit(self, n):
        """A rate above which the replica cannot keep up with the prompts at n running (an upper
        bracket for the searches; the exact bound also depends on step time and budget)."""
        _, _, _, c = self.parts(n)
        return 1.0 / (self.prefill_tokens * (self.prefill_best_s + c))

    # --- load points ----------------------------------------------------------------------------------
    def at_rate(self, rate, n_max) -> LoadPoints:
        """Open-loop steady state at `rate` requests/s per replica: Little's law n = λ·(TTFT + (O-1)·t)
        iterated from n = 0; unstable where n outgrows n_max or the work outgrows the GPUs."""
        rate = np.broadcast_to(np.asarray(rate, dtype=float), (self.size,)).copy()
        n_max = np.broadcast_to(np.asarray(n_max, dtype=float), (self.size,))
        o = self.output_tokens
        n = np.zeros(self.size)
        stable = np.ones(self.size, dtype=bool)
        # A converged scenario stops moving: its figures do not depend on which others share the batch.
        done = np.zeros(self.size, dtype=bool)
        for _ in range(60):
            t, ttft, _ = self.state(n, rate)
            with np.errstate(invalid="ignore"):
                n_new = rate * (ttft + (o - 1.0) * t)
            stable &= np.isfinite(n_new) & (n_new <= n_max)
            n_new = np.where(stable & ~done, n_new, n)
            done |= np.abs(n_new - n) <= 1e-4 * np.maximum(1.0, n_new)
            n = n_new
            if np.all(done | ~stable):
                break
        t, ttft, ttft90 = self.state(n, rate)
        stable &= np.isfinite(t)
        return LoadPoints.build(self, rate, n, t, ttft, ttft90, stable)

    def closed_loop(self, concurrency, n_max) -> LoadPoints:
        """Benchmark steady state: `concurrency` clients per replica, each sending its next request
        when the last one ends. The engine runs min(clients, n_max); the rest wait in its queue."""
        c = np.broadcast_to(np.asarray(concurrency, dtype=float), (self.size,))
        n_max = np.broadcast_to(np.asarray(n_max, dtype=float), (self.size,))
        running = np.maximum(np.minimum(c, n_max), 1e-6)
        o = self.output_tokens

        def excess(rate):
            t, ttft, _ = self.state(running, rate)
            with np.errstate(invalid="ignore"):
                value = rate * (ttft + (o - 1.0) * t) - running
            return np.where(np.isfinite(value), value, INF)

        lo = np.zeros(self.size)
        hi = np.asarray(self.rate_limit(running), dtype=float)
        for _ in range(_BISECT):
            mid = 0.5 * (lo + hi)
            above = excess(mid) > 0
            hi = np.where(above, mid, hi)
            lo = np.where(above, lo, mid)
        rate = lo
        t, ttft, ttft90 = self.state(running, rate)
        queued = np.maximum(0.0, c - running)
        with np.errstate(divide="ignore", invalid="ignore"):
            wait = np.where(queued > 0, queued / np.maximum(rate, 1e-12), 0.0)
        stable = np.isfinite(t) & (rate > 0)
        return LoadPoints.build(self, rate, running, t, ttft + wait, ttft90 + wait, stable)

    def lockstep(self, clients, n_max) -> LoadPoints:
        """A closed loop of `clients` whose requests all have exactly equal lengths (spread `equal`):
        the first wave arrives together, so every request of a wave ends at the same step and the
        clients send the next wave together — prefill of the whole wave, then its decode steps with
        no prompt in between, over and over: a static batch, repeated (the TTFT of such a benchmark
        grows with the clients, moreh-mi355x-bench in benchmarks/data/SOURCES.md). More clients than
        the engine runs queue, and the loop falls back to the steady state."""
        c = np.broadcast_to(np.asarray(clients, dtype=float), (self.size,))
        n_max = np.broadcast_to(np.asarray(n_max, dtype=float), (self.size,))
        waves = self.static_batch(np.maximum(np.minimum(c, n_max), 1.0))
        return self.closed_loop(c, n_max).where(c <= n_max, waves)

    def static_batch(self, batch) -> LoadPoints:
        """A batch of prompts submitted together and decoded together (a latency benchmark):
        prefill of batch × prompt tokens, then O steps at that batch."""
        b = np.broadcast_to(np.asarray(batch, dtype=float), (self.size,))
        decode = self.decode_step_s(b)
        chunks = np.ceil(b * self.prefill_tokens / np.maximum(1.0, self.budget_tokens))
        prefill = b * self.prefill_tokens * self.prefill_best_s + chunks * (self.step_overhead_s + self.floor_s + self.dense_s)
        latency = prefill + self.output_tokens * decode
        rate = b / latency
        return LoadPoints.build(self, rate, b, decode, prefill, prefill, np.ones(self.size, dtype=bool))

    def burst(self, requests, n_max, spread) -> LoadPoints:
        """`requests` submitted at once (per replica) whose output lengths vary as `spread` says
        (an array of OUTPUT_SPREADS names): a benchmark with request rate inf. Throughput is all
        output tokens over the makespan, and with varied lengths the makespan has a tail: after the
        queue drains, the running batch thins out as requests finish, and the longest ones decode
        almost alone at the small-batch step time. Fixed lengths keep the static-batch (all fit) and
        steady-state (waves at capacity) figures. Only the throughput is meaningful: latencies of a
        burst describe its queue, not a steady state.

        Survival of an output length L with mean μ: fixed — all end at μ; uniform on [0, 2μ] —
        S(t) = 1 − t/2μ; ShareGPT — exponential, S(t) = e^(−t/μ) (coefficient of variation 1, the
        dataset's long tail), truncated where fewer than one request is left. The tail takes
        ∫ step(C·S(t)) dt from the C running when the queue is empty: Gauss–Legendre in u = S."""
        n = np.broadcast_to(np.asarray(requests, dtype=float), (self.size,))
        cap = np.maximum(np.broadcast_to(np.asarray(n_max, dtype=float), (self.size,)), 1.0)
        kind = np.broadcast_to(np.asarray(spread), (self.size,))
        fixed = np.isin(kind, EQUAL_LENGTHS)
        static = self.static_batch(np.minimum(n, cap))
        steady = self.closed_loop(n, cap)
        point = steady.where(n <= cap, static)
        varied = ~fixed
        if not varied.any():
            return point
        mu = self.output_tokens
        start = np.minimum(n, cap)  # running when the queue is empty
        # bulk: the requests beyond the first `start` finish at the steady-state rate at capacity
        with np.errstate(divide="ignore", invalid="ignore"):
            bulk = np.where(n > cap, (n - cap) / np.maximum(steady.rate_rps, 1e-12), 0.0)
        # prefill of the first batch (the rest is inside the steady state)
        prefill = static.ttft_mean_s
        nodes, weights = np.polynomial.legendre.leggauss(16)
        lo = 1.0 / start  # the tail ends when less than one request is left
        u = 0.5 * (nodes[:, None] + 1.0) * (1.0 - lo) + lo  # surviving share, (16, size)
        running = start * u
        step = self.decode_step_s(running)
        # dt = −μ du/u (exponential) or 2μ du (uniform)
        expo = kind == "sharegpt"
        dt_du = np.where(expo, mu / u, 2.0 * mu)
        tail = 0.5 * (1.0 - lo) * np.sum(weights[:, None] * step * dt_du, axis=0)
        makespan = prefill + bulk + tail
        rate = n / makespan
        out = LoadPoints.build(self, rate, start, point.step_s, point.ttft_mean_s, point.ttft_p90_s, point.stable)
        return point.where(varied, out)

    def goodput(self, n_max, ttft_p90_s, tpot_p90_s) -> tuple[np.ndarray, LoadPoints, np.ndarray]:
        """Largest requests/s per replica within the SLO, its load point, and the constraint that
        binds: "ttft", "tpot", "capacity" (KV cache, max_num_seqs) or "throughput" (the GPUs).

        A bisection of `_GOODPUT_STEPS` halvings down to `_GOODPUT_TOLERANCE` of the bracket. The
        halvings are not run one after another: each round evaluates every rate the next
        `_ROUND_DEPTH` halvings could try (a binary tree of midpoints, 2^depth − 1 rates per
        scenario) in one vectorised pass, then walks the tree as the sequential bisection would,
        so the answer is the same with a few array passes instead of one per halving."""
        n_max = np.broadcast_to(np.asarray(n_max, dtype=float), (self.size,))
        ttft_slo = np.broadcast_to(np.asarray(ttft_p90_s, dtype=float), (self.size,))
        tpot_slo = np.broadcast_to(np.asarray(tpot_p90_s, dtype=float), (self.size,))
        t_full = self.decode_step_s(n_max)
        hi = np.minimum(n_max / (self.output_tokens * t_full), self.rate_limit(np.zeros(self.size)))
        hi = np.where(np.isfinite(hi) & (hi > 0), hi, 1e-6)
        ok0, first, why0 = self._within_slo(hi * 1e-6, n_max, ttft_slo, tpot_slo)
        lo = np.zeros(self.size)
        limit = np.where(ok0, "throughput", why0).astype(object)
        best = [np.array(v, copy=True) for v in first.values()]
        steps = 0
        while steps < _GOODPUT_STEPS:
            active = ok0 & (hi - lo > _GOODPUT_TOLERANCE * hi)
            if not active.any():
                break
            depth = min(_ROUND_DEPTH, _GOODPUT_STEPS - steps)
            idx = np.flatnonzero(active)
            mids = _midpoint_tree(lo[idx], hi[idx], depth)  # (len(idx), 2^depth - 1)
            width = mids.shape[1]
            rows = np.repeat(idx, width)
            ok, point, why = self.take(rows)._within_slo(mids.ravel(), n_max[rows], ttft_slo[rows], tpot_slo[rows])
            ok, why = ok.reshape(-1, width), why.reshape(-1, width)
            sub_lo, sub_hi = lo[idx], hi[idx]
            sub_limit = limit[idx]
            chosen = np.full(len(idx), -1)
            node = np.zeros(len(idx), dtype=int)
            alive = np.ones(len(idx), dtype=bool)
            pick = np.arange(len(idx))
            for _ in range(depth):
                alive &= sub_hi - sub_lo > _GOODPUT_TOLERANCE * sub_hi
                mid, good = mids[pick, node], ok[pick, node]
                sub_lo = np.where(alive & good, mid, sub_lo)
                sub_hi = np.where(alive & ~good, mid, sub_hi)
                sub_limit = np.where(alive & ~good, why[pick, node], sub_limit)
                chosen = np.where(alive & good, node, chosen)
                node = np.where(good, 2 * node + 2, 2 * node + 1)
            lo[idx], hi[idx], limit[idx] = sub_lo, sub_hi, sub_limit
            moved = chosen >= 0
            flat = pick[moved] * width + chosen[moved]
            for target, values in zip(best, point.values(), strict=True):
                target[idx[moved]] = values[flat]
            steps += depth
        rate = np.where(ok0, lo, 0.0)
        return rate, LoadPoints(*best), limit

    def _within_slo(self, rate, n_max, ttft_slo, tpot_slo):
        """(meets the SLO, load point, what breaks first) at these rates per replica."""
        point = self.at_rate(rate, n_max)
        ok = point.stable & (point.tpot_p90_s <= tpot_slo) & (point.ttft_p90_s <= ttft_slo)
        why = np.where(
            ~point.stable,
            np.where(point.running >= n_max * 0.999, "capacity", "throughput"),
            np.where(point.tpot_p90_s > tpot_slo, "tpot", np.where(point.ttft_p90_s > ttft_slo, "ttft", "")),
        )
        return ok, point, why

    def physical_ceiling_tokens_per_s(self, n):
        """Output tokens/s one replica could reach with n sequences at 100% of datasheet bandwidth and
        compute and no overheads: the roofline no prediction may exceed."""
        n = np.asarray(n, dtype=float)
        e = np.maximum(self.n_experts, 1.0)
        share = np.where(self.n_experts > 0, 1.0 - (1.0 - self.k_experts / e) ** n, 0.0)
        memory = (self.dense_bytes + self.expert_bytes_per_gpu * share + (n / self.dp) * self.kv_bytes_per_seq) / self.bw
        compute = 2.0 * self.linear_active * n / self.g / self.peak
        return n / np.maximum(memory, compute)


@dataclass(frozen=True)
class LoadPoints:
    """Predicted steady states, one per scenario (arrays)."""

    rate_rps: np.ndarray
    running: np.ndarray
    step_s: np.ndarray
    ttft_mean_s: np.ndarray
    ttft_p90_s: np.ndarray
    tpot_mean_s: np.ndarray
    tpot_p90_s: np.ndarray
    output_tokens_per_s: np.ndarray
    stable: np.ndarray

    @staticmethod
    def build(s: Scenarios, rate, running, t, ttft, ttft90, stable) -> LoadPoints:
        stable = np.asarray(stable, dtype=bool) & np.isfinite(t)
        inf = np.full(s.size, INF)
        t = np.where(stable, t, inf)
        return LoadPoints(
            rate_rps=np.asarray(rate, dtype=float),
            running=np.where(stable, running, inf),
            step_s=t,
            ttft_mean_s=np.where(stable, ttft, inf),
            ttft_p90_s=np.where(stable, ttft90, inf),
            tpot_mean_s=t,
            tpot_p90_s=t * s.tpot_p90,
            output_tokens_per_s=np.where(stable, np.asarray(rate, dtype=float) * s.output_tokens, 0.0),
            stable=stable,
        )

    def where(self, mask, other: LoadPoints) -> LoadPoints:
        """This point where `mask` is false, `other`'s where it is true."""
        return LoadPoints(*(np.where(mask, b, a) for a, b in zip(self.values(), other.values(), strict=True)))

    def values(self) -> tuple:
        return (
            self.rate_rps, self.running, self.step_s, self.ttft_mean_s, self.ttft_p90_s,
            self.tpot_mean_s, self.tpot_p90_s, self.output_tokens_per_s, self.stable,
        )

    def at(self, i: int) -> LoadPoint:
        return LoadPoint(*(v[i].item() if hasattr(v[i], "item") else v[i] for v in self.values()))


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


# --------------------------------------------------------------------------- per-scenario constants


def _midpoint_tree(lo: np.ndarray, hi: np.ndarray, depth: int) -> np.ndarray:
    """Every midpoint `depth` halvings of [lo, hi] can reach, as a heap (node i's halves are nodes
    2i+1 and 2i+2), computed as a sequential bisection computes them: 0.5 · (lo + hi)."""
    size = (1 << depth) - 1
    mids = np.empty((len(lo), size))
    lows, highs = np.empty_like(mids), np.empty_like(mids)
    lows[:, 0], highs[:, 0] = lo, hi
    for i in range(size):
        mids[:, i] = 0.5 * (lows[:, i] + highs[:, i])
        left, right = 2 * i + 1, 2 * i + 2
        if right < size:
            lows[:, left], highs[:, left] = lows[:, i], mids[:, i]
            lows[:, right], highs[:, right] = mids[:, i], highs[:, i]
    return mids


def _columns(rows: list[dict[str, float]]) -> dict[str, np.ndarray]:
    return {name: np.asarray([float(r[name]) for r in rows], dtype=float) for name in rows[0]} if rows else {}


def _shape(it: Scenario) -> dict[str, float]:
    """What one scenario is, independent of how efficiently it runs: bytes, FLOPs, tokens, groups."""
    arch, acc, layout, workload = it.arch, it.accelerator, it.layout, it.workload
    tp, dp = layout.tp, layout.dp
    g = tp * dp
    ctx_mean = workload.input_tokens + workload.output_tokens / 2.0
    kv_dtype = "fp8" if layout.kv_cache_dtype.startswith("fp8") else "auto"
    ep = layout.ep and arch.is_moe
    embed = arch.vocab_size * arch.hidden_size
    linear_active = arch.params_active - embed  # the input embedding is a lookup
    expert_active = arch.num_moe_layers * arch.num_experts_per_tok * arch.expert_params
    if arch.attention == "mla":
        # Decode attends in the absorbed form, over the latent (QK over kv_lora + rope, PV over
        # kv_lora); prefill expands the latent into per-head keys and values (QK over nope + rope,
        # PV over v_head): far fewer FLOPs per token attended (DeepSeek-V3 paper, vLLM's MLA backends).
        attn_width = arch.num_attention_heads * (2 * arch.kv_lora_rank + arch.qk_rope_head_dim) / 2
        prefill_attn_width = arch.num_attention_heads * (arch.qk_nope_head_dim + arch.qk_rope_head_dim + arch.v_head_dim) / 2
    else:
        attn_width = prefill_attn_width = arch.num_attention_heads * arch.head_dim
    node = max(1, it.node_gpus)

    def link_share(k: int) -> float:
        # AMD nodes are a full mesh (a group of k uses k-1 of node-1 links); NVLink switches all of it.
        return min(1.0, (k - 1) / (node - 1)) if acc.vendor == "amd" and node > 1 else 1.0

    layers, moe_layers = arch.num_layers, arch.num_moe_layers
    # attention output all-reduce on every layer; the MLP all-reduce unless DP gathers the experts
    n_allreduce = (layers + (layers - (moe_layers if dp > 1 else 0))) if tp > 1 else 0
    # dispatch tokens to the experts' GPUs before, combine after each MoE layer, across all g
    n_dispatch = 2 * moe_layers if dp > 1 and arch.is_moe else 0
    nodes = max(1, layout.nodes_per_replica)

    def remote_share(k: int) -> float:
        # of a rank's k-1 peers in a group of k spread evenly over the nodes, those on other nodes
        return (k - k / nodes) / (k - 1) if nodes > 1 and k > node else 0.0

    return {
        "tp": tp,
        "dp": dp,
        "g": g,
        "ep_sharded": 1.0 if ep and g > 1 else 0.0,
        "bw": acc.hbm_bandwidth_tb_s * 1e12,
        "peak": compute_tflops(acc, arch) * 1e12,
        "peak_attn": acc.bf16_tflops * 1e12,
        "link": acc.link_gb_s * 1e9,
        "input_tokens": workload.input_tokens,
        "output_tokens": max(1, workload.output_tokens),
        "prefill_tokens": max(1.0, workload.input_tokens * (1.0 - workload.prefix_cache_hit_rate)),
        "budget_tokens": layout.max_num_batched_tokens,
        "ctx_mean": ctx_mean,
        "dense_bytes": max(0.0, _dense_bytes_read_per_step(arch, tp, dp)),
        "dense_width": (arch.intermediate_size if not arch.is_moe else arch.hidden_size) / tp,
        "kv_bytes_per_seq": ctx_mean * arch.kv_bytes_per_token(kv_dtype, tp=tp, context_tokens=int(ctx_mean)),
        "n_experts": float(arch.num_experts),
        "k_experts": float(arch.num_experts_per_tok),
        "one_expert_bytes": arch.expert_params * arch.expert_bytes_per_param * arch.num_moe_layers if arch.is_moe else 0.0,
        "expert_width": (arch.moe_intermediate_size if ep else arch.moe_intermediate_size / g) if arch.is_moe else 1.0,
        "expert_local": arch.num_experts / g if arch.is_moe else 0.0,
        "expert_bytes_per_gpu": arch.routed_expert_weight_bytes / g if arch.is_moe else 0.0,
        "moe": 1.0 if arch.is_moe else 0.0,
        "embed": embed,
        "linear_active": linear_active,
        "dense_active": linear_active - expert_active,  # attention, dense MLPs, shared experts, LM head
        "expert_active": expert_active,
        "attn_per_ctx": 4.0 * arch.num_layers * attn_width,  # QK^T and PV FLOPs per token attended
        "prefill_attn_per_ctx": 4.0 * arch.num_layers * prefill_attn_width,
        "layers": layers,
        "n_allreduce": n_allreduce,
        "n_dispatch": n_dispatch,
        "hidden_bytes": arch.hidden_size * 2.0,
        "link_share_tp": link_share(min(tp, node)),
        "link_share_g": link_share(min(g, node)),
        "rdma": RDMA_GB_S * 1e9 * RDMA_COLLECTIVE_EFFICIENCY,
        "remote_tp": remote_share(tp),
        "remote_g": remote_share(g),
    }


def _with_factors(r: dict[str, np.ndarray], f: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-step and per-token seconds from the shapes and the factors (all arrays)."""
    half = f["slice_half_width"]
    dense_slice = np.where(half > 0, r["dense_width"] / (r["dense_width"] + half), 1.0)
    expert_slice = np.where(half > 0, r["expert_width"] / (r["expert_width"] + half), 1.0)
    dense_peak = r["peak"] * f["compute_efficiency"] * dense_slice
    moe_peak = r["peak"] * f["moe_compute_efficiency"] * expert_slice
    attn_peak = r["peak_attn"] * f["attention_compute_efficiency"]
    tp, dp, g = r["tp"], r["dp"], r["g"]
    expert_flop = np.where(r["moe"] > 0, 2.0 * r["expert_active"] / g / moe_peak, 0.0)
    prefill_dense_s = (
        2.0 * (r["dense_active"] - r["embed"]) / dense_peak + r["prefill_attn_per_ctx"] * (r["input_tokens"] / 2.0) / attn_peak
    ) / tp
    link = r["link"] * f["link_efficiency"]
    lat0, lat1 = f["collective_latency_us"] * 1e-6, f["collective_latency_per_peer_us"] * 1e-6
    rdma_lat = RDMA_LATENCY_US * 1e-6
    comm_fixed = (
        r["n_allreduce"] * (lat0 + lat1 * (tp - 1) + np.where(r["remote_tp"] > 0, rdma_lat, 0.0))
        + r["n_dispatch"] * (lat0 + lat1 * (g - 1) + np.where(r["remote_g"] > 0, rdma_lat, 0.0))
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        # local peers over xGMI/NVLink and remote peers over the NIC at once: the slower path sets the pace
        tp_bytes = 2.0 * (tp - 1) / tp * r["hidden_bytes"] / dp
        per_token_tp = np.where(
            tp > 1,
            np.maximum((1 - r["remote_tp"]) * tp_bytes / (link * r["link_share_tp"]), r["remote_tp"] * tp_bytes / r["rdma"]),
            0.0,
        )
        g_bytes = (g - 1) / g * r["hidden_bytes"]
        per_token_g = np.where(
            g > 1,
            np.maximum((1 - r["remote_g"]) * g_bytes / (link * r["link_share_g"]), r["remote_g"] * g_bytes / r["rdma"]),
            0.0,
        )
    comm_per_token = r["n_allreduce"] * per_token_tp + r["n_dispatch"] * per_token_g
    return {
        "dense_s": r["dense_bytes"] / (r["bw"] * f["hbm_efficiency"] * dense_slice),
        "kv_s_per_seq": r["kv_bytes_per_seq"] / (r["bw"] * f["kv_hbm_efficiency"]),
        "expert_full_s": r["one_expert_bytes"] / (r["bw"] * f["moe_hbm_efficiency"] * expert_slice),
        "moe_tokens_half": f["moe_tokens_half"],
        "dense_flop_s_per_token": 2.0 * r["dense_active"] / tp / dense_peak,
        "expert_flop_s_per_token": expert_flop,
        "attn_flop_s_per_seq": r["attn_per_ctx"] * r["ctx_mean"] / tp / attn_peak,
        # prefill: compute-bound; grouped GEMMs over a whole chunk run near their best efficiency
        "prefill_dense_s": prefill_dense_s,
        "prefill_expert_s": expert_flop,
        "prefill_single_s": prefill_dense_s + expert_flop,
        "prefill_best_s": prefill_dense_s / dp + expert_flop,
        "comm_fixed_s": comm_fixed,
        "comm_s_per_token": comm_per_token,
        "floor_s": r["layers"] * f["layer_overhead_us"] * 1e-6,
        # one scheduler per engine, plus the broadcast of its batch to and the gather from every rank
        "step_overhead_s": f["step_overhead_ms"] * 1e-3 + f["rank_overhead_us"] * 1e-6 * (tp - 1),
        "seq_overhead_s": f["seq_overhead_us"] * 1e-6,
        "tpot_p90": f["tpot_p90_factor"],
    }


def replica_model(arch: ModelArch, accelerator: Accelerator, node_gpus: int, layout: Layout, workload: Workload,
                  factors: EfficiencyFactors) -> Scenarios:
    """One scenario as a batch of one (tests and explanations)."""
    return Scenarios([Scenario(arch, accelerator, node_gpus, layout, workload, factors)])


__all__ = ["EQUAL_LENGTHS", "INF", "OUTPUT_SPREADS", "LoadPoint", "LoadPoints", "Scenario", "Scenarios", "compute_tflops", "replica_model", "slice_efficiency"]
