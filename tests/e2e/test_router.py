"""vllm-router 0.1.17 in front of two CPU engines: round robin, session stickiness, prefix affinity.

Inputs (tests/e2e/inputs.py): the engines run model_service.render_deployment's args (API key on);
the router runs infra.render.router.router_args(spec) (only host, ports and the Secret's key
substituted, harness.render_router_cli) and its workers come from the project's registrar. Which
engine served a request is read from each engine's own `vllm:request_success_total` on /metrics,
sampled before and after the request.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest

from infra.render import router as router_render
from tests.client_proxy_run import start_client_proxy
from tests.e2e import harness, inputs

KEY = harness.bearer(inputs.API_KEY)


def served_counts(engines: list[harness.Proc]) -> list[float]:
    out = []
    for e in engines:
        status, raw = harness.http("GET", e.url + "/metrics")
        assert status == 200
        out.append(harness.counter_sum(harness.parse_metrics(raw.decode()), "vllm:request_success_total"))
    return out


def prefix_hits(engines: list[harness.Proc]) -> list[float]:
    return [harness.counter_sum(harness.parse_metrics(harness.http("GET", e.url + "/metrics")[1].decode()),
                                "vllm:prefix_cache_hits_total") for e in engines]


def send(router: harness.Proc, engines, prompt: str, headers: dict | None = None, max_tokens: int = 2) -> int:
    """One completion through the router; the index of the engine that served it."""
    before = served_counts(engines)
    body = {"model": inputs.SERVED, "prompt": prompt, "max_tokens": max_tokens}
    status, raw = harness.http("POST", router.url + "/v1/completions", body=body, headers={**KEY, **(headers or {})})
    assert status == 200, f"{status} {raw[:300]!r}"
    after = served_counts(engines)
    delta = [a - b for a, b in zip(after, before, strict=True)]
    assert sorted(delta) == [0, 1], f"expected exactly one engine to serve the request, got {delta}"
    return delta.index(1)


@pytest.mark.parametrize("kind", ["session", "prefix", "round-robin"])
def test_project_router_args_run_on_vllm_router(engine_env, kind):
    """Every kind's rendered command line is accepted by the real binary (it keeps running)."""
    args = harness.render_router_cli(inputs.project_router_args(inputs.router_spec(kind)), port=harness.free_port(),
                                     metrics_port=harness.free_port(), api_key=inputs.API_KEY)
    try:
        result = subprocess.run([str(engine_env.router), *args], capture_output=True, text=True, timeout=8)
    except subprocess.TimeoutExpired:
        return  # still serving after 8 s: the arguments were accepted
    pytest.fail(f"{kind}: vllm-router exited {result.returncode}: {result.stderr.strip().splitlines()[-1:]}")


def test_a_wrong_router_argument_fails_the_harness(engine_env):
    """Harness self-test: a deliberately wrong rendered flag makes the router refuse to start."""
    args = harness.render_router_cli(inputs.project_router_args(inputs.router_spec("session")), port=harness.free_port(),
                                     metrics_port=harness.free_port(), api_key=inputs.API_KEY)
    wrong = harness._replace_value(args, "--policy", "sessionaware")
    result = subprocess.run([str(engine_env.router), *wrong], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0 and "invalid choice" in result.stderr, result.stderr[-500:]


def test_router_endpoints_auth_and_metrics(engine_pair, router_factory):
    router = router_factory(inputs.router_spec("round-robin"), engine_pair)
    for path in ("/health", "/liveness", "/readiness"):
        assert harness.http("GET", router.url + path)[0] == 200, path
    # Not a probe target: IGW mode answers 503 (regular mode 404); the project probes /health, /liveness.
    assert harness.http("GET", router.url + "/health_generate")[0] == 503
    workers = harness.get_json(router.url + "/workers")
    assert workers["total"] == 2 and all(w["is_healthy"] for w in workers["workers"])
    assert {w["model_id"] for w in workers["workers"]} == {inputs.SERVED}  # registered by the registrar
    body = {"model": inputs.SERVED, "prompt": "hi", "max_tokens": 1}
    # The router passes the client's Authorization header through, also with its own --api-key
    # set (that one is for its calls to workers); the engines enforce the key.
    assert harness.http("POST", router.url + "/v1/completions", body=body)[0] == 401
    assert harness.http("POST", router.url + "/v1/completions", body=body, headers=harness.bearer("wrong"))[0] == 401
    assert harness.http("POST", router.url + "/v1/completions", body=body, headers=KEY)[0] == 200
    models = harness.get_json(router.url + "/v1/models", headers=KEY)
    assert models == {"models": [inputs.SERVED]}  # IGW mode: the router's own list, not OpenAI's shape
    # Its own metrics are on --prometheus-port (default 29000, bound to 127.0.0.1 unless
    # --prometheus-host says otherwise), named vllm_router_*.
    own = harness.http("GET", f"http://{harness.LOOPBACK}:{router.meta['metrics_port']}/metrics")[1].decode()
    names = harness.metric_names(own)
    for name in ("vllm_router_requests_total", "vllm_router_processed_requests_total", "vllm_router_worker_health",
                 "vllm_router_active_workers", "vllm_router_policy_decisions_total", "vllm_router_cb_state",
                 "vllm_router_generate_duration_seconds"):
        assert name in names, (name, sorted(names))
    # The project's router PodMonitor scrapes this port (`metrics`), never the serving port.
    assert inputs.scrape_target_labels()["router"]["port"] == "metrics"


def test_round_robin_alternates(engine_pair, router_factory):
    router = router_factory(inputs.router_spec("round-robin"), engine_pair)
    served = [send(router, engine_pair, f"round robin request {i}") for i in range(8)]
    assert served.count(0) == served.count(1) == 4, served
    assert all(a != b for a, b in zip(served, served[1:], strict=False)), served


def test_consistent_hash_keeps_a_session_on_one_engine(engine_pair, router_factory):
    spec = inputs.router_spec("session")
    header = router_render.SESSION_HEADER  # the header vllm-router hashes first; config allows only it
    router = router_factory(spec, engine_pair)
    placement: dict[str, set[int]] = {}
    for s in range(8):
        for turn in range(3):
            engine = send(router, engine_pair, f"turn {turn} of a chat", headers={header: f"chat-{s}"})
            placement.setdefault(f"chat-{s}", set()).add(engine)
    assert all(len(v) == 1 for v in placement.values()), placement  # sticky
    used = {next(iter(v)) for v in placement.values()}
    assert used == {0, 1}, f"8 sessions should hash onto both engines: {placement}"


def test_cache_aware_sends_a_shared_prefix_to_one_engine(engine_pair, router_factory):
    router = router_factory(inputs.router_spec("prefix"), engine_pair)
    # > 2 KV blocks (vLLM CPU block size 128 tokens) of shared prefix, so the prefix cache can hit.
    system = " ".join(f"rule {i}: answer with the layout, the replica count and the latency budget." for i in range(16))  # ~400 tokens
    hits_before = prefix_hits(engine_pair)
    served = [send(router, engine_pair, f"{system}\nQuestion {i}: which layout?") for i in range(5)]
    assert len(set(served)) == 1, f"cache_aware split one prefix over engines: {served}"
    hits_after = prefix_hits(engine_pair)
    engine = served[0]
    assert hits_after[engine] > hits_before[engine], (hits_before, hits_after)
    print(json.dumps({"served_by": served, "prefix_cache_hits_before": hits_before, "after": hits_after}))


# Two named client keys (issue 30); the engines check only inputs.API_KEY, which plays the engine key.
CLIENT_KEYS = {"default": "e2e-client-default-0123456789", "ci-2026q4": "e2e-client-ci-2026q4-abcdef"}


@pytest.mark.nginx
def test_named_client_keys_at_the_front_door_and_the_engine_key_behind_it(engine_pair, router_factory, tmp_path):
    """The router pod's client proxy (rendered nginx.conf + watch loop) in front of the real router
    and engines: either named key works through the front door; a client key sent straight to an
    engine is refused; the engine key works on the engine."""
    spec = dataclasses.replace(inputs.router_spec("round-robin"), client_key_names=tuple(sorted(CLIENT_KEYS)))
    router = router_factory(spec, engine_pair)
    proxy = start_client_proxy(tmp_path / "client-proxy", spec, upstream_port=router.port, keys=CLIENT_KEYS,
                               engine_key=inputs.API_KEY)
    body = {"model": inputs.SERVED, "prompt": "hi", "max_tokens": 1}
    try:
        for name, key in CLIENT_KEYS.items():
            status, raw = harness.http("POST", proxy.url + "/v1/completions", body=body, headers=harness.bearer(key))
            assert status == 200, (name, status, raw[:300])
        assert harness.http("POST", proxy.url + "/v1/completions", body=body)[0] == 401
        assert harness.http("POST", proxy.url + "/v1/completions", body=body, headers=harness.bearer("e2e-unknown-0123456789"))[0] == 401
        assert harness.http("POST", proxy.url + "/v1/completions", body=body, headers=harness.bearer(inputs.API_KEY))[0] == 401
        assert harness.http("GET", proxy.url + "/health")[0] == 200  # probes need no key
        for engine in engine_pair:
            for key in CLIENT_KEYS.values():
                assert harness.http("POST", engine.url + "/v1/completions", body=body, headers=harness.bearer(key))[0] == 401
            assert harness.http("POST", engine.url + "/v1/completions", body=body, headers=KEY)[0] == 200
    finally:
        proxy.stop()
