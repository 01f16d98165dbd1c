"""Kubernetes manifests for the request router in front of one model's vLLM replicas.

Router kinds (stack config `router.kind`):
  service       no router: clients use the model's ClusterIP Service; kube-proxy spreads
                connections (not requests) over the replicas.
  session       vLLM production-stack router, `--routing-logic session`: requests carrying the
                same session header go to the same replica, whose prefix cache holds the chat.
  prefix        `--routing-logic prefixaware`: requests sharing a prompt prefix go together.
  round-robin   `--routing-logic roundrobin`: per-request balancing (better than per-connection).

The router discovers engines itself (`--service-discovery k8s`, whose default pod-IP discovery
lists and watches pods matching the engine labels and asks each ready pod for its model), so it
needs read-only, namespaced RBAC on pods and nothing else.

Exposure: internal ClusterIP always; `public` adds a DigitalOcean Load Balancer Service
(TLS with a DO certificate id, source allow-list, health-check tuning) and then requires an
API key, enforced by the engines (clients send `Authorization: Bearer <key>`).
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.catalog import versions
from infra.catalog.vllm_flags import VLLM_PORT
from infra.render.model_service import (
    ANNOTATION_API_KEY_REQUIRED,
    API_KEY_KEY,
    LABEL_MODEL,
    NAMESPACE,
    PART_OF,
    selector_labels,
)

ROUTER_PORT = 8001
ROUTING_LOGIC = {"session": "session", "prefix": "prefixaware", "round-robin": "roundrobin"}
ROUTER_KINDS = ("service", "session", "prefix", "round-robin")

DO_LB = "service.beta.kubernetes.io/do-loadbalancer-"
# DO's HTTP load balancer closes idle connections after 60 s by default; a long non-streamed
# completion can be silent for minutes. 600 s is the maximum DO allows.
LB_IDLE_TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class RouterSpec:
    """The router of one model.

    model: the model name (same as ModelServiceSpec.name); engines are found by its labels.
    kind: service | session | prefix | round-robin.
    session_header: HTTP header naming the session (kind `session`).
    replicas: router pods (two or more survive a node drain; a PDB keeps one up).
    public: add a DO Load Balancer; requires api_key_secret.
    tls_certificate_id: DO certificate id for HTTPS on 443 (HTTP on 80 then redirects).
    allowed_source_cidrs: client CIDRs allowed through the load balancer (empty = everyone).
    api_key_secret: Secret (key `api-key`) the engines check; the router uses it to list models.
    """

    model: str
    kind: str = "session"
    session_header: str = "x-session-id"
    replicas: int = 2
    namespace: str = NAMESPACE
    public: bool = False
    tls_certificate_id: str | None = None
    allowed_source_cidrs: tuple[str, ...] = ()
    api_key_secret: str | None = None
    image: str | None = None

    @property
    def uses_router(self) -> bool:
        return self.kind != "service"

    @property
    def name(self) -> str:
        return f"{self.model}-router"

    @property
    def resolved_image(self) -> str:
        return self.image or versions.ROUTER_IMAGE


def router_selector(model: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "router", LABEL_MODEL: model}


def router_labels(spec: RouterSpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
        "app.kubernetes.io/component": "router",
        "app.kubernetes.io/instance": spec.model,
        **router_selector(spec.model),
    }


def _meta(name: str, spec: RouterSpec, annotations: dict | None = None) -> dict:
    meta = {"name": name, "namespace": spec.namespace, "labels": router_labels(spec)}
    if annotations:
        meta["annotations"] = annotations
    return meta


def router_args(spec: RouterSpec) -> list[str]:
    """Command line of the production-stack router (`vllm-router`, the image's entrypoint)."""
    engine_selector = ",".join(f"{k}={v}" for k, v in selector_labels(spec.model).items())
    args = [
        "--host",
        "0.0.0.0",
        "--port",
        str(ROUTER_PORT),
        "--service-discovery",
        "k8s",
        "--k8s-namespace",
        spec.namespace,
        "--k8s-port",
        str(VLLM_PORT),
        "--k8s-label-selector",
        engine_selector,
        "--routing-logic",
        ROUTING_LOGIC[spec.kind],
    ]
    if spec.kind == "session":
        args += ["--session-key", spec.session_header]
    args += ["--engine-stats-interval", "15", "--request-stats-window", "60"]
    return args


def render_service_account(spec: RouterSpec) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(spec.name, spec)}


def render_role(spec: RouterSpec) -> dict:
    """Read-only, namespaced: what the router's pod-IP discovery needs and nothing else.

    The production-stack router's k8s discovery (default type pod-ip) only lists and watches pods
    by label selector; it reads no Services, Endpoints or EndpointSlices. Its service-name
    discovery type would need Services, but router_args does not select it.
    """
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(spec.name, spec),
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
    }


def render_role_binding(spec: RouterSpec) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(spec.name, spec),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": spec.name},
        "subjects": [{"kind": "ServiceAccount", "name": spec.name, "namespace": spec.namespace}],
    }


def render_router_deployment(spec: RouterSpec) -> dict:
    env = []
    if spec.api_key_secret:
        # The router lists each engine's models with this key (it reads VLLM_API_KEY).
        env.append(
            {
                "name": "VLLM_API_KEY",
                "valueFrom": {"secretKeyRef": {"name": spec.api_key_secret, "key": API_KEY_KEY}},
            }
        )
    probe = {"httpGet": {"path": "/health", "port": "http"}, "timeoutSeconds": 5}
    container = {
        "name": "router",
        "image": spec.resolved_image,
        "args": router_args(spec),
        "ports": [{"name": "http", "containerPort": ROUTER_PORT, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
        "readinessProbe": {**probe, "periodSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {**probe, "periodSeconds": 15, "failureThreshold": 4, "initialDelaySeconds": 30},
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", "10"]}}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if env:
        container["env"] = env
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(spec.name, spec),
        "spec": {
            "replicas": spec.replicas,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": router_selector(spec.model)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": router_labels(spec)},
                "spec": {
                    "serviceAccountName": spec.name,
                    "enableServiceLinks": False,
                    # Long streamed completions: give open connections time to finish.
                    "terminationGracePeriodSeconds": 300,
                    "containers": [container],
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "kubernetes.io/hostname",
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": router_selector(spec.model)},
                        }
                    ],
                },
            },
        },
    }


def render_router_pdb(spec: RouterSpec) -> dict:
    budget = {"minAvailable": 1} if spec.replicas > 1 else {"maxUnavailable": 1}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(spec.name, spec),
        "spec": {**budget, "selector": {"matchLabels": router_selector(spec.model)}},
    }


def render_router_service(spec: RouterSpec) -> dict:
    annotations = {ANNOTATION_API_KEY_REQUIRED: "true"} if spec.api_key_secret else None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(spec.name, spec, annotations),
        "spec": {
            "type": "ClusterIP",
            "selector": router_selector(spec.model),
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def public_annotations(spec: RouterSpec) -> dict[str, str]:
    """DO cloud-controller annotations for the public load balancer.

    Health checks: DOKS by default probes kube-proxy / the Service's healthCheckNodePort, which
    with `externalTrafficPolicy: Local` reports whether a node has a ready backend pod — the
    pods' own /health readiness drives that, so we tune only timing (these annotations apply
    without `do-loadbalancer-override-health-check`). Allow-list: `spec.loadBalancerSourceRanges`
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


def render_public_service(spec: RouterSpec) -> dict:
    """The DO Load Balancer: in front of the router pods, or the engines when kind is `service`."""
    selector = router_selector(spec.model) if spec.uses_router else selector_labels(spec.model)
    # Router and engine containers both name their port `http`; TLS ends at the load balancer.
    ports = [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]
    if spec.tls_certificate_id:
        ports.append({"name": "https", "port": 443, "targetPort": "http", "protocol": "TCP"})
    service_spec: dict = {
        "type": "LoadBalancer",
        "externalTrafficPolicy": "Local",
        "selector": selector,
        "ports": ports,
    }
    if spec.allowed_source_cidrs:
        service_spec["loadBalancerSourceRanges"] = list(spec.allowed_source_cidrs)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(f"{spec.model}-public", spec, public_annotations(spec)),
        "spec": service_spec,
    }


def render_router(spec: RouterSpec) -> list[dict]:
    """All router objects for one model (empty for kind `service` without a public endpoint).

    The spec is valid by construction: `infra.config` checks the router settings it comes from."""
    objects: list[dict] = []
    if spec.uses_router:
        objects += [
            render_service_account(spec),
            render_role(spec),
            render_role_binding(spec),
            render_router_deployment(spec),
            render_router_pdb(spec),
            render_router_service(spec),
        ]
    if spec.public:
        objects.append(render_public_service(spec))
    return objects
