"""Two models behind one vllm-router 0.1.17: does it route on the request's `model` field?

Engines: the dense model (engine_pair[0], served `tiny-llama`) and the MoE model (`tiny-mixtral`),
both from model_service.render_deployment's args with the API key on.
Findings recorded here: in regular mode the router ignores `model` (workers have model_id
"unknown") and sends requests to an engine that does not serve it (vLLM answers 404); with
`--enable-igw` it ignores `--worker-urls`, workers are registered with `POST /workers {"url": ...}`
and the router reads each one's model from its /v1/models, then routes by `model` (seen by hand
against engines WITHOUT an API key: 6/6 right, /v1/models answering `{"models": [...]}`, not the
OpenAI list). Against engines WITH the API key (as the platform runs them behind a public router),
that model discovery calls /v1/models without a key (`--api-key` is not used for it): 401, the
worker is registered as model "unknown" and routing by model fails — a strict xfail below.
"""

from __future__ import annotations

import pytest

from tests.e2e import harness, inputs

KEY = harness.bearer(inputs.API_KEY)


def _start(procs, engine_env, name, extra):
    port, metrics_port = harness.free_port(), harness.free_port()
    args = ["--host", harness.LOOPBACK, "--port", str(port), "--policy", "round_robin",
            "--prometheus-host", harness.LOOPBACK, "--prometheus-port", str(metrics_port), *extra]
    proc = procs.start(name, [engine_env.router, *args], port=port, meta={"args": args})
    harness.wait_http(proc, "/health", timeout=60, extra_tails=procs.tails)
    return proc


def _codes(router, models):
    out = []
    for m in models:
        status, _ = harness.http("POST", router.url + "/v1/completions", headers=KEY,
                                 body={"model": m, "prompt": "which model?", "max_tokens": 1})
        out.append(status)
    return out


def test_regular_mode_does_not_route_on_the_model_field(procs, engine_env, engine_pair, moe_engine):
    router = _start(procs, engine_env, "router-two-models", ["--worker-urls", engine_pair[0].url, moe_engine.url])
    try:
        workers = harness.get_json(router.url + "/workers")["workers"]
        assert {w["model_id"] for w in workers} == {"unknown"}
        codes = _codes(router, [inputs.SERVED] * 4)
        assert codes.count(404) == 2 and codes.count(200) == 2, codes  # round robin onto the wrong model
    finally:
        procs.stop(router)


@pytest.mark.xfail(strict=True, reason="vllm-router 0.1.17 IGW model discovery GETs /v1/models without "
                   "--api-key: 401 from key-protected engines, workers registered as model 'unknown'")
def test_igw_mode_routes_on_the_model_field(procs, engine_env, engine_pair, moe_engine):
    router = _start(procs, engine_env, "router-igw", ["--enable-igw", "--api-key", inputs.API_KEY,
                                                       "--worker-urls", engine_pair[0].url, moe_engine.url])
    try:
        assert harness.get_json(router.url + "/workers")["total"] == 0  # --worker-urls ignored in IGW mode
        for engine in (engine_pair[0], moe_engine):
            status, raw = harness.http("POST", router.url + "/workers", body={"url": engine.url})
            assert status == 200, raw[:300]
        models = {w["model_id"] for w in harness.get_json(router.url + "/workers")["workers"]}
        assert models == {inputs.SERVED, inputs.MOE_SERVED}
        assert _codes(router, [inputs.SERVED, inputs.MOE_SERVED] * 3) == [200] * 6
        listed = harness.get_json(router.url + "/v1/models", headers=KEY)
        print(f"IGW /v1/models: {listed}")
    finally:
        procs.stop(router)
