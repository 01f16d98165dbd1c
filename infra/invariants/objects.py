"""Generic views of rendered Kubernetes objects: identity, pod templates, selectors, quantities.

Every invariant reads objects through these functions, never through a feature's renderer, so an
object kind a new feature adds (a NetworkPolicy, a variant Deployment, a chart's templated
manifests) is covered as soon as it is in the list: a pod template is found wherever a
`{metadata, spec: {containers}}` sits in an object, a selector wherever the kinds below keep one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# Namespaced unless listed (the kinds the project and its charts create cluster-wide).
CLUSTER_SCOPED = frozenset({
    "Namespace", "PersistentVolume", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
    "StorageClass", "PriorityClass", "GatewayClass", "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration", "APIService", "Node", "IngressClass", "RuntimeClass",
})


def group_of(obj: dict) -> str:
    api = str(obj.get("apiVersion", ""))
    return api.split("/", 1)[0] if "/" in api else ""


def identity(obj: dict) -> tuple[str, str, str, str]:
    """(group, kind, namespace, name): what the API server keys an object by."""
    meta = obj.get("metadata") or {}
    ns = "" if obj.get("kind") in CLUSTER_SCOPED else str(meta.get("namespace") or "default")
    return group_of(obj), str(obj.get("kind", "")), ns, str(meta.get("name", ""))


def describe(obj: dict) -> str:
    """`Service inference/router`, `Namespace monitoring`."""
    _, kind, ns, name = identity(obj)
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


def labels(obj: dict) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


@dataclass(frozen=True)
class PodTemplate:
    """One pod template of a workload, with how many pods it runs (at the floor and at most)."""

    owner: dict  # the workload object
    template: dict  # {metadata, spec}
    count: int  # pods at the declared count; DaemonSets: per node (1)
    per_node: bool = False  # a DaemonSet: one on every matching node
    role: str = ""  # "leader" / "worker" of a group; "" otherwise

    @property
    def namespace(self) -> str:
        return identity(self.owner)[2]

    @property
    def labels(self) -> dict[str, str]:
        return dict((self.template.get("metadata") or {}).get("labels") or {})

    @property
    def spec(self) -> dict:
        return self.template.get("spec") or {}

    def containers(self, *, init: bool = True) -> list[dict]:
        spec = self.spec
        return list(spec.get("containers") or []) + (list(spec.get("initContainers") or []) if init else [])


def _is_template(node: Any) -> bool:
    return isinstance(node, dict) and isinstance(node.get("spec"), dict) and isinstance(node["spec"].get("containers"), list)


def _templates_under(node: Any, path: tuple = ()) -> Iterator[tuple[tuple, dict]]:
    if _is_template(node):
        yield path, node
        return
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _templates_under(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _templates_under(value, (*path, i))


def pod_templates(obj: dict) -> list[PodTemplate]:
    """Every pod template in `obj` with its pod count: a Deployment's, a Job's, a DaemonSet's, a
    LeaderWorkerSet's leader and workers, a bare Pod — and any kind that nests one."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return [PodTemplate(obj, obj, 1)]
    out = []
    for path, template in _templates_under(spec):
        if kind == "DaemonSet":
            out.append(PodTemplate(obj, template, 1, per_node=True))
        elif kind == "LeaderWorkerSet":
            lwt = spec.get("leaderWorkerTemplate") or {}
            size = int(lwt.get("size", 1) or 1)
            groups = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
            if "leaderTemplate" in path:
                out.append(PodTemplate(obj, template, groups, role="leader"))
            elif "leaderTemplate" in lwt:
                out.append(PodTemplate(obj, template, groups * (size - 1), role="worker"))
            else:  # the worker template serves as the leader's too
                out.append(PodTemplate(obj, template, groups * size, role="worker"))
        elif kind in ("Job",):
            out.append(PodTemplate(obj, template, int(spec.get("parallelism", 1) or 1)))
        else:
            replicas = spec.get("replicas")
            out.append(PodTemplate(obj, template, 1 if replicas is None else int(replicas)))
    return out


def all_pod_templates(objects: list[dict]) -> list[PodTemplate]:
    return [t for obj in objects for t in pod_templates(obj)]


# --------------------------------------------------------------------------- selectors


@dataclass(frozen=True)
class Selector:
    """A label selector and the namespaces it looks in (None: every namespace)."""

    match_labels: dict[str, str] = field(default_factory=dict)
    expressions: tuple[dict, ...] = ()
    namespaces: tuple[str, ...] | None = None

    def matches(self, pod_labels: dict[str, str], namespace: str) -> bool:
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        if any(pod_labels.get(k) != str(v) for k, v in self.match_labels.items()):
            return False
        for expr in self.expressions:
            key, op, values = expr.get("key"), expr.get("operator"), [str(v) for v in expr.get("values") or []]
            present = key in pod_labels
            if op == "In" and (not present or pod_labels[key] not in values):
                return False
            if op == "NotIn" and present and pod_labels[key] in values:
                return False
            if op == "Exists" and not present:
                return False
            if op == "DoesNotExist" and present:
                return False
        return True

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.expressions


def label_selector(node: dict | None, namespaces: tuple[str, ...] | None) -> Selector:
    node = node or {}
    return Selector(dict(node.get("matchLabels") or {}), tuple(node.get("matchExpressions") or ()), namespaces)


# Kinds whose selector picks pods to serve or count, and what a match means.
SERVING_KINDS = frozenset({("", "Service"), ("inference.networking.k8s.io", "InferencePool")})
COUNTING_KINDS = frozenset({("policy", "PodDisruptionBudget")})
MONITORING_KINDS = frozenset({("monitoring.coreos.com", "PodMonitor")})


def pod_selector(obj: dict) -> Selector | None:
    """The pod selector an object carries (Service, InferencePool, PDB, PodMonitor), or None."""
    key = (group_of(obj), obj.get("kind"))
    spec = obj.get("spec") or {}
    ns = identity(obj)[2]
    if key == ("", "Service"):
        sel = spec.get("selector")
        return Selector(dict(sel), (), (ns,)) if sel else None
    if key in (("inference.networking.k8s.io", "InferencePool"), ("policy", "PodDisruptionBudget")):
        return label_selector(spec.get("selector"), (ns,))
    if key in MONITORING_KINDS:
        ns_sel = spec.get("namespaceSelector") or {}
        namespaces = None if ns_sel.get("any") else tuple(ns_sel.get("matchNames") or (ns,))
        return label_selector(spec.get("selector"), namespaces)
    return None


# --------------------------------------------------------------------------- quantities

_SUFFIX = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
    "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "m": 1e-3, "": 1,
}
_QUANTITY = re.compile(r"^([0-9.]+(?:[eE][-+]?[0-9]+)?)([A-Za-z]*)$")


def quantity(value: Any) -> float:
    """A Kubernetes quantity (`500m`, `4Gi`, `72`, 2) as a number of base units."""
    if isinstance(value, int | float):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def pod_requests(template: PodTemplate) -> dict[str, float]:
    """What the scheduler reserves for one pod: the sum of its containers' requests, or the
    largest init container's where that is larger (init containers run one at a time)."""
    total: dict[str, float] = {}
    for c in template.containers(init=False):
        for name, value in ((c.get("resources") or {}).get("requests") or {}).items():
            total[name] = total.get(name, 0.0) + quantity(value)
    for c in template.spec.get("initContainers") or []:
        for name, value in ((c.get("resources") or {}).get("requests") or {}).items():
            total[name] = max(total.get(name, 0.0), quantity(value))
    return total
