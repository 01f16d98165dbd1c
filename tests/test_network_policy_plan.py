"""Issues 30 and 35: the connectivity of every stack and variant CI scans, computed by a real
analyzer (network-config-analyzer 2.1.0 over the rendered NetworkPolicies, with Cilium's entity
flows from the rendered CiliumNetworkPolicies: tests/policy_analyzer.py), equals the matrix the
plan needs (tests/policy_matrix.py): every needed flow allowed, every other flow probed denied.
docs/security.md's who-can-reach-what table is generated from the same matrix.

Findings of issue 35 each have their own test below (KEDA's ports open to every pod, the
prometheus-operator webhook unreachable from the API server, the chart's monitors and the node
scrapes denied, the CiliumNetworkPolicy CRD unknown to the prerequisites invariant)."""

from __future__ import annotations

import pytest

from infra.offline import kubernetes_objects
from tests.conftest import ROOT
from tests.policy_analyzer import Connectivity, Conns, Endpoint, parse_conns
from tests.policy_matrix import (
    API,
    BEGIN,
    CLIENTS,
    CONTROLLER_PODS,
    END,
    MONITORING_PODS,
    NODES,
    analyse,
    plan_facts,
    table,
    universe,
)
from tests.security_variants import NAMES, plan_named


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    root = tmp_path_factory.mktemp("netpol")
    return {name: plan_named(name, root) for name in NAMES}


@pytest.fixture(scope="module")
def results(plans):
    return {name: analyse(name, plan) for name, plan in plans.items()}


@pytest.fixture(scope="module")
def prod(plans):
    facts = plan_facts("prod", plans["prod"])
    return facts, Connectivity.analyse(facts.objects, universe(facts))


@pytest.mark.parametrize("name", NAMES)
def test_the_analyzer_allows_exactly_the_flows_the_plan_needs(results, name):
    r = results[name]
    assert r.allowed and r.probed > 1000
    assert r.missing == [], f"{name}: needed but denied: {r.missing[:20]}"
    assert r.unexpected == [], f"{name}: allowed but not needed: {r.unexpected[:20]}"
    print(f"{name}: {r.probed} flows probed, {len(r.allowed)} allowed")


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


@pytest.mark.parametrize("name", NAMES)
def test_no_policy_carries_an_empty_list_or_match_labels(plans, name):
    """The API server stores no empty `ingress: []`, `egress: []` or `matchLabels: {}`, so a
    server-side apply of one rewrites the policy on every `pulumi up`, a diff that never settles:
    policyTypes alone says "deny", `podSelector: {}` says "every pod" (issue 36, found by the
    control-plane tests' second apply). CiliumNetworkPolicies too."""
    policies = [o for o in kubernetes_objects(plans[name]) if o["kind"] in ("NetworkPolicy", "CiliumNetworkPolicy")]
    empty = [f"{p['kind']} {p['metadata']['namespace']}/{p['metadata']['name']} spec{where}" for p in policies
             for where in _empties(p["spec"])]  # fmt: skip
    assert not empty


def test_the_security_doc_table_is_the_matrix(results):
    doc = (ROOT / "docs" / "security.md").read_text()
    assert BEGIN in doc and END in doc
    current = doc[doc.index(BEGIN) + len(BEGIN):doc.index(END)].strip()
    assert current == table([results[n] for n in NAMES]).strip(), "docs/security.md is stale: python -m tests.policy_matrix --write"


def _pod(matrix_universe, role):
    return next(e for e in matrix_universe if e.role == role)


def test_keda_admits_the_control_plane_only(prod):
    """Issue 35: KEDA's admission webhooks (:9443) and metrics API (:6443) were open to every pod."""
    facts, conn = prod
    keda = CONTROLLER_PODS["keda"]
    for pod in keda:
        for port in (9443, 6443):
            for client in CLIENTS:
                assert not conn.allows(client, pod, port), (client.key, pod.key, port)
            for engine in (p for p in facts.pods if p.role == "engines"):
                assert not conn.allows(engine, pod, port)
    for port, pod in ((9443, keda[2]), (6443, keda[1])):
        assert conn.allows(API, pod, port) and all(conn.allows(n, pod, port) for n in NODES)


def test_the_api_server_reaches_the_prometheus_operator_webhook(prod):
    """Issue 35: the operator's admission webhook admitted only an ipBlock, which Cilium never
    matches for the control plane: every PrometheusRule create failed or timed out."""
    _, conn = prod
    operator = _pod(MONITORING_PODS, "prometheus-operator")
    assert conn.allows(API, operator, 10250) and all(conn.allows(n, operator, 10250) for n in NODES)
    assert not any(conn.allows(c, operator, 10250) for c in CLIENTS)


def test_every_monitor_of_the_chart_scrapes_and_the_nodes_too(prod):
    """Issue 35: the chart's self-monitors (Prometheus, Alertmanager, their reloaders, Grafana, the
    operator) were denied, and node-level targets (kubelet/cAdvisor, node-exporter) were ipBlock
    peers Cilium never matches."""
    _, conn = prod
    prometheus = _pod(MONITORING_PODS, "Prometheus")
    for role, ports in (("Prometheus", (9090, 8080)), ("Alertmanager", (9093, 8080)), ("Grafana", (3000,)),
                        ("prometheus-operator", (10250,)), ("kube-state-metrics", (8080,))):  # fmt: skip
        target = next(e for e in MONITORING_PODS if e.role == role and e is not prometheus)
        for port in ports:
            assert conn.allows(prometheus, target, port), (role, port)
    for node in NODES:
        for port in (10250, 9100):
            assert conn.allows(prometheus, node, port), (node.key, port)
        assert not conn.allows(prometheus, node, 22)
    assert conn.allows(prometheus, API, 443)


def test_pods_that_watch_the_api_reach_the_api_entity_and_not_the_internet(prod):
    """The registrar (router pod) reaches the API by entity; no pod reaches the internet on 443 for
    the API any more (only the router's PyPI install, prefetch downloads and weights)."""
    facts, conn = prod
    (router,) = [p for p in facts.pods if p.role == "router"]
    assert conn.allows(router, API, 443)
    for pod in facts.pods:
        if pod.role == "engines":
            assert not conn.allows(pod, API, 443)
    for pod in [*CONTROLLER_PODS["keda"], *MONITORING_PODS]:
        assert conn.allows(pod, API, 443)
        assert not conn.allows(pod, Endpoint("internet", ip="140.82.112.3"), 443), pod.key


def test_kube_proxy_monitor_is_off_with_its_reason():
    from infra.render.observability import UNREACHABLE_MONITOR_VALUES

    assert UNREACHABLE_MONITOR_VALUES == {"kubeProxy": {"enabled": False}}


def test_cilium_network_policy_crd_is_a_known_prerequisite(plans):
    """DOKS runs Cilium, which installs its CRDs: the prerequisites invariant knows `cilium.io`."""
    from infra.invariants.prerequisites import DOKS_CNI_CRDS

    assert "cilium.io" in DOKS_CNI_CRDS
    cnps = [o for o in kubernetes_objects(plans["prod"]) if o["kind"] == "CiliumNetworkPolicy"]
    assert {o["apiVersion"] for o in cnps} == {"cilium.io/v2"} and len(cnps) >= 5


def test_every_controller_namespace_of_the_variants_is_covered(plans):
    seen = {p["metadata"]["namespace"] for plan in plans.values() for p in kubernetes_objects(plan) if p["kind"] == "NetworkPolicy"}
    assert set(CONTROLLER_PODS) <= seen


def test_nca_connection_text_parses():
    assert parse_conns("All connections").allows(1, "UDP")
    c = parse_conns("{protocols:TCP, UDP,dst_ports:53},{protocols:TCP,dst_ports:8000-8001,9090}")
    assert c.allows(53, "UDP") and c.allows(8001, "TCP") and c.allows(9090, "TCP") and not c.allows(9091, "TCP")
    assert parse_conns("{protocols:TCP}").allows(65535, "TCP") and not parse_conns("{protocols:TCP}").allows(1, "UDP")
    assert set((Conns() | c).ranges) == set(c.ranges)


@pytest.mark.parametrize("name", NAMES)
def test_the_policy_pack_passes_on_every_variant(plans, name):
    """The CrossGuard pack (policy/) over every stack and variant, the public router included."""
    from tests.conftest import policy_violations

    plan = plans[name]
    assert policy_violations(plan, plan.summary["environment"]) == []
