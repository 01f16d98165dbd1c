"""Connectivity of a plan's policies by a real analyzer: network-config-analyzer (IBM, PyPI
`network-config-analyzer` 2.1.0), with the Cilium semantics DOKS runs applied where they differ.

nca computes which pod may open a connection to which pod or address, on which protocols and
ports, from `networking.k8s.io/v1` NetworkPolicies (its own implementation of the documented
rules). What nca does not model is written here, small and stated:

- **ipBlock never matches nodes, pods or the control plane** (Cilium applies CIDR rules only to
  peers outside the cluster that are not nodes; infra/render/cilium_policy.py). nca already never
  matches pods by ipBlock; nodes and the API server are not addresses here at all but *entities*.
- **Entity flows come from the CiliumNetworkPolicies only**: `fromEntities`/`toEntities`
  (`kube-apiserver`, `host`, `remote-node`) on the selected pods and ports. A NetworkPolicy cannot
  name them, so a pod in a namespace with a default deny reaches or is reached by an entity only
  through a CNP rule; a pod no policy selects (kube-system, a client's namespace) is open.
- Cilium admits the local node's traffic to its pods (kubelet probes) by default; not a flow here.

nca pins its libraries (PyYAML, lxml, networkx ...) exactly, so it runs from a venv of its own,
built on first use into `~/.cache/inference-platform/nca-2.1.0-py3.X` (about half a minute) or
taken from $NCA (an `nca` executable); scripts/install_nca.sh builds the same venv for CI.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

NCA_VERSION = "2.1.0"
ENTITIES = ("kube-apiserver", "host", "remote-node")
NS_NAME_LABEL = "kubernetes.io/metadata.name"


def nca_executable() -> str:
    """$NCA, or the cached venv's `nca` (built here when missing)."""
    if os.environ.get("NCA"):
        return os.environ["NCA"]
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inference-platform" / (
        f"nca-{NCA_VERSION}-py{sys.version_info.major}.{sys.version_info.minor}")
    exe = root / "bin" / "nca"
    if not exe.exists():
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
        subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        f"network-config-analyzer=={NCA_VERSION}"], check=True)  # fmt: skip
    return str(exe)


@dataclass(frozen=True)
class Endpoint:
    """A pod (namespace set), an address outside the cluster (ip set) or a Cilium entity."""

    name: str
    namespace: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)  # named container ports
    ip: str | None = None
    entity: str | None = None
    role: str = ""  # what the docs call it (tests/policy_matrix.py)

    @property
    def is_pod(self) -> bool:
        return self.namespace is not None

    @property
    def key(self) -> str:
        if self.is_pod:
            return f"{self.namespace}/{self.name}"
        return self.entity or str(self.ip)


# --------------------------------------------------------------------------- connections


@dataclass(frozen=True)
class Conns:
    """A set of (protocol, port range) allowed; `all` for every protocol and port."""

    all: bool = False
    ranges: tuple[tuple[str, int, int], ...] = ()

    def allows(self, port: int, protocol: str) -> bool:
        return self.all or any(p == protocol and lo <= port <= hi for p, lo, hi in self.ranges)

    def __or__(self, other: Conns) -> Conns:
        return Conns(self.all or other.all, tuple(sorted(set(self.ranges) | set(other.ranges))))


_GROUP = re.compile(r"\{protocols:([^}]*?)(?:,dst_ports:([^}]*))?\}")


def parse_conns(text: str) -> Conns:
    """nca's connection text: `All connections`, or `{protocols:TCP, UDP,dst_ports:53,8000-8001}`,..."""
    text = text.strip()
    if text == "All connections":
        return Conns(all=True)
    ranges = []
    for protocols, ports in _GROUP.findall(text):
        for proto in (p.strip() for p in protocols.split(",") if p.strip()):
            if not ports:
                ranges.append((proto, 1, 65535))
                continue
            for part in ports.split(","):
                lo, _, hi = part.strip().partition("-")
                ranges.append((proto, int(lo), int(hi or lo)))
    return Conns(ranges=tuple(ranges))


def _ip_range(text: str) -> tuple[int, int]:
    lo, _, hi = text.partition("-")
    if "/" in lo:
        net = ipaddress.ip_network(lo, strict=False)
        return int(net[0]), int(net[-1])
    return int(ipaddress.ip_address(lo)), int(ipaddress.ip_address(hi or lo))


# --------------------------------------------------------------------------- running nca


def _pod_object(e: Endpoint) -> dict:
    ports = [{"name": n, "containerPort": p} for n, p in sorted(e.ports.items())]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": e.name, "namespace": e.namespace, "labels": dict(e.labels)},
            "spec": {"containers": [{"name": "c", "image": "stand-in", "ports": ports}]}}  # fmt: skip


def run_nca(policies: list[dict], pods: list[Endpoint], namespaces: list[str]) -> list[tuple[str, str, Conns]]:
    """nca's connectivity map (src, dst, conns): pods as `ns/name`, addresses as nca's ranges."""
    with tempfile.TemporaryDirectory(prefix="nca-") as tmp:
        root = Path(tmp)
        (root / "policies").mkdir()
        for i, policy in enumerate(policies):
            (root / "policies" / f"{i:03d}.yaml").write_text(yaml.safe_dump(policy, sort_keys=True))
        (root / "pods.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [_pod_object(p) for p in pods]}))
        ns_objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": {NS_NAME_LABEL: n}}} for n in namespaces]
        (root / "namespaces.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": ns_objects}))
        out = root / "connectivity.txt"
        proc = subprocess.run([nca_executable(), "--connectivity", str(root / "policies"), "--pod_list", str(root / "pods.yaml"),
                               "--ns_list", str(root / "namespaces.yaml"), "--output_format", "txt_no_fw_rules",
                               "--file_out", str(out)], capture_output=True, text=True, timeout=600)  # fmt: skip
        if not out.exists():
            raise RuntimeError(f"nca failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        lines = out.read_text().splitlines()
    result = []
    for line in lines:
        if " => " not in line or " : " not in line:
            continue
        pair, _, conns = line.partition(" : ")
        src, _, dst = pair.partition(" => ")
        result.append((_endpoint_text(src), _endpoint_text(dst), parse_conns(conns)))
    return result


def _endpoint_text(text: str) -> str:
    text = text.strip()
    return re.sub(r"\[[A-Za-z]+\]$", "", text)


# --------------------------------------------------------------------------- the matrix


def _selects(selector: dict | None, labels: dict[str, str]) -> bool:
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {"In": labels.get(key) in values, "NotIn": labels.get(key) not in values, "Exists": key in labels,
              "DoesNotExist": key not in labels}[op]  # fmt: skip
        if not ok:
            return False
    return True


@dataclass
class Connectivity:
    """Who may open a connection to whom in one plan: nca for pods and addresses, the CNPs for entities."""

    endpoints: list[Endpoint]
    network_policies: list[dict]
    cilium_policies: list[dict]
    pairs: dict[tuple[str, str], Conns] = field(default_factory=dict)
    ranges: list[tuple[str, tuple[int, int], Conns, bool]] = field(default_factory=list)  # (pod key, range, conns, pod is src)

    @classmethod
    def analyse(cls, objects: list[dict], endpoints: list[Endpoint]) -> Connectivity:
        nps = [o for o in objects if o.get("kind") == "NetworkPolicy"]
        cnps = [o for o in objects if o.get("kind") == "CiliumNetworkPolicy"]
        pods = [e for e in endpoints if e.is_pod]
        namespaces = sorted({e.namespace for e in pods} | {p["metadata"]["namespace"] for p in nps})
        matrix = cls(endpoints, nps, cnps)
        pod_keys = {e.key for e in pods}
        for src, dst, conns in run_nca(nps, pods, namespaces):
            if src in pod_keys and dst in pod_keys:
                matrix.pairs[(src, dst)] = matrix.pairs.get((src, dst), Conns()) | conns
            elif src in pod_keys:
                matrix.ranges.append((src, _ip_range(dst), conns, True))
            elif dst in pod_keys:
                matrix.ranges.append((dst, _ip_range(src), conns, False))
        return matrix

    def _restricted(self, pod: Endpoint, direction: str) -> bool:
        kinds = ("Ingress",) if direction == "ingress" else ("Egress",)
        for p in self.network_policies:
            if p["metadata"]["namespace"] == pod.namespace and set(kinds) & set(p["spec"].get("policyTypes", ["Ingress"])):
                if _selects(p["spec"].get("podSelector"), pod.labels):
                    return True
        return False

    def _entity_allowed(self, pod: Endpoint, entity: str, port: int, protocol: str, direction: str) -> bool:
        if not self._restricted(pod, direction):
            return True
        rules_key, peer_key = ("ingress", "fromEntities") if direction == "ingress" else ("egress", "toEntities")
        for cnp in self.cilium_policies:
            if cnp["metadata"]["namespace"] != pod.namespace or not _selects(cnp["spec"].get("endpointSelector"), pod.labels):
                continue
            for rule in cnp["spec"].get(rules_key) or []:
                if entity not in (rule.get(peer_key) or []) and "all" not in (rule.get(peer_key) or []):
                    continue
                to_ports = rule.get("toPorts")
                if not to_ports:
                    return True
                for group in to_ports:
                    for p in group.get("ports") or []:
                        if int(p["port"]) == port and p.get("protocol", "TCP") in (protocol, "ANY"):
                            return True
        return False

    def allows(self, src: Endpoint, dst: Endpoint, port: int, protocol: str = "TCP") -> bool:
        if src.is_pod and dst.is_pod:
            return self.pairs.get((src.key, dst.key), Conns()).allows(port, protocol)
        if src.entity or dst.entity:
            pod, entity, direction = (dst, src.entity, "ingress") if src.entity else (src, dst.entity, "egress")
            return pod.is_pod and self._entity_allowed(pod, entity, port, protocol, direction)
        pod, ip, outward = (src, dst.ip, True) if src.is_pod else (dst, src.ip, False)
        value = int(ipaddress.ip_address(ip))
        return any(key == pod.key and lo <= value <= hi and is_src == outward and conns.allows(port, protocol)
                   for key, (lo, hi), conns, is_src in self.ranges)  # fmt: skip
