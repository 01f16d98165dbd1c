"""Multi-turn chat against a real CPU engine: the prefix-cache hit-rate series rises (issue 26).

The CPU build cannot run the offload tier itself: vLLM 0.32.0's CPU offloading worker refuses every
platform but CUDA-alike and XPU GPUs (vllm/v1/kv_offload/cpu/spec.py `get_worker`: "CPU Offloading
is currently only supported on CUDA-alike and XPU GPUs"). So this file checks what can be checked
here:

1. the renderer's `--kv-offloading-backend/--kv-offloading-size` flags (model_service with
   `kv_offload: cpu`) are parsed by the installed vLLM's own parser into the engine settings that
   switch the OffloadingConnector on;
2. a multi-turn replay — the project's trace (infra/tuning/multi_turn_trace.py) through
   `vllm bench serve --dataset-name timed_trace`, the args `infra bench --dataset multi-turn`
   renders — against an engine with the GPU-tier prefix cache raises the project's recorded hit
   rate (`model:vllm_prefix_cache_total_hit:ratio_rate5m`) in a real Prometheus well above the
   single-turn run's, while the offload tier's series stays 0 (no tier on this engine).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from infra.domain import KvOffload
from infra.tuning import bench, multi_turn_trace
from tests.e2e import harness, inputs
from tests.e2e.conftest import timed
from tests.e2e.test_prometheus import Prom, _write_config

HERE = Path(__file__).resolve().parent
TURNS, NEW_TOKENS, OUTPUT_TOKENS = 4, 160, 16  # prompts 160 → 688 tokens: whole 128-token blocks repeat


def test_the_rendered_offload_flags_parse_in_the_real_vllm(engine_env, tiny_models):
    spec = replace(inputs.model_service_spec(str(tiny_models["llama"])), kv_offload=KvOffload("cpu", 2.0))
    args = inputs.engine_container(spec)["args"]
    assert args[args.index("--kv-offloading-backend") + 1] == "native"
    result = subprocess.run([str(engine_env.python), str(HERE / "kv_offload_flags.py"), json.dumps(args)],
                            capture_output=True, text=True, timeout=900)  # importing vLLM + torch on a loaded 2-core machine
    assert result.returncode == 0, result.stderr[-3000:]
    parsed = json.loads(result.stdout.strip().splitlines()[-1])
    assert parsed == {"kv_offloading_backend": "native", "kv_offloading_size": 2.0, "enable_prefix_caching": True}


@pytest.fixture(scope="module")
def prom(prometheus_bin, procs, engine_pair, tmp_path_factory):
    groups = inputs.rule_groups(replicas=1)
    for g in groups:
        g["interval"] = "1s"
    tmp = tmp_path_factory.mktemp("prefix-prometheus")
    rule_file = tmp / "rules.yml"
    rule_file.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    engine = engine_pair[0]
    config_path, _ = _write_config(tmp, [engine], _NoRouter(), rule_file)
    port = harness.free_port()
    proc = procs.start("prometheus-prefix", [prometheus_bin["prometheus"], f"--config.file={config_path}",
                                             f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address={harness.LOOPBACK}:{port}",
                                             "--log.level=warn"], port=port)
    harness.wait_http(proc, "/-/ready", timeout=60, extra_tails=procs.tails)
    p = Prom(proc)
    deadline = time.monotonic() + 60
    while len(p.query('count_over_time(up{job="vllm"}[1m]) >= 2')) < 1:
        assert time.monotonic() < deadline, f"engine not scraped: {p.query('up')}\n{procs.tails()}"
        time.sleep(1)
    return p, engine


class _NoRouter:
    meta = {"metrics_port": 9}  # a closed port: the router job stays down, nothing reads it


def _bench(engine_env, engine, rendered, tokenizer, out: Path, label: str) -> None:
    args = harness.adapt_bench_args(rendered, base_url=engine.url, tokenizer=tokenizer, result_dir=str(out),
                                    served_model_name=inputs.SERVED)
    with timed(f"vllm bench serve ({label})"):
        result = subprocess.run([str(engine_env.vllm), "bench", "serve", *args], capture_output=True, text=True,
                                timeout=600, env={**os.environ, "OPENAI_API_KEY": inputs.API_KEY})
    (out / f"{label}.log").write_text(result.stdout + result.stderr)
    assert result.returncode == 0, f"vllm bench serve ({label}) failed:\n{result.stderr[-3000:]}"


def _settled(p: Prom, expr: str, seconds: float = 8.0) -> float:
    time.sleep(seconds)  # a few scrapes and evaluations after the last request
    value = p.value(expr)
    assert value is not None, expr
    return value


def test_a_multi_turn_replay_raises_the_hit_rate_series(prom, engine_env, tiny_models, artifacts):
    p, engine = prom
    sel = f'{{model="{inputs.MODEL}"}}'
    total, offload = (f"model:vllm_prefix_cache_total_hit:ratio_rate5m{sel}",
                      f"model:vllm_prefix_cache_offload_hit:ratio_rate5m{sel}")
    spec = inputs.model_service_spec(str(tiny_models["llama"]))
    out = artifacts / "prefix-cache"
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = str(tiny_models["llama"])

    # 1. single-turn random prompts: nothing repeats
    _bench(engine_env, engine, inputs.bench_args(spec, inputs.LAYOUT, 4.0, 8, "e2e-single"), tokenizer, out, "single-turn")
    single = _settled(p, total)

    # 2. the same engine, conversations of 4 turns replayed with think times
    trace = out / "multi-turn-trace.jsonl"
    lines = multi_turn_trace.trace(rate_rps=2.0, requests=24, turns=TURNS, new_tokens=NEW_TOKENS,
                                   output_tokens=OUTPUT_TOKENS, think_time_s=1.0, answer_s=0.2, seed=7)
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    target = replace(inputs.bench_target(spec), workload=replace(inputs.WORKLOAD, input_tokens=400, output_tokens=OUTPUT_TOKENS,
                                                                 turns_per_session=TURNS, think_time_s=1.0))
    opts = bench.BenchOptions(run_id="e2e-multi", dataset=bench.MULTI_TURN, dataset_path=str(trace), warmups=0,
                              min_prompts=len(lines))
    rendered = bench.bench_serve_args(target, inputs.LAYOUT, 2.0, len(lines), opts, base_url="http://placeholder",
                                      result_dir="placeholder")
    _bench(engine_env, engine, rendered, tokenizer, out, "multi-turn")
    multi = _settled(p, total)
    print(json.dumps({"hit_rate_single_turn": single, "hit_rate_after_multi_turn": multi,
                      "offload_tier": p.value(offload)}))
    assert multi > single + 0.2, (single, multi)
    assert p.value(offload) == 0  # no tier on a CPU engine: the series exists and stays at zero
    result = json.loads((out / "rate-2.json").read_text())
    assert result["workload"] == "multi-turn" and result["turns_per_session"] == str(TURNS)
