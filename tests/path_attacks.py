"""The family of request paths that reach a route other than the one they seem to (issue 35).

A path passes the client proxy's `/v1/` match and is then read again by vllm-router (Rust, WHATWG
URL rules: `\\` is `/`, `%2e%2e` is `..`) and by the engine (Starlette). Each generated path
disguises a target route (`/metrics`, `/sleep`, `/workers`, ...) behind `/v1/` or a probe path
with one of: a backslash, an encoded separator or dot in either case, double encoding, dot
segments, empty segments, a trailing `..`. Generated, not listed: every separator × every dot
form × every prefix, for every target, so a new route or a new spelling is covered at once.
Shared by tests/render/test_router_client_proxy.py (real nginx, a stub upstream) and
tests/e2e/test_router.py (real nginx, vllm-router 0.1.17 and CPU engines).
"""

from __future__ import annotations

import itertools

# vllm-router 0.1.17's worker-management and other non-client routes (its server.rs routes).
ROUTER_ADMIN = ("/workers", "/add_worker", "/remove_worker", "/flush_cache", "/list_workers", "/get_loads",
                "/get_model_info", "/get_server_info", "/scheduling/diagnostics", "/finish_session", "/health_generate")  # fmt: skip
# vLLM's API server (0.32/0.33) routes outside /v1 — not guarded by VLLM_API_KEY, which checks
# /v1 paths only: metrics, sleep mode, cache resets, RPC, elastic EP, pause, tokenizer, scoring,
# profiling, server info (some only with VLLM_SERVER_DEV_MODE; all listed). tests/e2e reads the
# real engine's /openapi.json and adds whatever else it serves.
ENGINE_ROUTES = ("/metrics", "/sleep", "/wake_up", "/is_sleeping", "/reset_prefix_cache", "/reset_mm_cache",
                 "/collective_rpc", "/server_info", "/scale_elastic_ep", "/is_scaling_elastic_ep", "/pause", "/resume",
                 "/is_paused", "/tokenize", "/detokenize", "/version", "/ping", "/load", "/invocations", "/pooling",
                 "/classify", "/score", "/rerank", "/start_profile", "/stop_profile", "/update_weights",
                 "/get_world_size", "/openapi.json", "/docs")  # fmt: skip

# Ways to write a separator after a dot-dot, and the dot-dot itself.
SEPARATORS = ("/", "\\", "%5c", "%5C", "%2f", "%2F", "%255c", "%252f", "\\\\", "/\\")
DOTDOTS = ("..", "%2e%2e", "%2E%2E", ".%2e", "%2e.", "%2E.", "%252e%252e", "..%00")
PREFIXES = ("/v1/", "/v1/models/", "/health/", "/v1/chat/completions/")


def disguises(target: str) -> list[str]:
    """Every generated spelling of `target` (e.g. `/metrics`) behind a client path."""
    rest = target.lstrip("/")
    out = []
    for prefix, dots, sep in itertools.product(PREFIXES, DOTDOTS, SEPARATORS):
        out.append(f"{prefix}{dots}{sep}{rest}")
    depth = "../" * 3
    out += [
        f"/v1/{depth}{rest}",  # more dot-dots than segments
        f"/v1/./../{rest}",
        f"/v1/.%2f..%2f{rest}",
        f"/v1/%2e/%2e%2e/{rest}",
        f"/v1//../{rest}",
        f"//{rest}",
        f"\\{rest}",
        f"/v1\\..\\{rest}",
        f"/%2e%2e/{rest}",
        f"/v1/{rest}/..",  # a trailing dot-dot
        f"/v1/{rest}/.",
        "/v1/..",
        f"/v1/..?next={rest}",
        f"/v1/%2e%2e%5c{rest}?x=1",
        f"/v1/%252e%252e%252f{rest}",
        f"/v1/..%5c..%5c{rest}",
        f"/{rest}%2f",
        f"/{rest}",  # not disguised at all
        # Under /v1 without any disguise: vllm-router's fallback forwards an unknown /v1 path to an
        # engine as is on some starts (found by fuzzing, issue 35); only exact client routes pass.
        f"/v1/{rest}",
        f"/v1/models/{rest}",
        f"/v1/chat/{rest}",
        # Encoded control characters, space, `#` and `?` the router drops or splits on when it
        # builds the engine's URL (`/v1/responses/.%0a.` reached the engine as `/v1/`).
        f"/v1/responses/.%0a./{rest}",
        f"/v1/responses/.%0d./{rest}",
        f"/v1/responses/.%09./{rest}",
        f"/v1/responses/..%01/{rest}",
        f"/v1/responses/..%1f/{rest}",
        f"/v1/responses/%23/{rest}",
        f"/v1/responses/%3f/{rest}",
        f"/v1/responses/%20../{rest}",
        f"/v1/responses/..%7f/{rest}",
    ]
    return list(dict.fromkeys(out))


def family(targets) -> list[str]:
    return list(dict.fromkeys([*(p for t in targets for p in disguises(t)), *CONTROL_CHARACTER_PATHS]))


# Paths the router fuzz found reaching an engine at another path (control characters decoded and
# dropped): refused on their own, whatever the target.
CONTROL_CHARACTER_PATHS = tuple(f"/v1/responses/{p}" for p in (
    ".%0a.", ".%0d.", ".%09.", *(f"..%{c:02x}" for c in range(0x20)), "..%7f", "%23/cancel", "%3f", "%20",
)) + ("/v1/responses/.%0a./cancel",)  # fmt: skip

# Client paths that must still pass (query strings may carry anything: only the path is judged).
CLIENT_PATHS = ("/v1/models", "/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses",
                "/v1/responses/resp_0a1B-2c_3", "/v1/responses/resp_0a1B-2c_3/cancel", "/health", "/liveness", "/readiness",
                "/v1/models?after=a%2Fb%2E%2E", "/v1/completions?x=..%5c..")  # fmt: skip


def raw_request(port: int, method: str, path: str, headers: dict[str, str] | None = None, timeout: float = 10,
                body: bytes = b"{}") -> tuple[int, bytes]:
    """One HTTP/1.1 request with `path` sent byte for byte (no client library re-encodes or
    normalises it): (status, body)."""
    import socket

    lines = [f"{method} {path} HTTP/1.1", "Host: front-door", "Connection: close",
             *(f"{k}: {v}" for k, v in (headers or {}).items())]  # fmt: skip
    payload = body if method in ("POST", "PUT") else b""
    if payload:
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    return status, body
