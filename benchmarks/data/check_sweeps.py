#!/usr/bin/env python3
"""Validate benchmarks/data/serving_sweeps.csv and print row counts; check the vLLM-on-ROCm MoE rows of
published_serving_benchmarks.csv (next to it) too.

Pure Python (csv module only). Exit status 1 if any row breaks a rule.

    python benchmarks/data/check_sweeps.py [path/to/serving_sweeps.csv]
"""

import collections
import csv
import os
import re
import sys

COLUMNS = [
    "source_id", "source", "source_ref", "date", "engine", "engine_version", "hardware", "gpus",
    "model", "precision", "kv_cache_dtype", "tp", "ep", "dp", "replicas", "isl", "osl",
    "concurrency", "concurrency_semantics", "output_lengths", "request_rate", "output_tok_s", "total_tok_s",
    "ttft_mean_ms", "ttft_median_ms", "ttft_p90_ms", "tpot_mean_ms", "tpot_median_ms",
    "itl_mean_ms", "e2e_mean_ms", "notes",
]
ENGINES = {"vllm", "sglang", "trtllm", "atom", "tgi", "other"}
HARDWARE = {"MI300X", "MI325X", "MI355X", "H100", "H200", "B200"}
ROCM = {"MI300X", "MI325X", "MI355X"}
SEMANTICS = {"max_concurrency_clients", "request_rate_open_loop", "offline_batch", "static_batch"}
# How output lengths vary between requests: all (nearly) equal; uniform from 0 to twice the mean (a random
# dataset with range ratio 0); ShareGPT conversation lengths (a long tail).
OUTPUT_LENGTHS = {"fixed", "equal", "uniform", "sharegpt"}
PRECISIONS = {"FP8", "BF16", "FP16", "MXFP4", "FP4", "INT4", "INT8"}
KV_DTYPES = {"", "fp8", "bf16", "fp16", "auto"}
INT_FIELDS = ["gpus", "tp", "dp", "replicas", "isl", "osl", "concurrency"]
FLOAT_FIELDS = ["request_rate", "output_tok_s", "total_tok_s", "ttft_mean_ms", "ttft_median_ms", "ttft_p90_ms",
                "tpot_mean_ms", "tpot_median_ms", "itl_mean_ms", "e2e_mean_ms"]
METRICS = ["output_tok_s", "total_tok_s", "ttft_mean_ms", "ttft_median_ms", "ttft_p90_ms", "tpot_mean_ms",
           "tpot_median_ms", "itl_mean_ms", "e2e_mean_ms"]
# Model class by name; every model in the table must be listed here.
MOE = {"DeepSeek-R1", "DeepSeek-V3", "DeepSeek-V3.2", "Qwen3-235B-A22B", "Qwen3-30B-A3B", "gpt-oss-120b",
       "gpt-oss-20b", "Mixtral-8x7B", "Mixtral-8x22B", "GLM-4.5-Air", "GLM-4.6", "Llama-4-Scout-17B-16E",
       "Llama-4-Maverick-17B-128E", "Qwen3.5-35B-A3B", "Kimi-K2", "MiniMax-M2.7", "DeepSeek-V4-Flash"}
DENSE = {"Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.3-70B", "Llama-3.1-405B", "Llama-2-70B", "Qwen3-8B",
         "Qwen3-14B", "Qwen3-32B", "Qwen3.5-9B"}
# Active parameters per generated token, in billions (MoE: routed top-k + shared experts + attention +
# embeddings as the model cards state them; dense: all parameters). Used for the HBM roofline below.
ACTIVE_PARAMS_B = {
    "DeepSeek-R1": 37, "DeepSeek-V3": 37, "DeepSeek-V3.2": 37, "Qwen3-235B-A22B": 22, "Qwen3-30B-A3B": 3.3,
    "gpt-oss-120b": 5.1, "gpt-oss-20b": 3.6, "Mixtral-8x7B": 12.9, "Mixtral-8x22B": 39, "GLM-4.5-Air": 12,
    "GLM-4.6": 32, "Llama-4-Scout-17B-16E": 17, "Llama-4-Maverick-17B-128E": 17, "Kimi-K2": 32,
    "MiniMax-M2.7": 10, "Qwen3.5-35B-A3B": 3,
    "Llama-3.1-8B": 8, "Llama-3.1-70B": 70, "Llama-3.3-70B": 70, "Llama-3.1-405B": 405, "Llama-2-70B": 69,
    "Qwen3-8B": 8.2, "Qwen3-14B": 14.8, "Qwen3-32B": 32.8, "Qwen3.5-9B": 9,
}
# Fewest bytes a weight can take at each precision (4-bit formats without their scales): a lower bound,
# so the roofline below can only be too generous, never too strict.
MIN_BYTES_PER_PARAM = {"FP8": 1.0, "INT8": 1.0, "BF16": 2.0, "FP16": 2.0, "MXFP4": 0.5, "FP4": 0.5, "INT4": 0.5}
# Peak HBM bandwidth per GPU, TB/s (vendor data sheets).
HBM_TB_S = {"MI300X": 5.3, "MI325X": 6.0, "MI355X": 8.0, "H100": 3.35, "H200": 4.8, "B200": 8.0}
# A serve command or configuration the row's layout was read from: in the notes, or the source is a
# document that carries the commands (a README, a recipe, a benchmark config).
SERVE_CITATION = re.compile(
    r"vllm serve|serve:|serve command|--tensor-parallel-size|\btp[ =]\d|benchmark_(throughput|latency)\.py|"
    r"README|recipe|config", re.I)
HEX40 = re.compile(r"^[0-9a-f]{40}$")
DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")


def model_class(m):
    return "MoE" if m in MOE else ("dense" if m in DENSE else "?")


def roofline_problems(r, vals):
    """Physical bounds every decode step obeys: it reads at least the active weights of one token from
    the HBM of the engine that runs it. So no sequence decodes faster than engine bandwidth ÷ active
    weight bytes (TPOT/ITL ≥ that time), and the system's output ≤ concurrency × that rate."""
    active = ACTIVE_PARAMS_B.get(r["model"])
    bpp = MIN_BYTES_PER_PARAM.get(r["precision"])
    bw = HBM_TB_S.get(r["hardware"])
    if not (active and bpp and bw) or not vals.get("gpus") or not vals.get("replicas"):
        return []
    engine_gpus = vals["gpus"] / vals["replicas"]
    min_step_s = active * 1e9 * bpp / (bw * 1e12 * engine_gpus)
    out = []
    for c in ("tpot_mean_ms", "tpot_median_ms", "itl_mean_ms"):
        if r[c] and float(r[c]) < min_step_s * 1e3:
            out.append(f"{c} {r[c]} is below the HBM roofline: reading {active}B active parameters at "
                       f"{r['precision']} from {engine_gpus:g}x{r['hardware']} takes at least {min_step_s * 1e3:.2f} ms")
    if r["output_tok_s"] and "concurrency" in vals and r["concurrency_semantics"] != "request_rate_open_loop":
        ceiling = vals["concurrency"] / min_step_s
        if float(r["output_tok_s"]) > ceiling:
            out.append(f"output_tok_s {r['output_tok_s']} exceeds the HBM roofline for {vals['concurrency']} sequences "
                       f"({ceiling:.0f} tok/s: each decodes at most one token per {min_step_s * 1e3:.2f} ms)")
    return out


def vllm_rocm_moe_problems(r, vals):
    """What a vLLM-on-ROCm MoE row must carry to calibrate the target stack: the engine build, where its
    layout was read (a serve command or config), and a layout that accounts for every GPU (vLLM's
    `-dp N` adds N × tp GPUs, so tp × dp × replicas = gpus)."""
    if not (r["engine"] == "vllm" and r["hardware"] in ROCM and model_class(r["model"]) == "MoE"):
        return []
    out = []
    if not r["engine_version"].strip():
        out.append("vLLM-on-ROCm MoE rows need engine_version")
    if not SERVE_CITATION.search(r["notes"] + " " + r["source"]):
        out.append("vLLM-on-ROCm MoE rows need the serve command or config citation in notes (or a README/recipe source)")
    if r["dp"] == "":
        out.append("vLLM-on-ROCm MoE rows need dp (1 when no data parallelism)")
    elif all(k in vals for k in ("tp", "dp", "replicas", "gpus")) and vals["tp"] * vals["dp"] * vals["replicas"] != vals["gpus"]:
        out.append(f"tp x dp x replicas = {vals['tp'] * vals['dp'] * vals['replicas']} but gpus = {vals['gpus']} "
                   "(vLLM data parallelism adds tp GPUs per rank)")
    return out


def check(path):
    errors = []
    with open(path, newline="") as f:
        rd = csv.reader(f)
        header = next(rd)
        if header != COLUMNS:
            errors.append(f"header differs from the required column list: {header}")
            return errors, []
        rows = []
        for n, cells in enumerate(rd, start=2):
            if len(cells) != len(COLUMNS):
                errors.append(f"line {n}: {len(cells)} fields, expected {len(COLUMNS)}")
                continue
            rows.append((n, dict(zip(COLUMNS, cells, strict=True))))
    seen = collections.Counter()
    for n, r in rows:
        def err(msg, n=n, r=r):
            errors.append(f"line {n} ({r['source_id']}): {msg}")
        for c in ("source_id", "source", "source_ref", "date", "engine", "hardware", "gpus", "model",
                  "precision", "tp", "replicas", "isl", "osl", "concurrency_semantics", "output_lengths", "notes"):
            if not r[c].strip():
                err(f"{c} is empty")
        if not re.match(r"^[a-z0-9][a-z0-9.\-]*$", r["source_id"]):
            err(f"source_id {r['source_id']!r} is not a slug")
        is_url = r["source"].startswith("http")
        if is_url:
            if not DATE.match(r["source_ref"]):
                err("web source needs the page date (YYYY-MM[-DD]) in source_ref")
        elif not HEX40.match(r["source_ref"]):
            err(f"repository source needs a 40-hex commit in source_ref, got {r['source_ref']!r}")
        if not DATE.match(r["date"]):
            err(f"date {r['date']!r} is not YYYY-MM or YYYY-MM-DD")
        if r["engine"] not in ENGINES:
            err(f"engine {r['engine']!r} not in {sorted(ENGINES)}")
        if r["hardware"] not in HARDWARE:
            err(f"hardware {r['hardware']!r} not in {sorted(HARDWARE)}")
        if r["precision"] not in PRECISIONS:
            err(f"precision {r['precision']!r} not in {sorted(PRECISIONS)}")
        if r["kv_cache_dtype"] not in KV_DTYPES:
            err(f"kv_cache_dtype {r['kv_cache_dtype']!r} not in {sorted(KV_DTYPES)}")
        if r["ep"] not in ("true", "false", ""):
            err(f"ep must be true/false (blank = not stated), got {r['ep']!r}")
        if r["concurrency_semantics"] not in SEMANTICS:
            err(f"concurrency_semantics {r['concurrency_semantics']!r} not in {sorted(SEMANTICS)}")
        if r["output_lengths"] not in OUTPUT_LENGTHS:
            err(f"output_lengths {r['output_lengths']!r} not in {sorted(OUTPUT_LENGTHS)}")
        if r["output_lengths"] == "equal" and "ignore-eos" not in r["notes"]:
            err("output_lengths 'equal' (lockstep waves) needs the notes to show --ignore-eos; else use 'fixed'")
        if model_class(r["model"]) == "?":
            err(f"model {r['model']!r} has no MoE/dense class in check_sweeps.py")
        vals = {}
        for c in INT_FIELDS:
            if r[c] == "":
                continue
            try:
                vals[c] = int(r[c])
                if vals[c] <= 0:
                    err(f"{c} must be positive")
            except ValueError:
                err(f"{c} {r[c]!r} is not an integer")
        for c in FLOAT_FIELDS:
            if r[c] == "":
                continue
            try:
                v = float(r[c])
                if not (v > 0):
                    err(f"{c} must be positive, got {r[c]}")
            except ValueError:
                err(f"{c} {r[c]!r} is not a number")
        sem = r["concurrency_semantics"]
        if sem == "request_rate_open_loop":
            if r["request_rate"] == "":
                err("request_rate_open_loop rows need request_rate")
        elif r["concurrency"] == "":
            err(f"{sem} rows need concurrency")
        if not any(r[c] for c in METRICS):
            err("no metric filled")
        if "tp" in vals and "gpus" in vals and vals["gpus"] < vals["tp"]:
            err("gpus < tp")
        if "tp" in vals and "gpus" in vals and "replicas" in vals and vals["gpus"] % (vals["tp"] * vals["replicas"]):
            err("gpus is not a multiple of tp x replicas")
        if r["output_tok_s"] and r["total_tok_s"] and float(r["output_tok_s"]) > float(r["total_tok_s"]) * 1.0001:
            err("output_tok_s > total_tok_s")
        for problem in roofline_problems(r, vals) + vllm_rocm_moe_problems(r, vals):
            err(problem)
        if "read from chart" in r["notes"] and "5%" not in r["notes"]:
            err("chart-read rows must state the reading error")
        key = tuple(r[c] for c in COLUMNS if c != "notes")
        seen[key] += 1
        if seen[key] == 2:
            err("duplicate row (all columns but notes equal to an earlier row)")
    return errors, [r for _, r in rows]


# published_serving_benchmarks.csv has no date column: a row dates its engine build in its notes, which the
# calibration reads as the row's date (builds before mid-2025 are reported, not fitted).
ENGINE_BUILD = re.compile(r"engine build (\d{4}-\d{2})\b")
PUBLISHED_MOE = {"Mixtral-8x7B", "DeepSeek-R1", "DeepSeek-V3", "Qwen3-235B-A22B", "Qwen3-30B-A3B", "gpt-oss-120b",
                 "gpt-oss-20b", "Llama-4-Scout-17B-16E", "Llama-4-Maverick-17B-128E"}


def check_published(path):
    """The vLLM-on-ROCm MoE rows of the older table that come from MLPerf must name the engine build's
    month, the harness config their layout was read from, and (Offline) the metric counted."""
    errors = []
    with open(path, newline="", encoding="utf-8") as f:
        for n, r in enumerate(csv.DictReader(f), start=2):
            if not ("vllm" in r["engine"].lower() and r["hardware"] in ROCM and r["model"] in PUBLISHED_MOE
                    and "mlcommons" in r["source"]):
                continue
            where = f"published line {n} ({r['model']} {r['hardware']} {r['concurrency_or_rate']})"
            m = ENGINE_BUILD.search(r["notes"])
            if not m or not DATE.match(m.group(1)):
                errors.append(f"{where}: MLPerf vLLM-on-ROCm MoE rows need 'engine build YYYY-MM' in notes")
            if not re.search(r"\.yaml|max_num_seqs|\bTP\d", r["notes"]):
                errors.append(f"{where}: name the harness config the layout was read from")
            if r["concurrency_or_rate"] == "Offline" and "metric=output tok/s" not in r["notes"]:
                errors.append(f"{where}: Offline rows must say which tokens the metric counts")
    return errors


def counts(rows):
    out = []
    tot = len(rows)
    out.append(f"rows: {tot}")
    for title, keyf in (
            ("by source_id", lambda r: r["source_id"]),
            ("by engine", lambda r: r["engine"]),
            ("by hardware", lambda r: r["hardware"]),
            ("by model class", lambda r: model_class(r["model"])),
            ("by concurrency_semantics", lambda r: r["concurrency_semantics"]),
            ("by model", lambda r: r["model"]),
    ):
        c = collections.Counter(keyf(r) for r in rows)
        out.append(f"{title}:")
        for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])):
            out.append(f"  {k:<28} {v:>5}")
    rocm_moe = [r for r in rows if r["hardware"] in ROCM and model_class(r["model"]) == "MoE"]
    sweep = [r for r in rocm_moe if r["concurrency_semantics"] in ("max_concurrency_clients", "request_rate_open_loop")
             and (r["tpot_mean_ms"] or r["tpot_median_ms"] or r["itl_mean_ms"])]
    out.append(f"ROCm (MI300X/MI325X/MI355X) MoE rows: {len(rocm_moe)}; of them online concurrency/rate points "
               f"with a TPOT or ITL value: {len(sweep)}")
    c = collections.Counter((r["source_id"], r["hardware"]) for r in rocm_moe)
    for (s, h), v in sorted(c.items()):
        out.append(f"  {s:<22} {h:<7} {v:>4}")
    out.append(f"independent sources: {len(set(r['source_id'] for r in rows))}")
    return "\n".join(out)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              "serving_sweeps.csv")
    errors, rows = check(path)
    published = os.path.join(os.path.dirname(os.path.abspath(path)), "published_serving_benchmarks.csv")
    if os.path.exists(published):
        errors += check_published(published)
    print(counts(rows))
    if errors:
        print(f"\n{len(errors)} problem(s):")
        for e in errors[:200]:
            print("  " + e)
        sys.exit(1)
    print("\nOK: all rows pass")


if __name__ == "__main__":
    main()
