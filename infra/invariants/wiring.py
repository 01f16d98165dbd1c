"""Wiring: every selector selects the pods it is meant for and no others; every reference resolves.

Generic over kinds. A serving or counting selector (Service, InferencePool, PodDisruptionBudget)
must select at least one pod, and only pods of one role: one `app.kubernetes.io/name`, one
`app.kubernetes.io/component`, one model, one prefill/decode side — an InferencePool over both
sides of a P/D layout sends whole requests to one-sided engines. The ports it sends to must be
ports those pods declare; a PodMonitor's endpoint port must exist on the pods it scrapes.

References are found wherever an object names another: any `...Ref`/`...Refs` field with a name
(scaleTargetRef, endpointPickerRef, parentRefs, backendRefs, parametersRef, targetRefs, roleRef,
secretRef, secretKeyRef, configMapRef, claimRef...), a pod's volumes, service account and image
pull secrets, a claim's `volumeName`. Each must name an object the plan (or a controller or chart
it installs) creates, or one Kubernetes always has (`default` ServiceAccount, built-in
ClusterRoles). References to kinds nothing in the plan creates and the cluster does not keep
(another operator's CRDs) are left alone.
"""

from __future__ import annotations

from typing import Any

from infra.errors import Problem
from infra.invariants.keypaths import MODEL_LABEL, KeyPaths
from infra.invariants.objects import (
    CLUSTER_SCOPED,
    COUNTING_KINDS,
    MONITORING_KINDS,
    SERVING_KINDS,
    PodTemplate,
    all_pod_templates,
    describe,
    group_of,
    identity,
    pod_selector,
)

ROLE_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/component", MODEL_LABEL, "inference-platform/pd-role")
PD_ROLE = "inference-platform/pd-role"
COUNTING_ROLE_LABELS = (MODEL_LABEL, PD_ROLE)

# A reference field → the kind it names when the reference does not say, and its default group.
REF_DEFAULT_KIND = {
    "secretRef": ("", "Secret"), "secretKeyRef": ("", "Secret"), "configMapRef": ("", "ConfigMap"),
    "configMapKeyRef": ("", "ConfigMap"), "claimRef": ("", "PersistentVolumeClaim"),
    "endpointPickerRef": ("", "Service"), "backendRefs": ("", "Service"),
    "parentRefs": ("gateway.networking.k8s.io", "Gateway"), "scaleTargetRef": ("apps", "Deployment"),
}
NOT_REFERENCES = frozenset({"fieldRef", "resourceFieldRef", "ownerReferences"})
CORE_KINDS = frozenset({"Secret", "ConfigMap", "Service", "PersistentVolumeClaim", "PersistentVolume", "ServiceAccount",
                        "Deployment", "StatefulSet", "LeaderWorkerSet", "Gateway", "InferencePool", "Role", "ClusterRole"})
ALWAYS_THERE = frozenset({("", "ServiceAccount", "default"), ("rbac.authorization.k8s.io", "ClusterRole", "cluster-admin"),
                          ("rbac.authorization.k8s.io", "ClusterRole", "admin"), ("rbac.authorization.k8s.io", "ClusterRole", "edit"),
                          ("rbac.authorization.k8s.io", "ClusterRole", "view")})


def _role_key(paths: KeyPaths, obj: dict, split: str) -> str:
    return paths.of_object(obj, "layout" if split == PD_ROLE else "name")


def _selected(obj: dict, templates: list[PodTemplate]) -> list[PodTemplate]:
    sel = pod_selector(obj)
    if sel is None:
        return []
    return [t for t in templates if sel.matches(t.labels, t.namespace)]


def _ports(template: PodTemplate) -> tuple[set[str], set[int]]:
    names, numbers = set(), set()
    for c in template.containers(init=False):
        for p in c.get("ports") or []:
            if p.get("name"):
                names.add(str(p["name"]))
            if p.get("containerPort") is not None:
                numbers.add(int(p["containerPort"]))
    return names, numbers


def _wanted_ports(obj: dict) -> list[Any]:
    key = (group_of(obj), obj.get("kind"))
    spec = obj.get("spec") or {}
    if key == ("", "Service"):
        return [p.get("targetPort", p.get("port")) for p in spec.get("ports") or []]
    if key == ("inference.networking.k8s.io", "InferencePool"):
        return [p.get("number") for p in spec.get("targetPorts") or []]
    if key in MONITORING_KINDS:
        return [e["port"] for e in spec.get("podMetricsEndpoints") or [] if e.get("port")]
    return []


def check_selectors(objects: list[dict], paths: KeyPaths) -> list[Problem]:
    templates = all_pod_templates(objects)
    problems = []
    for obj in objects:
        key = (group_of(obj), obj.get("kind"))
        if key not in SERVING_KINDS | COUNTING_KINDS | MONITORING_KINDS or pod_selector(obj) is None:
            continue
        chosen = _selected(obj, templates)
        if not chosen:
            if key in MONITORING_KINDS:
                continue  # a monitor of a component this stack does not run scrapes nothing, harmlessly
            problems.append(Problem(paths.of_object(obj), f"{describe(obj)} selects no pod the plan creates; its selector "
                                                          f"{(obj.get('spec') or {}).get('selector')} matches nothing"))
            continue
        if key not in MONITORING_KINDS:
            # Counting (a PDB) may span a workload's own pod kinds (a LeaderWorkerSet's leader and
            # workers), never two models or two P/D sides; serving must reach one role exactly.
            for label in ROLE_LABELS if key in SERVING_KINDS else COUNTING_ROLE_LABELS:
                values = sorted({t.labels.get(label, "(unset)") for t in chosen})
                if len(values) > 1:
                    owners = sorted({describe(t.owner) for t in chosen})
                    problems.append(Problem(_role_key(paths, obj, label), (
                        f"{describe(obj)} selects pods of {len(values)} different {label} ({', '.join(values)}: "
                        f"{', '.join(owners)}); it must select one role only"
                        + ("; the gateway's InferencePool cannot drive a prefill/decode layout: use a router kind with the "
                           "P/D router (router.kind: session, prefix or round-robin) or a layout without p/d sides"
                           if label == PD_ROLE else "")
                    )))
                    break
        for port in _wanted_ports(obj):
            for t in chosen:
                names, numbers = _ports(t)
                ok = (port in names) if isinstance(port, str) else (not numbers or int(port) in numbers)
                if not ok:
                    problems.append(Problem(paths.of_object(obj), f"{describe(obj)} sends to port {port!r}, which "
                                                                  f"{describe(t.owner)}'s pods do not declare"))
                    break
    return problems


# --------------------------------------------------------------------------- references


def _refs(node: Any, field: str = "") -> list[tuple[str, dict]]:
    """(field name, reference dict) for every named reference under `node`."""
    out: list[tuple[str, dict]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in NOT_REFERENCES:
                continue
            if (key.endswith("Ref") or key.endswith("Refs")) and key not in NOT_REFERENCES:
                items = value if isinstance(value, list) else [value]
                out += [(key, item) for item in items if isinstance(item, dict) and item.get("name")]
            out += _refs(value, key)
    elif isinstance(node, list):
        for item in node:
            out += _refs(item, field)
    return out


def _pod_refs(template: PodTemplate) -> list[tuple[str, str, str]]:
    """(group, kind, name) a pod needs: volumes, service account, image pull secrets."""
    spec = template.spec
    out = []
    for vol in spec.get("volumes") or []:
        if vol.get("secret", {}).get("secretName") and not vol["secret"].get("optional"):
            out.append(("", "Secret", vol["secret"]["secretName"]))
        if vol.get("configMap", {}).get("name") and not vol["configMap"].get("optional"):
            out.append(("", "ConfigMap", vol["configMap"]["name"]))
        if vol.get("persistentVolumeClaim", {}).get("claimName"):
            out.append(("", "PersistentVolumeClaim", vol["persistentVolumeClaim"]["claimName"]))
    account = spec.get("serviceAccountName")
    if account:
        out.append(("", "ServiceAccount", account))
    out += [("", "Secret", s["name"]) for s in spec.get("imagePullSecrets") or [] if s.get("name")]
    return out


def check_references(objects: list[dict], paths: KeyPaths) -> list[Problem]:
    index = {identity(o) for o in objects}
    by_name = {(g, k, n) for g, k, _, n in index}
    created_kinds = {(g, k) for g, k, _, _ in index}
    problems = []

    def resolve(obj: dict, group: str, kind: str, name: str, namespace: str | None, via: str) -> None:
        if (group, kind, name) in ALWAYS_THERE or (group, kind) not in created_kinds and kind not in CORE_KINDS:
            return
        ns = "" if kind in CLUSTER_SCOPED else (namespace or identity(obj)[2])
        if (group, kind, ns, name) in index:
            return
        if kind in CLUSTER_SCOPED and (group, kind, name) in by_name:
            return
        where = f" in namespace {ns}" if ns else ""
        problems.append(Problem(paths.of_object(obj), f"{describe(obj)} refers to {kind} {name!r}{where} ({via}), which "
                                                      "nothing in the plan creates"))

    for obj in objects:
        for field, ref in _refs(obj.get("spec") or {}):
            if ref.get("optional"):
                continue
            default_group, default_kind = REF_DEFAULT_KIND.get(field, ("", ""))
            kind = ref.get("kind") or default_kind
            if not kind:
                continue
            group = ref["apiVersion"].split("/")[0] if "/" in str(ref.get("apiVersion", "")) else ref.get("group", default_group)
            if kind == "Deployment" and "apiVersion" in ref and "/" not in ref["apiVersion"]:
                group = ""
            resolve(obj, group or "", kind, str(ref["name"]), ref.get("namespace"), field)
        for template in all_pod_templates([obj]):
            for group, kind, name in _pod_refs(template):
                resolve(obj, group, kind, name, None, "its pods")
        volume_name = (obj.get("spec") or {}).get("volumeName") if obj.get("kind") == "PersistentVolumeClaim" else None
        if volume_name:
            resolve(obj, "", "PersistentVolume", volume_name, None, "volumeName")
    return problems
