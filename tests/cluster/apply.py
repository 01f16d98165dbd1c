"""Server-side apply a plan's objects in the order `pulumi up` would create them.

The order comes from the plan itself: every Kubernetes resource, Helm release and manifest
(ConfigFile) is a node, its `dependsOn` and input dependencies are edges (a dependency on a
component stands for all of its children), and a resource is applied once everything it depends on
is. Among resources that are ready together, Pulumi starts them all at once; here they go in the
order kubectl and Helm use for kinds (namespaces and CRDs first), so only a missing declared
dependency that no such order hides remains — and `undeclared_prerequisites` names those too.

A Helm release is installed as far as the cluster tests can without its chart archive: its
namespace (createNamespace) and the CRDs of its pinned controller (tests/cluster/crds.py). A
manifest URL installs the CRDs of the module standing for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tests.cluster import crds, versions

INSTALLERS = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart", "kubernetes:yaml/v2:ConfigFile")
KIND_RANK = {k: i for i, k in enumerate((
    "Namespace", "CustomResourceDefinition", "PriorityClass", "ServiceAccount", "Secret", "ConfigMap",
    "StorageClass", "PersistentVolume", "PersistentVolumeClaim", "ClusterRole", "ClusterRoleBinding", "Role",
    "RoleBinding", "NetworkPolicy", "Service",
))}  # fmt: skip
FIELD_MANAGER = "pulumi-kubernetes"


def urn(res: dict) -> str:
    return f"{res['type']}::{res['name']}"


def _is_node(res: dict) -> bool:
    t = res["type"]
    if t in INSTALLERS:
        return True
    return t.startswith("kubernetes:") and res.get("custom") and t != "pulumi:providers:kubernetes"


def plan_object(res: dict) -> dict | None:
    """The manifest a Kubernetes resource sends (Secrets with their values redacted to none)."""
    obj = {k: v for k, v in res["inputs"].items() if k != "__defaults"}
    if "apiVersion" not in obj or "kind" not in obj:
        return None
    if obj["kind"] == "Secret":
        # The values are Pulumi secrets the plan never holds: the Secret goes without them, marked
        # as `infra plan --out` marks it (an object whose apply owns no field at all would be
        # rewritten by every apply, which the real one, with its keys, is not).
        meta = dict(obj["metadata"])
        meta["annotations"] = {**meta.get("annotations", {}), "inference-platform/redacted": "values are Pulumi secrets"}
        obj = {k: v for k, v in obj.items() if k not in ("data", "stringData")} | {"metadata": meta}
    return obj


@dataclass
class Step:
    urn: str
    res: dict
    deps: set[str]

    @property
    def installer(self) -> bool:
        return self.res["type"] in INSTALLERS

    @property
    def kind(self) -> str:
        return self.res["type"].rsplit(":", 1)[-1]

    def rank(self) -> tuple:
        if self.installer:
            return (0 if "Namespace" in self.res["type"] else 1, self.res["name"])
        return (KIND_RANK.get(self.kind, len(KIND_RANK)) + 2, self.res["name"])


def dependency_graph(resources: list[dict]) -> dict[str, Step]:
    by_urn = {urn(r): r for r in resources}
    children: dict[str, list[str]] = {}
    for r in resources:
        if r.get("parent"):
            children.setdefault(r["parent"], []).append(urn(r))

    def expand(u: str, seen: frozenset = frozenset()) -> set[str]:
        res = by_urn.get(u)
        if res is None or u in seen:
            return set()
        if _is_node(res):
            return {u}
        out: set[str] = set()
        for c in children.get(u, ()):
            out |= expand(c, seen | {u})
        return out

    steps = {}
    for r in resources:
        if not _is_node(r):
            continue
        deps: set[str] = set()
        for d in r["options"].get("dependsOn") or []:
            deps |= expand(d)
        for ds in (r.get("inputDependencies") or {}).values():
            for d in ds:
                deps |= expand(d)
        steps[urn(r)] = Step(urn(r), r, deps - {urn(r)})
    return steps


def apply_order(resources: list[dict]) -> list[Step]:
    """Kahn's order over the plan's dependencies, kind order among resources ready together."""
    steps = dependency_graph(resources)
    done: set[str] = set()
    order: list[Step] = []
    while len(order) < len(steps):
        ready = [s for u, s in steps.items() if u not in done and s.deps <= done]
        if not ready:
            raise RuntimeError(f"dependency cycle among {sorted(set(steps) - done)}")
        step = min(ready, key=Step.rank)
        order.append(step)
        done.add(step.urn)
    return order


def _closure(steps: dict[str, Step], u: str) -> set[str]:
    seen, todo = set(), [u]
    while todo:
        for d in steps[todo.pop()].deps:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def undeclared_prerequisites(resources: list[dict]) -> list[str]:
    """Resources Pulumi would start before what they need, because the plan does not say they need
    it: an object in a namespace the plan creates, without a dependency on that Namespace (or on
    the release creating it); a custom resource without a dependency on what installs its CRD."""
    steps = dependency_graph(resources)
    ns_makers: dict[str, str] = {}
    crd_makers: dict[str, str] = {}  # API group → installer urn
    for u, s in steps.items():
        res = s.res
        obj = plan_object(res) if not s.installer else None
        if obj and obj["kind"] == "Namespace":
            ns_makers[obj["metadata"]["name"]] = u
        elif obj and obj["kind"] == "CustomResourceDefinition":
            crd_makers[obj["spec"]["group"]] = u
        elif s.installer:
            inputs = res["inputs"]
            if inputs.get("createNamespace"):
                ns_makers.setdefault(inputs["namespace"], u)
            source = _installer_source(res)
            try:
                for doc in crds.source_objects(source) if source else ():
                    if doc.get("kind") == "CustomResourceDefinition":
                        crd_makers[doc["spec"]["group"]] = u
            except crds.NotServed:
                pass
    problems = []
    for u, s in steps.items():
        obj = plan_object(s.res) if not s.installer else None
        if not obj:
            continue
        before = _closure(steps, u)
        ns = obj.get("metadata", {}).get("namespace")
        if ns in ns_makers and ns_makers[ns] != u and ns_makers[ns] not in before:
            problems.append(f"{u}: in namespace {ns} but does not depend on {ns_makers[ns]}")
        group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
        if group in crd_makers and crd_makers[group] != u and crd_makers[group] not in before:
            problems.append(f"{u}: a {obj['kind']} ({group}) but does not depend on {crd_makers[group]}, which installs its CRD")
    return problems


def _installer_source(res: dict) -> str | None:
    inputs = res["inputs"]
    if res["type"] == "kubernetes:yaml/v2:ConfigFile":
        return crds.URL_SOURCES.get(inputs.get("file", ""))
    return crds.chart_name(inputs.get("chart", ""))


# --------------------------------------------------------------------------- applying


@dataclass
class Outcome:
    applied: list[tuple[str, dict]] = field(default_factory=list)  # (urn, the object as the server stored it)
    rejected: list[str] = field(default_factory=list)
    not_applied: list[str] = field(default_factory=list)  # CRD source not served: said, not hidden


class Applier:
    """Server-side apply through the dynamic client, as pulumi-kubernetes does (force: its
    patchForce annotation)."""

    def __init__(self, api_client):
        from kubernetes.dynamic import DynamicClient

        self.dyn = DynamicClient(api_client)

    def resource(self, obj: dict):
        return self.dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])

    def apply(self, obj: dict) -> dict:
        res = self.resource(obj)
        ns = obj.get("metadata", {}).get("namespace") or ("default" if res.namespaced else None)
        out = self.dyn.server_side_apply(res, body=obj, namespace=ns, field_manager=FIELD_MANAGER, force_conflicts=True)
        return out.to_dict()

    def wait_established(self, names: list[str], timeout: float = 60) -> None:
        crd_api = self.dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
        deadline = time.monotonic() + timeout
        for name in names:
            while True:
                conds = (crd_api.get(name=name).to_dict().get("status") or {}).get("conditions") or []
                if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"CRD {name} not Established after {timeout} s")
                time.sleep(0.2)
        self.dyn.resources.invalidate_cache()

    def install_objects(self, objects: list[dict]) -> list[str]:
        """Apply a release's or manifest's objects (CRDs first); returns errors."""
        errors = []
        crd_names = []
        for obj in sorted(objects, key=lambda o: o["kind"] != "CustomResourceDefinition"):
            if obj["kind"] != "CustomResourceDefinition" and crd_names:
                self.wait_established(crd_names)
                crd_names = []
            try:
                self.apply(obj)
                if obj["kind"] == "CustomResourceDefinition":
                    crd_names.append(obj["metadata"]["name"])
            except Exception as err:  # noqa: BLE001 - reported
                errors.append(f"{obj['kind']} {obj['metadata'].get('name')}: {_message(err)}")
        if crd_names:
            self.wait_established(crd_names)
        return errors


def _message(err: Exception) -> str:
    body = getattr(err, "body", None)
    if body:
        try:
            import json

            return json.loads(body).get("message", str(body))
        except ValueError:
            return str(body)[:2000]
    return str(err)[:2000]


def ensure_namespace(applier: Applier, name: str) -> None:
    applier.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def apply_plan(applier: Applier, resources: list[dict], on_release=None) -> Outcome:
    """Every step of the plan in order; each rejection recorded with the API server's message.
    `on_release(chart)` runs once a release's CRDs are in (to start the controller it stands for)."""
    outcome = Outcome()
    for step in apply_order(resources):
        res = step.res
        if step.installer:
            source = _installer_source(res)
            inputs = res["inputs"]
            try:
                if res["type"] != "kubernetes:yaml/v2:ConfigFile" and inputs.get("createNamespace"):
                    ensure_namespace(applier, inputs["namespace"])
                objects = crds.source_objects(source) if source else []
            except crds.NotServed as err:
                outcome.not_applied.append(f"{step.urn}: CRDs not installed ({err})")
                continue
            outcome.rejected += [f"{step.urn}: {e}" for e in applier.install_objects(objects)]
            if on_release and res["type"] != "kubernetes:yaml/v2:ConfigFile":
                on_release(source)
            continue
        obj = plan_object(res)
        if obj is None:
            continue
        group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
        if group in versions.NOT_SERVED_GROUPS:
            outcome.not_applied.append(f"{step.urn}: {obj['kind']} not applied (its CRD's module is not served: "
                                       f"{versions.NOT_SERVED[versions.NOT_SERVED_GROUPS[group]]})")
            continue
        try:
            stored = applier.apply(obj)
            outcome.applied.append((step.urn, stored))
            if obj["kind"] == "CustomResourceDefinition":
                applier.wait_established([obj["metadata"]["name"]])
        except Exception as err:  # noqa: BLE001 - reported
            outcome.rejected.append(f"{step.urn} ({obj['kind']} {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}): {_message(err)}")
    return outcome


def object_key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata", {})
    return (obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])
