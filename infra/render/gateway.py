"""The environment's gateway for `router.kind: gateway`: Agentgateway with the Inference Extension.

Why Agentgateway (of the three implementations conformant at gateway-api-inference-extension
v1.6.0, site-src/implementations/gateways.md: Istio, Agentgateway, NGINX Gateway Fabric): it
checks API keys itself (AgentgatewayPolicy `traffic.apiKeyAuthentication`, keys in a Secret),
copies the body's `model` into the routing header with a CEL transformation before routing
(Inference Extension v1.6.0 dropped its body-based-routing ext_proc), provisions the data plane
from a Gateway with per-Gateway overlays for the Service DigitalOcean's load balancer reads, and is
one Helm release. Istio needs JWT or ext_authz for keys, two istiod switches and a TLS
DestinationRule per picker; NGINX Gateway Fabric's open-source build has no API-key auth.
docs/serving.md compares them.

What is rendered here (facts of agentgateway/agentgateway @ v1.4.1):
- Helm values of the `agentgateway` chart (controller/install/helm/agentgateway/values.yaml):
  `inferenceExtension.enabled`, the GatewayClass the controller creates and owns
  (`gatewayClassName`, controller `agentgateway.dev/agentgateway`), pinned image tag, system pool;
- `AgentgatewayParameters` (controller/api/v1alpha1/agentgateway/agentgateway_parameters_types.go):
  strategic-merge overlays of the proxy Deployment (replicas, system pool), its PDB and its
  Service (type, DigitalOcean load-balancer annotations, source ranges, the HTTPS port);
- the `Gateway` (one HTTP listener; routes from the engines' namespace only, where each model's
  InferencePool must live) pointing at those parameters;
- an `AgentgatewayPolicy` on the Gateway, phase PreRouting: the API-key check and the
  transformation `X-Gateway-Base-Model-Name = json(request.body).model` the HTTPRoutes match on
  (agentgateway_policy_types.go: PreRouting supports both; `json()` is in schema/cel-functions.md);
- with keys, a second policy that sends the key on to the engines (`backend.auth.secretRef`): the
  API-key check strips `Authorization` (crates/agentgateway/src/http/apikey.rs), and its
  `passthrough` mode restores only JWTs (src/http/auth/mod.rs), while vLLM still checks the key.

TLS ends on the DigitalOcean load balancer with a DO certificate, as for the router: a regional
(HTTP) load balancer is required for that (`do-loadbalancer-type: REGIONAL`; the CCM's default
REGIONAL_NETWORK type forwards TCP only, digitalocean-cloud-controller-manager
cloud-controller-manager/do/loadbalancers.go `buildRegionalNetworkForwardingRule`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infra.catalog import versions
from infra.front_door import FrontDoor
from infra.render.epp import GATEWAY_GROUP, MODEL_HEADER, PoolSpec
from infra.render.model_service import ANNOTATION_API_KEY_REQUIRED, API_KEY_KEY, NAMESPACE, PART_OF
from infra.render.observability import MonitoringSettings
from infra.render.timeouts import request_timeout_seconds

AGW_API = "agentgateway.dev/v1alpha1"
GATEWAY_NAME = "inference-gateway"
GATEWAY_CLASS = "inference-platform"
CONTROLLER_NAME = "agentgateway.dev/agentgateway"
CONTROLLER_NAMESPACE = "agentgateway-system"
API_KEY_SECRET = f"{GATEWAY_NAME}-api-key"
LISTENER_PORT = 80
HTTPS_PORT = 443
PROXY_METRICS_PORT = 15020  # the proxy pods' `metrics` port (controller/pkg/deployer/values_helpers.go)
# The CEL expression of the routing header: the OpenAI request body's `model`.
MODEL_FROM_BODY = "json(request.body).model"

DO_LB = "service.beta.kubernetes.io/do-loadbalancer-"
# DO's HTTP load balancer closes idle connections after 60 s by default; 600 s is its maximum.
LB_IDLE_TIMEOUT_SECONDS = 600

MIN_REQUEST_TIMEOUT_SECONDS = 60
NS_NAME_LABEL = "kubernetes.io/metadata.name"  # set by Kubernetes on every namespace


def route_timeout_seconds(ttft_p90_ms: float, tpot_p90_ms: float, output_tokens: int) -> int:
    """A model's route timeout (infra/render/timeouts.py), at least 60 s."""
    return max(MIN_REQUEST_TIMEOUT_SECONDS, request_timeout_seconds(ttft_p90_ms, tpot_p90_ms, output_tokens))


@dataclass(frozen=True)
class GatewaySpec:
    """The environment's gateway and every model's pool behind it.

    name: logical (Pulumi) name prefix.
    pools: one PoolSpec per model, in the models' order.
    replicas: gateway proxy replicas (a PDB keeps one up when there are two or more).
    public: a DigitalOcean load balancer in front (else a ClusterIP Service).
    tls_certificate_id: DO certificate: HTTPS on 443 ends on the load balancer.
    allowed_source_cidrs: client ranges the load balancer admits (empty: everyone).
    api_key_secret: the Secret (key `api-key`) the gateway checks keys against; None: no check.
    install_gateway_api_crds: install Gateway API's CRDs (false where DOKS manages them).
    system_node_selector: where the controller and proxies run.
    monitoring: the monitoring stack's settings when observability is on (PodMonitors, rules and
        the dashboard of infra/render/gateway_observability.py); None: not monitored.
    """

    name: str
    pools: tuple[PoolSpec, ...]
    namespace: str = NAMESPACE
    replicas: int = 2
    public: bool = False
    tls_certificate_id: str | None = None
    allowed_source_cidrs: tuple[str, ...] = ()
    api_key_secret: str | None = None
    checks_client_keys: bool = True  # authentication none: no check at the gateway, the key still sent upstream
    install_gateway_api_crds: bool = True
    system_node_selector: dict[str, str] = field(default_factory=dict)
    chart_version: str = versions.AGENTGATEWAY_CHART_VERSION
    gateway_name: str = GATEWAY_NAME
    monitoring: MonitoringSettings | None = None

    @property
    def endpoint(self) -> str:
        """The in-cluster base URL (the proxy Service takes the Gateway's name)."""
        return f"http://{self.gateway_name}.{self.namespace}.svc.cluster.local/v1"

    @property
    def crd_urls(self) -> tuple[tuple[str, str], ...]:
        """(logical name, manifest URL) of the CRDs installed from pinned release files."""
        urls = []
        if self.install_gateway_api_crds:
            urls.append(("gateway-api-crds", versions.GATEWAY_API_CRDS_URL))
        urls.append(("inference-pool-crds", versions.INFERENCE_POOL_CRDS_URL))
        urls.append(("inference-objective-crd", versions.INFERENCE_OBJECTIVE_CRD_URL))
        return tuple(urls)


def gateway_labels() -> dict[str, str]:
    return {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/managed-by": "pulumi", "app.kubernetes.io/component": "gateway"}


def _meta(name: str, spec: GatewaySpec) -> dict:
    return {"name": name, "namespace": spec.namespace, "labels": gateway_labels()}


def render_controller_values(spec: GatewaySpec) -> dict:
    """Helm values of the `agentgateway` chart (controller; the chart's CRDs come separately)."""
    return {
        "inferenceExtension": {"enabled": True},
        "gatewayClassName": GATEWAY_CLASS,
        # Pins the controller and proxy images (both default to the chart's appVersion).
        "image": {"tag": versions.AGENTGATEWAY_CHART_VERSION},
        "nodeSelector": dict(spec.system_node_selector),
        # Our own PodMonitor (infra/render/gateway_observability.py) scrapes the proxies.
        "monitoring": {"enabled": False},
    }


def service_annotations(spec: GatewaySpec) -> dict[str, str]:
    """DigitalOcean cloud-controller annotations of the proxy Service (public gateways only)."""
    if not spec.public:
        return {}
    annotations = {
        f"{DO_LB}healthcheck-check-interval-seconds": "5",
        f"{DO_LB}healthcheck-response-timeout-seconds": "5",
        f"{DO_LB}healthcheck-unhealthy-threshold": "2",
        f"{DO_LB}healthcheck-healthy-threshold": "2",
    }
    if spec.tls_certificate_id:
        annotations.update(
            {
                f"{DO_LB}type": "REGIONAL",
                f"{DO_LB}protocol": "http",
                f"{DO_LB}http-idle-timeout-seconds": str(LB_IDLE_TIMEOUT_SECONDS),
                f"{DO_LB}tls-ports": str(HTTPS_PORT),
                f"{DO_LB}certificate-id": spec.tls_certificate_id,
                f"{DO_LB}redirect-http-to-https": "true",
            }
        )
    else:
        # A network (L4) load balancer passes TCP through: no HTTP idle timeout to cut long answers.
        annotations[f"{DO_LB}type"] = "REGIONAL_NETWORK"
    if spec.api_key_secret:
        annotations[ANNOTATION_API_KEY_REQUIRED] = "true"
    return annotations


def render_parameters(spec: GatewaySpec) -> dict:
    """AgentgatewayParameters: overlays of what the controller generates for the Gateway."""
    # The controller's proxy pods drop every capability and run as non-root but set no seccomp
    # profile (controller/pkg/helm/agentgateway/templates/_helpers.tpl @ v1.4.1), which Pod
    # Security `restricted` requires of the namespace they run in: the overlay adds it (a strategic
    # merge keeps the chart's sysctl, which `restricted` allows).
    template_spec: dict = {"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}
    if spec.system_node_selector:
        template_spec["nodeSelector"] = dict(spec.system_node_selector)
    service_spec: dict
    if spec.public:
        service_spec = {"type": "LoadBalancer", "externalTrafficPolicy": "Local"}
        if spec.allowed_source_cidrs:
            service_spec["loadBalancerSourceRanges"] = list(spec.allowed_source_cidrs)
        if spec.tls_certificate_id:
            # TLS ends on the load balancer, which forwards the plain request to the listener.
            service_spec["ports"] = [{"name": "https", "port": HTTPS_PORT, "targetPort": LISTENER_PORT, "protocol": "TCP"}]
    else:
        service_spec = {"type": "ClusterIP"}
    service: dict = {"spec": service_spec}
    annotations = service_annotations(spec)
    if annotations:
        service["metadata"] = {"annotations": annotations}
    budget = {"minAvailable": 1} if spec.replicas > 1 else {"maxUnavailable": 1}
    return {
        "apiVersion": AGW_API,
        "kind": "AgentgatewayParameters",
        "metadata": _meta(spec.gateway_name, spec),
        "spec": {
            "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
            "deployment": {"spec": {"replicas": spec.replicas, "template": {"spec": template_spec}}},
            "podDisruptionBudget": {"spec": budget},
            "service": service,
        },
    }


def allowed_routes(spec: GatewaySpec) -> dict:
    """The namespaces whose HTTPRoutes may attach to the listener: exactly the pools' (the engines'
    namespace), matched by the name label Kubernetes sets on every namespace."""
    namespaces = sorted({p.namespace for p in spec.pools})
    if not namespaces or namespaces == [spec.namespace]:
        return {"namespaces": {"from": "Same"}}
    selector = {"matchExpressions": [{"key": NS_NAME_LABEL, "operator": "In", "values": namespaces}]}
    return {"namespaces": {"from": "Selector", "selector": selector}}


def render_gateway(spec: GatewaySpec) -> dict:
    return {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "Gateway",
        "metadata": _meta(spec.gateway_name, spec),
        "spec": {
            "gatewayClassName": GATEWAY_CLASS,
            "listeners": [
                {"name": "http", "protocol": "HTTP", "port": LISTENER_PORT, "allowedRoutes": allowed_routes(spec)}
            ],
            "infrastructure": {
                "parametersRef": {"group": AGW_API.split("/")[0], "kind": "AgentgatewayParameters", "name": spec.gateway_name}
            },
        },
    }


def _gateway_target(spec: GatewaySpec) -> list[dict]:
    return [{"group": GATEWAY_GROUP, "kind": "Gateway", "name": spec.gateway_name}]


def render_prerouting_policy(spec: GatewaySpec) -> dict:
    """Before a route is chosen: check the API key, then copy the body's `model` into the header
    the routes match on (a client-sent header of that name is overwritten)."""
    traffic: dict = {
        "phase": "PreRouting",
        "transformation": {"request": {"set": [{"name": MODEL_HEADER, "value": MODEL_FROM_BODY}]}},
    }
    if spec.api_key_secret and spec.checks_client_keys:
        traffic["apiKeyAuthentication"] = {"mode": "Strict", "secretRef": {"name": spec.api_key_secret}}
    return {
        "apiVersion": AGW_API,
        "kind": "AgentgatewayPolicy",
        "metadata": _meta(f"{spec.gateway_name}-prerouting", spec),
        "spec": {"targetRefs": _gateway_target(spec), "traffic": traffic},
    }


def render_backend_auth_policy(spec: GatewaySpec) -> dict | None:
    """The key again on the way to the engines, which check it too (VLLM_API_KEY)."""
    if not spec.api_key_secret:
        return None
    return {
        "apiVersion": AGW_API,
        "kind": "AgentgatewayPolicy",
        "metadata": _meta(f"{spec.gateway_name}-backend-auth", spec),
        "spec": {
            "targetRefs": _gateway_target(spec),
            "backend": {"auth": {"secretRef": {"name": spec.api_key_secret, "key": API_KEY_KEY}}},
        },
    }


def render_gateway_resources(spec: GatewaySpec) -> list[dict]:
    """The environment-level custom resources, in apply order (after the controller's CRDs)."""
    objects = [render_parameters(spec), render_gateway(spec), render_prerouting_policy(spec)]
    backend = render_backend_auth_policy(spec)
    if backend is not None:
        objects.append(backend)
    return objects


# --- the front door the plan shows (issue 17 item 3; the lead unifies it with the router's) -------

# Scorer type → the short name the plan's routing line uses.
_SCORER_SHORT = {
    "prefix-cache-scorer": "prefix",
    "queue-scorer": "queue",
    "kv-cache-utilization-scorer": "kv",
    "session-affinity-scorer": "session",
    "running-requests-size-scorer": "running",
    "load-aware-scorer": "load",
    "lora-affinity-scorer": "lora",
}


def routing_summary(scorers: tuple[tuple[str, float], ...]) -> str:
    """`EPP: prefix+queue+kv scorers` — the scorers of the endpoint pickers, in configured order."""
    return "EPP: " + "+".join(_SCORER_SHORT.get(name, name) for name, _ in scorers) + " scorers"


def gateway_front_door(spec: GatewaySpec) -> FrontDoor:
    """The plan's front door for `router.kind: gateway`: one URL for every model, which models, how
    it routes (the endpoint pickers' scorers and weights), how clients authenticate, and why."""
    scorers = spec.pools[0].scorers if spec.pools else ()
    weights = ", ".join(f"{name} {weight:g}" for name, weight in scorers)
    if spec.public:
        scheme, port = ("https", HTTPS_PORT) if spec.tls_certificate_id else ("http", LISTENER_PORT)
        public_url = f"{scheme}://<load balancer address>:{port}/v1"
    else:
        public_url = None
    auth = "API key checked at the gateway" if spec.api_key_secret and spec.checks_client_keys else "no authentication at the gateway (the engines check the key)"
    sources = f"; clients from {', '.join(spec.allowed_source_cidrs)}" if spec.allowed_source_cidrs else ""
    return FrontDoor(
        kind="gateway",
        urls=(spec.endpoint,),
        public_url=public_url,
        models=tuple(sorted(p.served_model_name for p in spec.pools)),
        routing=routing_summary(scorers),
        why=(
            "one Agentgateway gateway (Gateway API + Inference Extension) for every model: the request body's "
            f"`model` selects the model's InferencePool, whose endpoint picker scores its engines ({weights}) "
            f"on prefix-cache hits, queue depth and KV-cache use; {auth}{sources}"
        ),
    )
