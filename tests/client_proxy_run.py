"""Run the router pod's client proxy outside Kubernetes: the rendered nginx.conf, started by the
rendered watch loop (infra/render/client_proxy.sh), its key files written where the projected
Secret volume would put them. Used by tests/render/test_client_proxy_keys.py (a stub upstream)
and tests/e2e/test_router.py (the real router and engines).

Only what the pod fixes and a test cannot use is replaced: the listen port, the upstream port,
/tmp, and the keys' directory.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from infra.render.client_proxy_keys import (
    CLIENT_KEYS_FILE,
    ENGINE_KEY_FILE,
    KEYS_DIR,
    WATCH_SCRIPT,
    client_keys_map,
    engine_key_map,
)
from infra.render.router import CLIENT_PORT, ROUTER_PORT, RouterSpec, client_proxy_config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ClientProxy:
    port: int
    proc: subprocess.Popen
    keys_dir: Path
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_keys(self, keys: dict[str, str], engine_key: str) -> None:
        """What the kubelet does when a Secret changes: the files change in place (atomically)."""
        for name, text in ((CLIENT_KEYS_FILE, client_keys_map(keys)), (ENGINE_KEY_FILE, engine_key_map(engine_key))):
            tmp = self.keys_dir / f".{name}.tmp"
            tmp.write_text(text)
            os.replace(tmp, self.keys_dir / name)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_client_proxy(tmp: Path, spec: RouterSpec, *, upstream_port: int, keys: dict[str, str], engine_key: str,
                       watch_seconds: float = 0.2) -> ClientProxy:
    """The watch loop running nginx with the rendered config, on a free port, upstream `upstream_port`."""
    tmp.mkdir(parents=True, exist_ok=True)
    keys_dir = tmp / "keys"
    keys_dir.mkdir(exist_ok=True)
    port = free_port()
    conf = client_proxy_config(spec)
    conf = conf.replace(f"listen {CLIENT_PORT};", f"listen 127.0.0.1:{port};")
    conf = conf.replace(f"http://127.0.0.1:{ROUTER_PORT}", f"http://127.0.0.1:{upstream_port}")
    conf = conf.replace("/tmp/", f"{tmp}/").replace(KEYS_DIR, str(keys_dir))
    (tmp / "nginx.conf").write_text(conf)
    proxy = ClientProxy(port=port, proc=None, keys_dir=keys_dir, log=tmp / "client-proxy.log")  # type: ignore[arg-type]
    proxy.write_keys(keys, engine_key)
    env = {**os.environ, "CLIENT_PROXY_CONF": str(tmp / "nginx.conf"), "CLIENT_PROXY_KEYS": str(keys_dir),
           "CLIENT_PROXY_WATCH_SECONDS": str(watch_seconds), "CLIENT_PROXY_PREFIX": str(tmp),
           "PATH": f"{Path(shutil.which('nginx') or '/usr/sbin/nginx').parent}:{os.environ.get('PATH', '')}"}
    log = proxy.log.open("w")
    proxy.proc = subprocess.Popen(["sh", str(WATCH_SCRIPT)], env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proxy
        except OSError:
            if proxy.proc.poll() is not None:
                break
            time.sleep(0.05)
    proxy.stop()
    raise RuntimeError(f"client proxy did not start: {proxy.log.read_text()[-2000:]}")


@dataclass
class StubUpstream:
    """Stands in for the loopback-bound router: records each request's path and Authorization;
    `/v1/completions` answers in `chunks` pieces `gap_s` apart (a streamed completion; the proxy
    passes only the exact client routes, so the stream rides on one of them)."""

    seen: list[tuple[str, str | None]] = field(default_factory=list)
    chunks: int = 6
    gap_s: float = 0.5
    server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.server_address[1]

    def start(self) -> StubUpstream:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                stub.seen.append((self.path, self.headers.get("Authorization")))
                if self.path == "/v1/completions":
                    piece = b"data: token\n\n"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(piece) * stub.chunks))
                    self.end_headers()
                    for _ in range(stub.chunks):
                        self.wfile.write(piece)
                        self.wfile.flush()
                        time.sleep(stub.gap_s)
                    return
                body = b'{"ok":true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = _answer  # noqa: N815 - http.server's names

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
