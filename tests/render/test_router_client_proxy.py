"""Issue 30: the router's worker-management routes are not reachable from the client port.

Runs the rendered nginx.conf of the router pod's client proxy with a real nginx (marker `nginx`;
Debian `nginx-light`) in front of a stub standing in for the loopback-bound vllm-router: the
client routes reach the stub, the admin routes get 404 from the proxy, also when disguised.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from infra.render.router import CLIENT_PORT, ROUTER_PORT, RoutedModel, RouterSpec, client_proxy_config
from tests.conftest import need_tool

pytestmark = need_tool("nginx", "apt-get install nginx-light")

ADMIN = ["/workers", "/add_worker?url=http://evil:8000", "/remove_worker?url=x", "/flush_cache", "/list_workers",
         "/get_loads", "/get_model_info", "/scheduling/diagnostics", "/finish_session", "/workers/http%3A%2F%2Fx",
         "/v1/../workers", "/v1/%2e%2e/workers", "//workers", "/v1/..%2fworkers", "/health/../workers"]  # fmt: skip
CLIENT = ["/v1/models", "/v1/chat/completions", "/health", "/liveness", "/readiness"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def proxy(tmp_path, httpserver):
    """nginx running the rendered config, its upstream pointed at the stub, its port a free one."""
    seen: list[str] = []

    def record(request):
        from werkzeug import Response

        seen.append(request.full_path.rstrip("?"))
        return Response("ok", status=200)

    httpserver.expect_request(__import__("re").compile(".*")).respond_with_handler(record)
    port = _free_port()
    conf = client_proxy_config(RouterSpec(models=(RoutedModel("m", "M"),)))
    conf = conf.replace(f"listen {CLIENT_PORT};", f"listen 127.0.0.1:{port};")
    conf = conf.replace(f"http://127.0.0.1:{ROUTER_PORT}", f"http://127.0.0.1:{httpserver.port}")
    conf = conf.replace("/tmp/", f"{tmp_path}/")
    (tmp_path / "nginx.conf").write_text(conf)
    proc = subprocess.Popen([shutil.which("nginx"), "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-g", "daemon off;"],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"nginx exited: {proc.stderr.read()}")
            time.sleep(0.05)
    yield port, seen
    proc.terminate()
    proc.wait(timeout=10)


def _status(port: int, path: str, method: str = "GET") -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=b"{}" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


def test_admin_routes_never_reach_the_router(proxy):
    port, seen = proxy
    for path in ADMIN:
        for method in ("GET", "POST", "DELETE"):
            assert _status(port, path, method) in (400, 404), (method, path)
    assert not any(p.split("?")[0].rstrip("/").endswith(("workers", "add_worker", "remove_worker", "flush_cache", "list_workers",
                                                        "get_loads", "get_model_info", "diagnostics", "finish_session"))
                   for p in seen), seen  # fmt: skip


def test_client_routes_pass_through(proxy):
    port, seen = proxy
    for path in CLIENT:
        assert _status(port, path, "POST" if "completions" in path else "GET") == 200, path
    assert seen == CLIENT
