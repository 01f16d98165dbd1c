"""Two models behind one vllm-router 0.1.17: the project's router routes on the request's `model`.

Engines: the dense model (engine_pair[0], served `tiny-llama`) and the MoE model (`tiny-mixtral`),
both from model_service.render_deployment's args with the API key on. The router runs the args
infra.render.router.router_args renders (`--enable-igw`, ...); its workers are registered by the
project's registrar (infra/render/router_registrar.py, args from registrar_args) reading a
stand-in EndpointSlice API.

Findings recorded here (vllm-router 0.1.17):
- regular mode (no `--enable-igw`) ignores `model`: workers have model_id "unknown" and requests go
  round robin to an engine that may not serve the model (vLLM answers 404);
- IGW mode ignores `--worker-urls`; `POST /workers {"url": ...}` without a model id makes the router
  ask the worker's /v1/models WITHOUT a key (its `--api-key` is not used for that): key-protected
  engines answer 401 and the worker is filed as model "unknown". With `"model_id"` in the body
  (what the registrar sends) no lookup happens and routing by model works.
"""

from __future__ import annotations

import json
import time

from tests.e2e import harness, inputs

KEY = harness.bearer(inputs.API_KEY)
TWO_MODELS = ((inputs.MODEL, inputs.SERVED), (inputs.MOE_MODEL, inputs.MOE_SERVED))


def _start(procs, engine_env, name, extra):
    port, metrics_port = harness.free_port(), harness.free_port()
    args = ["--host", harness.LOOPBACK, "--port", str(port), "--policy", "round_robin",
            "--prometheus-host", harness.LOOPBACK, "--prometheus-port", str(metrics_port), *extra]
    proc = procs.start(name, [engine_env.router, *args], port=port, meta={"args": args})
    harness.wait_http(proc, "/health", timeout=60, extra_tails=procs.tails)
    return proc


def _served_by(router, models) -> list[tuple[int, str | None]]:
    """(status, the model the answer says served it) per request."""
    out = []
    for m in models:
        status, raw = harness.http("POST", router.url + "/v1/completions", headers=KEY,
                                   body={"model": m, "prompt": "which model?", "max_tokens": 1})
        answered = json.loads(raw).get("model") if status == 200 else None
        out.append((status, answered))
    return out


def test_regular_mode_does_not_route_on_the_model_field(procs, engine_env, engine_pair, moe_engine):
    router = _start(procs, engine_env, "router-two-models", ["--worker-urls", engine_pair[0].url, moe_engine.url])
    try:
        workers = harness.get_json(router.url + "/workers")["workers"]
        assert {w["model_id"] for w in workers} == {"unknown"}
        codes = [s for s, _ in _served_by(router, [inputs.SERVED] * 4)]
        assert codes.count(404) == 2 and codes.count(200) == 2, codes  # round robin onto the wrong model
    finally:
        procs.stop(router)


def test_igw_model_lookup_has_no_key_so_key_protected_engines_are_unknown(procs, engine_env, engine_pair, moe_engine):
    """Why the registrar sends model_id: without it the worker's model is looked up without a key."""
    router = _start(procs, engine_env, "router-igw-lookup", ["--enable-igw", "--api-key", inputs.API_KEY,
                                                              "--worker-urls", engine_pair[0].url, moe_engine.url])
    try:
        assert harness.get_json(router.url + "/workers")["total"] == 0  # --worker-urls ignored in IGW mode
        for engine in (engine_pair[0], moe_engine):
            status, raw = harness.http("POST", router.url + "/workers", body={"url": engine.url})
            assert status == 200, raw[:300]
        models = {w["model_id"] for w in harness.get_json(router.url + "/workers")["workers"]}
        assert models == {"unknown"}, models
    finally:
        procs.stop(router)


def test_the_project_router_routes_each_model_to_its_engines(engine_pair, moe_engine, router_factory):
    spec = inputs.router_spec("round-robin", TWO_MODELS)
    router = router_factory(spec, {inputs.MODEL: [engine_pair[0]], inputs.MOE_MODEL: [moe_engine]})
    workers = {w["url"]: w["model_id"] for w in harness.get_json(router.url + "/workers")["workers"]}
    assert workers == {engine_pair[0].url: inputs.SERVED, moe_engine.url: inputs.MOE_SERVED}
    asked = [inputs.SERVED, inputs.MOE_SERVED] * 3
    results = _served_by(router, asked)
    assert results == [(200, m) for m in asked], results  # 6/6 answered by the model asked for
    listed = harness.get_json(router.url + "/v1/models", headers=KEY)
    assert sorted(listed["models"]) == sorted([inputs.SERVED, inputs.MOE_SERVED]), listed  # not the OpenAI list shape
    print(f"routing by model through the registrar: {results}; /v1/models: {listed}")


def test_the_registrar_follows_endpoint_changes_and_router_restarts(procs, engine_env, engine_pair, moe_engine,
                                                                    router_factory):
    spec = inputs.router_spec("round-robin", TWO_MODELS)
    router = router_factory(spec, {inputs.MODEL: [engine_pair[0]], inputs.MOE_MODEL: [moe_engine]})
    kube = router.meta["kube"]
    # An engine stops being ready (drain, failing probe): the registrar removes it within one interval.
    kube.set(inputs.MOE_MODEL, [moe_engine.url], ready=False)
    harness.wait_workers(router.url, {engine_pair[0].url: inputs.SERVED}, timeout=20, tails=procs.tails)
    # Ready again, plus a second dense replica: both (re)registered under their model.
    kube.set(inputs.MOE_MODEL, [moe_engine.url])
    kube.set(inputs.MODEL, [e.url for e in engine_pair])
    want = {engine_pair[0].url: inputs.SERVED, engine_pair[1].url: inputs.SERVED, moe_engine.url: inputs.MOE_SERVED}
    harness.wait_workers(router.url, want, timeout=20, tails=procs.tails)
    # The router restarts (its worker list is in memory): the sidecar registers everything again.
    procs.stop(router)
    t0 = time.monotonic()
    restarted = procs.start(f"{router.name}-restarted", router.cmd, port=router.port, meta=router.meta)
    harness.wait_http(restarted, "/health", timeout=60, extra_tails=procs.tails)
    harness.wait_workers(restarted.url, want, timeout=30, tails=procs.tails)
    print(f"workers back {time.monotonic() - t0:.1f} s after the router restart")
    procs.stop(restarted)
