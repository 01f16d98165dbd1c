"""Published serving measurements in the planner's terms, and the planner's predictions of them.

Two cited tables feed the calibration (benchmarks/data/): `serving_sweeps.csv` (latency and
throughput versus concurrency from ten independent sources) and the older
`published_serving_benchmarks.csv` (peak-throughput rows). Each row becomes an `Observation`: the
model's architecture, the accelerator, the layout as the engine ran it, prompt/answer lengths, the
load (closed-loop clients, a batch submitted at once, a static batch or an open-loop rate), and what
was measured (output tokens/s of the whole system, mean TPOT, mean TTFT).

Rows the model cannot describe are kept out with a reason (an architecture the catalog does not
know, sparse attention, pipeline parallelism, an ambiguous metric); `load_observations` returns
both lists. Engines other than vLLM are evidence, predicted with their fitted engine scales.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from infra.catalog import gpus
from infra.catalog.gpus import Accelerator
from infra.catalog.models import ModelArch, resolve_model
from infra.domain import Layout, Workload
from infra.planner.efficiency import EfficiencyTable
from infra.planner.memory import memory_per_gpu
from infra.planner.performance import Scenario, Scenarios

ACCELERATORS: dict[str, Accelerator] = {
    "MI300X": gpus.MI300X,
    "MI325X": gpus.MI325X,
    "MI355X": gpus.MI355X,
    "H100": gpus.H100,
    "H100 SXM": gpus.H100,
    "H200": gpus.H200,
    "H200 SXM": gpus.H200,
    "B200": gpus.B200,
}
ENGINES = ("vllm", "sglang", "trtllm", "atom")

# Published model names → the Hugging Face ids the catalog resolves (the dtype comes from the row).
MODEL_IDS = {
    "DeepSeek-R1": "deepseek-ai/DeepSeek-R1",
    "DeepSeek-V3": "deepseek-ai/DeepSeek-V3",
    "Qwen3-235B-A22B": "Qwen/Qwen3-235B-A22B",
    "Qwen3-30B-A3B": "Qwen/Qwen3-30B-A3B",
    "Qwen3-32B": "Qwen/Qwen3-32B",
    "Qwen3-14B": "Qwen/Qwen3-14B",
    "Qwen3-8B": "Qwen/Qwen3-8B",
    "Llama-3.1-405B": "meta-llama/Llama-3.1-405B",
    "Llama-3.1-70B": "meta-llama/Llama-3.1-70B",
    "Llama-3.3-70B": "meta-llama/Llama-3.3-70B",
    "Llama-3.1-8B": "meta-llama/Llama-3.1-8B",
    "Llama-2-70B": "meta-llama/Llama-2-70b-hf",
    "Llama-4-Scout-17B-16E": "meta-llama/Llama-4-Scout-17B-16E",
    "Llama-4-Maverick-17B-128E": "meta-llama/Llama-4-Maverick-17B-128E",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "gpt-oss-20b": "openai/gpt-oss-20b",
    "GLM-4.5-Air": "zai-org/GLM-4.5-Air",
    "GLM-4.6": "zai-org/GLM-4.6",
    "Mixtral-8x7B": "mistralai/Mixtral-8x7B-v0.1",
}
_PRECISION_DTYPE = {"FP8": "fp8", "BF16": "bf16", "FP16": "bf16", "MXFP4": "mxfp4", "FP4": "nvfp4", "NVFP4": "nvfp4"}
# Models whose published numbers the architecture in the catalog does not describe.
_NOT_MODELLED = {
    "DeepSeek-V3.2": "sparse attention (DSA) is not modelled",
    "DeepSeek-V4-Flash": "architecture not in the catalog",
    "MiniMax-M2.7": "architecture not in the catalog",
}


def engine_key(engine: str, vendor: str) -> str:
    return engine if engine == "vllm" else f"{engine}-{vendor}"


def engine_defaults(engine: str, version: str, semantics: str) -> tuple[int, int]:
    """(max running sequences, max batched tokens) an engine uses when a row states neither.

    vLLM V1 (0.8+) on GPUs with ≥ 70 GiB: 1024 sequences and 8192 tokens for the API server,
    16384 for the offline `LLM` class (vllm/engine/arg_utils.py, `_set_default_args`); older
    releases 256. SGLang sizes its running batch from the KV pool (capped here at 4096) with an
    8192-token prefill chunk; trtllm-bench tunes max_batch_size itself (2048); ATOM like vLLM.
    """
    if engine == "vllm":
        old = bool(re.match(r"0\.[0-7]\.", version or ""))
        seqs = 256 if old else 1024
        tokens = 16384 if semantics in ("offline", "static") and not old else 8192
        return seqs, tokens
    if engine == "sglang":
        return 4096, 8192
    if engine == "trtllm":
        return 2048, 8192
    return 1024, 8192


@dataclass(frozen=True)
class Observation:
    """One published measurement: what ran, under which load, and what was measured."""

    source: str  # the independent source it comes from (the unit of leave-one-source-out)
    engine: str
    engine_version: str
    date: str
    hardware: str
    accelerator: Accelerator
    arch: ModelArch
    layout: Layout  # one replica, with the engine's batch limits
    replicas: int
    input_tokens: int
    output_tokens: int
    load: str  # closed | offline | static | rate
    concurrency: float  # clients (closed), requests at once (offline) or batch (static), whole system
    rate_rps: float | None  # open-loop rate, whole system
    output_tok_s: float | None  # whole system
    tpot_ms: float | None  # mean (ITL where the source gives no TPOT); None for a burst
    ttft_ms: float | None  # median (mean where the source gives no median); None for a burst
    label: str
    output_lengths: str = "fixed"  # how output lengths vary between requests (OUTPUT_SPREADS)

    @property
    def family(self) -> str:
        return self.accelerator.family

    @property
    def engine_key(self) -> str:
        """The engine as the factors know it: vLLM is the reference on every GPU; another engine's
        kernels differ per vendor backend (SGLang on ROCm runs AITER, on CUDA its own kernels)."""
        return self.engine

    @property
    def moe(self) -> bool:
        return self.arch.is_moe

    @property
    def model_class(self) -> str:
        return "moe" if self.arch.is_moe else "dense"

    @property
    def rocm_moe(self) -> bool:
        return self.accelerator.vendor == "amd" and self.arch.is_moe


@dataclass(frozen=True)
class Excluded:
    source: str
    label: str
    reason: str


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    text = str(text).strip().replace(",", "")
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _arch(model: str, precision: str) -> tuple[ModelArch | None, str]:
    if model in _NOT_MODELLED:
        return None, _NOT_MODELLED[model]
    hf = MODEL_IDS.get(model)
    arch = resolve_model(hf) if hf else None
    if arch is None:
        return None, f"{model} is not in the model catalog"
    dtype = _PRECISION_DTYPE.get(precision.strip().upper())
    if dtype is None:
        return None, f"precision {precision!r} not modelled"
    if arch.weight_dtype == "mxfp4" and dtype == "bf16":
        dtype = "mxfp4"  # gpt-oss ships MXFP4 experts whatever the row calls it
    return replace(arch, weight_dtype=dtype), ""


# --------------------------------------------------------------------------- serving_sweeps.csv


_LOAD = {
    "max_concurrency_clients": "closed",
    "offline_batch": "offline",
    "static_batch": "static",
    "request_rate_open_loop": "rate",
}


def read_sweeps(path: Path) -> tuple[list[Observation], list[Excluded]]:
    observations, excluded = [], []
    with path.open(newline="", encoding="utf-8") as fh:
        for rec in csv.DictReader(fh):
            obs, why = _sweep_row(rec)
            label = f"{rec['source_id']}: {rec['engine']} {rec['hardware']} {rec['model']} {rec['precision']} tp{rec['tp']} {rec['isl']}/{rec['osl']} c={rec['concurrency'] or rec['request_rate']}"
            if obs is None:
                excluded.append(Excluded(rec["source_id"], label, why))
            else:
                observations.append(replace(obs, label=label))
    return observations, excluded


def _sweep_row(rec: dict) -> tuple[Observation | None, str]:
    acc = ACCELERATORS.get(rec["hardware"].strip())
    if acc is None:
        return None, f"hardware {rec['hardware']} not modelled"
    if rec["engine"] not in ENGINES:
        return None, f"engine {rec['engine']} not modelled"
    arch, why = _arch(rec["model"], rec["precision"])
    if arch is None:
        return None, why
    load = _LOAD.get(rec["concurrency_semantics"])
    if load is None:
        return None, f"load {rec['concurrency_semantics']!r} not understood"
    tp = int(_num(rec["tp"]) or 1)
    dp = int(_num(rec["dp"]) or 1)
    replicas = int(_num(rec["replicas"]) or 1)
    ep = rec["ep"].strip().lower() == "true"
    isl, osl = _num(rec["isl"]), _num(rec["osl"])
    if not isl or not osl:
        return None, "sequence lengths not stated"
    notes = rec["notes"]
    seqs, tokens = engine_defaults(rec["engine"], rec["engine_version"], load)
    if m := re.search(r"--max-num-seqs[ =](\d+)|max_num_seqs[ =](\d+)|--max-running-requests[ =](\d+)", notes):
        seqs = int(next(g for g in m.groups() if g))
    if m := re.search(r"--max-num-batched-tokens[ =](\d+)|--chunked-prefill-size[ =](\d+)", notes):
        tokens = int(next(g for g in m.groups() if g))
    kv = "fp8" if (rec["kv_cache_dtype"] or "").lower().startswith("fp8") or "kv-cache-dtype fp8" in notes else "auto"
    gpus = int(_num(rec["gpus"]) or tp * dp * replicas)
    if dp > 1 and tp * replicas == gpus and tp % dp == 0:
        # SGLang/TensorRT-LLM attention DP shares the TP ranks (tp 8, dp 8 is eight GPUs); vLLM's
        # `-dp N` adds N × tp GPUs. In the planner's (vLLM's) terms that is tp/dp per DP rank.
        tp //= dp
    layout = Layout(tp=tp, ep=ep, dp=dp, replicas_per_node=1, max_num_seqs=max(1, seqs // dp) if dp > 1 else seqs,
                    max_num_batched_tokens=tokens, kv_cache_dtype=kv, gpu_memory_utilization=0.9)
    concurrency = _num(rec["concurrency"]) or 0.0
    rate = _num(rec["request_rate"])
    if load == "rate" and not rate:
        return None, "open-loop row without a rate"
    if load != "rate" and concurrency <= 0:
        return None, "no concurrency stated"
    tpot = _num(rec["tpot_mean_ms"]) or _num(rec["itl_mean_ms"]) or _num(rec["tpot_median_ms"])
    # The median TTFT: a closed-loop benchmark starts every client at once, and that first wave's
    # queue inflates the mean far beyond the steady state the model describes.
    ttft = _num(rec["ttft_median_ms"]) or _num(rec["ttft_mean_ms"])
    if load in ("offline", "static"):
        # A burst of requests submitted at once: its latencies describe the burst, not a steady
        # state; only the throughput is comparable.
        tpot = ttft = None
    output = _num(rec["output_tok_s"])
    if output is None and tpot is None:
        return None, "no throughput or TPOT"
    return (
        Observation(
            source=rec["source_id"],
            engine=rec["engine"],
            engine_version=rec["engine_version"],
            date=rec["date"],
            hardware=rec["hardware"],
            accelerator=acc,
            arch=arch,
            layout=layout,
            replicas=replicas,
            input_tokens=int(isl),
            output_tokens=int(osl),
            load=load,
            concurrency=concurrency,
            rate_rps=rate,
            output_tok_s=output if load != "rate" else None,
            tpot_ms=tpot,
            ttft_ms=ttft,
            label="",
            output_lengths=rec["output_lengths"],
        ),
        "",
    )


# --------------------------------------------------------------------------- published_serving_benchmarks.csv


_MLPERF_LENGTHS = {"OpenOrca": (300, 301), "MLPerf mixtral mix": (200, 144)}
# These sources of the older table repeat in serving_sweeps.csv (dstack) or are ambiguous (vultr).
_OLD_SKIP = {"dstack": "repeated with its latency columns in serving_sweeps.csv", "vultr": "metric ambiguous"}


def _old_source(text: str) -> str:
    for key, short in (
        ("mlcommons", "mlperf-v5.1"),
        ("performance-results", "amd-perf-page"),
        ("rocm-blogs", "rocm-blogs"),
        ("oracle", "oracle-blog"),
        ("dstack", "dstack"),
        ("vultr", "vultr"),
    ):
        if key in text:
            return short
    return "other"


def read_published(path: Path) -> tuple[list[Observation], list[Excluded]]:
    observations, excluded = [], []
    with path.open(newline="", encoding="utf-8") as fh:
        for i, rec in enumerate(csv.DictReader(fh)):
            source = _old_source(rec["source"])
            label = f"{source}#{i}: {rec['engine']} {rec['hardware']} {rec['model']} tp{rec['tp']} {rec['isl']}/{rec['osl']} {rec['concurrency_or_rate']}"
            obs, why = _published_row(rec, source)
            if obs is None:
                excluded.append(Excluded(source, label, why))
            else:
                observations.append(replace(obs, label=label))
    return observations, excluded


def _published_row(rec: dict, source: str) -> tuple[Observation | None, str]:
    if source in _OLD_SKIP:
        return None, _OLD_SKIP[source]
    notes = rec["notes"]
    acc = ACCELERATORS.get(rec["hardware"].strip())
    if acc is None:
        return None, f"hardware {rec['hardware']} not modelled"
    model = re.sub(r"\s*\(.*?\)", "", rec["model"]).strip()
    if "MXFP4" in rec["precision"] or "finetuned" in rec["model"]:
        return None, "MXFP4 / modified model (open division)"
    arch, why = _arch(model, "FP8" if "FP8" in rec["precision"].upper() else "BF16")
    if arch is None:
        return None, why
    if not rec["tp"]:
        return None, "layout not stated"
    reps = rec["dp_or_replicas"].strip()
    if "PP" in reps:
        return None, "pipeline parallelism not modelled"
    if "ambiguous" in notes:
        return None, "metric ambiguous (notes)"
    if not rec["throughput_tok_s_total"]:
        return None, "no number (qualitative row)"
    tp, dp, replicas = int(rec["tp"]), 1, 1
    if reps == "DP-attn":
        dp, tp = tp, 1
    elif reps.isdigit():
        replicas = int(reps)
    isl, osl = _num(rec["isl"]), _num(rec["osl"])
    for key, (mi, mo) in _MLPERF_LENGTHS.items():
        if rec["isl"].startswith(key):
            isl, osl = mi, mo
    if not isl or not osl:
        return None, "sequence lengths not stated"
    load_text = rec["concurrency_or_rate"]
    engine = "vllm" if "vllm" in rec["engine"].lower() else "trtllm" if "trt" in rec["engine"].lower().replace("tensorrt", "trt") else "sglang" if "sglang" in rec["engine"].lower() else ""
    if not engine:
        return None, f"engine {rec['engine']} not modelled"
    seqs, tokens = engine_defaults(engine, rec["engine"], "offline")
    if m := re.search(r"max_num_seqs (\d+)", notes + " " + load_text):
        seqs = int(m.group(1))
    if re.match(r"(Server|Interactive) ", load_text):
        return None, "MLPerf Server/Interactive: throughput set by the offered rate (TPOT at the p99 limit)"
    if load_text.lower().startswith("offline") or "max load" in load_text:
        load, concurrency = "offline", float(seqs * replicas)
    elif m := re.match(r"(?:batch|conc) (\d+)", load_text):
        load, concurrency = "closed", float(m.group(1))
        seqs = max(seqs, int(concurrency))
    else:
        return None, f"load {load_text!r} not understood"
    total = _num(rec["throughput_tok_s_total"])
    output = total * osl / (isl + osl) if "input+output" in notes else total
    layout = Layout(tp=tp, dp=dp, ep=bool(rec["ep"].strip()), max_num_seqs=seqs, max_num_batched_tokens=tokens,
                    kv_cache_dtype="fp8" if "KV" in rec["precision"] else "auto")
    # This table has no date column: a row dates its engine build in its notes ("engine build
    # YYYY-MM"), so a recent result run on an old build (MLPerf partners on the v5.0 fork) is
    # reported as early software rather than fitted; undated rows stay current.
    build = re.search(r"engine build (\d{4}-\d{2})", notes)
    return (
        Observation(
            source=source, engine=engine, engine_version=rec["engine"], date=build.group(1) if build else "",
            hardware=rec["hardware"],
            accelerator=acc, arch=arch, layout=layout, replicas=replicas, input_tokens=int(isl), output_tokens=int(osl),
            load=load, concurrency=concurrency, rate_rps=None, output_tok_s=output, tpot_ms=_num(rec["tpot_ms"]),
            ttft_ms=None, label="",
        ),
        "",
    )


def load_observations(data_dir: Path) -> tuple[list[Observation], list[Excluded]]:
    """Every usable measurement of both tables in `data_dir`, and every row left out with why."""
    obs, excl = read_sweeps(data_dir / "serving_sweeps.csv")
    old_obs, old_excl = read_published(data_dir / "published_serving_benchmarks.csv")
    return obs + old_obs, excl + old_excl


# --------------------------------------------------------------------------- predictions


@dataclass(frozen=True)
class Predictions:
    """The planner's figures for a list of observations (NaN where it cannot say: does not fit)."""

    output_tok_s: np.ndarray
    tpot_ms: np.ndarray
    ttft_ms: np.ndarray
    fits: np.ndarray


def _node_gpus(obs: Observation) -> int:
    return 8 if obs.layout.gpus_per_replica > 1 or obs.replicas > 1 else 1


def scenarios_for(observations: Sequence[Observation], table: EfficiencyTable) -> tuple[Scenarios, np.ndarray]:
    """The observations' replicas as one batch of scenarios, and each replica's running capacity
    (KV cache and max_num_seqs), 0 where the layout does not fit in memory."""
    items, n_max = [], []
    for o in observations:
        context = o.input_tokens + o.output_tokens
        layout = o.layout.with_(max_model_len=max(4096, 1 << (2 * context - 1).bit_length()))
        size = gpus.modelling_node(o.accelerator, max(8, layout.gpus_per_replica))
        mem = memory_per_gpu(o.arch, size, layout.with_(max_model_len=min(layout.max_model_len, max(context, 2048))), context)
        cap = min(mem.max_concurrency_per_replica, layout.max_num_seqs * layout.dp) if mem.kv_cache_gb > 0 else 0
        n_max.append(float(cap))
        workload = Workload(o.input_tokens, o.output_tokens)
        items.append(Scenario(o.arch, o.accelerator, _node_gpus(o), layout, workload, table.for_family(o.family, o.engine_key, o.moe)))
    return Scenarios(items), np.asarray(n_max)


@dataclass(frozen=True)
class Prepared:
    """Observations turned into scenarios once; `predict_prepared` re-evaluates them under other factors."""

    observations: tuple[Observation, ...]
    scenarios: Scenarios
    n_max: np.ndarray
    replicas: np.ndarray
    concurrency: np.ndarray  # per replica
    rate: np.ndarray  # per replica
    load: np.ndarray
    output_lengths: np.ndarray


def prepare(observations: Sequence[Observation], table: EfficiencyTable) -> Prepared:
    s, n_max = scenarios_for(observations, table)
    replicas = np.asarray([o.replicas for o in observations], dtype=float)
    return Prepared(
        observations=tuple(observations),
        scenarios=s,
        n_max=n_max,
        replicas=replicas,
        concurrency=np.asarray([o.concurrency for o in observations], dtype=float) / replicas,
        rate=np.asarray([(o.rate_rps or 0.0) for o in observations], dtype=float) / replicas,
        load=np.asarray([o.load for o in observations]),
        output_lengths=np.asarray([o.output_lengths for o in observations]),
    )


def predict(observations: Sequence[Observation], table: EfficiencyTable) -> Predictions:
    """What the planner predicts for each observation, under the load the source applied."""
    return predict_prepared(prepare(observations, table))


def predict_prepared(prep: Prepared, factors: dict[str, np.ndarray] | None = None) -> Predictions:
    """Predictions for prepared observations, under `factors` (arrays per factor name) if given."""
    s = prep.scenarios if factors is None else prep.scenarios.with_factors(factors)
    size = s.size
    fits = prep.n_max >= 1
    cap = np.maximum(prep.n_max, 1.0)
    conc = np.maximum(prep.concurrency, 1.0)
    out, tpot, ttft = np.full(size, np.nan), np.full(size, np.nan), np.full(size, np.nan)
    # A batch submitted at once (a burst) that the engine can run whole behaves like a static batch;
    # a larger one runs at capacity with a queue (continuous batching), and varied output lengths
    # leave a thinning tail at the end (Scenarios.burst).
    static = prep.load == "static"
    burst = prep.load == "offline"
    rate = prep.load == "rate"
    # A closed loop whose requests are all exactly as long runs in waves (Scenarios.lockstep).
    lockstep = ~static & ~rate & ~burst & (prep.output_lengths == "equal")
    closed = ~static & ~rate & ~burst & ~lockstep
    for mask, run in (
        (static, lambda sub, m: sub.static_batch(np.minimum(conc[m], cap[m]))),
        (burst, lambda sub, m: sub.burst(conc[m], cap[m], prep.output_lengths[m])),
        (closed, lambda sub, m: sub.closed_loop(conc[m], cap[m])),
        (lockstep, lambda sub, m: sub.lockstep(conc[m], cap[m])),
        (rate, lambda sub, m: sub.at_rate(np.maximum(prep.rate[m], 1e-9), cap[m])),
    ):
        if not mask.any():
            continue
        point = run(s.take(mask), mask)
        out[mask] = point.output_tokens_per_s * prep.replicas[mask]
        tpot[mask] = point.tpot_mean_s * 1e3
        ttft[mask] = point.ttft_mean_s * 1e3
    out[rate] = prep.rate[rate] * prep.replicas[rate] * s.output_tokens[rate]
    return Predictions(
        output_tok_s=np.where(fits, out, np.nan),
        tpot_ms=np.where(fits & np.isfinite(tpot), tpot, np.nan),
        ttft_ms=np.where(fits & np.isfinite(ttft), ttft, np.nan),
        fits=fits,
    )
