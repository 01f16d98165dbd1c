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

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from infra.catalog import versions
from infra.render import scan_exceptions
from infra.render.pod_security import restricted_container, restricted_pod
from infra.render.scan_exceptions import accept

# The front-door router's lock (vllm-router 0.1.17 and its dependencies, sha256 each).
LOCK_FILE = Path(__file__).resolve().parents[2] / "images" / "vllm-router" / "requirements.txt"
INSTALL_DIR = "/opt/vllm-router"

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
    node_selector: dict[str, str] = field(default_factory=dict)  # an existing cluster's system nodes; empty: not pinned

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


def install_configmap_name(spec: PdRouterSpec) -> str:
    return f"{spec.name}-install"


def _lock_digest() -> str:
    """A change of the lock rolls the pods (the initContainer reads it at start)."""
    return hashlib.sha256(LOCK_FILE.read_bytes()).hexdigest()[:16]


def _meta(spec: PdRouterSpec, name: str | None = None) -> dict:
    return {"name": name or spec.name, "namespace": spec.namespace, "labels": {**spec.labels, **selector_pods(spec)}}


def render_pd_router(spec: PdRouterSpec) -> list[dict]:
    """ServiceAccount, Role (list/watch pods), RoleBinding, Deployment, the router's own Service
    (engines register on it) and the model's Service pointing at the router."""
    ports = [
        {"name": "http", "containerPort": spec.engine_port, "protocol": "TCP"},
        {"name": "metrics", "containerPort": PROMETHEUS_PORT, "protocol": "TCP"},
    ]
    if spec.discovery_port is not None:
        ports.append({"name": "discovery", "containerPort": spec.discovery_port, "protocol": "TCP"})
    probe = {"httpGet": {"path": "/health", "port": "http"}, "timeoutSeconds": 5}
    tmp = {"name": "tmp", "mountPath": "/tmp"}
    # The same hash-locked wheel set as the front-door router (images/vllm-router/requirements.txt),
    # installed by an initContainer with --require-hashes: no unpinned `pip install` at start.
    install = {
        "name": "install-vllm-router",
        "image": versions.PD_ROUTER_BASE_IMAGE,
        "command": ["python", "-m", "pip", "install", "--no-deps", "--require-hashes", "--only-binary=:all:",
                    "--no-cache-dir", "--disable-pip-version-check", "--target", INSTALL_DIR, "-r", "/install/requirements.txt"],
        "env": [{"name": "HOME", "value": "/tmp"}],
        "volumeMounts": [{"name": "vllm-router", "mountPath": INSTALL_DIR},
                         {"name": "install", "mountPath": "/install", "readOnly": True}, tmp],
        "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": restricted_container(),
    }  # fmt: skip
    container = {
        "name": "router",
        "image": versions.PD_ROUTER_BASE_IMAGE,
        "command": [f"{INSTALL_DIR}/bin/vllm-router"],
        "args": pd_router_args(spec),
        "env": [{"name": "PYTHONPATH", "value": INSTALL_DIR}],
        "volumeMounts": [{"name": "vllm-router", "mountPath": INSTALL_DIR, "readOnly": True}, tmp],
        "ports": ports,
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
        "startupProbe": {**probe, "periodSeconds": 10, "failureThreshold": 60},
        "readinessProbe": {**probe, "periodSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {**probe, "periodSeconds": 15, "failureThreshold": 4},
        "securityContext": restricted_container(),
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
                "metadata": {"labels": {**spec.labels, **selector_pods(spec)},
                             "annotations": {"inference-platform/router-lock-sha256": _lock_digest()}},
                "spec": {
                    "serviceAccountName": spec.name,
                    "securityContext": restricted_pod(),
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 300,
                    "initContainers": [install],
                    "containers": [container],
                    "volumes": [
                        {"name": "vllm-router", "emptyDir": {"sizeLimit": "512Mi"}},
                        {"name": "install", "configMap": {"name": install_configmap_name(spec)}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
                    ],
                },
            },
        },
    }
    if spec.node_selector:
        deployment["spec"]["template"]["spec"]["nodeSelector"] = dict(spec.node_selector)
    accept(deployment, scan_exceptions.API_WATCHER)
    svc_ports = [{"name": "http", "port": spec.engine_port, "targetPort": "http", "protocol": "TCP"}]
    own_ports = [*svc_ports, {"name": "metrics", "port": PROMETHEUS_PORT, "targetPort": "metrics", "protocol": "TCP"}]
    if spec.discovery_port is not None:
        own_ports.append({"name": "discovery", "port": spec.discovery_port, "targetPort": "discovery", "protocol": "TCP"})
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(spec, install_configmap_name(spec)),
         "data": {"requirements.txt": LOCK_FILE.read_text()}},
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
