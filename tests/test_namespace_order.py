"""Every namespaced Kubernetes object of a plan waits for what creates its namespace.

A namespaced object sent before its namespace exists fails `pulumi up` on a new cluster (and
passes on the retry, which hides it). Namespaces come from a declared `Namespace` or from a Helm
release with `createNamespace` (KEDA, LWS, the GPU operator); this checks, over the resources the
offline plan records (dependsOn and input dependencies, transitively), every shipped stack and
every security variant (tests/security_variants.py: gateway, P/D on a fabric pool, multi-node...)."""

from __future__ import annotations

import pytest

from tests.security_variants import NAMES, plan_named

PRE_EXISTING = {"kube-system", "default"}  # DOKS makes them


def _urn(resource: dict) -> str:
    return f"{resource['type']}::{resource['name']}"


def _creators(resources: list[dict]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for r in resources:
        inputs = r.get("inputs", {})
        if r["type"] == "kubernetes:core/v1:Namespace":
            out.setdefault(inputs["metadata"]["name"], set()).add(_urn(r))
        elif r["type"] == "kubernetes:helm.sh/v3:Release" and inputs.get("createNamespace"):
            out.setdefault(inputs["namespace"], set()).add(_urn(r))
    return out


def _waits_for(resources: list[dict]) -> dict[str, set[str]]:
    direct = {}
    for r in resources:
        deps = set(r["options"].get("dependsOn", []))
        for urns in (r.get("inputDependencies") or {}).values():
            deps |= set(urns)
        direct[_urn(r)] = deps
    closed: dict[str, set[str]] = {}

    def visit(urn: str) -> set[str]:
        if urn not in closed:
            closed[urn] = set()
            for dep in direct.get(urn, ()):
                closed[urn] |= {dep, *visit(dep)}
        return closed[urn]

    return {urn: visit(urn) for urn in direct}


@pytest.mark.parametrize("name", NAMES)
def test_every_namespaced_object_waits_for_its_namespace(name, tmp_path):
    resources = plan_named(name, tmp_path).resources
    creators, waits = _creators(resources), _waits_for(resources)
    late = []
    for r in resources:
        if not r["type"].startswith("kubernetes:") or r["type"].startswith("kubernetes:helm.sh"):
            continue
        namespace = (r.get("inputs", {}).get("metadata") or {}).get("namespace")
        if namespace and namespace not in PRE_EXISTING and not waits[_urn(r)] & creators.get(namespace, set()):
            late.append(f"{r['name']} (namespace {namespace})")
    assert not late, f"sent before their namespace exists: {late}"
