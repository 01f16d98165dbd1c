"""Default-deny NetworkPolicies for the namespaces the stack owns, plus exactly the flows the plan needs.

Why: without a NetworkPolicy every pod of the cluster reaches every engine's :8000 (and the GPUs
behind it), the router's worker-management routes, Prometheus, Alertmanager, Grafana, the P/D
side channels and the NFS share. DOKS runs Cilium, which enforces `networking.k8s.io/v1`
NetworkPolicy and its own CiliumNetworkPolicy; an ipBlock never matches a node, a pod or the
control plane there, so every flow from or to the nodes or the API server is a CiliumNetworkPolicy
with entities (infra/render/cilium_policy.py, rendered from `cilium_flows` below). Cilium admits
the local node's traffic (kubelet probes) without a rule.

What is rendered (all from the plan's facts, nothing per feature: engines are selected by the common
engine labels every layout family carries — Deployments, P/D sides, LeaderWorkerSet leaders and
workers, rollout variants):

inference namespace (the front door) and inference-engines namespace (the engines, P/D routers,
endpoint pickers, prefetch Jobs); a flow between them names the other namespace in a
`namespaceSelector` peer on both sides (the sender's egress and the receiver's ingress)
  default-deny          every pod of both namespaces, ingress and egress
  dns                   every pod → CoreDNS (kube-system, k8s-app=kube-dns) 53/UDP+TCP
  front door ingress    clients (any pod; when public, the internet and the VPC — DO's HTTP load
                        balancer proxies from its VPC address) → the router's client port / the
                        gateway listener; kind `service` (no router): clients → the engines' :8000
  engines               serving engines (not a multi-node replica's workers): ingress :8000 from the
                        front door (router or gateway proxies, endpoint pickers, the model's P/D
                        router) and from Prometheus; every port from engines of the same model (P/D
                        KV transfer, multi-node collectives); egress to engines of the same model,
                        to the model's P/D router (MoRI-IO registration), to the weights (NFS :2049
                        in the VPC, or Spaces :443; the hub :443 without a cache), and to every
                        endpoint the model's settings name (`declared_endpoints`: HF_ENDPOINT,
                        OTLP collectors)
  prefetch Jobs         egress to the model hub / Spaces (:443) and NFS; no ingress
  router / pickers / P/D routers
                        egress to the engines; the router's and P/D routers' hash-locked PyPI
                        install uses the internet on :443 (none for the router when `router.image`
                        is set); the API by entity (CiliumNetworkPolicy `api-server`); the gateway
                        proxies reach the pickers (ext-proc gRPC) and the engines across namespaces
  metrics               Prometheus → engines :8000, router and P/D routers :29000, pickers :9090,
                        gateway proxies :15020
monitoring namespace (observability on)
  default-deny, dns; Prometheus ← Grafana and KEDA (:9090) and its other replicas (:9090, reloader
  :8080); Alertmanager ← Prometheus (:9093, reloader :8080) and its peers (:9094), → the receiver
  over HTTPS when one is set; Grafana ← Prometheus (:3000); kube-state-metrics ← Prometheus
  (:8080); the operator ← Prometheus (:10250); Prometheus → exactly its pod targets (the chart's
  pods, CoreDNS :9153, the PodMonitors' pods on their ports). Entities (CNPs): the operator's
  admission webhook ← the control plane; Prometheus → the nodes (kubelet/cAdvisor :10250,
  node-exporter :9100, DOKS's AMD exporter :5000) and the API server.

controller namespaces the stack installs (keda with autoscaling, agentgateway-system with the
gateway, lws-system with a fabric pool, kube-amd-gpu and cert-manager with the GPU operator)
  default-deny; every pod: DNS and its own namespace; the API by entity; the control plane (and
  only it: CNP `control-plane`) → the chart's webhooks and aggregated APIs (KEDA: admission
  webhooks :9443, the external-metrics API server :6443; LWS: webhooks :9443; cert-manager: its
  webhook :10250); the KEDA operator → Prometheus :9090 (ScaledObject queries); the gateway
  proxies → the agentgateway controller's xDS :9978; Prometheus → the GPU operator's
  device-metrics exporter :5000. Ports are the charts' defaults, which the stack does not override
  (`CONTROLLERS` below names each one's source). Nothing else scrapes the controllers (their
  charts' monitors are off).

Every egress to addresses outside the cluster excepts the node metadata address 169.254.169.254
(droplet metadata: user data, the node's bootstrap secrets) and the private ranges, unless a
setting names an address there (the VPC for an in-VPC mirror).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infra.catalog.engine_env import (
    ENDPOINT_ENV,
    ENDPOINT_FLAGS,
    endpoint_host,
    literal_address,
    metadata_space,
)
from infra.render.cilium_policy import (
    DEVICE_EXPORTER_PORT,
    KUBELET_PORT,
    NODE_EXPORTER_PORT,
    CiliumFlows,
    render_cilium_policies,
)
from infra.render.gpu_runtime import (
    CERT_MANAGER_NAMESPACE,
    CERT_MANAGER_WEBHOOK_PORT,
    GPU_OPERATOR_NAMESPACE,
    METRICS_EXPORTER_PORT,
)

METADATA_CIDR = "169.254.169.254/32"  # DigitalOcean droplet metadata (and every cloud's)
ANYWHERE = "0.0.0.0/0"
PRIVATE_CIDRS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
PART_OF = "inference-platform"
ENGINE_LABELS = {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/component": "engine"}
LABEL_MODEL = "inference-platform/model"
# The engines that serve HTTP: every engine but a multi-node replica's workers (`vllm-worker`).
SERVING_ENGINE_LABELS = {**ENGINE_LABELS, "app.kubernetes.io/name": "vllm"}
ROUTER_LABELS = {"app.kubernetes.io/name": "router", "app.kubernetes.io/part-of": PART_OF}
PD_ROUTER_LABELS = {"app.kubernetes.io/name": "vllm-pd-router", "app.kubernetes.io/part-of": PART_OF}
EPP_LABELS = {"app.kubernetes.io/name": "epp", "app.kubernetes.io/part-of": PART_OF}
PREFETCH_LABELS = {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/component": "prefetch"}
GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"  # set by the controller on proxy pods
PROMETHEUS_LABELS = {"app.kubernetes.io/name": "prometheus"}  # prometheus-operator sets it on Prometheus pods
ALERTMANAGER_LABELS = {"app.kubernetes.io/name": "alertmanager"}
GRAFANA_LABELS = {"app.kubernetes.io/name": "grafana"}
KSM_LABELS = {"app.kubernetes.io/name": "kube-state-metrics"}
OPERATOR_LABELS = {"app": "kube-prometheus-stack-operator"}
DNS_LABELS = {"k8s-app": "kube-dns"}
NS_NAME_LABEL = "kubernetes.io/metadata.name"  # set by Kubernetes on every namespace

ENGINE_PORT = 8000
PROMETHEUS_PORT = 9090
ALERTMANAGER_PORT = 9093
RELOADER_PORT = 8080  # prometheus-operator's config-reloader sidecar (`reloader-web`), scraped by the self-monitors
GRAFANA_PORT = 3000
COREDNS_METRICS_PORT = 9153  # the chart's coreDns monitor
OPERATOR_PORT = 10250  # prometheus-operator: metrics (https) and the admission webhook
ROUTER_METRICS_PORT = 29000
NFS_PORT = 2049
HTTPS_PORT = 443


@dataclass(frozen=True)
class NetworkPolicySpec:
    """The facts of the plan the policies follow.

    front_door: `router` (the vLLM router), `gateway` (agentgateway + endpoint pickers) or
        `service` (none: clients call each model's Service).
    client_port: the port clients reach on the front door pods (router: its client port;
        gateway: the listener port).
    public: the front door has a public load balancer.
    models: every model; pd_models: those with a P/D layout (a P/D router each, MoRI-IO port).
    weights: `nfs`, `spaces` or None (no shared cache: each engine loads from its image/volume).
    """

    namespace: str  # the front door's (router, gateway proxies)
    models: tuple[str, ...]
    front_door: str
    client_port: int
    public: bool
    weights: str | None
    vpc_cidr: str | None  # None: an existing cluster's (unknown) network
    prefetch: bool
    pd_models: tuple[str, ...] = ()
    pd_discovery_port: int | None = None
    gateway_name: str = "inference-gateway"
    gateway_metrics_port: int = 15020
    epp_ports: tuple[int, int] = (9002, 9090)  # ext-proc gRPC, metrics
    monitoring_namespace: str | None = None
    keda_namespace: str | None = None  # KEDA queries Prometheus for ScaledObjects
    gateway_controller_namespace: str | None = None
    lws_namespace: str | None = None  # the LeaderWorkerSet controller (fabric pools)
    gpu_operator_namespace: str | None = None  # gpu_runtime.mode gpu-operator: the AMD GPU operator
    cert_manager_namespace: str | None = None  # ... and the cert-manager it needs
    engines_namespace: str = ""  # the engines', P/D routers' and pickers'; "" = namespace
    router_installs: bool = True  # the router pod installs vllm-router from PyPI (no `router.image`)
    endpoints: tuple[tuple[str, str, str], ...] = ()  # (model, setting, URL) the engines are told to use
    alert_egress: bool = False  # Alertmanager sends to a webhook/Slack receiver (HTTPS)
    device_exporter_scrape: bool = False  # Prometheus scrapes DOKS's AMD device-metrics exporter (kube-system)
    labels: dict[str, str] = field(default_factory=lambda: {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/managed-by": "pulumi"})

    @property
    def engines_ns(self) -> str:
        return self.engines_namespace or self.namespace


# --------------------------------------------------------------------------- peers and rules


def _pods(labels: dict[str, str]) -> dict[str, Any]:
    return {"podSelector": _match(labels)}


def _pods_in(namespace: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    # Every pod of the namespace is `podSelector: {}`: an empty `matchLabels` is not stored by the
    # API server, so applying one would rewrite the policy on every `pulumi up` (issue 36).
    return {"namespaceSelector": {"matchLabels": {NS_NAME_LABEL: namespace}}, "podSelector": _match(labels or {})}


def _any_pod() -> dict[str, Any]:
    return {"namespaceSelector": {}}


def internet_peer(*, private_too: bool = False) -> dict[str, Any]:
    """Any address outside the pod network but the metadata service (and the private ranges, unless
    `private_too`): the hub, Spaces, the API. Also the peer of `infra bench`'s own policy."""
    except_ = [METADATA_CIDR] if private_too else [*PRIVATE_CIDRS, METADATA_CIDR]
    return {"ipBlock": {"cidr": ANYWHERE, "except": except_}}


def _ports(*ports: int, protocol: str = "TCP") -> list[dict[str, Any]]:
    return [{"port": p, "protocol": protocol} for p in ports]


def _policy(spec: NetworkPolicySpec, namespace: str, name: str, selector: dict[str, Any], why: str, *, ingress=None, egress=None):
    types = (["Ingress"] if ingress is not None else []) + (["Egress"] if egress is not None else [])
    body: dict[str, Any] = {"podSelector": selector, "policyTypes": types}
    # An empty rule list is left out: policyTypes alone denies that direction, and the API server
    # stores no empty list, so a server-side apply of `ingress: []` rewrites the object on every
    # `pulumi up` (a diff that never settles; the control-plane tests found it, issue 36).
    if ingress:
        body["ingress"] = ingress
    if egress:
        body["egress"] = egress
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(spec.labels), "annotations": {"inference-platform/why": why}},
        "spec": body,
    }


def _match(labels: dict[str, str]) -> dict[str, Any]:
    """A label selector; no labels is `{}` (every pod), never an empty `matchLabels`, which the API
    server does not store (an apply of one rewrites the policy every time, issue 36)."""
    return {"matchLabels": dict(labels)} if labels else {}


def _dns_egress() -> dict[str, Any]:
    return {"to": [_pods_in("kube-system", DNS_LABELS)], "ports": [*_ports(53, protocol="UDP"), *_ports(53)]}


def _pypi_egress() -> dict[str, Any]:
    """The hash-locked vllm-router install (PyPI over HTTPS) of the router and P/D router pods."""
    return {"to": [internet_peer()], "ports": _ports(HTTPS_PORT)}


def vpc_peers(vpc_cidr: str | None) -> list[dict[str, Any]]:
    """The VPC as peers; on an existing cluster (None), whose network the stack does not know, the
    private ranges stand in for it."""
    if vpc_cidr is None:
        return [{"ipBlock": {"cidr": cidr}} for cidr in PRIVATE_CIDRS]
    return [{"ipBlock": {"cidr": vpc_cidr}}]


def endpoint_egress(url: str, vpc_cidr: str | None) -> dict[str, Any] | None:
    """The egress rule for one endpoint a setting names (`models[].env.HF_ENDPOINT`, an OTLP
    collector): an IP literal → that address; `<svc>.<ns>.svc[...]` → the pods of that namespace;
    any other host name → the VPC (an in-VPC mirror) and the internet, on the URL's port. None for
    what is not a URL and for a link-local address (the config refuses both: infra/config/model_env.py)."""
    host, port, scheme = endpoint_host(url)
    if not host or metadata_space(host):
        return None  # the config refuses both; the metadata address is never opened, whatever asks
    port = port or {"https": 443, "http": 80, "grpc": 4317}.get(scheme, 443)
    address = literal_address(host)
    if address is not None:
        return {"to": [{"ipBlock": {"cidr": f"{address}/{address.max_prefixlen}"}}], "ports": _ports(port)}
    labels = host.split(".")
    if len(labels) >= 3 and labels[2] == "svc":
        return {"to": [_pods_in(labels[1])], "ports": _ports(port)}
    return {"to": [*vpc_peers(vpc_cidr), internet_peer()], "ports": _ports(port)}


# --------------------------------------------------------------------------- inference namespace


def _front_door_selectors(spec: NetworkPolicySpec) -> list[dict[str, Any]]:
    """Pods that send requests to engines on behalf of clients, as peers of a policy in the engines'
    namespace: the router or the gateway proxies in the front door's namespace, the pickers beside
    the engines."""
    if spec.front_door == "router":
        return [_pods_in(spec.namespace, ROUTER_LABELS)]
    if spec.front_door == "gateway":
        return [_pods_in(spec.namespace, {GATEWAY_NAME_LABEL: spec.gateway_name}), _pods(EPP_LABELS)]
    return []


def _clients(spec: NetworkPolicySpec) -> list[dict[str, Any]]:
    """Any pod; when public, the internet and the load balancer: DO's HTTP load balancer proxies
    each request from its own address in the VPC (the client's is in X-Forwarded-For)."""
    return [_any_pod(), internet_peer(), *vpc_peers(spec.vpc_cidr)] if spec.public else [_any_pod()]


def _prometheus(spec: NetworkPolicySpec) -> list[dict[str, Any]]:
    return [_pods_in(spec.monitoring_namespace, PROMETHEUS_LABELS)] if spec.monitoring_namespace else []


def _weights_egress(spec: NetworkPolicySpec) -> list[dict[str, Any]]:
    if spec.weights == "hub":  # no shared cache: each engine downloads its checkpoint
        return [{"to": [internet_peer()], "ports": _ports(HTTPS_PORT)}]
    if spec.weights == "nfs":  # the DO NFS share answers on a VPC address
        return [{"to": vpc_peers(spec.vpc_cidr), "ports": _ports(NFS_PORT)}]
    if spec.weights == "spaces":  # the regional Spaces endpoint, over HTTPS
        return [{"to": [internet_peer()], "ports": _ports(HTTPS_PORT)}]
    return []


def _engine_policies(spec: NetworkPolicySpec) -> list[dict[str, Any]]:
    ns = spec.engines_ns
    callers = _front_door_selectors(spec) if spec.front_door != "service" else _clients(spec)
    ingress = [{"from": callers + _prometheus(spec), "ports": _ports(ENGINE_PORT)}]
    if spec.pd_models:
        ingress.append({"from": [_pods(PD_ROUTER_LABELS)], "ports": _ports(ENGINE_PORT)})
    out = [
        _policy(
            spec, ns, "engines", _match(ENGINE_LABELS),
            "engines resolve names and load weights; nothing else leaves them",
            egress=[_dns_egress(), *_weights_egress(spec)],
        ),
        _policy(
            spec, ns, "engines-serving", _match(SERVING_ENGINE_LABELS),
            "serving engines (not the workers of a replica over nodes) answer the front door and Prometheus on :8000",
            ingress=ingress,
        ),
    ]  # fmt: skip
    for model in spec.models:
        mine = {**ENGINE_LABELS, LABEL_MODEL: model}
        egress: list[dict[str, Any]] = [{"to": [_pods(mine)]}]
        if model in spec.pd_models and spec.pd_discovery_port:
            egress.append({"to": [_pods({**PD_ROUTER_LABELS, LABEL_MODEL: model})], "ports": _ports(spec.pd_discovery_port)})
        for owner, _setting, url in spec.endpoints:  # what the model's settings tell its engines to call
            rule = endpoint_egress(url, spec.vpc_cidr) if owner == model else None
            if rule is not None and rule not in egress:
                egress.append(rule)
        out.append(
            _policy(
                spec, ns, f"engines-{model}", _match(mine),
                f"engines of {model} talk to each other on every port (P/D KV transfer, multi-node collectives)",
                ingress=[{"from": [_pods(mine)]}], egress=egress,
            )
        )  # fmt: skip
    return out


def _front_door_policies(spec: NetworkPolicySpec) -> list[dict[str, Any]]:
    """The router or the gateway proxies (front door namespace); the pickers and the P/D routers
    (engines' namespace)."""
    ns, eng_ns, engines = spec.namespace, spec.engines_ns, [_pods(ENGINE_LABELS)]
    to_engines = {"to": engines, "ports": _ports(ENGINE_PORT)}  # from the engines' namespace
    to_engines_there = {"to": [_pods_in(eng_ns, ENGINE_LABELS)], "ports": _ports(ENGINE_PORT)}
    out = []
    if spec.front_door == "router":
        out.append(
            _policy(
                spec, ns, "router", _match(ROUTER_LABELS),
                "clients reach the router's client port only; Prometheus its metrics; it reaches engines, P/D routers and the API",
                ingress=[{"from": _clients(spec), "ports": _ports(spec.client_port)}]
                + ([{"from": _prometheus(spec), "ports": _ports(ROUTER_METRICS_PORT)}] if spec.monitoring_namespace else []),
                egress=[_dns_egress(), to_engines_there, {"to": [_pods_in(eng_ns, PD_ROUTER_LABELS)], "ports": _ports(ENGINE_PORT)},
                        *([_pypi_egress()] if spec.router_installs else [])],
            )
        )  # fmt: skip
    if spec.front_door == "gateway":
        grpc, metrics = spec.epp_ports
        proxy = {GATEWAY_NAME_LABEL: spec.gateway_name}
        control = [{"to": [_pods_in(spec.gateway_controller_namespace)]}] if spec.gateway_controller_namespace else []
        out.append(
            _policy(
                spec, ns, "gateway", _match(proxy),
                "clients reach the gateway listener; it asks the pickers and forwards to engines",
                ingress=[{"from": _clients(spec), "ports": _ports(spec.client_port)}]
                + ([{"from": _prometheus(spec), "ports": _ports(spec.gateway_metrics_port)}] if spec.monitoring_namespace else []),
                egress=[_dns_egress(), to_engines_there, {"to": [_pods_in(eng_ns, EPP_LABELS)], "ports": _ports(grpc)}, *control],
            )
        )  # fmt: skip
        out.append(
            _policy(
                spec, eng_ns, "endpoint-pickers", _match(EPP_LABELS),
                "the gateway asks the pickers (ext-proc gRPC); they read engine metrics and watch pods",
                ingress=[{"from": [_pods_in(ns, proxy)], "ports": _ports(grpc)}]
                + ([{"from": _prometheus(spec), "ports": _ports(metrics)}] if spec.monitoring_namespace else []),
                egress=[_dns_egress(), to_engines],
            )
        )  # fmt: skip
    if spec.pd_models:
        discovery = [{"from": engines, "ports": _ports(spec.pd_discovery_port)}] if spec.pd_discovery_port else []
        out.append(
            _policy(
                spec, eng_ns, "pd-routers", _match(PD_ROUTER_LABELS),
                "the front door reaches each model's P/D router; it runs both legs on the engines",
                ingress=[{"from": _front_door_selectors(spec) or _clients(spec), "ports": _ports(ENGINE_PORT)}, *discovery]
                + ([{"from": _prometheus(spec), "ports": _ports(ROUTER_METRICS_PORT)}] if spec.monitoring_namespace else []),
                egress=[_dns_egress(), to_engines, _pypi_egress()],
            )
        )  # fmt: skip
    return out


def _inference_policies(spec: NetworkPolicySpec) -> list[dict[str, Any]]:
    """Both serving namespaces: each denies by default and resolves names; then the flows."""
    out = []
    for ns in dict.fromkeys((spec.namespace, spec.engines_ns)):
        out += [
            _policy(spec, ns, "default-deny", {}, "deny every flow the plan does not list below", ingress=[], egress=[]),
            _policy(spec, ns, "dns", {}, "every pod resolves names", egress=[_dns_egress()]),
        ]
    out += [*_engine_policies(spec), *_front_door_policies(spec)]
    if spec.prefetch:
        out.append(
            _policy(
                spec, spec.engines_ns, "prefetch", _match(PREFETCH_LABELS),
                "the weight prefetch Jobs download from the model hub (or Spaces) into the cache",
                egress=[_dns_egress(), {"to": [internet_peer()], "ports": _ports(HTTPS_PORT)}, *_weights_egress(spec)],
            )
        )  # fmt: skip
        for model, setting, url in spec.endpoints:  # a hub mirror: the prefetch Job downloads from it
            rule = endpoint_egress(url, spec.vpc_cidr) if setting == "env.HF_ENDPOINT" else None
            if rule is not None:
                out.append(_policy(spec, spec.engines_ns, f"prefetch-{model}", _match({**PREFETCH_LABELS, LABEL_MODEL: model}),
                                   f"{model}'s prefetch Job downloads from the hub mirror models[].env.HF_ENDPOINT names",
                                   egress=[rule]))  # fmt: skip
    return out


# --------------------------------------------------------------------------- monitoring namespace


def _scrape_egress(spec: NetworkPolicySpec) -> list[dict[str, Any]]:
    """Prometheus reaches exactly its scrape targets: the chart's own pods (itself, Alertmanager,
    their config reloaders, Grafana, the operator, kube-state-metrics), CoreDNS, and the pods the
    project's PodMonitors select (infra/render/observability.py), each on its metrics port."""
    ns = spec.monitoring_namespace
    own = (PROMETHEUS_PORT, RELOADER_PORT, ALERTMANAGER_PORT, GRAFANA_PORT, OPERATOR_PORT)
    out = [
        {"to": [{"podSelector": {}}], "ports": _ports(*own)},
        {"to": [_pods_in("kube-system", DNS_LABELS)], "ports": _ports(COREDNS_METRICS_PORT)},
        {"to": [_pods_in(spec.engines_ns, ENGINE_LABELS)], "ports": _ports(ENGINE_PORT)},
    ]
    if spec.front_door == "router":
        out.append({"to": [_pods_in(spec.namespace, ROUTER_LABELS)], "ports": _ports(ROUTER_METRICS_PORT)})
    if spec.front_door == "gateway":
        out.append({"to": [_pods_in(spec.namespace, {GATEWAY_NAME_LABEL: spec.gateway_name})], "ports": _ports(spec.gateway_metrics_port)})
        out.append({"to": [_pods_in(spec.engines_ns, EPP_LABELS)], "ports": _ports(spec.epp_ports[1])})
    if spec.pd_models:
        out.append({"to": [_pods_in(spec.engines_ns, PD_ROUTER_LABELS)], "ports": _ports(ROUTER_METRICS_PORT)})
    if spec.device_exporter_scrape:  # DOKS's exporter: the PodMonitor keeps kube-system pods by image
        out.append({"to": [_pods_in("kube-system")], "ports": _ports(DEVICE_EXPORTER_PORT)})
    if spec.gpu_operator_namespace:
        out.append({"to": [_pods_in(spec.gpu_operator_namespace)], "ports": _ports(METRICS_EXPORTER_PORT)})
    assert ns is not None
    return out


def _monitoring_policies(spec: NetworkPolicySpec) -> list[dict[str, Any]]:
    """kube-prometheus-stack's pods, with every scrape its monitors make (the chart's own
    self-monitors included: docs/security.md lists them) and nothing else; the node-level
    scrapes and the API are CiliumNetworkPolicies (infra/render/cilium_policy.py)."""
    ns = spec.monitoring_namespace
    assert ns is not None
    prom = [{"podSelector": {"matchLabels": PROMETHEUS_LABELS}}]
    prometheus_from = [{"podSelector": {"matchLabels": GRAFANA_LABELS}}]
    if spec.keda_namespace:
        prometheus_from.append(_pods_in(spec.keda_namespace))
    here = {"to": [{"podSelector": {}}]}
    return [
        _policy(spec, ns, "default-deny", {}, "deny every flow the plan does not list below", ingress=[], egress=[]),
        _policy(spec, ns, "monitoring-egress", {}, "monitoring pods reach each other and DNS (the API: CiliumNetworkPolicy api-server)",
                egress=[_dns_egress(), here]),
        _policy(
            spec, ns, "prometheus", _match(PROMETHEUS_LABELS),
            "Grafana and KEDA query Prometheus; it scrapes itself and its config reloader, and exactly its pod targets",
            ingress=[{"from": prometheus_from, "ports": _ports(PROMETHEUS_PORT)},
                     {"from": prom, "ports": _ports(PROMETHEUS_PORT, RELOADER_PORT)}],
            egress=_scrape_egress(spec),
        ),
        _policy(
            spec, ns, "alertmanager", _match(ALERTMANAGER_LABELS),
            "Prometheus sends alerts and scrapes Alertmanager and its config reloader; replicas gossip"
            + ("; it notifies the receiver over HTTPS" if spec.alert_egress else ""),
            ingress=[{"from": prom, "ports": _ports(ALERTMANAGER_PORT, RELOADER_PORT)},
                     {"from": [{"podSelector": {"matchLabels": ALERTMANAGER_LABELS}}], "ports": [*_ports(9094), *_ports(9094, protocol="UDP")]}],
            **({"egress": [{"to": [internet_peer()], "ports": _ports(HTTPS_PORT)}]} if spec.alert_egress else {}),
        ),
        _policy(spec, ns, "grafana", _match(GRAFANA_LABELS), "Prometheus scrapes Grafana (the chart's ServiceMonitor)",
                ingress=[{"from": prom, "ports": _ports(GRAFANA_PORT)}]),
        _policy(
            spec, ns, "kube-state-metrics", _match(KSM_LABELS), "Prometheus scrapes kube-state-metrics",
            ingress=[{"from": prom, "ports": _ports(8080)}],
        ),
        _policy(spec, ns, "operator", _match(OPERATOR_LABELS),
                "Prometheus scrapes the operator (https :10250; its admission webhook, same port: CiliumNetworkPolicy control-plane)",
                ingress=[{"from": prom, "ports": _ports(OPERATOR_PORT)}]),
    ]  # fmt: skip


# --------------------------------------------------------------------------- controller namespaces


@dataclass(frozen=True)
class ControllerFlows:
    """What one Helm-installed controller namespace needs beyond DNS, the API and itself."""

    role: str  # which spec field names its namespace
    why: str
    from_api_server: tuple[int, ...] = ()  # admission webhooks, aggregated API servers
    from_gateway_proxies: tuple[int, ...] = ()  # xDS: the proxies fetch their configuration
    to_prometheus: bool = False  # queries Prometheus (KEDA's prometheus scaler)
    from_prometheus: tuple[int, ...] = ()  # metrics Prometheus scrapes (when observability is on)


AGENTGATEWAY_XDS_PORT = 9978  # agentgateway chart values `controller.service.ports.agwGrpc`

CONTROLLERS = (
    ControllerFlows(
        "keda_namespace",
        "KEDA: the API server calls its admission webhooks and its external-metrics API server; the operator queries Prometheus",
        # kedacore/charts keda: webhooks.port default 9443, service.portHttpsTarget 6443; the
        # metrics server reaches the operator on :9666 inside the namespace.
        from_api_server=(9443, 6443),
        to_prometheus=True,
    ),
    ControllerFlows(
        "gateway_controller_namespace",
        "agentgateway controller: the gateway proxies fetch their configuration over xDS; it watches the API",
        from_gateway_proxies=(AGENTGATEWAY_XDS_PORT,),
    ),
    ControllerFlows(
        "lws_namespace",
        "LeaderWorkerSet controller: the API server calls its webhooks; it watches the API",
        from_api_server=(9443,),  # lws chart: the webhook Service's targetPort 9443
    ),
    ControllerFlows(
        "gpu_operator_namespace",
        "AMD GPU operator: it and its node labeller watch the API; Prometheus scrapes the device-metrics exporter",
        # gpu-operator-charts v1.5.0: no webhook; the device plugin talks to the kubelet over a socket.
        from_prometheus=(METRICS_EXPORTER_PORT,),
    ),
    ControllerFlows(
        "cert_manager_namespace",
        "cert-manager (the GPU operator's certificates): the API server calls its webhook; it watches the API",
        from_api_server=(CERT_MANAGER_WEBHOOK_PORT,),
    ),
)


def _controller_policies(spec: NetworkPolicySpec, flows: ControllerFlows) -> list[dict[str, Any]]:
    ns = getattr(spec, flows.role)
    assert ns is not None
    # The API server's calls (webhooks, aggregated APIs: `from_api_server`) are entity flows, in
    # the CiliumNetworkPolicy `control-plane` (infra/render/cilium_policy.py): a NetworkPolicy can
    # only say "any source", which opened these ports to every pod (issue 35).
    ingress: list[dict[str, Any]] = [{"from": [{"podSelector": {}}]}]
    if flows.from_gateway_proxies:
        proxies = _pods_in(spec.namespace, {GATEWAY_NAME_LABEL: spec.gateway_name})
        ingress.append({"from": [proxies], "ports": _ports(*flows.from_gateway_proxies)})
    if flows.from_prometheus and spec.monitoring_namespace:
        ingress.append({"from": _prometheus(spec), "ports": _ports(*flows.from_prometheus)})
    egress = [_dns_egress(), {"to": [{"podSelector": {}}]}]
    if flows.to_prometheus and spec.monitoring_namespace:
        egress.append({"to": [_pods_in(spec.monitoring_namespace, PROMETHEUS_LABELS)], "ports": _ports(9090)})
    return [
        _policy(spec, ns, "default-deny", {}, "deny every flow the plan does not list below", ingress=[], egress=[]),
        _policy(spec, ns, "controller", {}, flows.why, ingress=ingress, egress=egress),
    ]


def render_network_policies(spec: NetworkPolicySpec) -> list[dict[str, Any]]:
    """Every NetworkPolicy of the stack, namespace by namespace (deterministic order)."""
    out = _inference_policies(spec)
    if spec.monitoring_namespace:
        out += _monitoring_policies(spec)
    for flows in CONTROLLERS:
        if getattr(spec, flows.role) is not None:
            out += _controller_policies(spec, flows)
    return out + render_cilium_policies(cilium_flows(spec), spec.labels)


def cilium_flows(spec: NetworkPolicySpec) -> CiliumFlows:
    """The plan's flows from or to the control plane and the nodes (Cilium entities)."""
    watchers: list[tuple[str, dict[str, str]]] = []
    if spec.front_door == "router":
        watchers.append((spec.namespace, ROUTER_LABELS))  # the registrar reads EndpointSlices
    if spec.front_door == "gateway":
        watchers.append((spec.engines_ns, EPP_LABELS))  # the pickers watch pods
    if spec.pd_models:
        watchers.append((spec.engines_ns, PD_ROUTER_LABELS))  # service discovery of prefill/decode pods
    webhooks: list[tuple[str, dict[str, str], tuple[int, ...], str]] = []
    if spec.monitoring_namespace:
        watchers.append((spec.monitoring_namespace, {}))  # the operator, Prometheus' discovery, Grafana's sidecars
        webhooks.append((spec.monitoring_namespace, OPERATOR_LABELS, (OPERATOR_PORT,),
                         "the API server calls prometheus-operator's admission webhook (PrometheusRules are validated there)"))
    for flows in CONTROLLERS:
        ns = getattr(spec, flows.role)
        if ns is None:
            continue
        watchers.append((ns, {}))
        if flows.from_api_server:
            webhooks.append((ns, {}, flows.from_api_server, flows.why.split(";")[0] + ": only the control plane reaches these ports"))
    node_ports = (KUBELET_PORT, NODE_EXPORTER_PORT) + ((DEVICE_EXPORTER_PORT,) if spec.device_exporter_scrape else ())
    return CiliumFlows(
        api_watchers=tuple(watchers),
        webhooks=tuple(webhooks),
        prometheus=(spec.monitoring_namespace, PROMETHEUS_LABELS) if spec.monitoring_namespace else None,
        node_scrape_ports=node_ports if spec.monitoring_namespace else (),
    )


def network_policy_spec(
    *, namespace: str, vpc_cidr: str | None, services, engines_namespace: str = "", router, gateway, observability, keda: bool, lws: bool = False,
    gpu_operator: bool = False,
) -> NetworkPolicySpec:
    """The policy facts of a plan: its model services, router or gateway, observability, KEDA.

    Engines download from the model hub themselves when there is no shared cache (`weights: hub`)."""
    from infra.catalog.versions import LWS_NAMESPACE
    from infra.render.gateway import CONTROLLER_NAMESPACE, GATEWAY_NAME, LISTENER_PORT, PROXY_METRICS_PORT
    from infra.render.pd_service import MORIIO_PROXY_PING_PORT
    from infra.render.router import client_port

    # A stack without models still gets its default deny (its router, if any, reaches nothing).
    first = services[0] if services else None
    weights = None if first is None else "spaces" if first.weights is not None else "nfs" if first.cache is not None else "hub"
    pd_models = tuple(s.name for s in services if getattr(s.layout, "disaggregated", False))
    if gateway is not None:
        door, port, public = "gateway", LISTENER_PORT, gateway.public
    elif router.kind != "service":
        door, port, public = "router", client_port(router), router.public
    else:
        door, port, public = "service", ENGINE_PORT, False
    return NetworkPolicySpec(
        namespace=namespace,
        engines_namespace=engines_namespace,
        models=tuple(s.name for s in services),
        front_door=door,
        client_port=port,
        public=public,
        weights=weights,
        vpc_cidr=vpc_cidr,
        prefetch=any(s.cache is not None or s.weights is not None for s in services),
        pd_models=pd_models,
        pd_discovery_port=MORIIO_PROXY_PING_PORT if pd_models else None,
        gateway_name=GATEWAY_NAME,
        gateway_metrics_port=PROXY_METRICS_PORT,
        monitoring_namespace=observability.settings.namespace if observability is not None else None,
        keda_namespace="keda" if keda else None,
        gateway_controller_namespace=CONTROLLER_NAMESPACE if gateway is not None else None,
        lws_namespace=LWS_NAMESPACE if lws else None,
        gpu_operator_namespace=GPU_OPERATOR_NAMESPACE if gpu_operator else None,
        cert_manager_namespace=CERT_MANAGER_NAMESPACE if gpu_operator else None,
        router_installs=door == "router" and not router.image,
        endpoints=declared_endpoints(services),
        alert_egress=observability is not None and observability.settings.alert_receiver != "none",
        device_exporter_scrape=observability is not None and observability.gpu.scrape_amd_exporter
        and observability.gpu.resolved_exporter_namespace == "kube-system",
    )


def declared_endpoints(services) -> tuple[tuple[str, str, str], ...]:
    """(model, setting, URL) of every endpoint a model's settings tell its engines to use
    (`models[].env` HF_ENDPOINT / OTEL_* and `extra_args --otlp-traces-endpoint`): each gets an
    egress rule derived from it (`endpoint_egress`), so a setting never points past the policies."""
    out = []
    for s in services:
        env = dict(getattr(s, "env", {}) or {})
        out += [(s.name, f"env.{k}", env[k]) for k in ENDPOINT_ENV if env.get(k)]
        args = list(getattr(s, "extra_args", ()) or ())
        for i, arg in enumerate(args):
            for flag in ENDPOINT_FLAGS:
                if arg == flag and i + 1 < len(args):
                    out.append((s.name, f"extra_args {flag}", args[i + 1]))
                elif arg.startswith(flag + "="):
                    out.append((s.name, f"extra_args {flag}", arg.split("=", 1)[1]))
    return tuple(out)
