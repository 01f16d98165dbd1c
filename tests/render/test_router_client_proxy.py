"""Issues 30 and 35: the router's worker-management routes and the engines' non-/v1 routes are not
reachable from the client port, however the path is spelt.

Runs the rendered nginx.conf of the router pod's client proxy with a real nginx (marker `nginx`;
Debian `nginx-light`), started by the rendered watch loop, in front of a stub standing in for the
loopback-bound vllm-router (tests/client_proxy_run.py). Every path of the generated family
(tests/path_attacks.py: each admin or engine route disguised behind `/v1/` or a probe path with
backslashes, encoded separators and dots in either case, double encoding, dot and empty segments)
is sent byte for byte with a valid client key, with GET and POST: the proxy answers 400 or 404
itself and the stub sees nothing. The client routes still pass.
"""

from __future__ import annotations

import pytest

from infra.render.router import RoutedModel, RouterSpec
from tests.client_proxy_run import StubUpstream, start_client_proxy
from tests.conftest import need_tool
from tests.path_attacks import CLIENT_PATHS, ENGINE_ROUTES, ROUTER_ADMIN, family, raw_request

pytestmark = need_tool("nginx", "apt-get install nginx-light")

KEYS = {"default": "client-key-0123456789abcdef"}
ENGINE_KEY = "engine-key-0123456789abcdef"
SPEC = RouterSpec(models=(RoutedModel("m", "M"),), client_key_names=tuple(KEYS))
AUTH = {"Authorization": f"Bearer {KEYS['default']}"}
ATTACKS = family(ROUTER_ADMIN + ENGINE_ROUTES)


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    stub = StubUpstream().start()
    proxy = start_client_proxy(tmp_path_factory.mktemp("client-proxy"), SPEC, upstream_port=stub.port, keys=KEYS,
                               engine_key=ENGINE_KEY)  # fmt: skip
    yield proxy, stub
    proxy.stop()
    stub.stop()


def test_the_family_is_large_and_covers_every_route():
    assert len(ATTACKS) > 2000
    for route in ROUTER_ADMIN + ENGINE_ROUTES:
        assert sum(route.lstrip("/") in p for p in ATTACKS) >= 300, route


def test_no_disguised_admin_or_engine_route_reaches_the_router(front):
    proxy, stub = front
    stub.seen.clear()
    answers: dict[int, int] = {}
    for path in ATTACKS:
        for method in ("GET", "POST"):
            status, body = raw_request(proxy.port, method, path, AUTH)
            answers[status] = answers.get(status, 0) + 1
            assert status in (400, 404), (method, path, status, body[:200])
    assert stub.seen == [], stub.seen[:20]
    assert set(answers) <= {400, 404} and answers.get(400, 0) > len(ATTACKS)  # most are refused as not normal
    print({"requests": 2 * len(ATTACKS), "answers": answers})


def test_the_normal_form_is_judged_on_the_path_only_and_client_routes_pass(front):
    proxy, stub = front
    stub.seen.clear()
    for path in CLIENT_PATHS:
        method = "POST" if "completions" in path else "GET"
        assert raw_request(proxy.port, method, path, AUTH)[0] == 200, path
    assert [p for p, _ in stub.seen] == list(CLIENT_PATHS)


@pytest.mark.parametrize("path", ["/workers", "/metrics", "/v1/../workers", "/v1/..\\metrics", "/v1/%2e%2e/sleep",
                                  "/V1/%2E%2E%5Creset_prefix_cache", "/health/..%2fworkers", "//workers"])  # fmt: skip
def test_refused_without_a_key_too_and_with_the_proxys_own_answer(front, path):
    proxy, stub = front
    stub.seen.clear()
    for headers in ({}, AUTH):
        status, body = raw_request(proxy.port, "GET", path, headers)
        assert status in (400, 404) and body.startswith(b'{"error"'), (path, status, body[:100])
    assert stub.seen == []
