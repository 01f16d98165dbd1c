#!/usr/bin/env python3
"""Build benchmarks/data/serving_sweeps.csv from public sources (see ../SOURCES.md).

This is the extraction record, kept so every row can be traced back. It reads
local git snapshots of the source repositories (paths in SNAPSHOTS; pass
--mirror-root to point elsewhere) at the pinned commits, plus the small
hand transcriptions in tools/raw/ for sources that are web pages or docs
that were read through a file viewer rather than cloned. Nothing here is
fitted or interpolated: a value is either copied, unit-converted (s -> ms),
or derived by a stated arithmetic rule that the row's notes spell out.

    python benchmarks/data/tools/build_serving_sweeps.py [--mirror-root /work/.mirror]
"""

import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "serving_sweeps.csv")

COLUMNS = [
    "source_id", "source", "source_ref", "date", "engine", "engine_version", "hardware", "gpus",
    "model", "precision", "kv_cache_dtype", "tp", "ep", "dp", "replicas", "isl", "osl",
    "concurrency", "concurrency_semantics", "request_rate", "output_tok_s", "total_tok_s",
    "ttft_mean_ms", "ttft_median_ms", "ttft_p90_ms", "tpot_mean_ms", "tpot_median_ms",
    "itl_mean_ms", "e2e_mean_ms", "notes",
]

SNAPSHOTS = {
    "inferencex_app": "vngcloud+InferenceX-app/repo",
    "dstack": "dstackai+benchmarks/repo",
    "gpustack": "gpustack+gpustack/repo",
    "rocm_vllm": "ROCm+vllm/repo",
    "datacrunch": "datacrunch-research+h200-benchmarks/repo",
}

ROWS = []


def git_show(root, snap, commit, path):
    repo = os.path.join(root, SNAPSHOTS[snap])
    return subprocess.check_output(["git", "-C", repo, "show", f"{commit}:{path}"]).decode("utf-8-sig")


def fmt(x, nd=2):
    if x is None or x == "":
        return ""
    if isinstance(x, str):
        return x
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return ""
    if isinstance(x, int):
        return str(x)
    s = f"{x:.{nd}f}"
    return s.rstrip("0").rstrip(".") if "." in s else s


def add(**kw):
    row = {c: "" for c in COLUMNS}
    for k, v in kw.items():
        if k not in row:
            raise KeyError(k)
        row[k] = v
    ROWS.append(row)


def ms(x):
    return None if x is None else x * 1000.0


# --------------------------------------------------------------------------------------------
# 1. InferenceX (SemiAnalysis): API snapshot committed as the InferenceX-app e2e test fixture.
IFX_COMMIT = "528c4146b8f502fcbce8df7870a935a970cbae25"
IFX_HW = {"mi300x": "MI300X", "mi325x": "MI325X", "mi355x": "MI355X", "h100": "H100", "h200": "H200",
          "b200": "B200"}
IFX_ENGINE = {"sglang": "sglang", "trt": "trtllm", "atom": "atom", "vllm": "vllm"}


def ifx_version(image):
    if not image:
        return ""
    m = re.search(r"sglang:v?([0-9][0-9a-z.\-]*?)(?:-rocm|-cu|$)", image)
    if m:
        return f"{m.group(1)} ({image})"
    m = re.search(r"tensorrt-llm/release:([0-9a-z.\-]+)", image)
    if m:
        return f"{m.group(1)} ({image})"
    return image


def ifx_row(r, path, extra_note):
    hw = IFX_HW[r["hardware"]]
    tp = r["decode_tp"]
    m = r["metrics"]
    prec = r["precision"].upper()
    if prec == "FP4":
        prec = "MXFP4" if hw.startswith("MI") else "FP4"
    out = m.get("output_tput_per_gpu")
    notes = [
        "InferenceX fixed-seq benchmark (benchmark_serving, random dataset, --random-range-ratio 0.8 per the "
        "InferenceX benchmark template; isl/osl are the nominal lengths)",
        "single engine on one node; metrics stored per GPU in the source: output_tok_s = output_tput_per_gpu x tp "
        "and total_tok_s = tput_per_gpu x tp (derived; the fixture's num_decode_gpu field equals tp x ep and is not "
        "the GPU count)",
        f"model key 'dsr1' (DeepSeek-R1-0528 in the InferenceX configs); precision fp key '{r['precision']}'",
    ]
    if prec == "FP4" and hw == "B200":
        notes.append("FP4 = NVFP4 checkpoint")
    if r["decode_dp_attention"]:
        notes.append("dp-attention on (dp = tp attention ranks)")
    if out is None:
        notes.append("source gives no input/output split for this run (older schema): only total_tok_s")
    notes.append(f"p99 TTFT {fmt(ms(m.get('p99_ttft')),1)} ms, p99 TPOT {fmt(ms(m.get('p99_tpot')),2)} ms")
    notes.append(f"run {r['run_url']}")
    if extra_note:
        notes.append(extra_note)
    add(source_id="inferencemax", source=f"SemiAnalysisAI/InferenceX-app {path} (also in fork vngcloud/InferenceX-app)",
        source_ref=IFX_COMMIT, date=r["date"], engine=IFX_ENGINE[r["framework"]],
        engine_version=ifx_version(r.get("image")), hardware=hw, gpus=str(tp), model="DeepSeek-R1",
        precision=prec, kv_cache_dtype="", tp=str(tp), ep="true" if r["decode_ep"] > 1 else "false",
        dp=str(tp) if r["decode_dp_attention"] else "1", replicas="1", isl=str(r["isl"]), osl=str(r["osl"]),
        concurrency=str(r["conc"]), concurrency_semantics="max_concurrency_clients",
        output_tok_s=fmt(None if out is None else out * tp, 1), total_tok_s=fmt(m["tput_per_gpu"] * tp, 1),
        ttft_mean_ms=fmt(ms(m.get("mean_ttft")), 1), ttft_median_ms=fmt(ms(m.get("median_ttft")), 1),
        tpot_mean_ms=fmt(ms(m.get("mean_tpot")), 2), tpot_median_ms=fmt(ms(m.get("median_tpot")), 2),
        itl_mean_ms=fmt(ms(m.get("mean_itl")), 2), e2e_mean_ms=fmt(ms(m.get("mean_e2el")), 0),
        notes="; ".join(notes))


def ifx_key(r):
    return (r["hardware"], r["framework"], r["precision"], r["decode_tp"], r["decode_ep"],
            r["decode_dp_attention"], r["isl"], r["osl"], r["conc"])


def ifx_ok(r):
    return (r["hardware"] in IFX_HW and not r["disagg"] and not r["is_multinode"]
            and r["spec_method"] == "none" and r["framework"] in IFX_ENGINE)


def build_inferencex(root):
    p1 = "packages/app/cypress/fixtures/api/benchmarks.json"
    p2 = "packages/app/cypress/fixtures/api/benchmarks-history.json"
    latest = [r for r in json.loads(git_show(root, "inferencex_app", IFX_COMMIT, p1)) if ifx_ok(r)]
    latest_keys = {ifx_key(r): r["date"] for r in latest}
    for r in latest:
        ifx_row(r, p1, "")
    # history: the earliest run of each ROCm configuration that the latest snapshot also has, kept as an
    # older-software point (the fixture stores one row per nightly run).
    hist = [r for r in json.loads(git_show(root, "inferencex_app", IFX_COMMIT, p2)) if ifx_ok(r)]
    first = {}
    for r in hist:
        if not r["hardware"].startswith("mi"):
            continue
        k = ifx_key(r)
        if k not in latest_keys or r["date"] == latest_keys[k]:
            continue
        if k not in first or r["date"] < first[k]["date"]:
            first[k] = r
    for k in sorted(first, key=str):
        ifx_row(first[k], p2, f"earliest history run of this config (latest run {latest_keys[k]} is also a row)")


# --------------------------------------------------------------------------------------------
# 2. dstack: DeepSeek-R1 MI300X vs H200 (raw CSVs) and Llama-3.1-405B H100 vs MI300X (online QPS CSV).
DSTACK_DS_COMMIT = "7f37e6697725e58dd09b9ef190b62ce19f01d45e"
DSTACK_L405_COMMIT = "85a2fe177aabe8a5556ce75e791dcd74b1cd8187"
DSTACK_VERSIONS = {
    ("mi300x", "vllm"): ("vllm", "0.7.3.dev138+g21f6ca217 (rocm/vllm-dev:vllm-ds3-staging-0217)", "1", ""),
    ("mi300x", "sglang"): ("sglang", "0.4.2.post4 (rocm/sglang-staging:20250212)", "1", ""),
    ("h200", "vllm"): ("vllm", "0.7.4.dev181+gf35f8e22 (nightly wheel; VLLM_ATTENTION_BACKEND=FLASHMLA)", "1", ""),
    ("h200", "sglang"): ("sglang", "0.4.3.post2 (lmsysorg/sglang:latest)", "8",
                         "--enable-dp-attention (SGLang 0.4.x sets dp size = tp size)"),
    ("h200", "trt-llm"): ("trtllm", "0.17.post1.dev (trtllm-serve, pytorch backend, tp 8 ep 4)", "1",
                          "ep_size 4 (tp 8)"),
}


def build_dstack(root):
    src = "dstackai/benchmarks Deepseek-R1/raw_data/online_results.csv (+ Deepseek-R1/README.md for versions)"
    rd = csv.DictReader(git_show(root, "dstack", DSTACK_DS_COMMIT, "Deepseek-R1/raw_data/online_results.csv").splitlines())
    for r in rd:
        if not r.get("GPU"):
            continue
        gpu, be = r["GPU"].strip(), r["backend"].strip()
        eng, ver, dp, cfgnote = DSTACK_VERSIONS[(gpu, be)]
        done = int(r["completed"])
        isl = round(int(r["total_input_tokens"]) / done)
        osl = round(int(r["total_output_tokens"]) / done)
        conc = int(r["max_concurrency"])
        hw = "MI300X" if gpu == "mi300x" else "H200"
        ep = "true" if be == "trt-llm" else "false"
        notes = [f"SGLang bench_serving (dstack fork), dataset {r['dataset_name']}, {done} requests, "
                 f"--max-concurrency {conc}, request rate inf",
                 "isl/osl = total tokens / completed requests (random lengths fixed, range ratio 1)"
                 if r["dataset_name"] == "random" else
                 "generated-shared-prefix dataset: ~2000 of ~3200 prompt tokens are a shared prefix (prefix-cache test); "
                 "isl/osl = totals / completed",
                 "total_tok_s = input_throughput + output_throughput (derived)",
                 f"p99 TTFT {fmt(float(r['p99_ttft_ms']),1)} ms, p99 TPOT {fmt(float(r['p99_tpot_ms']),2)} ms, "
                 f"median ITL {fmt(float(r['median_itl_ms']),2)} ms",
                 "early-2025 software; default engine batch limits"]
        if cfgnote:
            notes.append(cfgnote)
        if r["dataset_name"] == "random" and osl == 800 and conc in (4, 32, 128) and \
                (gpu, be) in (("mi300x", "vllm"), ("h200", "vllm")) or \
                (r["dataset_name"] == "random" and osl == 800 and conc in (4, 128) and (gpu, be) == ("mi300x", "sglang")) or \
                (r["dataset_name"] == "random" and osl == 800 and conc == 128 and (gpu, be) in (("h200", "sglang"), ("h200", "trt-llm"))):
            notes.append("also in published_serving_benchmarks.csv (this row adds median TTFT/TPOT, ITL, e2e)")
        add(source_id="dstack", source=src, source_ref=DSTACK_DS_COMMIT, date="2025-03", engine=eng,
            engine_version=ver, hardware=hw, gpus="8", model="DeepSeek-R1", precision="FP8", kv_cache_dtype="",
            tp="8", ep=ep, dp=dp, replicas="1", isl=str(isl), osl=str(osl), concurrency=str(conc),
            concurrency_semantics="max_concurrency_clients",
            output_tok_s=fmt(float(r["output_throughput"]), 1),
            total_tok_s=fmt(float(r["input_throughput"]) + float(r["output_throughput"]), 1),
            ttft_mean_ms=fmt(float(r["mean_ttft_ms"]), 1), ttft_median_ms=fmt(float(r["median_ttft_ms"]), 1),
            tpot_mean_ms=fmt(float(r["mean_tpot_ms"]), 2), tpot_median_ms=fmt(float(r["median_tpot_ms"]), 2),
            itl_mean_ms=fmt(float(r["mean_itl_ms"]), 2), e2e_mean_ms=fmt(float(r["mean_e2e_latency_ms"]), 0),
            notes="; ".join(notes))
    src = "dstackai/benchmarks Deepseek-R1/raw_data/offline_results.csv (+ Deepseek-R1/README.md)"
    rd = csv.DictReader(git_show(root, "dstack", DSTACK_DS_COMMIT, "Deepseek-R1/raw_data/offline_results.csv").splitlines())
    for r in rd:
        gpu, be = r["GPU"].strip(), r["backend"].strip()
        gpu = {"mi300": "mi300x"}.get(gpu, gpu)
        eng, ver, dp, cfgnote = DSTACK_VERSIONS[(gpu, be)]
        el = float(r["elapsed_time"])
        n = int(r["num_requests"])
        notes = [f"offline benchmark_throughput (vLLM script, SGLang/TRT-LLM ports), {n} requests submitted at once; "
                 "running batch capped by the engine's defaults",
                 "output_tok_s = total_output_tokens / elapsed_time (derived); total_tok_s = tokens_per_second as listed",
                 "early-2025 software"]
        if cfgnote:
            notes.append(cfgnote)
        add(source_id="dstack", source=src, source_ref=DSTACK_DS_COMMIT, date="2025-03", engine=eng,
            engine_version=ver, hardware="MI300X" if gpu == "mi300x" else "H200", gpus="8", model="DeepSeek-R1",
            precision="FP8", tp="8", ep="true" if be == "trt-llm" else "false", dp=dp, replicas="1",
            isl=r["input_len"], osl=r["output_len"], concurrency=str(n), concurrency_semantics="offline_batch",
            output_tok_s=fmt(int(r["total_output_tokens"]) / el, 1), total_tok_s=fmt(float(r["tokens_per_second"]), 1),
            e2e_mean_ms="", notes="; ".join(notes))
    # Llama-3.1-405B online (ShareGPT, open-loop QPS), Nov 2024
    src = "dstackai/benchmarks comparison/h100sxm5_vs_mi300x/csv_data/qps_comparison.csv (+ README.md)"
    rd = csv.DictReader(git_show(root, "dstack", DSTACK_L405_COMMIT,
                                 "comparison/h100sxm5_vs_mi300x/csv_data/qps_comparison.csv").splitlines())
    for r in rd:
        g = r["gpu"].strip()
        if g not in ("8xH100 1FP8-meta", "8xMi300x 1FP8-meta", "8xMi300x 1FP8-amd"):
            continue  # 4x and '2FP8' variants: configuration not described unambiguously in the README
        hw = "H100" if "H100" in g else "MI300X"
        done = int(r["completed"])
        if hw == "H100":
            ver = "vLLM nightly wheel (Nov 2024; collect_env 0.6.3.post2.dev308)"
            cfg = "vllm serve -tp 8 --max-model-len 91680 (defaults: chunked prefill on, max-num-seqs 512 per CSV)"
            mdl_note = "meta-llama/Llama-3.1-405B-FP8"
        else:
            ver = "vLLM ROCm build ghcr.io/embeddedllm/vllm-rocm:cb3b2b9 (Nov 2024)"
            cfg = "vllm serve -tp 8 --num-scheduler-step 15 --enable-chunked-prefill=False --max-num-seqs 1024"
            mdl_note = ("meta-llama/Llama-3.1-405B-FP8" if "meta" in g else "amd/Llama-3.1-405B-Instruct-FP8-KV (FP8 KV cache)")
        qps = r["request_rate"]
        add(source_id="dstack", source=src, source_ref=DSTACK_L405_COMMIT, date="2024-11", engine="vllm",
            engine_version=ver, hardware=hw, gpus="8", model="Llama-3.1-405B", precision="FP8",
            kv_cache_dtype="fp8" if "amd" in g else "", tp="8", ep="false", dp="1", replicas="1",
            isl=str(round(int(r["total_input_tokens"]) / done)), osl=str(round(int(r["total_output_tokens"]) / done)),
            concurrency="", concurrency_semantics="request_rate_open_loop", request_rate=qps,
            output_tok_s=fmt(float(r["output_throughput"]), 1), total_tok_s=fmt(float(r["total_token_throughput"]), 1),
            ttft_mean_ms=fmt(float(r["mean_ttft_ms"]), 1), ttft_median_ms=fmt(float(r["median_ttft_ms"]), 1),
            tpot_mean_ms=fmt(float(r["mean_tpot_ms"]), 2), tpot_median_ms=fmt(float(r["median_tpot_ms"]), 2),
            itl_mean_ms=fmt(float(r["mean_itl_ms"]), 2),
            notes=f"vLLM benchmark_serving, ShareGPT, {r['num_prompts']} prompts, Poisson rate {qps} req/s "
                  f"(1000 = effectively all at once); isl/osl = means from totals (ShareGPT lengths vary); {cfg}; "
                  f"model {mdl_note}; CSV label '{g}'; late-2024 software")


# --------------------------------------------------------------------------------------------
# 3. GPUStack performance lab (docs/performance-lab/*/h100|h200*.md): raw `vllm bench serve` outputs.
GPUSTACK_COMMIT = "47277d79f4a5bae12a2d25e9ecbed2a2177a5f2d"
GPUSTACK_FILES = {
    # file: (hardware, model, first-commit date in the snapshot)
    "deepseek-r1/h200.md": ("H200", "DeepSeek-R1", "2025-10"),
    "deepseek-v3.2/h200.md": ("H200", "DeepSeek-V3.2", "2025-12"),
    "glm-4.5-air/h100.md": ("H100", "GLM-4.5-Air", "2025-10"),
    "glm-4.x/h100.md": ("H100", None, "2025-12"),
    "glm-4.x/h200.md": ("H200", None, "2025-12"),
    "gpt-oss-120b/h100.md": ("H100", "gpt-oss-120b", "2025-10"),
    "gpt-oss-20b/h100.md": ("H100", "gpt-oss-20b", "2025-11"),
    "qwen3-14b/h100.md": ("H100", "Qwen3-14B", "2025-11"),
    "qwen3-235b-a22b/h100.md": ("H100", "Qwen3-235B-A22B", "2025-11"),
    "qwen3-32b/h100.md": ("H100", "Qwen3-32B", "2025-11"),
    "qwen3-8b/h100-latency.md": ("H100", "Qwen3-8B", "2025-10"),
}
CMD_RE = re.compile(r"(vllm serve|sglang\.launch_server|trtllm-serve)")


def parse_cmd(cmd):
    def num(pats, default=None):
        for p in pats:
            m = re.search(r"(?:^|\s)" + p + r"[ =]+(\d+)", cmd)
            if m:
                return int(m.group(1))
        return default
    eng = "vllm" if "vllm serve" in cmd else ("sglang" if "sglang" in cmd else "trtllm")
    tp = num([r"-tp", r"--tensor-parallel-size", r"--tp-size", r"--tp", r"--tp_size"], 1)
    dp = num([r"-dp", r"--data-parallel-size", r"--dp-size", r"--dp"], 1)
    pp = num([r"-pp", r"--pipeline-parallel-size", r"--pp-size", r"--pp_size"], 1)
    epsize = num([r"--ep_size", r"--ep-size", r"--ep"], None)
    ep = ("--enable-expert-parallel" in cmd) or (epsize is not None and epsize > 1)
    m = re.search(r"(?:--model(?:-path)?\s+|serve\s+|trtllm-serve\s+)(\S+)", cmd)
    model_id = m.group(1) if m else ""
    spec = "--speculative" in cmd
    dpattn = "--enable-dp-attention" in cmd
    return dict(engine=eng, tp=tp, dp=dp, pp=pp, ep=ep, epsize=epsize, model_id=model_id, spec=spec,
                dpattn=dpattn)


def model_from_id(mid, fallback):
    base = mid.split("/")[-1]
    prec = "BF16"
    if re.search(r"FP8", base, re.I):
        prec = "FP8"
    name = re.sub(r"-Instruct|-2507|-FP8|-Thinking|-0528|-dynamic", "", base, flags=re.I)
    canon = {"DeepSeek-R1": "DeepSeek-R1", "gpt-oss-120b": "gpt-oss-120b", "gpt-oss-20b": "gpt-oss-20b",
             "Qwen3-235B-A22B": "Qwen3-235B-A22B"}
    if name.startswith("gpt-oss"):
        prec = "MXFP4"
    if name.lower().startswith("deepseek-r1") or name.lower().startswith("deepseek-v3"):
        prec = "FP8"  # native FP8 (block-scaled) checkpoints
        name = "DeepSeek-V3.2" if name.lower() == "deepseek-v3.2" else name
    return canon.get(name, name or fallback), prec


def gpustack_blocks(text):
    """Yield (serving_cmd, result_dict) for every '=== Serving Benchmark Result ===' block."""
    lines = text.splitlines()
    cur_cmd = None
    i = 0
    while i < len(lines):
        ln = lines[i]
        if CMD_RE.search(ln) and "bench" not in ln:
            cmd = ln.strip()
            j = i
            while cmd.endswith("\\") and j + 1 < len(lines):
                j += 1
                cmd = cmd[:-1] + " " + lines[j].strip()
            cur_cmd = cmd
            i = j + 1
            continue
        if "Serving Benchmark Result" in ln:
            variant = ""
            for back in (1, 2):  # a '# <variant>' comment line inside the result fence names the variant
                if i - back >= 0 and re.match(r"^\s{2,}#\s*\S", lines[i - back]):
                    variant = lines[i - back].strip().lstrip("#").strip()
                    break
            res = {"_variant": variant}
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("====="):
                m = re.match(r"\s*([^:]+):\s+([0-9.]+|inf)\s*$", lines[j])
                if m:
                    res[m.group(1).strip()] = m.group(2)
                j += 1
            yield (cur_cmd + (" [variant: " + variant + "]" if variant else "")) if cur_cmd else None, res
            i = j + 1
            continue
        i += 1


def build_gpustack(root):
    seen = set()
    for f, (hw, model_hint, date) in GPUSTACK_FILES.items():
        path = f"docs/performance-lab/{f}"
        text = git_show(root, "gpustack", GPUSTACK_COMMIT, path)
        vers = dict(re.findall(r"^- (vLLM|SGLang|TensorRT-LLM): (\S+)", text, re.M))
        for cmd, res in gpustack_blocks(text):
            if cmd is None or "Successful requests" not in res:
                continue
            key = (f, res.get("Output token throughput (tok/s)"), res.get("Mean TTFT (ms)"),
                   res.get("Total input tokens"), res.get("Benchmark duration (s)"))
            if key in seen:
                continue  # the doc repeats a result block verbatim
            seen.add(key)
            c = parse_cmd(cmd)
            if c["spec"] or c["pp"] > 1:
                continue  # speculative decoding / pipeline parallel rows are not extracted
            model, prec = model_from_id(c["model_id"], model_hint)
            typo = ""
            if model_hint and model != model_hint:
                typo = f"serving command names {c['model_id']} although the page is about {model_hint} (kept as {model_hint})"
                model = model_hint
            done = int(float(res["Successful requests"]))
            isl = round(int(float(res["Total input tokens"])) / done)
            osl = round(int(float(res["Total generated tokens"])) / done)
            mc = res.get("Maximum request concurrency")
            # SGLang --dp with --enable-dp-attention splits attention across the same tp GPUs; otherwise
            # (vLLM -dp, SGLang router dp) each dp rank owns tp GPUs.
            gpus = c["tp"] if (c["engine"] == "sglang" and c["dpattn"]) else c["tp"] * c["dp"]
            engver = {"vllm": vers.get("vLLM", ""), "sglang": vers.get("SGLang", ""),
                      "trtllm": vers.get("TensorRT-LLM", "")}[c["engine"]]
            notes = ["GPUStack performance lab; client `vllm bench serve` (openai-chat endpoint)",
                     f"serving command: {cmd}"]
            if mc:
                sem, conc = "max_concurrency_clients", mc
                notes.append(f"{done} requests, --max-concurrency {mc}")
            else:
                sem, conc = "offline_batch", str(done)
                notes.append(f"{done} requests sent at once over HTTP (request rate inf, no max-concurrency); "
                             "concurrency = requests submitted, running batch capped by engine defaults")
            notes.append("isl/osl = total tokens / successful requests (ShareGPT lengths vary; random dataset "
                         "cases are 32000/100, 4000/200, 2000/100 or 128/4 nominal)")
            if "P99 TTFT (ms)" in res:
                notes.append(f"p99 TTFT {res['P99 TTFT (ms)']} ms, p99 TPOT {res.get('P99 TPOT (ms)','')} ms, "
                             f"median ITL {res.get('Median ITL (ms)','')} ms")
            if c["dpattn"]:
                notes.append("--enable-dp-attention (dp not set explicitly)")
            if typo:
                notes.append(typo)
            if model == "DeepSeek-V3.2":
                notes.append("DeepSeek-V3.2 uses sparse attention (DSA)")
            if c["epsize"]:
                notes.append(f"ep_size {c['epsize']}")
            add(source_id="gpustack-perf-lab", source=f"gpustack/gpustack {path}", source_ref=GPUSTACK_COMMIT,
                date=date, engine=c["engine"], engine_version=engver, hardware=hw, gpus=str(gpus), model=model,
                precision=prec, kv_cache_dtype="", tp=str(c["tp"]), ep="true" if c["ep"] else "false",
                dp=str(c["dp"]), replicas="1", isl=str(isl), osl=str(osl), concurrency=conc,
                concurrency_semantics=sem, request_rate="",
                output_tok_s=res.get("Output token throughput (tok/s)", ""),
                total_tok_s=res.get("Total Token throughput (tok/s)", res.get("Total token throughput (tok/s)", "")),
                ttft_mean_ms=res.get("Mean TTFT (ms)", ""), ttft_median_ms=res.get("Median TTFT (ms)", ""),
                tpot_mean_ms=res.get("Mean TPOT (ms)", ""), tpot_median_ms=res.get("Median TPOT (ms)", ""),
                itl_mean_ms=res.get("Mean ITL (ms)", ""), notes="; ".join(notes))


# --------------------------------------------------------------------------------------------
# 4. AMD vLLM dev-docker performance tables (ROCm/vllm docs/dev-docker/README.md), two releases.
ROCM_VLLM_RELEASES = [
    ("7bb0618b1fe725b7d4fad9e525aa44da12c94a8b", "2025-05", "0.8.5 (rocm/vllm-dev, ROCm 6.3.1)"),
    ("7802e2b729300adb67a665783292cd25684d1292", "2025-08", "0.10.0 (rocm/vllm-dev, ROCm 6.4.1)"),
]


def build_rocm_vllm(root):
    for commit, date, ver in ROCM_VLLM_RELEASES:
        text = git_show(root, "rocm_vllm", commit, "docs/dev-docker/README.md")
        section = None
        model = None
        for ln in text.splitlines():
            if ln.startswith("### Throughput Measurements"):
                section, model = "thr", None
                continue
            if ln.startswith("### Latency Measurements"):
                section, model = "lat", None
                continue
            if ln.startswith("## Reproducing"):
                break
            if section is None or not ln.startswith("|"):
                continue
            cells = [c.strip() for c in ln.strip().strip("|").split("|")]
            if cells[0].startswith("Model") or set("".join(cells)) <= set("-: "):
                continue
            if cells[0]:
                m = re.match(r"Llama 3\.1 (\d+B)", cells[0])
                model = f"Llama-3.1-{m.group(1)}" if m else None
            if model is None:
                continue
            tp = cells[2] or "8"
            src = "ROCm/vllm docs/dev-docker/README.md"
            if section == "thr":
                # Model | Precision | TP | Input | Output | Num Prompts | Max Num Seqs | Throughput
                isl, osl, nprompt, mns, thr = cells[3], cells[4], cells[5], cells[6], cells[7]
            else:
                # Model | Precision | TP | Batch | Input | Output | Latency (sec)
                bs, isl, osl, lat = cells[3], cells[4], cells[5], cells[6]
            common = dict(source_id="amd-vllm-perf-tables", source=src, source_ref=commit, date=date, engine="vllm",
                          engine_version=ver, hardware="MI300X", gpus=tp, model=model, precision="FP8",
                          kv_cache_dtype="fp8", tp=tp, ep="false", dp="1", replicas="1", isl=isl, osl=osl)
            if section == "thr":
                add(**common, concurrency=nprompt, concurrency_semantics="offline_batch", output_tok_s=thr,
                    notes=f"AMD benchmark_throughput.py (v0.8.5 scripts), {nprompt} prompts, max_num_seqs {mns}, "
                          "amd/...-FP8-KV checkpoint; column 'Throughput (tokens/s)' taken as output tokens/s "
                          "(plausible against the batch-128 rates of the latency table; the table does not say "
                          "which count) - uncertain; same AMD harness as the amd.com performance-results page "
                          "(amd-perf-page rows in published_serving_benchmarks.csv are vLLM 0.11.1, not these)")
            else:
                b, o, L = int(bs), int(osl), float(lat)
                add(**common, concurrency=bs, concurrency_semantics="static_batch",
                    output_tok_s=fmt(b * o / L, 1), e2e_mean_ms=fmt(L * 1000, 0),
                    notes=f"AMD benchmark_latency.py, batch {bs}, end-to-end batch latency {lat} s as listed; "
                          "output_tok_s = batch x osl / latency (derived, includes prefill time); "
                          "amd/...-FP8-KV checkpoint")


# --------------------------------------------------------------------------------------------
# 5. TensorRT-LLM perf overview (transcribed table, tools/raw/trtllm_perf_overview_00f37686.csv)
def build_trtllm():
    moe = {"Qwen3-235B-A22B", "Qwen3-30B-A3B", "Llama-4-Scout-17B-16E", "Llama-4-Maverick-17B-128E"}
    with open(os.path.join(HERE, "raw", "trtllm_perf_overview_00f37686.csv")) as f:
        for r in csv.DictReader(f):
            notes = ["trtllm-bench throughput (PyTorch backend), synthetic fixed-length requests (stdev 0), "
                     f"{r['num_requests']} requests queued at once; metric 'Total Output Throughput (tokens/sec)'",
                     "transcribed from the doc table (values are the doc's integers)",
                     "date approximate: the doc marks its RTX Pro tables 'NEW for v1.0'; commit date not available here"]
            if r["model"] in moe:
                notes.append("MoE recipe in the doc sets enable_attention_dp and passes --ep $ep_size; "
                             "ep/dp per table cell not stated (left blank)")
            if r["precision"] == "FP4":
                notes.append("FP4 = NVFP4 checkpoint (nvidia/*-FP4)")
            add(source_id="trtllm-perf-overview", source="NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md",
                source_ref="00f37686aa854010d68bcbd0f4ab000221541ca6", date="2025-09", engine="trtllm",
                engine_version="1.0 docs (PyTorch backend)", hardware=r["gpu"], gpus=r["tp"], model=r["model"],
                precision=r["precision"], kv_cache_dtype="", tp=r["tp"],
                ep="" if r["model"] in moe else "false", dp="" if r["model"] in moe else "1", replicas="1",
                isl=r["isl"], osl=r["osl"], concurrency=r["num_requests"], concurrency_semantics="offline_batch",
                output_tok_s=r["output_tok_s"], notes="; ".join(notes))


# --------------------------------------------------------------------------------------------
# 6. silybench (tgarg01/silybench-data derived/csv/perf_points.csv), transcribed subset
def build_silybench():
    with open(os.path.join(HERE, "raw", "silybench_perf_points_93e48873.csv")) as f:
        for r in csv.DictReader(f):
            prec = "FP8" if r["run"].endswith("fp8") else "BF16"
            add(source_id="silybench", source="tgarg01/silybench-data derived/csv/perf_points.csv",
                source_ref="93e4887353137e64bd5605fa3d1f4529da0a1dc5", date="2026-09", engine="vllm",
                engine_version="0.30.0 (vllm/vllm-openai:v0.30.0)", hardware="H100", gpus="1", model="Qwen3-8B",
                precision=prec, kv_cache_dtype="", tp="1", ep="false", dp="1", replicas="1",
                isl=r["isl"], osl=r["osl"], concurrency=r["conc"], concurrency_semantics="max_concurrency_clients",
                output_tok_s=r["out"], total_tok_s=r["total"],
                notes=f"run {r['run']} (GCP a3-highgpu-1g, H100-80GB), workload {r['workload']}, "
                      f"vllm bench serve random {r['isl']}/{r['osl']}, {r['prompts']} prompts x 3 repeats, "
                      f"--quantization {'fp8 (online)' if prec == 'FP8' else 'none'}; source gives only percentiles: "
                      f"p95 TTFT {r['ttft_p95']} ms, p95 TPOT {r['tpot_p95']} ms, median ITL {r['itl_med']} ms; "
                      "values rounded to 0.1 in transcription")


# --------------------------------------------------------------------------------------------
# 7. vLLM blog, FP8 KV cache (AWS + Red Hat AI), Tables 4 and 5
def build_vllm_blog_fp8kv():
    src = "vllm-project/vllm-project.github.io _posts/2026-04-22-fp8-kvcache.md (Tables 4, 5)"
    ref = "c3a01c4a5807c8d900ae468897e45263373e534e"
    rows = [
        ("Llama-3.1-8B", "BF16", "bf16", "763.6", "15.18", "672.6", "450.3", ""),
        ("Llama-3.1-8B", "BF16", "fp8", "742.8", "12.93", "585.2", "517.5", ""),
        ("gpt-oss-20b", "MXFP4", "bf16", "468.9", "8.09", "364.2", "831.6", ""),
        ("gpt-oss-20b", "MXFP4", "fp8", "451.7", "7.90", "355.1", "853.0", ""),
        ("gpt-oss-20b", "MXFP4", "fp8", "456.4", "7.70", "347.4", "871.8",
         "--kv-cache-dtype-skip-layers sliding_window (sliding-window layers kept BF16)"),
    ]
    for model, prec, kv, ttft, itl, dur, out, extra in rows:
        n = ["150 requests at concurrency 8, ~20k input and ~2k output tokens (+-15% variance) per the post; "
             "single H100, FlashAttention-3 backend", f"median ITL {itl} ms; total duration {dur} s",
             "engine version not stated for this table (post's fixed version is v0.19.1)"]
        if extra:
            n.append(extra)
        add(source_id="redhat-aws-vllm-blog", source=src, source_ref=ref, date="2026-04", engine="vllm",
            engine_version="", hardware="H100", gpus="1", model=model, precision=prec, kv_cache_dtype=kv, tp="1",
            ep="false", dp="1", replicas="1", isl="20000", osl="2000", concurrency="8",
            concurrency_semantics="max_concurrency_clients", output_tok_s=out, ttft_median_ms=ttft,
            notes="; ".join(n))


# --------------------------------------------------------------------------------------------
# 8. DataCrunch H200 SGLang outputs (Dec 2024)
def build_datacrunch(root):
    ref = "c091ef530a525d2e788bc41c39a4450b09c9f2ad"
    files = [("sglang/outputs/llama_3_3_70b_online_output.jsonl", "Llama-3.3-70B", 4),
             ("sglang/outputs/llama_3_3_70b_offline_output.jsonl", "Llama-3.3-70B", 4),
             ("sglang/outputs/llama_405b_online_output.jsonl", "Llama-3.1-405B", 8)]
    for path, model, tp in files:
        for ln in git_show(root, "datacrunch", ref, path).splitlines():
            if not ln.strip():
                continue
            d = json.loads(ln.replace("Infinity", "1e999"))
            done = d["completed"]
            rate = d["request_rate"]
            isl = round(d["total_input_tokens"] / done)
            osl = round(d["total_output_tokens"] / done)
            if math.isinf(rate):
                sem, conc, rr = "offline_batch", str(done), ""
            else:
                sem, conc, rr = "request_rate_open_loop", "", fmt(rate, 1)
            ds = d["dataset_name"]
            dsn = (f"random, --random-input {d['random_input_len']} --random-output {d['random_output_len']} "
                   f"--random-range-ratio {d['random_range_ratio']} (lengths uniform up to the nominal value)"
                   if ds == "random" else "ShareGPT")
            add(source_id="datacrunch-h200", source=f"datacrunch-research/h200-benchmarks {path}", source_ref=ref,
                date="2024-12", engine="sglang", engine_version="lmsysorg/sglang:latest (Dec 2024)",
                hardware="H200", gpus=str(tp), model=model, precision="BF16", kv_cache_dtype="", tp=str(tp),
                ep="false", dp="1", replicas="1", isl=str(isl), osl=str(osl), concurrency=conc,
                concurrency_semantics=sem, request_rate=rr, output_tok_s=fmt(d["output_throughput"], 1),
                ttft_median_ms=fmt(d["median_ttft_ms"], 1), e2e_mean_ms=fmt(d["mean_e2e_latency_ms"], 0),
                notes=f"sglang.bench_serving {dsn}, {done} requests"
                      f"{', Poisson rate ' + rr + ' req/s' if rr else ', all at once (rate inf)'}; "
                      f"launch: --tp-size {tp} --disable-radix-cache --enable-torch-compile (BF16); "
                      f"isl/osl = means from totals; median ITL {fmt(d['median_itl_ms'],2)} ms; "
                      "README tables in this repo are not used (they repeat SGLang's H100 numbers)")


# --------------------------------------------------------------------------------------------
# 9. SGLang cookbook: MiniMax-M2.7 on MI300X (jsx benchmark entries + the PR that added them)
def build_sglang_cookbook():
    src = ("sgl-project/sglang docs_new/src/snippets/configs/MiniMaxAI/minimax-m2.7-benchmarks.jsx "
           "(whole-system throughput from PR https://github.com/sgl-project/sglang/pull/31044)")
    ref = "05751c8d9a98afafd220257440358bae0017c342"
    rows = [  # tp=ep, conc, prompts, ttft, tpot, tok/s/GPU (jsx), tok/s whole system (PR table)
        (2, 1, 64, "210", "14.94", 33, "65"), (2, 16, 256, "167", "31.80", 243, "486"),
        (4, 64, 512, "419", "42.48", 351, "1403"), (4, 256, 1024, "337", "71.72", 809, "3236"),
        (8, 1024, 2048, "3547", "239.18", 538, "4301"), (8, 4096, 4096, "18251", "431.16", 1043, "8344"),
    ]
    for tp, conc, n, ttft, tpot, pg, tot in rows:
        add(source_id="sglang-cookbook", source=src, source_ref=ref, date="2026-07", engine="sglang",
            engine_version="0.5.13.post1 (lmsysorg/sglang:v0.5.13.post1-rocm720-mi30x)", hardware="MI300X",
            gpus=str(tp), model="MiniMax-M2.7", precision="FP8", kv_cache_dtype="fp8", tp=str(tp), ep="true",
            dp="1", replicas="1", isl="1000", osl="1000", concurrency=str(conc),
            concurrency_semantics="max_concurrency_clients", output_tok_s=tot, ttft_median_ms=ttft,
            tpot_median_ms=tpot,
            notes=f"sglang.bench_serving random 1000/1000, {n} prompts, --max-concurrency {conc}, "
                  f"--warmup-requests 64; tp={tp} ep={tp}; server --attention-backend triton "
                  "--mem-fraction-static 0.85 --kv-cache-dtype fp8_e4m3; cookbook fields ttft_ms/tpot_ms "
                  "(statistic not stated for this entry; other cookbook entries state P50) placed in the median "
                  f"columns; tokens_per_sec_per_gpu {pg} x {tp} GPUs ~ the PR's whole-system figure, which is "
                  "output tokens (conc 1: 1000/14.94 ms ~ 67 tok/s)")


# --------------------------------------------------------------------------------------------
# 10. vLLM PR #42893 comment (2026-05-21): DeepSeek-V4-Flash TP=4 on 4x MI300X, ISL 8192 / OSL 1024
def build_vllm_pr_42893():
    src = "https://github.com/vllm-project/vllm/pull/42893 (comment 'MI300X serve-bench: DSv4-Flash TP=4 Pareto sweep')"
    rows = [  # conc, agg out tok/s, tok/s/GPU, ITL p50, ITL p99, TTFT p50, TPOT mean
        (1, "24.4", "6.1", "39.9", "57", "229", "40.4"), (2, "46.6", "11.7", "40.4", "58", "1200", "41.3"),
        (4, "87.5", "21.9", "40.8", "58", "1996", "42.6"), (8, "155.5", "38.9", "42.5", "63", "1868", "46.8"),
        (16, "273.5", "68.4", "46.0", "69", "2028", "52.3"), (32, "367.6", "91.9", "52.5", "1945", "4316", "74.6"),
        (64, "341.2", "85.3", "64.5", "1991", "7980", "150.8"), (128, "374.4", "93.6", "83.3", "1998", "66200", "234.1"),
        (256, "419.9", "105.0", "115.2", "", "", ""),
    ]
    for conc, out, pg, itl50, itl99, ttft, tpot in rows:
        extra = f"ITL p50 {itl50} ms" + (f", ITL p99 {itl99} ms" if itl99 else "")
        if conc == 256:
            extra += "; the stored copy of the comment is cut after this row's ITL p50 (other cells not available)"
        add(source_id="vllm-pr-42893", source=src, source_ref="2026-05-21", date="2026-05-21", engine="vllm",
            engine_version="vllm/vllm-openai-rocm:nightly-a6682d1d259cca69a9ae737ea5608fbbe7520031 + PR branch",
            hardware="MI300X", gpus="4", model="DeepSeek-V4-Flash", precision="FP8", kv_cache_dtype="fp8",
            tp="4", ep="", dp="1", replicas="1", isl="8192", osl="1024", concurrency=str(conc),
            concurrency_semantics="max_concurrency_clients", output_tok_s=out, ttft_median_ms=ttft,
            tpot_mean_ms=tpot,
            notes=f"vllm bench serve, fixed seed, --ignore-eos, --async-scheduling, FULL_AND_PIECEWISE cudagraphs, "
                  f"--max-num-seqs 384, --gpu-memory-utilization 0.85, --kv-cache-dtype fp8_e4m3; {extra}; "
                  f"tok/s/GPU {pg} as listed; ep not stated in the comment (left blank); precision FP8 per the SGLang cookbook's MI300X DeepSeek-V4-Flash cell "
                  "(quant fp8), the comment does not restate it")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mirror-root", default="/work/.mirror")
    a = ap.parse_args()
    build_inferencex(a.mirror_root)
    build_dstack(a.mirror_root)
    build_gpustack(a.mirror_root)
    build_rocm_vllm(a.mirror_root)
    build_trtllm()
    build_silybench()
    build_vllm_blog_fp8kv()
    build_datacrunch(a.mirror_root)
    build_sglang_cookbook()
    build_vllm_pr_42893()
    with open(OUT, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(ROWS)
    print(f"wrote {len(ROWS)} rows to {os.path.relpath(OUT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
