"""Prerequisites: every custom resource the plan creates has its CRD installed by someone.

A custom object whose CRD nothing installs fails the whole `pulumi up` (the API server has no such
kind). CRDs come from the plan itself (a CustomResourceDefinition object, a Helm release that
ships them, a pinned CRD manifest) or from DOKS, which manages the Gateway API CRDs on VPC-native
clusters only (docs.digitalocean.com/products/kubernetes/how-to/use-gateway-api), and whose CNI,
Cilium, installs its own CRDs on every cluster (CiliumNetworkPolicy).
"""

from __future__ import annotations

from infra.charts.source import chart_name
from infra.errors import Problem
from infra.invariants.keypaths import KeyPaths
from infra.invariants.objects import describe, group_of
from infra.stack_plan import StackPlan

BUILT_IN_GROUPS = frozenset({
    "", "apps", "batch", "policy", "rbac.authorization.k8s.io", "networking.k8s.io", "storage.k8s.io",
    "apiextensions.k8s.io", "autoscaling", "coordination.k8s.io", "scheduling.k8s.io", "admissionregistration.k8s.io",
    "discovery.k8s.io", "node.k8s.io", "certificates.k8s.io", "apiregistration.k8s.io",
})
# Chart → the CRD groups its release installs.
CHART_CRDS = {
    "kube-prometheus-stack": ("monitoring.coreos.com",),
    "keda": ("keda.sh", "eventing.keda.sh"),
    "lws": ("leaderworkerset.x-k8s.io",),
    "agentgateway-crds": ("agentgateway.dev",),
    "gpu-operator-charts": ("amd.com",),
    "cert-manager": ("cert-manager.io", "acme.cert-manager.io"),
}
# Pinned CRD manifests (yaml ConfigFile resources, by the end of their logical name) → groups.
MANIFEST_CRDS = {
    "gateway-api-crds": ("gateway.networking.k8s.io",),
    "inference-pool-crds": ("inference.networking.k8s.io",),
    "inference-objective-crd": ("llm-d.ai", "inference.networking.x-k8s.io"),
}
DOKS_VPC_NATIVE_CRDS = ("gateway.networking.k8s.io",)
# Every DOKS cluster runs Cilium as its CNI, and Cilium registers its own CRDs (CiliumNetworkPolicy
# among them) when its agent starts (docs.cilium.io, "Network Policy"; DOKS's managed Gateway API
# is Cilium's, docs.digitalocean.com/products/kubernetes/how-to/use-gateway-api).
DOKS_CNI_CRDS = ("cilium.io",)
# Who to ask when a group's CRDs are missing.
GROUP_KEYS = {"gateway.networking.k8s.io": "router.gateway.install_gateway_api_crds"}


def installed_groups(plan: StackPlan, objects: list[dict], resources: list[dict]) -> set[str]:
    groups = {str((o.get("spec") or {}).get("group")) for o in objects if o.get("kind") == "CustomResourceDefinition"}
    for res in resources:
        if res.get("type") == "kubernetes:helm.sh/v3:Release":
            inputs = res.get("inputs") or {}
            chart = chart_name(str(inputs.get("chart", "")), str(inputs.get("version", "")))
            groups.update(CHART_CRDS.get(chart, ()))
        elif str(res.get("type", "")).startswith("kubernetes:yaml"):
            for suffix, provided in MANIFEST_CRDS.items():
                if str(res.get("name", "")).endswith(suffix):
                    groups.update(provided)
    if plan.config.network is not None and plan.config.network.cluster_subnet is not None:  # VPC-native
        groups.update(DOKS_VPC_NATIVE_CRDS)
    groups.update(DOKS_CNI_CRDS)  # an existing cluster too: the mode needs Cilium (docs/existing-cluster.md; `infra doctor` checks)
    return groups


def check_prerequisites(plan: StackPlan, objects: list[dict], resources: list[dict], paths: KeyPaths) -> list[Problem]:
    if not resources:  # no records to read the installers from (a bare object list): nothing to say
        return []
    have = installed_groups(plan, objects, resources)
    problems, seen = [], set()
    for obj in objects:
        group = group_of(obj)
        if group in BUILT_IN_GROUPS or group in have or group in seen:
            continue
        seen.add(group)
        key = GROUP_KEYS.get(group)
        fix = ("true (DOKS manages the Gateway API CRDs only on VPC-native clusters: network.cluster_subnet set), "
               "or make the cluster VPC-native" if key else "")
        problems.append(Problem(paths.section(key) if key else paths.of_object(obj), (
            f"{describe(obj)} is a {group} resource, but nothing installs that API's CRDs on this cluster"
            + (f"; set it to {fix}" if fix else ""))))
    return problems
