#!/usr/bin/env python3
"""Validate benchmarks/data/serving_sweeps.csv and print row counts.

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
OUTPUT_LENGTHS = {"fixed", "uniform", "sharegpt"}
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
HEX40 = re.compile(r"^[0-9a-f]{40}$")
DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")


def model_class(m):
    return "MoE" if m in MOE else ("dense" if m in DENSE else "?")


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
        if "read from chart" in r["notes"] and "5%" not in r["notes"]:
            err("chart-read rows must state the reading error")
        key = tuple(r[c] for c in COLUMNS if c != "notes")
        seen[key] += 1
        if seen[key] == 2:
            err("duplicate row (all columns but notes equal to an earlier row)")
    return errors, [r for _, r in rows]


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
    print(counts(rows))
    if errors:
        print(f"\n{len(errors)} problem(s):")
        for e in errors[:200]:
            print("  " + e)
        sys.exit(1)
    print("\nOK: all rows pass")


if __name__ == "__main__":
    main()
