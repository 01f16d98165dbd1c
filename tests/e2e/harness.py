"""Process, HTTP and argument helpers of the real-engine e2e tests (no pytest in here).

Processes: every engine, router and Prometheus runs in its own session (process group) on a free
loopback port, logs to a file, and is stopped by killing its group (SIGTERM, then SIGKILL).
`Processes.tails()` gives the last lines of every log for assertion messages.

Arguments: the tests take the command lines from the project's renderers; the functions here
only adapt them to this machine, each change listed with its reason:
  - `adapt_engine_args`: the model path / host / port (loopback, free port) rewritten, plus
    the CPU-only additions in CPU_ENGINE_ADDITIONS. Nothing else is dropped: every flag the
    one-GPU layout renders parses and runs on the CPU build (tests/e2e/test_engine.py checks that
    against the real parser and that GPU_ONLY_FLAGS, which would be stripped, are not rendered).
  - `adapt_bench_args`: base URL, tokenizer path, result directory and (when the engines serve
    the production name) the served model name.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK = "127.0.0.1"
TAIL_LINES = 60

# Flags a one-process CPU engine cannot honour. None of them is rendered for a one-GPU layout
# (asserted in test_engine.py); if a layout used here ever renders one, adapt_engine_args strips
# it and says so rather than failing obscurely inside vLLM.
GPU_ONLY_FLAGS: dict[str, str] = {
    "--distributed-executor-backend": "mp = one process per GPU; a CPU engine here runs one worker",
    "--data-parallel-size": "DP ranks need one device each",
    "--all2all-backend": "DP+EP all-to-all between GPUs",
    "--disable-nccl-for-dp-synchronization": "NCCL/RCCL only exists on GPUs",
}

# Added for the CPU build, each for a reason; none changes what the tests check.
CPU_ENGINE_ADDITIONS: tuple[tuple[list[str], str], ...] = (
    (["--dtype", "float32"], "the tiny checkpoint is float32; CPU bf16 needs AVX512-BF16, not assumed here"),
    (["-O0"], "no torch.compile: ~50 s of inductor compilation per cold engine start on 2 cores, GPU-irrelevant"),
    (["--distributed-executor-backend", "uni"], "one worker in the engine process (saves a Python start per engine)"),
)
# Environment for CPU engines (on top of the project's engine_env values).
CPU_ENGINE_ENV: dict[str, str] = {
    # CPU analogue of --gpu-memory-utilization (which the CPU build accepts and ignores): KV GiB.
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
# The engine core in the API server's process (saves ~15 s per start on 2 cores). Off with
# INFRA_E2E_ENGINE_MULTIPROC=1 to run vLLM's production process layout (API server + engine core).
INPROC_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


# --- processes --------------------------------------------------------------------------------


@dataclass
class Proc:
    name: str
    cmd: list[str]
    log_path: Path
    popen: subprocess.Popen
    port: int | None = None
    meta: dict = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, n: int = TAIL_LINES) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError as err:
            return f"(no log: {err})"
        # pip's index-location warnings drown everything else.
        lines = [ln for ln in lines if not ln.startswith("WARNING: Location 'file://")]
        return "\n".join(lines[-n:])

    def stop(self, grace: float = 15.0) -> None:
        if self.popen.poll() is not None:
            return
        try:
            os.killpg(self.popen.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)  # also children that outlived the leader
        except ProcessLookupError:
            pass
        try:
            self.popen.wait(5)
        except subprocess.TimeoutExpired:
            pass


class Processes:
    """Every process a test session started, for teardown and for failure messages."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.procs: list[Proc] = []

    def start(self, name: str, cmd: Iterable, *, env: Mapping[str, str] | None = None, port: int | None = None,
              cwd: Path | None = None, meta: dict | None = None) -> Proc:
        cmd = [str(c) for c in cmd]
        log_path = self.log_dir / f"{name}.log"
        full_env = {**os.environ, **(env or {})}
        with open(log_path, "ab") as log:
            log.write(f"$ {' '.join(cmd)}\n".encode())
            log.flush()
            popen = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=full_env, cwd=cwd, start_new_session=True)
        proc = Proc(name, cmd, log_path, popen, port, meta or {})
        self.procs.append(proc)
        return proc

    def stop(self, proc: Proc) -> None:
        proc.stop()
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()

    def tails(self, n: int = TAIL_LINES) -> str:
        return "\n".join(f"===== {p.name} ({'running' if p.alive() else f'exited {p.popen.returncode}'}) "
                         f"{p.log_path}\n{p.tail(n)}" for p in self.procs)


class E2EFailure(AssertionError):
    pass


def wait_http(proc: Proc, path: str = "/health", *, timeout: float, headers: Mapping[str, str] | None = None,
              port: int | None = None, extra_tails=None) -> float:
    """Poll until GET path answers 200; seconds waited. Fails early when the process exits."""
    start = time.monotonic()
    url = f"http://{LOOPBACK}:{port or proc.port}{path}"
    while True:
        if not proc.alive():
            raise E2EFailure(f"{proc.name} exited ({proc.popen.returncode}) before {url} answered\n{proc.tail()}")
        try:
            status, _ = http("GET", url, headers=headers, timeout=2)
            if status == 200:
                return time.monotonic() - start
        except OSError:
            pass
        if time.monotonic() - start > timeout:
            raise E2EFailure(f"{url} not healthy after {timeout:.0f}s\n{proc.tail()}" + (f"\n{extra_tails()}" if extra_tails else ""))
        time.sleep(0.5)


# --- HTTP ---------------------------------------------------------------------------------------


def http(method: str, url: str, *, body: dict | None = None, headers: Mapping[str, str] | None = None,
         timeout: float = 60) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={**(headers or {})})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def get_json(url: str, **kw) -> dict:
    status, body = http("GET", url, **kw)
    if status != 200:
        raise E2EFailure(f"GET {url}: {status} {body[:500]!r}")
    return json.loads(body)


def bearer(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def parse_metrics(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Prometheus text format → name → [(labels, value)] (enough for counters and gauges)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, _, rest = line.rpartition(" ")
        if not name_labels:
            continue
        try:
            value = float(rest)
        except ValueError:
            continue
        labels: dict[str, str] = {}
        if "{" in name_labels:
            name, _, raw = name_labels.partition("{")
            raw = raw.rstrip("}")
            for part in _split_labels(raw):
                k, _, v = part.partition("=")
                labels[k.strip()] = v.strip().strip('"')
        else:
            name = name_labels
        out.setdefault(name.strip(), []).append((labels, value))
    return out


def _split_labels(raw: str) -> list[str]:
    parts, current, quoted = [], "", False
    for ch in raw:
        if ch == '"' and not current.endswith("\\"):
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return parts


def metric_names(text: str) -> set[str]:
    """Every series name in a /metrics page, plus the base names of histogram/counter suffixes."""
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            names.add(line.split("{", 1)[0].split(" ", 1)[0])
    return names


def counter_sum(metrics: dict, name: str, **match: str) -> float:
    return sum(v for labels, v in metrics.get(name, []) if all(labels.get(k) == want for k, want in match.items()))


# --- argument adaptation -------------------------------------------------------------------------


def _replace_value(args: list[str], flag: str, value: str) -> list[str]:
    out = list(args)
    for i, token in enumerate(out):
        if token == flag and i + 1 < len(out):
            out[i + 1] = value
            return out
        if token.startswith(flag + "="):
            out[i] = f"{flag}={value}"
            return out
    raise KeyError(f"{flag} not in {args}")


def _strip_flag(args: list[str], flag: str, takes_value: bool) -> list[str]:
    out, skip = [], False
    for token in args:
        if skip:
            skip = False
            continue
        if token == flag:
            skip = takes_value
            continue
        if token.startswith(flag + "="):
            continue
        out.append(token)
    return out


def adapt_engine_args(rendered: list[str], *, model_path: str, port: int) -> tuple[list[str], list[str]]:
    """The renderer's `vllm serve` args made runnable here; returns (args, notes on every change)."""
    notes: list[str] = []
    args = list(rendered)
    if args and not args[0].startswith("-"):
        if args[0] != model_path:
            notes.append(f"model {args[0]!r} -> {model_path!r} (the tiny checkpoint)")
        args[0] = model_path
    args = _replace_value(args, "--host", LOOPBACK)
    args = _replace_value(args, "--port", str(port))
    notes.append(f"--host {LOOPBACK} --port {port}: loopback only, a free port per engine")
    for flag, reason in GPU_ONLY_FLAGS.items():
        if flag in args:
            takes_value = flag not in ("--disable-nccl-for-dp-synchronization",)
            args = _strip_flag(args, flag, takes_value)
            notes.append(f"stripped {flag}: {reason}")
    for extra, reason in CPU_ENGINE_ADDITIONS:
        args += extra
        notes.append(f"added {' '.join(extra)}: {reason}")
    return args, notes


def literal_env(rendered_env: list[dict], **secrets: str) -> dict[str, str]:
    """A container's env list as a dict: literal values kept; secretKeyRef values filled from
    `secrets` (by variable name); HF_HOME dropped (the pod's /scratch or cache path)."""
    out: dict[str, str] = {}
    for entry in rendered_env:
        name = entry["name"]
        if "value" in entry:
            out[name] = entry["value"]
        elif name in secrets:
            out[name] = secrets[name]
    out.pop("HF_HOME", None)
    return out


def adapt_bench_args(rendered: list[str], *, base_url: str, tokenizer: str, result_dir: str,
                     served_model_name: str | None = None) -> list[str]:
    args = _replace_value(rendered, "--base-url", base_url)
    args = _replace_value(args, "--tokenizer", tokenizer)
    args = _replace_value(args, "--result-dir", result_dir)
    if served_model_name:
        args = _replace_value(args, "--model", served_model_name)
        args = _replace_value(args, "--served-model-name", served_model_name)
    return args


def flag_names(args: list[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in args if a.startswith("--")]


# --- a stand-in Kubernetes API for the registrar ------------------------------------------------


class FakeEndpointSlices:
    """The one Kubernetes API call the registrar makes, served from memory on a loopback port:
    `GET /apis/discovery.k8s.io/v1/namespaces/NS/endpointslices?labelSelector=kubernetes.io/service-name=S`.
    Requests without the bearer token get 401 (the registrar must send its service-account token).

    `set(service, urls, ready=...)` replaces a Service's endpoints, as the EndpointSlice controller
    does when pods become ready, stop being ready or go away."""

    TOKEN = "e2e-service-account-token"

    def __init__(self, namespace: str = "inference-engines"):
        import http.server
        import threading
        import urllib.parse

        self.namespace = namespace
        self.services: dict[str, list[tuple[str, int, bool]]] = {}
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # noqa: N802 - http.server's name
                url = urllib.parse.urlparse(self.path)
                prefix = f"/apis/discovery.k8s.io/v1/namespaces/{fake.namespace}/endpointslices"
                if self.headers.get("Authorization") != f"Bearer {fake.TOKEN}":
                    return self._send(401, {"kind": "Status", "code": 401})
                if url.path != prefix:
                    return self._send(404, {"kind": "Status", "code": 404})
                selector = urllib.parse.parse_qs(url.query).get("labelSelector", [""])[0]
                service = selector.removeprefix("kubernetes.io/service-name=")
                return self._send(200, {"kind": "EndpointSliceList", "items": fake.slices(service)})

            def _send(self, code, payload):
                raw = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = http.server.ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self.url = f"http://{LOOPBACK}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def set(self, service: str, urls: list[str], *, ready: bool = True) -> None:
        entries = []
        for u in urls:
            host, port = u.removeprefix("http://").rsplit(":", 1)
            entries.append((host, int(port), ready))
        self.services[service] = entries

    def slices(self, service: str) -> list[dict]:
        """One slice per endpoint (a Service's endpoints may span several slices, and here each
        engine listens on its own port, where in the cluster they all share port 8000)."""
        return [
            {"addressType": "IPv4", "metadata": {"labels": {"kubernetes.io/service-name": service}},
             "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
             "endpoints": [{"addresses": [host], "conditions": {"ready": ready}}]}
            for host, port, ready in self.services.get(service, [])
        ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def render_router_cli(rendered: list[str], *, port: int, metrics_port: int, api_key: str) -> list[str]:
    """The renderer's `vllm-router` args made runnable here: loopback host and free ports, and the
    Secret's key where the kubelet would expand `$(VLLM_API_KEY)`. Nothing else changes."""
    args = _replace_value(rendered, "--host", LOOPBACK)
    args = _replace_value(args, "--port", str(port))
    args = _replace_value(args, "--prometheus-host", LOOPBACK)
    args = _replace_value(args, "--prometheus-port", str(metrics_port))
    return [api_key if a == "$(VLLM_API_KEY)" else a for a in args]


def render_registrar_cli(rendered: list[str], *, router_url: str, api_server: str, token_file: str,
                         script: str) -> list[str]:
    """The renderer's registrar args made runnable here: the script's path in the repo, the router's
    loopback URL, the stand-in API server and a token file (in the pod: the service account's)."""
    args = [script if a == "/registrar/router_registrar.py" else a for a in rendered]
    args = _replace_value(args, "--router", router_url)
    return [*args, "--api-server", api_server, "--token-file", token_file]


def wait_workers(router_url: str, want: dict[str, str], *, timeout: float, tails=lambda: "") -> float:
    """Until the router's /workers lists exactly `want` (url → model id); seconds waited."""
    t0 = time.monotonic()
    seen: dict = {}
    while time.monotonic() - t0 < timeout:
        try:
            listing = get_json(router_url + "/workers")
            seen = {w["url"]: w.get("model_id") for w in listing.get("workers", [])}
            if seen == want:
                return time.monotonic() - t0
        except Exception:  # noqa: BLE001 - router still starting: retry until the deadline
            pass
        time.sleep(0.25)
    raise AssertionError(f"router workers {seen} != {want} after {timeout} s\n{tails()}")
