"""Issue 30, named keys: the router pod's client proxy checks every named client key and sends the
engine key upstream, and a changed key file is live after a graceful reload.

Runs the rendered nginx.conf with a real nginx (marker `nginx`; Debian `nginx-light`), started by
the rendered watch loop (infra/render/client_proxy.sh), in front of a stub standing in for the
loopback-bound vllm-router (tests/client_proxy_run.py).
"""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request

import pytest

from infra.config.client_keys import key_value_problems
from infra.render.router import RoutedModel, RouterSpec
from tests.client_proxy_run import StubUpstream, start_client_proxy
from tests.conftest import need_tool

pytestmark = need_tool("nginx", "apt-get install nginx-light")

KEYS = {"default": "Default-key.0123456789+abc", "ci-2026q4": "ci2026q4-key_0123456789~/=="}
NEW_KEY = "ci2027q1-key-0123456789abcdef"
ENGINE_KEY = "EngineKey0123456789abcdefghijklmnop"
SPEC = RouterSpec(models=(RoutedModel("m", "M"),), client_key_names=tuple(sorted(KEYS)))


def test_the_test_keys_are_keys_the_config_accepts():
    assert key_value_problems({**KEYS, "new": NEW_KEY, "engine": ENGINE_KEY}, {}) == []


@pytest.fixture
def upstream():
    stub = StubUpstream().start()
    yield stub
    stub.stop()


@pytest.fixture
def proxy(tmp_path, upstream):
    running = start_client_proxy(tmp_path, SPEC, upstream_port=upstream.port, keys=KEYS, engine_key=ENGINE_KEY)
    yield running
    running.stop()


def _call(url: str, path: str = "/v1/chat/completions", auth: str | None = None) -> int:
    headers = {"Authorization": auth} if auth is not None else {}
    req = urllib.request.Request(url + path, method="POST", data=b"{}", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


def test_every_named_key_is_accepted_and_upstream_sees_only_the_engine_key(proxy, upstream):
    for key in KEYS.values():
        assert _call(proxy.url, auth=f"Bearer {key}") == 200
    assert [auth for _, auth in upstream.seen] == [f"Bearer {ENGINE_KEY}"] * len(KEYS)


@pytest.mark.parametrize(
    "auth",
    [None, "", "Bearer", "Bearer ", "Bearer unknown-key-0123456789", f"Bearer {KEYS['default'].lower()}",
     f"Bearer {KEYS['default']}x", f"bearer {KEYS['default']}", f"Basic {KEYS['default']}", f"Bearer  {KEYS['default']}",
     f"Bearer {KEYS['default'].replace('.', 'X')}", f"Bearer {ENGINE_KEY}"],
    ids=["missing", "empty", "scheme-only", "scheme-space", "unknown", "other-case", "longer", "lowercase-scheme", "basic",
         "two-spaces", "dot-is-literal", "engine-key"],
)  # fmt: skip
def test_anything_but_a_named_key_is_refused_before_the_router(proxy, upstream, auth):
    assert _call(proxy.url, auth=auth) == 401
    assert upstream.seen == []


def test_probe_paths_need_no_key_and_forward_none(proxy, upstream):
    for path in ("/health", "/liveness", "/readiness"):
        assert _call(proxy.url, path, auth=f"Bearer {KEYS['default']}") == 200
        assert _call(proxy.url, path) == 200
    assert {auth for _, auth in upstream.seen} == {None}


def test_admin_routes_stay_closed_with_a_valid_key(proxy, upstream):
    for path in ("/workers", "/add_worker?url=http://evil:8000", "/flush_cache", "/v1/../workers"):
        assert _call(proxy.url, path, auth=f"Bearer {KEYS['default']}") in (400, 404), path
    assert upstream.seen == []


def _wait_status(url: str, auth: str, want: int, timeout: float = 15) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if _call(url, auth=auth) == want:
            return time.monotonic() - start
        time.sleep(0.1)
    pytest.fail(f"status {want} not reached within {timeout} s")


def test_a_changed_key_file_is_live_after_a_reload_and_open_streams_finish(proxy, upstream):
    upstream.chunks, upstream.gap_s = 8, 0.5  # a 4 s streamed answer
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=20)
    conn.request("POST", "/v1/completions", body=b"{}", headers={"Authorization": f"Bearer {KEYS['ci-2026q4']}"})
    resp = conn.getresponse()
    assert resp.status == 200
    first = resp.read(len(b"data: token\n\n"))
    assert first == b"data: token\n\n"
    # Rotation: add a new key and drop the old `ci-2026q4` in one Secret update.
    assert _call(proxy.url, auth=f"Bearer {NEW_KEY}") == 401
    proxy.write_keys({"default": KEYS["default"], "ci-2027q1": NEW_KEY}, ENGINE_KEY)
    _wait_status(proxy.url, f"Bearer {NEW_KEY}", 200)
    assert _call(proxy.url, auth=f"Bearer {KEYS['ci-2026q4']}") == 401
    assert _call(proxy.url, auth=f"Bearer {KEYS['default']}") == 200
    # The stream opened with the removed key still runs to its end on the old worker.
    rest = resp.read()
    assert first + rest == b"data: token\n\n" * upstream.chunks
    conn.close()
    assert "nginx reloaded" in proxy.log.read_text()
    assert {auth for _, auth in upstream.seen} == {f"Bearer {ENGINE_KEY}"}


def test_a_key_file_that_does_not_load_keeps_the_keys_loaded_before(proxy, upstream):
    (proxy.keys_dir / "client-keys.map").write_text('"~^Bearer unterminated ci-2026q4;\n')
    deadline = time.monotonic() + 10
    while "do not load" not in proxy.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "do not load" in proxy.log.read_text()
    assert proxy.proc.poll() is None
    assert _call(proxy.url, auth=f"Bearer {KEYS['default']}") == 200
    assert KEYS["default"] not in proxy.log.read_text()  # no key in the log


def test_sigterm_stops_nginx_gracefully(proxy):
    proxy.proc.terminate()
    assert proxy.proc.wait(timeout=15) == 0
