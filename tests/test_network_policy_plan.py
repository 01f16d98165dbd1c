"""Issue 30, the connectivity matrix: derived from the rendered NetworkPolicies of every shipped stack
and of every layout-family variant (tests/security_variants.py) with the documented NetworkPolicy
semantics (tests/netpol.py): every flow the plan needs is allowed; a client pod cannot reach an
engine directly (when there is a front door), Prometheus, Grafana, Alertmanager, the router's
loopback admin port or its metrics; nothing reaches the node metadata address."""

from __future__ import annotations

import pytest

from infra.offline import kubernetes_objects
from infra.render.network_policy import METADATA_CIDR
from tests.netpol import Endpoint, allowed, pods_of, selector_matches
from tests.security_variants import NAMES, plan_named

CLIENT = Endpoint("client", "default", {"app": "client"})
OTHER_NS_POD = Endpoint("intruder", "tenant-a", {"app": "anything"})
PROMETHEUS = Endpoint("prometheus", "monitoring", {"app.kubernetes.io/name": "prometheus"}, {"web": 9090})
GRAFANA = Endpoint("grafana", "monitoring", {"app.kubernetes.io/name": "grafana"}, {"grafana": 3000})
ALERTMANAGER = Endpoint("alertmanager", "monitoring", {"app.kubernetes.io/name": "alertmanager"}, {"web": 9093})
DNS = Endpoint("coredns", "kube-system", {"k8s-app": "kube-dns"}, {"dns": 53})
GATEWAY_PROXY = Endpoint("gateway-proxy", "inference", {"gateway.networking.k8s.io/gateway-name": "inference-gateway"})
INTERNET = Endpoint("internet", ip="140.82.112.3")  # a public address (the model hub, Spaces, PyPI, the API)
METADATA = Endpoint("metadata", ip=METADATA_CIDR.split("/")[0])


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    root = tmp_path_factory.mktemp("netpol")
    return {name: plan_named(name, root) for name in NAMES}


class Matrix:
    """One plan's pods and policies, with helpers that name what the assertions mean."""

    def __init__(self, plan):
        objects = kubernetes_objects(plan)
        self.policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
        self.pods = pods_of(objects)
        self.door = plan.front_door["kind"]
        self.monitoring = any(p["metadata"]["namespace"] == "monitoring" for p in self.policies)
        self.vpc = next(r for r in plan.resources if r["type"] == "digitalocean:index/vpc:Vpc")["inputs"]["ipRange"]

    def having(self, **labels) -> list[Endpoint]:
        return [p for p in self.pods if selector_matches({"matchLabels": labels}, p.labels)]

    def engines(self) -> list[Endpoint]:
        return self.having(**{"app.kubernetes.io/component": "engine"})

    def ok(self, src, dst, port, protocol="TCP") -> bool:
        return allowed(self.policies, src, dst, port, protocol)


@pytest.fixture(scope="module", params=NAMES)
def matrix(request, plans):
    return Matrix(plans[request.param])


def test_every_namespace_the_stack_owns_denies_by_default(matrix):
    namespaces = {p.namespace for p in matrix.pods if p.namespace != "kube-system"}
    namespaces |= {"monitoring"} if matrix.monitoring else set()
    for ns in namespaces:
        assert any(p["metadata"]["namespace"] == ns and p["spec"]["podSelector"] == {} and p["spec"]["policyTypes"] == ["Ingress", "Egress"]
                   and not p["spec"].get("ingress") and not p["spec"].get("egress") for p in matrix.policies), ns  # fmt: skip


def _empties(node, path=""):
    """Paths of empty lists and empty `matchLabels` maps in a policy spec (`podSelector: {}` and
    `namespaceSelector: {}` are selectors, kept as written)."""
    if isinstance(node, list):
        if not node:
            yield path
        for i, item in enumerate(node):
            yield from _empties(item, f"{path}[{i}]")
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "matchLabels" and value == {}:
                yield f"{path}.{key}"
            yield from _empties(value, f"{path}.{key}")


def test_no_policy_carries_an_empty_list_or_match_labels(matrix):
    """The API server stores no empty `ingress: []`, `egress: []` or `matchLabels: {}`, so a
    server-side apply of one rewrites the policy on every `pulumi up`, a diff that never settles:
    policyTypes alone says "deny", `podSelector: {}` says "every pod" (issue 36, found by the
    control-plane tests' second apply)."""
    empty = [f"{p['metadata']['namespace']}/{p['metadata']['name']} spec{where}" for p in matrix.policies
             for where in _empties(p["spec"])]  # fmt: skip
    assert not empty


def test_clients_reach_the_front_door_and_nothing_behind_it(matrix):
    engines = matrix.engines()
    assert engines
    if matrix.door == "service":  # no front door: each model's Service is it, the key guards it
        assert all(matrix.ok(CLIENT, e, 8000) for e in matrix.having(**{"app.kubernetes.io/name": "vllm"}))
        return
    for engine in engines:
        for client in (CLIENT, OTHER_NS_POD):
            assert not matrix.ok(client, engine, 8000), engine.name
    if matrix.door == "gateway":
        assert matrix.ok(CLIENT, GATEWAY_PROXY, 80)
        for epp in matrix.having(**{"app.kubernetes.io/name": "epp"}):
            assert not matrix.ok(CLIENT, epp, 9002) and not matrix.ok(CLIENT, epp, 9090)
            assert matrix.ok(GATEWAY_PROXY, epp, 9002)
        assert all(matrix.ok(GATEWAY_PROXY, e, 8000) for e in engines)
        return
    (router,) = matrix.having(**{"app.kubernetes.io/name": "router"})
    assert matrix.ok(CLIENT, router, 8000) and matrix.ok(OTHER_NS_POD, router, 8000)
    for port in (8001, 29000):  # the loopback-bound router (admin routes) and its metrics
        assert not matrix.ok(CLIENT, router, port), port
    for pd_router in matrix.having(**{"app.kubernetes.io/name": "vllm-pd-router"}):
        assert not matrix.ok(CLIENT, pd_router, 8000)  # its admin routes too: only the front door reaches it
        assert matrix.ok(router, pd_router, 8000)
    serving = [e for e in engines if e.labels.get("app.kubernetes.io/name") == "vllm" and "inference-platform/pd-role" not in e.labels]
    assert all(matrix.ok(router, e, 8000) for e in serving)


def test_clients_reach_no_monitoring_component(matrix):
    for target, port in ((PROMETHEUS, 9090), (GRAFANA, 3000), (ALERTMANAGER, 9093)):
        assert not matrix.ok(CLIENT, target, port) or not matrix.monitoring, target.name
    if matrix.monitoring:
        assert matrix.ok(GRAFANA, PROMETHEUS, 9090) and matrix.ok(PROMETHEUS, ALERTMANAGER, 9093)


def test_prometheus_scrapes_every_metrics_port(matrix):
    if not matrix.monitoring:
        return
    for engine in matrix.having(**{"app.kubernetes.io/name": "vllm"}):
        assert matrix.ok(PROMETHEUS, engine, 8000), engine.name
    for router in matrix.having(**{"app.kubernetes.io/component": "router"}) + matrix.having(**{"app.kubernetes.io/name": "vllm-pd-router"}):
        assert matrix.ok(PROMETHEUS, router, 29000), router.name
    for epp in matrix.having(**{"app.kubernetes.io/name": "epp"}):
        assert matrix.ok(PROMETHEUS, epp, 9090)


def test_engines_talk_within_their_model_only(matrix):
    by_model: dict[str, list[Endpoint]] = {}
    for engine in matrix.engines():
        by_model.setdefault(engine.labels["inference-platform/model"], []).append(engine)
    for model, mine in by_model.items():
        for a in mine:
            for b in mine:
                assert matrix.ok(a, b, 6301) and matrix.ok(a, b, 29500), (a.name, b.name)  # KV transfer, torch rendezvous
            for other_model, theirs in by_model.items():
                if other_model != model:
                    assert not any(matrix.ok(a, b, 8000) for b in theirs), (a.name, other_model)
            for pd_router in matrix.having(**{"app.kubernetes.io/name": "vllm-pd-router", "inference-platform/model": model}):
                assert matrix.ok(a, pd_router, 36367)  # MoRI-IO registration
                assert matrix.ok(pd_router, a, 8000)


def test_weights_come_only_from_where_the_plan_keeps_them(matrix):
    nfs = Endpoint("nfs", ip=matrix.vpc.split("/")[0].rsplit(".", 1)[0] + ".20")
    prefetch = matrix.having(**{"app.kubernetes.io/component": "prefetch"})
    engines = matrix.having(**{"app.kubernetes.io/name": "vllm"})
    uses_nfs = any(p["spec"].get("egress") and any(
        e.get("ports") == [{"port": 2049, "protocol": "TCP"}] for e in p["spec"]["egress"]) for p in matrix.policies)  # fmt: skip
    for engine in engines:
        assert matrix.ok(engine, nfs, 2049) == uses_nfs
    for job in prefetch:
        assert matrix.ok(job, INTERNET, 443)  # the model hub or Spaces
    if uses_nfs:  # the engines load from the share: no way out to the internet
        assert not any(matrix.ok(e, INTERNET, 443) for e in engines)


def test_every_pod_resolves_names_and_none_reaches_the_metadata_address(matrix):
    for pod in matrix.pods:
        if pod.namespace == "kube-system":
            continue  # not a namespace the stack owns (node tuning, Multus)
        assert matrix.ok(pod, DNS, 53, "UDP"), pod.name
        for port in (80, 443):
            assert not matrix.ok(pod, METADATA, port), pod.name
    if matrix.monitoring:
        for pod in (PROMETHEUS, GRAFANA, ALERTMANAGER):
            assert not matrix.ok(pod, METADATA, 80)


def test_pods_that_watch_the_api_reach_it(matrix):
    api = Endpoint("kubernetes-api", ip="165.227.0.10")
    for pod in matrix.having(**{"app.kubernetes.io/name": "router"}) + matrix.having(**{"app.kubernetes.io/name": "epp"}):
        assert matrix.ok(pod, api, 443), pod.name
    for engine in matrix.having(**{"app.kubernetes.io/name": "vllm"}):
        assert not matrix.ok(engine, api, 6443)


# The controllers' pods come from their Helm charts (not in the plan): their labels as the charts
# set them (kedacore/charts keda 2.18, agentgateway v1.4, lws 0.10), and their ports.
API_SERVER = Endpoint("kubernetes-api", ip="165.227.0.10")
CONTROLLER_PODS = {
    "keda": [
        Endpoint("keda-operator", "keda", {"app.kubernetes.io/name": "keda-operator"}, {"metricsservice": 9666}),
        Endpoint("keda-metrics-apiserver", "keda", {"app.kubernetes.io/name": "keda-operator-metrics-apiserver"}, {"https": 6443}),
        Endpoint("keda-admission-webhooks", "keda", {"app.kubernetes.io/name": "keda-admission-webhooks"}, {"https": 9443}),
    ],
    "agentgateway-system": [Endpoint("agentgateway", "agentgateway-system", {"app.kubernetes.io/name": "agentgateway"}, {"agw-grpc": 9978})],
    "lws-system": [Endpoint("lws-controller-manager", "lws-system", {"control-plane": "controller-manager"}, {"webhook-server": 9443})],
    "kube-amd-gpu": [
        Endpoint("amd-gpu-operator", "kube-amd-gpu", {"app.kubernetes.io/name": "gpu-operator-charts"}, {"health": 8081}),
        Endpoint("device-metrics-exporter", "kube-amd-gpu", {"app.kubernetes.io/name": "metrics-exporter"}, {"exporter-port": 5000}),
    ],
    "cert-manager": [Endpoint("cert-manager-webhook", "cert-manager", {"app.kubernetes.io/name": "webhook"}, {"https": 10250})],
}
# What each controller namespace must accept from the API server, and the rest of its flows.
FROM_API_SERVER = {"keda": (9443, 6443), "agentgateway-system": (), "lws-system": (9443,), "kube-amd-gpu": (), "cert-manager": (10250,)}


def test_controller_namespaces_deny_by_default_and_allow_exactly_their_flows(matrix):
    """Issue 30: the namespaces of the controllers the stack installs (KEDA with autoscaling,
    agentgateway with the gateway, LeaderWorkerSet with a fabric pool, the GPU operator and
    cert-manager) deny by default; the API server reaches their webhooks, they reach DNS, the API
    and each other; no client or engine reaches any other port of theirs."""
    installed = {p["metadata"]["namespace"] for p in matrix.policies} & set(CONTROLLER_PODS)
    assert ("agentgateway-system" in installed) == (matrix.door == "gateway")
    for ns in installed:
        assert any(p["metadata"]["namespace"] == ns and p["metadata"]["name"] == "default-deny" for p in matrix.policies), ns
        pods = CONTROLLER_PODS[ns]
        for pod in pods:
            assert matrix.ok(pod, DNS, 53, "UDP") and matrix.ok(pod, API_SERVER, 443), pod.name
            assert not matrix.ok(pod, METADATA, 80) and not matrix.ok(pod, INTERNET, 80), pod.name
            assert not any(matrix.ok(pod, e, 8000) for e in matrix.engines()), pod.name
            for port in {*pod.named_ports.values(), 8080, 8443} - set(FROM_API_SERVER[ns]):  # + the charts' metrics ports
                assert not matrix.ok(CLIENT, pod, port) and not matrix.ok(OTHER_NS_POD, pod, port), (pod.name, port)
                assert not any(matrix.ok(e, pod, port) for e in matrix.engines()), (pod.name, port)
            for port in FROM_API_SERVER[ns]:
                # Open to any source (the API server's address is not matchable on DOKS: see
                # _controller_policies); what they serve are TLS admission reviews.
                assert matrix.ok(API_SERVER, pod, port), (pod.name, port)
        assert all(matrix.ok(a, b, port) for a in pods for b in pods for port in b.named_ports.values())
    if "keda" in installed:
        assert matrix.ok(CONTROLLER_PODS["keda"][0], PROMETHEUS, 9090)
        assert not matrix.ok(CONTROLLER_PODS["keda"][0], GRAFANA, 3000)
    if "agentgateway-system" in installed:
        assert matrix.ok(GATEWAY_PROXY, CONTROLLER_PODS["agentgateway-system"][0], 9978)
    if "kube-amd-gpu" in installed:
        assert matrix.ok(PROMETHEUS, CONTROLLER_PODS["kube-amd-gpu"][1], 5000) == matrix.monitoring


def test_every_controller_namespace_of_the_variants_is_covered(plans):
    """KEDA (prod autoscales), agentgateway (the gateway variant), LWS (fabric pools), the GPU
    operator and cert-manager (the gpu-operator variant) all appear."""
    seen = {p["metadata"]["namespace"] for plan in plans.values() for p in kubernetes_objects(plan) if p["kind"] == "NetworkPolicy"}
    assert set(CONTROLLER_PODS) <= seen


def test_semantics_of_the_evaluator():
    """The evaluator itself, on the documented examples: unselected pods are open; a policy
    selecting a pod closes the directions it lists; rules are ORed; ipBlock excepts."""
    deny = {"metadata": {"namespace": "a"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []}}
    allow = {"metadata": {"namespace": "a"}, "spec": {"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress"],
             "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}], "ports": [{"port": "sql"}]}]}}  # fmt: skip
    web, db = Endpoint("web", "a", {"app": "web"}), Endpoint("db", "a", {"app": "db"}, {"sql": 5432})
    elsewhere = Endpoint("web", "b", {"app": "web"})
    assert allowed([], elsewhere, db, 1) and not allowed([deny], web, db, 5432)
    assert allowed([deny, allow], web, db, 5432) and not allowed([deny, allow], web, db, 5433)
    assert not allowed([deny, allow], elsewhere, db, 5432)  # podSelector alone: the policy's namespace
    out = {"metadata": {"namespace": "a"}, "spec": {"podSelector": {}, "policyTypes": ["Egress"],
           "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32"]}}]}]}}  # fmt: skip
    assert allowed([out], web, INTERNET, 443) and not allowed([out], web, METADATA, 80)
    assert not allowed([out], web, db, 5432)  # ipBlock does not match pods


@pytest.mark.parametrize("name", NAMES)
def test_the_policy_pack_passes_on_every_variant(plans, name):
    """The CrossGuard pack (policy/) over every stack and variant, the public router included:
    no key on a command line any more (the router used to get `--api-key $(VLLM_API_KEY)`)."""
    from tests.conftest import policy_violations

    plan = plans[name]
    assert policy_violations(plan, plan.summary["environment"]) == []


def _role(pod: Endpoint) -> str:
    return pod.labels.get("app.kubernetes.io/component") or pod.labels.get("app.kubernetes.io/name") or pod.name


def test_flows_between_the_serving_namespaces_are_exactly_the_front_doors(matrix):
    """Issue 30 item 4: the engines live in `inference-engines`, apart from the front door in
    `inference`. Between the two namespaces (either way, over every port the pods declare and the
    platform's well-known ones) only the front door's own flows are open: the router to the engines
    and P/D routers, the gateway proxies to the engines and the endpoint pickers. The pre-pull
    DaemonSets in `inference` reach nothing; nothing behind opens a connection to the front."""
    front = [p for p in matrix.pods if p.namespace == "inference"] + ([GATEWAY_PROXY] if matrix.door == "gateway" else [])
    behind = [p for p in matrix.pods if p.namespace == "inference-engines"]
    assert behind and all(p.namespace == "inference-engines" for p in matrix.engines())
    well_known = {80, 8000, 8001, 9002, 9090, 29000, 36367, 6301}
    opened = {
        (_role(a), _role(b), port)
        for src, dst in ((front, behind), (behind, front))
        for a in src
        for b in dst
        for port in sorted(set(b.named_ports.values()) | well_known)
        if matrix.ok(a, b, port)
    }
    pd = any(_role(p) == "pd-router" for p in behind)
    expected = {
        "router": {("router", "engine", 8000)} | ({("router", "pd-router", 8000)} if pd else set()),
        "gateway": {("gateway-proxy", "engine", 8000), ("gateway-proxy", "endpoint-picker", 9002)},
        "service": set(),  # no front door pod: clients reach the engines' Services directly
    }[matrix.door if matrix.door in ("gateway", "service") else "router"]  # else a router kind (session, prefix...)
    assert opened == expected
