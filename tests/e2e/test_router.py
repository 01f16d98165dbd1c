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
from infra.render.router import CLIENT_EXACT_PATHS
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


# --------------------------------------------------------------------------- issue 35: one normal form


class StandInEngine:
    """An engine as the front door sees one: `/health` open, `/v1/...` only with the engine key
    (VLLM_API_KEY), every other route open, as vLLM's API server guards only `/v1` paths. Records
    every request's method and raw path."""

    def __init__(self, engine_key: str):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.seen: list[tuple[str, str]] = []
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                engine.seen.append((self.command, self.path))
                path = self.path.split("?")[0]
                if path.startswith("/v1") and self.headers.get("Authorization") != f"Bearer {engine_key}":
                    status, body = 401, b'{"error":"Unauthorized"}'
                elif path == "/v1/models":
                    status, body = 200, json.dumps({"object": "list", "data": [{"id": inputs.SERVED, "object": "model"}]}).encode()
                else:
                    status, body = 200, json.dumps({"engine_route": path}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _answer  # noqa: N815 - http.server's names

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _attack_front_door(proxy, targets) -> dict:
    """Every disguise of every target through the client proxy with a valid client key: each
    answered by the proxy itself (400/404, its own JSON), none forwarded. Returns counts."""
    from tests.path_attacks import family, raw_request

    auth = {"Authorization": f"Bearer {CLIENT_KEYS['default']}"}
    paths = family(targets)
    answers: dict[int, int] = {}
    for path in paths:
        for method in ("GET", "POST"):
            status, body = raw_request(proxy.port, method, path, auth)
            # The proxy's own answer: its JSON, or nginx's own 400 for bytes it never parses (%00).
            own = body.startswith(b'{"error"') or b"<center>nginx</center>" in body
            assert status in (400, 404) and own, (method, path, status, body[:200])
            answers[status] = answers.get(status, 0) + 1
    return {"paths": len(paths), "requests": 2 * len(paths), "answers": answers}


@pytest.mark.nginx
def test_path_family_reaches_no_engine_or_admin_route_through_the_real_router(stub_router_factory, router_env, procs, tmp_path):
    """Issue 35 with vllm-router 0.1.17 (real) between the client proxy (real nginx, rendered
    config) and two stand-in engines. (1) The finding, on the real router in regular mode (its
    transparent proxy, which the P/D router uses too): `/v1/..\\metrics`, `/v1/..\\sleep`,
    `/v1/models/%2e%2e/%2e%2e/metrics` sent straight to it reach the engine's `/metrics` and
    `/sleep`. (2) Through the client proxy, in front of that router and of the project's IGW router,
    no spelling of any admin or engine route reaches a router or an engine. (3) Client requests
    still work end to end."""
    from tests.path_attacks import ENGINE_ROUTES, ROUTER_ADMIN, raw_request

    engines = [StandInEngine(inputs.API_KEY) for _ in range(2)]
    spec = dataclasses.replace(inputs.router_spec("round-robin"), client_key_names=tuple(sorted(CLIENT_KEYS)))
    proxies = []
    try:
        igw = stub_router_factory(spec, engines)
        port = harness.free_port()
        regular = procs.start("router-regular-mode", [router_env.router, "--host", harness.LOOPBACK, "--port", str(port),
                                                      "--prometheus-port", str(harness.free_port()), "--policy", "round_robin",
                                                      "--worker-urls", *[e.url for e in engines]], port=port)
        harness.wait_http(regular, "/health", timeout=60, extra_tails=procs.tails)
        # (1) What the proxy defends against.
        client = {"Authorization": f"Bearer {CLIENT_KEYS['default']}"}
        for method, path, target in (("GET", "/v1/..\\metrics", "/metrics"), ("POST", "/v1/..\\sleep", "/sleep"),
                                     ("GET", "/v1/models/%2e%2e/%2e%2e/metrics", "/metrics")):
            for e in engines:
                e.seen.clear()
            status, _ = raw_request(regular.port, method, path, client, body=json.dumps({"model": inputs.SERVED}).encode())
            assert status == 200 and (method, target) in [s for e in engines for s in e.seen], (path, status)
        # (2) Through the front door: nothing gets past the proxy, whichever router is behind it.
        for name, router in (("igw", igw), ("regular", regular)):
            proxy = start_client_proxy(tmp_path / f"client-proxy-{name}", spec, upstream_port=router.port, keys=CLIENT_KEYS,
                                       engine_key=inputs.API_KEY)
            proxies.append(proxy)
            for e in engines:
                e.seen.clear()
            counts = _attack_front_door(proxy, ROUTER_ADMIN + ENGINE_ROUTES)
            print(json.dumps({"router": name, "front_door": counts}))
            after = {p for e in engines for _, p in e.seen}
            assert after <= {"/health"}, (name, sorted(after))  # only the routers' own health checks
            # (3) The client route still works through proxy, router and engine (engine key upstream).
            body_ok = {"model": inputs.SERVED, "prompt": "hi", "max_tokens": 1}
            status, raw = harness.http("POST", proxy.url + "/v1/completions", body=body_ok,
                                       headers=harness.bearer(CLIENT_KEYS["default"]))
            assert status == 200, (name, status, raw[:200])
            assert ("POST", "/v1/completions") in [s for e in engines for s in e.seen]
        procs.stop(regular)
    finally:
        for proxy in proxies:
            proxy.stop()
        for e in engines:
            e.close()


@pytest.mark.nginx
def test_path_family_through_real_engines_and_the_real_router(engine_pair, router_factory, tmp_path):
    """The same family in front of real CPU vLLM engines: every non-/v1 route the engine itself
    serves (read from its /openapi.json) is a target too; none is reached through the front door,
    and a completion still passes."""
    from tests.path_attacks import ENGINE_ROUTES, ROUTER_ADMIN

    spec = dataclasses.replace(inputs.router_spec("round-robin"), client_key_names=tuple(sorted(CLIENT_KEYS)))
    router = router_factory(spec, engine_pair)
    served = harness.get_json(engine_pair[0].url + "/openapi.json")["paths"]
    # The front door's own exact client paths (/health, /liveness, /readiness) are answered by the
    # router itself (its health, not the engine's): client routes by design, not targets.
    own = sorted(p for p in served if not p.startswith("/v1") and "{" not in p and p not in CLIENT_EXACT_PATHS)
    proxy = start_client_proxy(tmp_path / "client-proxy", spec, upstream_port=router.port, keys=CLIENT_KEYS,
                               engine_key=inputs.API_KEY)
    try:
        before = served_counts(engine_pair)
        counts = _attack_front_door(proxy, tuple(dict.fromkeys(ROUTER_ADMIN + ENGINE_ROUTES + tuple(own))))
        print(json.dumps({"engine_routes_from_openapi": own, "front_door": counts}))
        assert served_counts(engine_pair) == before  # no request reached an engine
        body = {"model": inputs.SERVED, "prompt": "hi", "max_tokens": 1}
        status, raw = harness.http("POST", proxy.url + "/v1/completions", body=body, headers=harness.bearer(CLIENT_KEYS["default"]))
        assert status == 200, (status, raw[:200])
    finally:
        proxy.stop()
