"""Kubernetes manifests of the one request router in front of every model of an environment.

Router kinds (stack config `router.kind`):
  service       no router: clients use each model's ClusterIP Service; kube-proxy spreads
                connections (not requests) over its replicas.
  session       vLLM router `--policy consistent_hash`: requests carrying the same `x-session-id`
                header go to the same replica, whose prefix cache holds the conversation.
  prefix        `--policy cache_aware`: requests sharing a prompt prefix go together (the router
                keeps an approximate radix tree per worker), load-balanced past a threshold.
  round-robin   `--policy round_robin`: per-request balancing (better than per-connection).

The router is the vLLM project's Rust router, `vllm-router==0.1.17` (PyPI; vllm-project/router),
the same build tests/e2e runs against real engines. One Deployment serves all models in IGW mode
(`--enable-igw`): it keeps one worker pool per model id and routes each request by its `model`
field. Its workers are registered by the registrar sidecar (`router_registrar.py`, shipped in a
ConfigMap; why a sidecar: its docstring) with the served model name as the explicit `model_id`.

Image: no `vllm/vllm-router:v0.1.17` tag is confirmed on Docker Hub (the release script pushes
`v<version>` tags, but none could be checked), so the default is the pinned Python base image
with an initContainer that installs a hash-locked wheel set (`images/vllm-router/requirements.txt`:
vllm-router 0.1.17's manylinux x86_64 wheel and its Python dependencies, `pip install --no-deps
--require-hashes`) into an emptyDir. `router.image` names an image built from
`images/vllm-router/Dockerfile` (the same lock) instead: no install at pod start, no PyPI access.

Authentication (issue 30: named keys): the client proxy below checks `Authorization: Bearer <key>`
against every named client key and sends the internal engine key upstream in its place
(infra/render/client_proxy_keys.py: the keys come as files from Secrets, and a watch loop reloads
nginx when they change, so keys rotate with no restart and no 401 window). vllm-router 0.1.17
passes the header through to the engine, which checks the engine key (`VLLM_API_KEY`); a client
key sent to an engine directly is refused (verified in tests/e2e). The router itself needs no key:
its health checks hit the engines' unauthenticated `/health` and the registrar's `POST /workers`
names the model, so no `--api-key` (it would put the key on the command line, which the policy
pack refuses).

Admin routes closed (issue 30): 0.1.17 serves its worker-management routes (`/workers`,
`/add_worker`, `/remove_worker`, `/flush_cache`, `/list_workers`, `/get_loads`, ...) without
authentication on the client port, and has no flag to bind them elsewhere (its `--help`:
one `--host`/`--port`). So the router binds to 127.0.0.1 only — the registrar sidecar, in the same
pod, is its one admin client — and a `client-proxy` sidecar (nginx, unprivileged) is the pod's only
client port: it forwards the OpenAI routes clients use (`CLIENT_ROUTES`, each exactly) and the
probe paths and answers 404 to everything else. It first refuses (400) any path not in one normal
form (issue 35: `NOT_NORMAL_FORM`), because the router and the engines read the path again by other
rules (`/v1/..\\metrics` reached an engine's `/metrics`). A
NetworkPolicy (infra/render/network_policy.py) could not do this: admin and client routes share
one port.
Exposure: internal ClusterIP `router` always; `public` adds one DigitalOcean Load Balancer
Service (TLS with a DO certificate id, source allow-list, health-check tuning).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from infra.catalog import versions
from infra.render import scan_exceptions
from infra.render.client_proxy_keys import (
    CLIENT_KEYS_FILE,
    CLIENT_KEYS_SECRET,
    ENGINE_KEY_FILE,
    ENGINE_KEY_SECRET,
    KEYS_DIR,
    WATCH_SCRIPT,
    WATCH_SCRIPT_NAME,
    WATCH_SECONDS,
    keys_volume,
)
from infra.render.model_service import (
    ANNOTATION_API_KEY_REQUIRED,
    ENGINES_NAMESPACE,
    NAMESPACE,
    PART_OF,
    selector_labels,
)
from infra.render.pod_security import restricted_container, restricted_pod
from infra.render.scan_exceptions import accept
from infra.render.timeouts import request_timeout_seconds

ROUTER_PORT = 8001  # loopback only: the registrar and the client proxy in the same pod
CLIENT_PORT = 8000  # the client proxy: the pod's one client-facing port
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"  # where the registrar reads it
# What clients may call through the proxy: the OpenAI API routes the engines serve, each exactly,
# and the probe paths. Everything else (the admin routes, current and future, and any other /v1
# path) gets 404 from the proxy itself: vllm-router's fallback route forwards an unknown path to an
# engine at the same path on some starts (which of its two internal routers takes the fallback is
# chosen when the process starts), so a /v1 prefix match reached /v1/load_lora_adapter, /v1/sleep
# ... on the engine (found by fuzzing the rendered proxy and the real router, issue 35).
CLIENT_ROUTES = ("/v1/models", "/v1/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/responses")
# A stored response by id (`GET /v1/responses/{id}`, `POST /v1/responses/{id}/cancel`): the id's
# characters are restricted, so nothing in it can be decoded into a separator or dot by a later reader.
CLIENT_ROUTE_PATTERNS = (r"^/v1/responses/[A-Za-z0-9_-]{1,128}(/cancel)?$",)
CLIENT_EXACT_PATHS = ("/health", "/liveness", "/readiness")
# A request path the client proxy refuses with 400 before matching (PCRE, case-insensitive, on the
# raw path before `?`): a backslash (vllm-router turns it into `/`: `/v1/..\\metrics` reached the
# engine's `/metrics`), an encoded `.`, `/`, `\\` or `%` (double encoding), an encoded control
# character, space, `#` or `?` (the router drops decoded tabs and newlines when it builds the engine's
# URL: `/v1/responses/.%0a.` reached the engine as `/v1/`), an empty segment, and a `.` or `..`
# segment. nginx would normalise some of these itself, but the router and the engines parse the path
# again their own way (WHATWG URL rules read `%2e%2e` as `..`); one normal form means no second
# reading can differ from the first.
NOT_NORMAL_FORM = r"^[^?]*(\x5c|%(2e|2f|5c|25|[01][0-9a-f]|7f|20|23|3f)|//|/\.\.?(/|\?|$))"
METRICS_PORT = 29000  # vllm-router's --prometheus-port default
ROUTER_NAME = "router"
ROUTER_KINDS = ("service", "session", "prefix", "round-robin")
POLICY = {"session": "consistent_hash", "prefix": "cache_aware", "round-robin": "round_robin"}
POLICY_WHY = {
    "service": "no router: kube-proxy spreads connections over each model's replicas",
    "session": "consistent hash of the x-session-id header: a conversation stays on the replica holding its prefix cache",
    "prefix": "cache-aware: requests sharing a prompt prefix go to the replica that cached it, load-balanced past a threshold",
    "round-robin": "round robin per request: even load when prompts share little",
}
# consistent_hash reads the session from these headers, in order (vllm-project/router 0.1.17
# src/policies/hash_key.rs); no flag renames them, so `router.session_header` must be the first.
SESSION_HEADER = "x-session-id"
REGISTRAR_FILE = Path(__file__).with_name("router_registrar.py")
REGISTRAR_INTERVAL_SECONDS = 5
LOCK_FILE = Path(__file__).resolve().parents[2] / "images" / "vllm-router" / "requirements.txt"
INSTALL_DIR = "/opt/vllm-router"

DO_LB = "service.beta.kubernetes.io/do-loadbalancer-"
# DO's HTTP load balancer closes idle connections after 60 s by default; a long non-streamed
# completion can be silent for minutes. 600 s is the maximum DO allows.
LB_IDLE_TIMEOUT_SECONDS = 600
REQUEST_TIMEOUT_MIN_SECONDS = 300
REQUEST_TIMEOUT_MAX_SECONDS = 3600


@dataclass(frozen=True)
class RoutedModel:
    """One model behind the router.

    name: the platform model name (engine labels, its ClusterIP Service's name).
    served_model_name: what clients put in `model` (`vllm serve --served-model-name`); the worker's
        model id in the router.
    """

    name: str
    served_model_name: str

    @property
    def engine_service(self) -> str:
        return self.name  # infra.render.model_service.service_name


@dataclass(frozen=True)
class RouterSpec:
    """The environment's router.

    models: every model it serves (the registrar registers their ready engines).
    kind: service | session | prefix | round-robin.
    replicas: router pods (two or more survive a node drain; a PDB keeps one up).
    public: add a DO Load Balancer; requires client keys.
    tls_certificate_id: DO certificate id for HTTPS on 443 (HTTP on 80 then redirects).
    allowed_source_cidrs: client CIDRs allowed through the load balancer (empty = everyone).
    client_key_names: the named client keys the client proxy accepts (names only: the keys are in
        Secret `router-client-keys`, the engine key it sends upstream in `router-upstream-key`);
        empty: no check (only tests render that).
    image: an image with `vllm-router` on PATH (images/vllm-router/Dockerfile); None: the pinned
        Python base image plus the hash-locked install in an initContainer.
    request_timeout_s: `--request-timeout-secs`, sized from the slowest model's SLO and output.
    node_selector: where the router pods run (the system pool).
    """

    models: tuple[RoutedModel, ...]
    kind: str = "session"
    replicas: int = 2
    namespace: str = NAMESPACE
    engines_namespace: str = ENGINES_NAMESPACE  # where the engine Services are: the registrar reads their EndpointSlices there
    public: bool = False
    tls_certificate_id: str | None = None
    allowed_source_cidrs: tuple[str, ...] = ()
    client_key_names: tuple[str, ...] = ()
    image: str | None = None
    request_timeout_s: int = 1800
    node_selector: dict[str, str] = field(default_factory=dict)

    @property
    def uses_router(self) -> bool:
        return self.kind != "service"

    @property
    def checks_keys(self) -> bool:
        return bool(self.client_key_names)

    @property
    def name(self) -> str:
        return ROUTER_NAME

    @property
    def policy(self) -> str | None:
        return POLICY.get(self.kind)

    @property
    def internal_url(self) -> str:
        return f"http://{self.name}.{self.namespace}.svc.cluster.local"


def router_timeout_seconds(slowest: list[tuple[float, float, int]]) -> int:
    """`--request-timeout-secs` from (ttft_p90_ms, tpot_p90_ms, mean output tokens) per model: the
    longest model's timeout (infra/render/timeouts.py) within [300 s, 3600 s]."""
    need = [request_timeout_seconds(ttft, tpot, out) for ttft, tpot, out in slowest] or [0]
    return int(min(REQUEST_TIMEOUT_MAX_SECONDS, max(REQUEST_TIMEOUT_MIN_SECONDS, max(need))))


def router_selector() -> dict[str, str]:
    return {"app.kubernetes.io/name": "router", "app.kubernetes.io/part-of": PART_OF}


def router_labels(spec: RouterSpec) -> dict[str, str]:
    return {
        **router_selector(),
        "app.kubernetes.io/managed-by": "pulumi",
        "app.kubernetes.io/component": "router",
        "app.kubernetes.io/instance": spec.name,
    }


def _meta(name: str, spec: RouterSpec, annotations: dict | None = None) -> dict:
    meta = {"name": name, "namespace": spec.namespace, "labels": router_labels(spec)}
    if annotations:
        meta["annotations"] = annotations
    return meta


def router_args(spec: RouterSpec) -> list[str]:
    """`vllm-router` arguments (every flag is checked against the 0.1.17 CLI in tests)."""
    args = [
        "--host", "127.0.0.1",  # admin routes unauthenticated: only the pod itself reaches the router
        "--port", str(ROUTER_PORT),
        "--enable-igw",
        "--policy", POLICY[spec.kind],
        "--prometheus-host", "0.0.0.0",
        "--prometheus-port", str(METRICS_PORT),
        "--request-timeout-secs", str(spec.request_timeout_s),
        # vLLM's /health answers without a key; 10 s instead of 60 s drops a dead engine quickly
        # (the registrar also removes it as soon as its EndpointSlice marks it not ready).
        "--health-check-endpoint", "/health",
        "--health-check-interval-secs", "10",
        "--health-failure-threshold", "3",
        "--log-level", "info",
    ]  # fmt: skip
    return args


def loopback_probe(path: str) -> list[str]:
    """An exec probe command asking the loopback-bound router for `path` with the image's Python
    (the default image and images/vllm-router/Dockerfile both are python:3.12-slim-bookworm);
    a non-2xx answer or no answer exits non-zero."""
    script = f"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{ROUTER_PORT}{path}', timeout=4)"
    return ["python", "-c", script]


def registrar_args(spec: RouterSpec) -> list[str]:
    args = [
        "/registrar/router_registrar.py",
        "--router", f"http://127.0.0.1:{ROUTER_PORT}",
        "--namespace", spec.engines_namespace,
        "--interval", str(REGISTRAR_INTERVAL_SECONDS),
    ]  # fmt: skip
    for m in sorted(spec.models, key=lambda m: m.served_model_name):
        args += ["--model", f"{m.served_model_name}={m.engine_service}"]
    return args


def render_registrar_configmap(spec: RouterSpec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(f"{spec.name}-registrar", spec),
        "data": {"router_registrar.py": REGISTRAR_FILE.read_text()},
    }


def render_install_configmap(spec: RouterSpec) -> dict:
    """The hash-locked wheel set the initContainer installs (default image only)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(f"{spec.name}-install", spec),
        "data": {"requirements.txt": LOCK_FILE.read_text()},
    }


def render_service_account(spec: RouterSpec) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(spec.name, spec)}


def render_role(spec: RouterSpec) -> dict:
    """Read-only, namespaced: the registrar lists EndpointSlices of the engine Services, nothing
    else; so the Role and its binding live in the engines' namespace, bound to the router's
    ServiceAccount in its own."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {**_meta(spec.name, spec), "namespace": spec.engines_namespace},
        "rules": [{"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]}],
    }


def render_role_binding(spec: RouterSpec) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {**_meta(spec.name, spec), "namespace": spec.engines_namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": spec.name},
        "subjects": [{"kind": "ServiceAccount", "name": spec.name, "namespace": spec.namespace}],
    }


_SECURITY = restricted_container()  # every router container: nobody, read-only root, /tmp an emptyDir


def _containers(spec: RouterSpec) -> tuple[list[dict], list[dict], list[dict]]:
    """(initContainers, containers, volumes) of a router pod."""
    env: list[dict] = []
    volumes = [
        {"name": "registrar", "configMap": {"name": f"{spec.name}-registrar"}},
        {"name": "client-proxy", "configMap": {"name": client_proxy_configmap_name(spec)}},
        {"name": "client-proxy-tmp", "emptyDir": {"sizeLimit": "256Mi"}},
        *([keys_volume()] if spec.checks_keys else []),
        {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
        # The service account token, mounted into the registrar only (the pod mounts none): what
        # the kubelet's automount would put in every container, as a projected volume.
        {"name": "registrar-token", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]}},
    ]  # fmt: skip
    tmp = {"name": "tmp", "mountPath": "/tmp"}
    init = []
    if spec.image:
        image, command = spec.image, ["vllm-router"]
    else:
        image, command = versions.ROUTER_BASE_IMAGE, [f"{INSTALL_DIR}/bin/vllm-router"]
        env.append({"name": "PYTHONPATH", "value": INSTALL_DIR})
        volumes += [
            {"name": "vllm-router", "emptyDir": {"sizeLimit": "512Mi"}},
            {"name": "install", "configMap": {"name": f"{spec.name}-install"}},
        ]
        init.append(
            {
                "name": "install-vllm-router",
                "image": versions.ROUTER_BASE_IMAGE,
                "command": ["python", "-m", "pip", "install", "--no-deps", "--require-hashes", "--only-binary=:all:",
                            "--no-cache-dir", "--disable-pip-version-check", "--target", INSTALL_DIR,
                            "-r", "/install/requirements.txt"],
                "env": [{"name": "HOME", "value": "/tmp"}],
                "volumeMounts": [{"name": "vllm-router", "mountPath": INSTALL_DIR},
                                 {"name": "install", "mountPath": "/install", "readOnly": True}, tmp],
                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
                "securityContext": _SECURITY,
            }
        )
    mounts = [tmp] + ([] if spec.image else [{"name": "vllm-router", "mountPath": INSTALL_DIR, "readOnly": True}])
    router = {
        "name": "router",
        "image": image,
        "command": command,
        "args": router_args(spec),
        "env": env,
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
        # Unauthenticated in 0.1.17 (tests/e2e/test_router.py). /health answers as soon as the
        # server is up, also with no workers: an environment scaled to zero still has a router.
        # The router listens on loopback, which a kubelet probe (sent to the pod IP from the node)
        # cannot reach, and a probe's named port is looked up in the probed container only (the
        # client proxy's `http` is not the router's: issue 35). So the router's own probes run in
        # the container: the image's Python asks 127.0.0.1 (infra/invariants/kubelet.py checks
        # the program is in the pinned image). The client proxy's readiness checks the path clients take.
        "readinessProbe": {"exec": {"command": loopback_probe("/readiness")}, "timeoutSeconds": 5, "periodSeconds": 10,
                           "failureThreshold": 3},
        "livenessProbe": {"exec": {"command": loopback_probe("/liveness")}, "timeoutSeconds": 5, "periodSeconds": 15,
                          "failureThreshold": 4, "initialDelaySeconds": 30},
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", "10"]}}},
        "volumeMounts": mounts,
        "securityContext": _SECURITY,
    }
    registrar = {
        "name": "registrar",
        "image": versions.ROUTER_BASE_IMAGE,
        "command": ["python"],
        "args": registrar_args(spec),
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
        "volumeMounts": [{"name": "registrar", "mountPath": "/registrar", "readOnly": True}, tmp,
                         {"name": "registrar-token", "mountPath": SERVICE_ACCOUNT_DIR, "readOnly": True}],
        "resources": {"requests": {"cpu": "20m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "securityContext": _SECURITY,
    }
    return init, [router, registrar, client_proxy_container(spec)], volumes


def client_proxy_container(spec: RouterSpec) -> dict:
    """The pod's client port: nginx forwarding the client routes to the loopback-bound router; with
    client keys, run by the watch loop that reloads it when the mounted keys change."""
    mounts = [
        {"name": "client-proxy", "mountPath": "/etc/client-proxy", "readOnly": True},
        {"name": "client-proxy-tmp", "mountPath": "/tmp"},
    ]
    if spec.checks_keys:
        # Not the image's entrypoint: its scripts rewrite /etc/nginx, which is read-only here.
        command = ["sh", f"/etc/client-proxy/{WATCH_SCRIPT_NAME}"]
        env = [{"name": "CLIENT_PROXY_WATCH_SECONDS", "value": str(WATCH_SECONDS)}]
        mounts.append({"name": "client-proxy-keys", "mountPath": KEYS_DIR, "readOnly": True})
    else:
        command, env = ["nginx", "-c", "/etc/client-proxy/nginx.conf", "-g", "daemon off;"], []
    return {
        "name": "client-proxy",
        "image": versions.CLIENT_PROXY_IMAGE,
        "command": command,
        "env": env,
        "ports": [{"name": "http", "containerPort": CLIENT_PORT, "protocol": "TCP"}],
        # Ready when a client's path works end to end (nginx → the router's /readiness); alive
        # while nginx accepts connections (a router problem must not restart the proxy).
        "readinessProbe": {"httpGet": {"path": "/readiness", "port": "http"}, "timeoutSeconds": 5, "periodSeconds": 5,
                           "failureThreshold": 3},
        "livenessProbe": {"tcpSocket": {"port": "http"}, "timeoutSeconds": 5, "periodSeconds": 15, "failureThreshold": 4},
        "volumeMounts": mounts,
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": _SECURITY,  # any uid: it writes only /tmp (pid, temp files)
    }


def client_proxy_configmap_name(spec: RouterSpec) -> str:
    return f"{spec.name}-client-proxy"


def client_proxy_config(spec: RouterSpec) -> str:
    """nginx.conf of the client proxy. Streaming: no buffering either way, so server-sent events
    reach the client token by token; timeouts follow the router's request timeout.

    With client keys: the API routes answer 401 unless `Authorization` is `Bearer <a named key>`
    (the map from `client-keys.map`), and upstream the header is the engine key's; the probe paths
    stay open (the kubelet and the load balancer send no key) and forward no `Authorization` at all."""
    timeout = f"{spec.request_timeout_s + 30}s"
    upstream = f"http://127.0.0.1:{ROUTER_PORT}"
    # proxy_pass with a URI part sends the *normalised* path (`/v1/../workers` cannot reach
    # `/workers`: nginx resolves it before matching and forwards what it matched).
    options = 'proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off; proxy_request_buffering off;'
    api_auth = probe_auth = keys = ""
    if spec.checks_keys:
        api_auth = (
            'if ($client_key_name = "") { return 401 \'{"error":"Unauthorized"}\'; } '
            "proxy_set_header Authorization $engine_authorization; "
        )
        probe_auth = 'proxy_set_header Authorization ""; '
        keys = (
            "  # The named client keys and the engine key, from Secrets (infra/render/client_proxy_keys.py).\n"
            f'  map $http_authorization $client_key_name {{ default ""; include {KEYS_DIR}/{CLIENT_KEYS_FILE}; }}\n'
            f'  map "" $engine_authorization {{ include {KEYS_DIR}/{ENGINE_KEY_FILE}; }}'
        )
    # Exact client routes: proxy_pass without a URI part forwards the request's own (normal-form) path.
    locations = [f"    location = {p} {{ {api_auth}proxy_pass {upstream}; {options} }}" for p in CLIENT_ROUTES]
    locations += [f"    location ~ \"{p}\" {{ {api_auth}proxy_pass {upstream}; {options} }}" for p in CLIENT_ROUTE_PATTERNS]
    locations += [f"    location = {p} {{ {probe_auth}proxy_pass {upstream}{p}; {options} }}" for p in CLIENT_EXACT_PATHS]
    return "\n".join(
        [
            "# Rendered by infra/render/router.py: only the client routes reach the router (issue 30).",
            "worker_processes 2;",
            "pid /tmp/nginx.pid;",
            "error_log stderr warn;",
            "events { worker_connections 4096; }",
            "http {",
            "  access_log off;",
            "  client_body_temp_path /tmp/body; proxy_temp_path /tmp/proxy;",
            "  fastcgi_temp_path /tmp/fastcgi; uwsgi_temp_path /tmp/uwsgi; scgi_temp_path /tmp/scgi;",
            "  server_tokens off;",
            "  client_max_body_size 64m;",
            f"  proxy_read_timeout {timeout}; proxy_send_timeout {timeout};",
            "  default_type application/json;",
            *([keys] if keys else []),
            "  server {",
            f"    listen {CLIENT_PORT};",
            "    # One normal form of paths (issue 35): refused before any location matches, on the",
            "    # request's own bytes, so what passes is the path the router and the engines see.",
            f"    if ($request_uri ~* \"{NOT_NORMAL_FORM}\") {{ return 400 '{{\"error\":\"path not in normal form\"}}'; }}",
            *locations,
            "    location / { return 404 '{\"error\":\"not found\"}'; }",
            "  }",
            "}",
            "",
        ]
    )


def render_client_proxy_configmap(spec: RouterSpec) -> dict:
    """nginx.conf and the watch loop (no key: those are in Secrets)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(client_proxy_configmap_name(spec), spec),
        "data": {"nginx.conf": client_proxy_config(spec), WATCH_SCRIPT_NAME: WATCH_SCRIPT.read_text()},
    }


def render_client_key_secret_shapes(spec: RouterSpec) -> list[tuple[dict, str]]:
    """The two key Secrets without their values, each with the one file it holds: the component
    adds the file's content from the keys' Pulumi secret Outputs (client_proxy_keys.client_keys_map
    / engine_key_map)."""
    if not spec.checks_keys:
        return []
    return [
        ({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": _meta(name, spec)}, file)
        for name, file in ((CLIENT_KEYS_SECRET, CLIENT_KEYS_FILE), (ENGINE_KEY_SECRET, ENGINE_KEY_FILE))
    ]


def client_port(spec: RouterSpec) -> int:
    """The port clients (and the NetworkPolicies) reach on a router pod."""
    return CLIENT_PORT


def _files_digest(spec: RouterSpec) -> str:
    # Never the keys: a rotated key reaches the pods through the mounted Secret and a reload.
    files = [REGISTRAR_FILE, WATCH_SCRIPT] + ([] if spec.image else [LOCK_FILE])
    data = b"".join(f.read_bytes() for f in files) + client_proxy_config(spec).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def render_router_deployment(spec: RouterSpec) -> dict:
    init, containers, volumes = _containers(spec)
    pod: dict = {
        "serviceAccountName": spec.name,
        "automountServiceAccountToken": False,  # only the registrar gets the token (its own mount)
        "securityContext": restricted_pod(),
        "enableServiceLinks": False,
        # Long streamed completions: give open connections time to finish.
        "terminationGracePeriodSeconds": 300,
        "containers": containers,
        "volumes": volumes,
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": router_selector()},
            }
        ],
    }
    if init:
        pod["initContainers"] = init
    if spec.node_selector:
        pod["nodeSelector"] = dict(spec.node_selector)
    return accept({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(spec.name, spec),
        "spec": {
            "replicas": spec.replicas,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": router_selector()},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            # The registrar script and the lock are read at start: a change of either rolls the pods.
            "template": {"metadata": {"labels": router_labels(spec), "annotations": {
                "inference-platform/router-files-sha256": _files_digest(spec)}}, "spec": pod},
        },
    }, scan_exceptions.ROUTER)


def render_router_pdb(spec: RouterSpec) -> dict:
    budget = {"minAvailable": 1} if spec.replicas > 1 else {"maxUnavailable": 1}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(spec.name, spec),
        "spec": {**budget, "selector": {"matchLabels": router_selector()}},
    }


def render_router_service(spec: RouterSpec) -> dict:
    annotations = {ANNOTATION_API_KEY_REQUIRED: "true"} if spec.checks_keys else None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(spec.name, spec, annotations),
        "spec": {
            "type": "ClusterIP",
            "selector": router_selector(),
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def public_annotations(spec: RouterSpec) -> dict[str, str]:
    """DO cloud-controller annotations for the public load balancer.

    Health checks: DOKS by default probes kube-proxy / the Service's healthCheckNodePort, which
    with `externalTrafficPolicy: Local` reports whether a node has a ready router pod — the
    pods' own readiness drives that, so we tune only timing (these annotations apply without
    `do-loadbalancer-override-health-check`). Allow-list: `spec.loadBalancerSourceRanges`
    (the `do-loadbalancer-allow-rules` annotation is deprecated in its favour).
    """
    annotations = {
        f"{DO_LB}protocol": "http",
        f"{DO_LB}http-idle-timeout-seconds": str(LB_IDLE_TIMEOUT_SECONDS),
        f"{DO_LB}healthcheck-check-interval-seconds": "5",
        f"{DO_LB}healthcheck-response-timeout-seconds": "5",
        f"{DO_LB}healthcheck-unhealthy-threshold": "2",
        f"{DO_LB}healthcheck-healthy-threshold": "2",
        ANNOTATION_API_KEY_REQUIRED: "true",
    }
    if spec.tls_certificate_id:
        annotations.update(
            {
                f"{DO_LB}tls-ports": "443",
                f"{DO_LB}certificate-id": spec.tls_certificate_id,
                f"{DO_LB}redirect-http-to-https": "true",
            }
        )
    return annotations


def public_service_name(spec: RouterSpec) -> str:
    return f"{spec.name}-public"


def render_public_service(spec: RouterSpec) -> dict:
    """The DO Load Balancer in front of the router pods (TLS ends at the load balancer)."""
    ports = [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]
    if spec.tls_certificate_id:
        ports.append({"name": "https", "port": 443, "targetPort": "http", "protocol": "TCP"})
    service_spec: dict = {
        "type": "LoadBalancer",
        "externalTrafficPolicy": "Local",
        "selector": router_selector(),
        "ports": ports,
    }
    if spec.allowed_source_cidrs:
        service_spec["loadBalancerSourceRanges"] = list(spec.allowed_source_cidrs)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(public_service_name(spec), spec, public_annotations(spec)),
        "spec": service_spec,
    }


def engine_selectors(spec: RouterSpec) -> list[dict[str, str]]:
    """The engine pods the router reaches (through their Services' EndpointSlices)."""
    return [selector_labels(m.name) for m in spec.models]


def render_router(spec: RouterSpec) -> list[dict]:
    """All router objects (empty for kind `service`: the config refuses `public` with it).

    The spec is valid by construction: `infra.config` checks the router settings it comes from."""
    if not spec.uses_router:
        return []
    objects = [
        render_service_account(spec),
        render_role(spec),
        render_role_binding(spec),
        render_registrar_configmap(spec),
        render_client_proxy_configmap(spec),
    ]
    if not spec.image:
        objects.append(render_install_configmap(spec))
    objects += [render_router_deployment(spec), render_router_pdb(spec), render_router_service(spec)]
    if spec.public:
        objects.append(render_public_service(spec))
    return objects
