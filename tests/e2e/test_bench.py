"""`vllm bench serve` (the real client) for two layouts, then `infra tune ingest` on its result files.

Layouts: `tp1-r1` = one engine, measured directly (as the bench Job measures one replica behind
its Service); `tp1-r2` = both engines behind vllm-router (policy of the project's default router
kind, `session` → consistent_hash; the random prompts carry no session, so it hashes the body).

Inputs (tests/e2e/inputs.py): the args are infra.tuning.bench.bench_serve_args for the model
service spec with that layout (random dataset, Poisson arrivals, --goodput with the SLO,
--save-result, --metadata layout=... and the engine limits). The harness rewrites only --base-url,
--tokenizer (the local checkpoint), --result-dir and --model/--served-model-name: the bench renders
`<model>-bench-<layout>` (its isolated bench Deployment's name) while these engines serve the
production name. The API key reaches the client as OPENAI_API_KEY, as in the bench Job.
The result files are kept under the run's artifacts (bench/<layout>/rate-<r>.json).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.tuning.results import load_results
from tests.e2e import harness, inputs
from tests.e2e.conftest import timed

RATES = (1.0, 4.0)
PROMPTS = 8
RUN_ID = "e2e"


@pytest.fixture(scope="module")
def bench_results(engine_pair, module_router_factory, engine_env, artifacts, tiny_models):
    spec = inputs.model_service_spec(str(tiny_models["llama"]))
    router = module_router_factory(inputs.router_spec("session"), engine_pair)
    targets = {1: engine_pair[0].url, 2: router.url}
    out = artifacts / "bench"
    runs = []
    for replicas, base_url in targets.items():
        layout = inputs.layout_with_replicas(replicas)
        for rate in RATES:
            rendered = inputs.bench_args(spec, layout, rate, PROMPTS, RUN_ID)
            args = harness.adapt_bench_args(rendered, base_url=base_url, tokenizer=str(tiny_models["llama"]),
                                            result_dir=str(out / layout.name), served_model_name=inputs.SERVED)
            log = artifacts / "logs" / f"bench-{layout.name}-rate-{rate:g}.log"
            with timed(f"vllm bench serve {layout.name} @ {rate:g} req/s"):
                result = subprocess.run([str(engine_env.vllm), "bench", "serve", *args], capture_output=True, text=True,
                                        timeout=600, env={**os.environ, "OPENAI_API_KEY": inputs.API_KEY})
            log.write_text(result.stdout + result.stderr)
            assert result.returncode == 0, f"vllm bench serve failed ({log}):\n{result.stderr[-3000:]}"
            runs.append((layout.name, rate, out / layout.name / f"rate-{rate:g}.json"))
    return out, runs


def test_bench_results_have_what_ingest_reads(bench_results):
    _, runs = bench_results
    for layout, rate, path in runs:
        obj = json.loads(path.read_text())
        assert obj["layout"] == layout and obj["request_rate"] == rate, path
        assert obj["completed"] == PROMPTS and obj["failed"] == 0, path
        for key in ("date", "model_id", "p90_ttft_ms", "p90_tpot_ms", "request_throughput", "output_throughput",
                    "request_goodput", "layout_max_num_seqs", "layout_max_num_batched_tokens", "vllm_version"):
            assert key in obj, (key, path)
        assert obj["vllm_version"] == "0.33.0"  # --metadata carries the PINNED version, not the engine's


def test_results_load_as_sweep_points(bench_results):
    out, runs = bench_results
    points = load_results([out])
    assert sorted((p.layout, p.request_rate_rps) for p in points) == sorted((layout, rate) for layout, rate, _ in runs)
    assert all(not p.skip_reasons() for p in points), [p.skip_reasons() for p in points]


def test_infra_tune_ingest_on_real_results(bench_results, artifacts):
    out, _ = bench_results
    cmd = [str(Path(sys.executable).parent / "infra"), "tune", "ingest", str(out), "--ttft-p90-ms", f"{inputs.SLO.ttft_p90_ms:g}",
           "--tpot-p90-ms", f"{inputs.SLO.tpot_p90_ms:g}", "--json", "--chart", str(artifacts / "latency-vs-rate.svg")]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    (artifacts / "ingest.json").write_text(result.stdout + result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    payload = json.loads(result.stdout)
    names = {g["name"] for g in payload["layouts"]}
    assert names == {"tp1-r1", "tp1-r2"}, payload
    assert (artifacts / "latency-vs-rate.svg").stat().st_size > 0
    print(json.dumps({"winner": payload.get("winner"), "layouts": [(g["name"], g.get("goodput_rps")) for g in payload["layouts"]]}))
