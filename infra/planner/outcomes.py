"""Published layout comparisons the planner must reproduce (benchmarks/data/published_outcomes.md).

Each outcome names its source, the conditions, and an inequality between two predictions of the
same model: "2×TP4-EP serves ≥ 1.3× the goodput of TP8 on this workload". The regression tests
(tests/planner/test_outcomes.py) assert them with the planner as it ships. The calibration never
sees them: they are out-of-sample checks of how the model *compares* layouts, which matters most on
ROCm, where the measurement tables hold almost nothing but TP8 on MI300X/MI325X. Each arm states
the load as the source ran it (a burst of N requests, closed-loop clients, an open-loop rate).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from infra.catalog import gpus
from infra.catalog.gpus import Accelerator
from infra.catalog.models import ModelArch, resolve_model
from infra.domain import Layout, Slo, Workload
from infra.planner.efficiency import EfficiencyFactors
from infra.planner.memory import memory_per_gpu
from infra.planner.performance import Scenario, Scenarios

FactorsOf = Callable[[str, str, bool], EfficiencyFactors]  # (family, engine, moe) → factors


@dataclass(frozen=True)
class Arm:
    """One side of a comparison: a layout of a model on a node, under a load.

    concurrency: closed-loop clients per node; with `requests` ≤ concurrency the benchmark submits
    every request at once (one burst: a static batch when the engines hold them all, else waves at
    capacity). rate: open-loop requests/s per node. Neither: goodput within the outcome's SLO.
    """

    layout: Layout
    concurrency: float | None = None
    requests: int | None = None
    rate: float | None = None


@dataclass(frozen=True)
class Outcome:
    """`metric(better) ≥ threshold × metric(worse)` (for "tpot" and "ttft", lower is better)."""

    key: str
    source: str
    model: str
    accelerator: Accelerator
    workload: Workload
    engine: str
    metric: str  # goodput | throughput | tpot | ttft | per_gpu
    better: Arm
    worse: Arm
    threshold: float
    slo: Slo | None = None
    note: str = ""
    published: float | None = None  # the ratio the source measured (same sense as the threshold)
    output_lengths: str = "fixed"  # how the benchmark's output lengths vary (performance.OUTPUT_SPREADS)

    def arch(self) -> ModelArch:
        return resolve_model(self.model)


def _arm_scenario(o: Outcome, arm: Arm, factors: EfficiencyFactors) -> tuple[Scenario, float, Layout]:
    arch = o.arch()
    size = gpus.modelling_node(o.accelerator)
    context = o.workload.input_tokens + o.workload.output_tokens
    layout = arm.layout.with_(max_model_len=max(4096, 1 << (2 * context - 1).bit_length()))
    mem = memory_per_gpu(arch, size, layout, context)
    cap = float(min(mem.max_concurrency_per_replica, layout.max_num_seqs * layout.dp)) if mem.fits else 0.0
    return Scenario(arch, o.accelerator, 8, layout, o.workload, factors), cap, layout


def ratios(outcomes: tuple[Outcome, ...], factors_of: FactorsOf) -> list[float]:
    """How far each prediction is on the published side (≥ threshold reproduces the outcome), all
    arms evaluated as one batch; NaN where an arm does not fit."""
    arms = []
    for o in outcomes:
        factors = factors_of(o.accelerator.family, o.engine, o.arch().is_moe)
        arms += [(o, arm, *_arm_scenario(o, arm, factors)) for arm in (o.better, o.worse)]
    values = np.full(len(arms), np.nan)
    caps = np.asarray([cap for *_, cap, _ in arms])
    s = Scenarios([scen for _, _, scen, _, _ in arms])
    goodput = np.asarray([arm.concurrency is None and arm.rate is None for _, arm, *_ in arms])
    if goodput.any():
        idx = np.flatnonzero(goodput)
        sub = s.take(idx)
        ttft = np.asarray([arms[i][0].slo.ttft_p90_ms / 1e3 for i in idx])
        tpot = np.asarray([arms[i][0].slo.tpot_p90_ms / 1e3 for i in idx])
        rate, _, _ = sub.goodput(np.maximum(caps[idx], 1.0), ttft, tpot)
        for j, i in enumerate(idx):
            values[i] = rate[j] * arms[i][4].replicas_per_node
    for i in np.flatnonzero(~goodput):
        o, arm, layout = arms[i][0], arms[i][1], arms[i][4]
        sub = s.take([i])
        reps = float(layout.replicas_per_node)
        cap = max(caps[i], 1.0)
        if arm.rate is not None:
            point = sub.at_rate([arm.rate / reps], [cap])
        elif arm.requests is not None and arm.requests <= arm.concurrency:
            # every request submitted at once: a burst (static batch, waves at capacity, a tail
            # when output lengths vary)
            point = sub.burst([arm.requests / reps], [cap], [o.output_lengths])
        else:
            point = sub.closed_loop([arm.concurrency / reps], [cap])
        values[i] = _metric(o, point, layout, reps)
    values = np.where(caps >= 1, values, np.nan)
    return _compare(outcomes, values)


def _metric(o: Outcome, point, layout: Layout, reps: float) -> float:
    if o.metric == "tpot":
        return float(point.tpot_mean_s[0])
    if o.metric == "ttft":
        return float(point.ttft_mean_s[0])
    tokens = float(point.output_tokens_per_s[0]) * reps
    return tokens / layout.gpus_per_node_used if o.metric == "per_gpu" else tokens


def _compare(outcomes, values) -> list[float]:
    out = []
    for k, o in enumerate(outcomes):
        better, worse = values[2 * k], values[2 * k + 1]
        if not (np.isfinite(better) and np.isfinite(worse)) or min(better, worse) <= 0:
            out.append(math.nan)
        else:
            out.append(float(worse / better if o.metric in ("tpot", "ttft") else better / worse))
    return out


def ratio(o: Outcome, factors_of: FactorsOf) -> float:
    return ratios((o,), factors_of)[0]


QWEN_235B_FP8 = "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"
DEEPSEEK_R1 = "deepseek-ai/DeepSeek-R1-0528"

OUTCOMES: tuple[Outcome, ...] = (
    Outcome(
        key="charai-2xtp4ep-vs-tp8",
        source="DigitalOcean blog 'Technical Deep Dive: How DigitalOcean and AMD Delivered a 2x Production "
        "Inference Performance Increase for Character.ai' (2026-01-13); published_outcomes.md O1",
        model=QWEN_235B_FP8,
        accelerator=gpus.MI325X,
        workload=Workload(5600, 140),
        engine="vllm",
        metric="goodput",
        better=Arm(Layout(tp=4, ep=True, replicas_per_node=2, kv_cache_dtype="fp8")),
        worse=Arm(Layout(tp=8, kv_cache_dtype="fp8")),
        threshold=1.3,
        slo=Slo(2000, 50),
        note="published ≈ 1.45× requests/s per node within p90 TTFT 2 s / TPOT 50 ms",
        published=1.45,
    ),
    Outcome(
        key="charai-2xtp4ep-vs-tp8ep",
        source="as charai-2xtp4ep-vs-tp8: the deployment chose two TP4-EP engines per node over one TP8 engine",
        model=QWEN_235B_FP8,
        accelerator=gpus.MI325X,
        workload=Workload(5600, 140),
        engine="vllm",
        metric="goodput",
        better=Arm(Layout(tp=4, ep=True, replicas_per_node=2, kv_cache_dtype="fp8")),
        worse=Arm(Layout(tp=8, ep=True, kv_cache_dtype="fp8")),
        threshold=1.0,
        slo=Slo(2000, 50),
    ),
    Outcome(
        key="moriio-itl-2xtp4ep-vs-tp8ep",
        source="vLLM blog 'Next-Level Inference: Why Your Single-Node vLLM Setup Needs Prefill-Decode "
        "Disaggregation' (2026-04-07), vllm-project/vllm-project.github.io _posts/2026-04-07-moriio-kv-connector.md "
        "@c3a01c4a; published_outcomes.md O2",
        model=QWEN_235B_FP8,
        accelerator=gpus.MI300X,
        workload=Workload(2000, 1000),
        engine="vllm",
        metric="tpot",
        better=Arm(Layout(tp=4, ep=True, replicas_per_node=2, max_num_batched_tokens=8192), rate=1.0),
        worse=Arm(Layout(tp=8, ep=True, max_num_batched_tokens=8192), rate=1.0),
        threshold=1.0,
        note="open-loop Poisson arrivals: TP8 violates the 50 ms ITL from low rates on, 2×TP4 keeps it up to ~1 req/s",
    ),
    Outcome(
        key="dsr1-tp8ep-ahead-at-64",
        source="ROCm blog 'The vLLM MoE Playbook' (2025-11-24), ROCm/rocm-blogs "
        "blogs/software-tools-optimization/vllm-moe-guide/README.md @58fdc95f; published_outcomes.md O3",
        model=DEEPSEEK_R1,
        accelerator=gpus.MI300X,
        workload=Workload(8192, 1024),
        engine="vllm",
        metric="throughput",
        better=Arm(Layout(tp=8, ep=True, max_num_seqs=1024), concurrency=64, requests=640),
        worse=Arm(Layout(tp=1, dp=8, ep=True, max_num_seqs=1024), concurrency=64, requests=640),
        threshold=1.3,
        note="published: TP8+EP 52% more throughput and 80% lower TTFT at 64 concurrent",
        published=1.52,
    ),
    Outcome(
        key="dsr1-dp8ep-ahead-at-1024",
        source="as dsr1-tp8ep-ahead-at-64",
        model=DEEPSEEK_R1,
        accelerator=gpus.MI300X,
        workload=Workload(8192, 1024),
        engine="vllm",
        metric="throughput",
        better=Arm(Layout(tp=1, dp=8, ep=True, max_num_seqs=1024), concurrency=1024, requests=640),
        worse=Arm(Layout(tp=8, ep=True, max_num_seqs=1024), concurrency=1024, requests=640),
        threshold=1.3,
        note="published: DP8+EP 47% more throughput at 1024 concurrent; the benchmark sends 640 requests, so at "
        "1024 every request is submitted at once: DP8 holds them all (MLA latent per rank), TP8 replicates "
        "the latent on every GPU and runs them in waves",
        published=1.47,
    ),
    Outcome(
        key="qwen235b-h100-tp4-per-gpu",
        source="GPUStack performance lab, gpustack/gpustack docs/performance-lab/qwen3-235b-a22b/h100.md @47277d79; "
        "published_outcomes.md O6",
        model=QWEN_235B_FP8,
        accelerator=gpus.H100,
        workload=Workload(218, 196),
        engine="vllm",
        metric="per_gpu",
        better=Arm(Layout(tp=4, max_num_seqs=1024), concurrency=984, requests=984),
        worse=Arm(Layout(tp=8, ep=True, max_num_seqs=1024), concurrency=984, requests=984),
        threshold=1.0,
        note="published 898 vs 482 output tok/s per GPU (1.86×), 984 ShareGPT requests at once",
        output_lengths="sharegpt",
        published=1.86,
    ),
    Outcome(
        key="glm46-h200-tp4-per-gpu",
        source="GPUStack performance lab, gpustack/gpustack docs/performance-lab/glm-4.x/h200.md @47277d79; "
        "published_outcomes.md O5",
        model="zai-org/GLM-4.6-FP8",
        accelerator=gpus.H200,
        workload=Workload(214, 200),
        engine="sglang",
        metric="per_gpu",
        better=Arm(Layout(tp=4, max_num_seqs=4096), concurrency=1000, requests=1000),
        worse=Arm(Layout(tp=8, max_num_seqs=4096), concurrency=1000, requests=1000),
        threshold=1.0,
        note="published 854 vs 474 output tok/s per GPU (1.80×), 1000 ShareGPT requests at once (SGLang 0.5.3)",
        output_lengths="sharegpt",
        published=1.8,
    ),
    Outcome(
        key="gptoss120b-h100-tp2-vs-tp1-per-gpu",
        source="GPUStack performance lab, gpustack/gpustack docs/performance-lab/gpt-oss-120b/h100.md @47277d79; "
        "published_outcomes.md O7",
        model="openai/gpt-oss-120b",
        accelerator=gpus.H100,
        workload=Workload(215, 196),
        engine="vllm",
        metric="per_gpu",
        better=Arm(Layout(tp=2, max_num_seqs=1024), concurrency=1000, requests=1000),
        worse=Arm(Layout(tp=1, max_num_seqs=1024), concurrency=1000, requests=1000),
        threshold=1.0,
        note="published 3824 vs 2943 output tok/s per GPU: one 80 GB GPU holds too little KV cache beside 65 GB of weights",
        output_lengths="sharegpt",
        published=1.3,
    ),
    Outcome(
        key="gptoss120b-h100-tp2-vs-tp4-per-gpu",
        source="as gptoss120b-h100-tp2-vs-tp1-per-gpu",
        model="openai/gpt-oss-120b",
        accelerator=gpus.H100,
        workload=Workload(215, 196),
        engine="vllm",
        metric="per_gpu",
        better=Arm(Layout(tp=2, max_num_seqs=1024), concurrency=1000, requests=1000),
        worse=Arm(Layout(tp=4, max_num_seqs=1024), concurrency=1000, requests=1000),
        threshold=1.0,
        note="published 3824 vs 2832 output tok/s per GPU",
        output_lengths="sharegpt",
        published=1.35,
    ),
    Outcome(
        key="glm45air-h100-ep-helps-at-tp4",
        source="GPUStack performance lab, gpustack/gpustack docs/performance-lab/glm-4.5-air/h100.md @47277d79; "
        "published_outcomes.md O10",
        model="zai-org/GLM-4.5-Air",
        accelerator=gpus.H100,
        workload=Workload(214, 200),
        engine="sglang",
        metric="throughput",
        better=Arm(Layout(tp=4, ep=True, max_num_seqs=4096), concurrency=1000, requests=1000),
        worse=Arm(Layout(tp=4, max_num_seqs=4096), concurrency=1000, requests=1000),
        threshold=1.0,
        note="published 5988 vs 4533 output tok/s (+32%), BF16, SGLang 0.5.4",
        output_lengths="sharegpt",
        published=1.32,
    ),
)
