"""The flows a NetworkPolicy cannot express on DOKS, as CiliumNetworkPolicies (cilium.io/v2).

DOKS runs Cilium, which enforces `networking.k8s.io/v1` NetworkPolicies and its own
CiliumNetworkPolicy CRD (Cilium installs the CRD itself: docs.cilium.io "Network Policy" —
NetworkPolicy, CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy run side by side, their
allow rules add up). Where the two differ, this project relies on Cilium's semantics:

- **ipBlock never matches nodes, pods or the control plane.** Cilium applies CIDR rules only to
  peers outside the cluster that are not a node (CiliumNetworkPolicy `toCIDR` reference: "only
  connections destined for outside of the cluster and not targeting the host"); matching node
  IPs by CIDR is opt-in (`policy-cidr-match-mode: nodes`, Cilium >= 1.15), off by default. Pods
  are matched by identity. The Kubernetes API server, which DOKS runs outside the cluster, has the
  reserved identity `kube-apiserver`.
- So every flow from or to a node or the control plane is written here with **entities**:
  `kube-apiserver` (the API server), `host` (the local node: the kubelet, host-network pods),
  `remote-node` (every other node). The API server's calls to webhooks and aggregated APIs may
  arrive from its own address or relayed by DOKS's node-level tunnel agent (a node identity), so
  webhook ports admit the three — and never a pod.
- The kubelet's probes come from `host`, which Cilium admits by default (`allow-localhost`), so
  they need no rule.

What is rendered (all from the plan; nothing else is opened here):
  api-server      egress to `kube-apiserver` :443 for the pods that watch the API (the router's
                  registrar, endpoint pickers, P/D routers; every pod of a controller namespace and
                  of monitoring).
  control-plane   ingress from `kube-apiserver`, `host`, `remote-node` on the admission webhook and
                  aggregated-API ports of each installed controller (KEDA 9443 and its metrics API
                  6443, LeaderWorkerSet 9443, cert-manager 10250, prometheus-operator 10250).
  node-scrapes    Prometheus egress to `host`/`remote-node` on the node-level scrape ports (the
                  kubelet and cAdvisor :10250, node-exporter :9100 on the host network, DOKS's
                  AMD device-metrics exporter :5000 when the plan scrapes it) and to
                  `kube-apiserver` :443 (the chart's apiserver monitor).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CILIUM_API = "cilium.io/v2"
CONTROL_PLANE = ("kube-apiserver", "host", "remote-node")  # who calls a webhook on DOKS
NODES = ("host", "remote-node")
API_PORT = 443  # DOKS's API endpoint answers on 443 (the `kubernetes` Service's endpoint port)
KUBELET_PORT = 10250
NODE_EXPORTER_PORT = 9100
DEVICE_EXPORTER_PORT = 5000


@dataclass(frozen=True)
class CiliumFlows:
    """The entity flows of one plan (infra/render/network_policy.py derives them with the rest)."""

    api_watchers: tuple[tuple[str, dict[str, str]], ...] = ()  # (namespace, pod labels; {} = every pod)
    webhooks: tuple[tuple[str, dict[str, str], tuple[int, ...], str], ...] = ()  # (namespace, pods, ports, why)
    prometheus: tuple[str, dict[str, str]] | None = None  # (namespace, labels) when observability is on
    node_scrape_ports: tuple[int, ...] = ()


def _ports(ports) -> list[dict[str, Any]]:
    return [{"ports": [{"port": str(p), "protocol": "TCP"} for p in ports]}]


def _policy(namespace: str, name: str, pods: dict[str, str], why: str, labels: dict[str, str], **rules) -> dict[str, Any]:
    return {
        "apiVersion": CILIUM_API,
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels), "annotations": {"inference-platform/why": why}},
        # Every endpoint of the namespace is `{}` (Cilium's own spelling), never `matchLabels: {}`:
        # one form per meaning, as the NetworkPolicies write `podSelector: {}` (issue 36).
        "spec": {"endpointSelector": {"matchLabels": dict(pods)} if pods else {}, **rules},
    }


def render_cilium_policies(flows: CiliumFlows, labels: dict[str, str]) -> list[dict[str, Any]]:
    """Every CiliumNetworkPolicy of the stack (deterministic order)."""
    out = []
    watchers: dict[str, list[dict[str, str]]] = {}
    for ns, pods in flows.api_watchers:
        watchers.setdefault(ns, []).append(pods)
    for ns, selectors in watchers.items():
        for i, pods in enumerate(selectors):
            name = "api-server" if len(selectors) == 1 else f"api-server-{i + 1}"
            out.append(_policy(ns, name, pods, "these pods watch the Kubernetes API (DOKS runs it outside the cluster: entity kube-apiserver)",
                               labels, egress=[{"toEntities": ["kube-apiserver"], "toPorts": _ports((API_PORT,))}]))  # fmt: skip
    for ns, pods, ports, why in flows.webhooks:
        out.append(_policy(ns, "control-plane", pods, why, labels,
                           ingress=[{"fromEntities": list(CONTROL_PLANE), "toPorts": _ports(ports)}]))  # fmt: skip
    if flows.prometheus is not None:
        ns, pods = flows.prometheus
        egress = [{"toEntities": ["kube-apiserver"], "toPorts": _ports((API_PORT,))}]
        if flows.node_scrape_ports:
            egress.insert(0, {"toEntities": list(NODES), "toPorts": _ports(flows.node_scrape_ports)})
        out.append(_policy(ns, "node-scrapes", pods,
                           "Prometheus scrapes the kubelet and cAdvisor, node-exporter (host network) and the API server, which "
                           "Cilium matches by entity, never by ipBlock", labels, egress=egress))  # fmt: skip
    return out
