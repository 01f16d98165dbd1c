"""The per-model P/D router: vLLM's Rust router (`vllm-router` 0.1.17) with `--vllm-pd-disaggregation`.

It runs the two legs of every request itself — the prompt on a prefill engine (`max_tokens=1`,
`kv_transfer_params.do_remote_decode`), then the generation on a decode engine with the prefill's
KV parameters (vllm-project/router `src/routers/http/vllm_pd_router.rs`) — and finds the engines by
label (`--service-discovery --prefill-selector … --decode-selector …`, so it needs to list pods).
With MoRI-IO the engines also register on `--vllm-discovery-address` (their `proxy_ping_port`):
the router learns READ/WRITE mode from them and refuses to dispatch until one has registered.
Policies follow vLLM's MoRI-IO guide (`consistent_hash` for all three).

The model's Service (named like the model, port 8000) selects this router's pods, so the front-door
router registers it as the model's one worker; infra/render/router.py needs no change.
Flags verified against the 0.1.17 `src/main.rs` CliArgs (serving-research A4).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infra.catalog import versions

PROMETHEUS_PORT = 29000


@dataclass(frozen=True)
class PdRouterSpec:
    model: str
    namespace: str
    kv_connector: str  # "moriio" | "nixl"
    prefill_selector: dict[str, str]
    decode_selector: dict[str, str]
    discovery_port: int | None  # MoRI-IO registration port; None for NIXL
    engine_port: int
    labels: dict[str, str] = field(default_factory=dict)
    replicas: int = 1

    @property
    def name(self) -> str:
        return f"{self.model}-pd-router"


def router_host(model: str, namespace: str) -> str:
    """Where engines reach the router (MoRI-IO `proxy_ip`): its headless-free ClusterIP Service."""
    return f"{model}-pd-router.{namespace}.svc"


def selector_pods(spec: PdRouterSpec) -> dict[str, str]:
    return {"app.kubernetes.io/name": "vllm-pd-router", "inference-platform/model": spec.model}


def pd_router_args(spec: PdRouterSpec) -> list[str]:
    args = [
        "--host", "0.0.0.0",
        "--port", str(spec.engine_port),
        "--vllm-pd-disaggregation",
        "--kv-connector", spec.kv_connector,
        "--service-discovery",
        "--service-discovery-namespace", spec.namespace,
        "--service-discovery-port", str(spec.engine_port),
        "--prefill-selector", *(f"{k}={v}" for k, v in sorted(spec.prefill_selector.items())),
        "--decode-selector", *(f"{k}={v}" for k, v in sorted(spec.decode_selector.items())),
        "--policy", "consistent_hash",
        "--prefill-policy", "consistent_hash",
        "--decode-policy", "consistent_hash",
        "--prometheus-host", "0.0.0.0",
        "--prometheus-port", str(PROMETHEUS_PORT),
    ]
    if spec.discovery_port is not None:
        args += ["--vllm-discovery-address", f"0.0.0.0:{spec.discovery_port}"]
    return args


def _meta(spec: PdRouterSpec, name: str | None = None) -> dict:
    return {"name": name or spec.name, "namespace": spec.namespace, "labels": {**spec.labels, **selector_pods(spec)}}


def render_pd_router(spec: PdRouterSpec) -> list[dict]:
    """ServiceAccount, Role (list/watch pods), RoleBinding, Deployment, the router's own Service
    (engines register on it) and the model's Service pointing at the router."""
    script = (
        f"pip install --no-cache-dir --disable-pip-version-check vllm-router=={versions.PD_ROUTER_VERSION} "
        '&& exec vllm-router "$@"'
    )
    ports = [
        {"name": "http", "containerPort": spec.engine_port, "protocol": "TCP"},
        {"name": "metrics", "containerPort": PROMETHEUS_PORT, "protocol": "TCP"},
    ]
    if spec.discovery_port is not None:
        ports.append({"name": "discovery", "containerPort": spec.discovery_port, "protocol": "TCP"})
    probe = {"httpGet": {"path": "/health", "port": "http"}, "timeoutSeconds": 5}
    container = {
        "name": "router",
        "image": versions.PD_ROUTER_BASE_IMAGE,
        "command": ["/bin/sh", "-c", script, "vllm-router"],
        "args": pd_router_args(spec),
        "ports": ports,
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
        "startupProbe": {**probe, "periodSeconds": 10, "failureThreshold": 60},
        "readinessProbe": {**probe, "periodSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {**probe, "periodSeconds": 15, "failureThreshold": 4},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(spec),
        "spec": {
            "replicas": spec.replicas,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": selector_pods(spec)},
            "template": {
                "metadata": {"labels": {**spec.labels, **selector_pods(spec)}},
                "spec": {
                    "serviceAccountName": spec.name,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 300,
                    "containers": [container],
                },
            },
        },
    }
    svc_ports = [{"name": "http", "port": spec.engine_port, "targetPort": "http", "protocol": "TCP"}]
    own_ports = [*svc_ports, {"name": "metrics", "port": PROMETHEUS_PORT, "targetPort": "metrics", "protocol": "TCP"}]
    if spec.discovery_port is not None:
        own_ports.append({"name": "discovery", "port": spec.discovery_port, "targetPort": "discovery", "protocol": "TCP"})
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(spec)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(spec),
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(spec),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": spec.name},
            "subjects": [{"kind": "ServiceAccount", "name": spec.name, "namespace": spec.namespace}],
        },
        deployment,
        {"apiVersion": "v1", "kind": "Service", "metadata": _meta(spec),
         "spec": {"type": "ClusterIP", "selector": selector_pods(spec), "ports": own_ports}},
        # The model's Service: what the front door already targets for this model.
        {"apiVersion": "v1", "kind": "Service", "metadata": _meta(spec, spec.model),
         "spec": {"type": "ClusterIP", "selector": selector_pods(spec), "ports": svc_ports}},
    ]


__all__ = ["PROMETHEUS_PORT", "PdRouterSpec", "pd_router_args", "render_pd_router", "router_host"]
