"""Kubernetes NetworkPolicy semantics over rendered objects: may endpoint A open a connection to B:port?

Implements the documented `networking.k8s.io/v1` rules (kubernetes.io/docs/concepts/services-
networking/network-policies/) for what the project renders: policies are additive allow-lists; a
pod selected by no policy of a direction is open in that direction; a pod selected by one with
that policyType accepts only what some rule allows; a connection needs the sender's egress and the
receiver's ingress. Peers: podSelector (the policy's namespace), namespaceSelector (matching the
namespace's labels, `kubernetes.io/metadata.name` included), both (AND), ipBlock (addresses
outside the pod network: Cilium matches pod IPs by identity, not ipBlock). Ports: number, name
(resolved against the destination pod's container ports), endPort ranges, protocol (default TCP).
No PyPI analyzer fits (the maintained ones need a cluster or are unmaintained), hence this small one.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

NS_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Endpoint:
    """A pod (namespace set) or an address outside the pod network (ip set)."""

    name: str
    namespace: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    named_ports: dict[str, int] = field(default_factory=dict)
    ip: str | None = None

    @property
    def is_pod(self) -> bool:
        return self.namespace is not None


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A LabelSelector: matchLabels AND matchExpressions; {} matches everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def _namespace_labels(namespace: str) -> dict[str, str]:
    return {NS_NAME_LABEL: namespace}


def _peer_matches(peer: dict[str, Any], policy_ns: str, other: Endpoint) -> bool:
    if "ipBlock" in peer:
        if other.is_pod:
            return False
        block = peer["ipBlock"]
        ip = ipaddress.ip_address(other.ip)
        if ip not in ipaddress.ip_network(block["cidr"]):
            return False
        return not any(ip in ipaddress.ip_network(e) for e in block.get("except", []))
    if not other.is_pod:
        return False
    if "namespaceSelector" in peer:
        if not selector_matches(peer["namespaceSelector"], _namespace_labels(other.namespace)):
            return False
    elif other.namespace != policy_ns:
        return False
    return "podSelector" not in peer or selector_matches(peer["podSelector"], other.labels)


def _port_matches(entries: list[dict[str, Any]] | None, port: int, protocol: str, dst: Endpoint) -> bool:
    if not entries:
        return True
    for entry in entries:
        if entry.get("protocol", "TCP") != protocol:
            continue
        want = entry.get("port")
        if want is None:
            return True
        if isinstance(want, str):
            want = dst.named_ports.get(want)
            if want is None:
                continue
        if want == port or (entry.get("endPort") is not None and want <= port <= entry["endPort"]):
            return True
    return False


def _side_allows(policies: list[dict], pod: Endpoint, other: Endpoint, port: int, protocol: str, direction: str, dst: Endpoint) -> bool:
    kind, peers_key = ("Ingress", "from") if direction == "ingress" else ("Egress", "to")
    selecting = [
        p for p in policies
        if p["metadata"]["namespace"] == pod.namespace
        and kind in p["spec"].get("policyTypes", ["Ingress"])
        and selector_matches(p["spec"]["podSelector"], pod.labels)
    ]  # fmt: skip
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get(direction, []):
            peers = rule.get(peers_key)
            if peers and not any(_peer_matches(peer, policy["metadata"]["namespace"], other) for peer in peers):
                continue
            if _port_matches(rule.get("ports"), port, protocol, dst):
                return True
    return False


def allowed(policies: list[dict], src: Endpoint, dst: Endpoint, port: int, protocol: str = "TCP") -> bool:
    """May `src` open a connection to `dst:port`? Both the egress and the ingress side must allow it."""
    egress_ok = not src.is_pod or _side_allows(policies, src, dst, port, protocol, "egress", dst)
    ingress_ok = not dst.is_pod or _side_allows(policies, dst, src, port, protocol, "ingress", dst)
    return egress_ok and ingress_ok


def _pod_templates(obj: dict) -> list[dict]:
    spec = obj.get("spec", {})
    if obj["kind"] in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
        return [spec["template"]]
    if obj["kind"] == "LeaderWorkerSet":
        lws = spec["leaderWorkerTemplate"]
        return [t for t in (lws.get("leaderTemplate"), lws.get("workerTemplate")) if t]
    return []


def pods_of(objects: list[dict]) -> list[Endpoint]:
    """One endpoint per pod template of the rendered workloads (name: `<object>` or `<object>/<n>`)."""
    out = []
    for obj in objects:
        for i, template in enumerate(_pod_templates(obj)):
            spec = template.get("spec", {})
            if spec.get("hostNetwork"):
                continue  # node traffic: NetworkPolicy does not apply
            ports = {p["name"]: p["containerPort"] for c in spec.get("containers", []) for p in c.get("ports", []) if "name" in p}
            name = obj["metadata"]["name"] + (f"/{i}" if i else "")
            out.append(Endpoint(name, obj["metadata"].get("namespace", "default"), template["metadata"].get("labels", {}), ports))
    return out
