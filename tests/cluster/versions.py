"""Every version the control-plane tests build or read, in one place (stdlib only: the build
script runs before any venv exists).

What the cluster tests run is built from Go modules at these versions (tests/cluster/build.py);
the CRDs they install are read from modules at the versions the plan pins
(infra/catalog/versions.py), or the nearest the Go module proxy serves where it does not serve
the pin (each such case says so below and in docs/testing.md).
"""

from __future__ import annotations

from infra.catalog import versions as pins

# Kubernetes at the minor every stack pins (`cluster.version: "1.33"`), newest 1.33 patch the
# proxy serves (v1.33.6 and v1.33.13 are listed). The staging modules (k8s.io/api, client-go, ...)
# that k8s.io/kubernetes names at v0.0.0 are replaced by their published v0.33.13.
KUBERNETES = "v1.33.13"
KUBERNETES_STAGING = "v0.33.13"
# etcd: the version k8s.io/kubernetes v1.33.13's go.mod requires (go.etcd.io/etcd/server/v3
# v3.5.21). kubeadm 1.33 defaults to etcd 3.5.24, which the proxy does not serve; 3.5.21 speaks
# the same v3 API.
ETCD = "v3.5.21"
# kwok (node heartbeats, pod status): v0.7.0 is built against k8s.io/client-go v0.33, the
# cluster's minor (v0.8.0 against v0.36).
KWOK = "v0.7.0"
# LeaderWorkerSet: the plan pins 0.10.0 (pins.LWS_IMAGE_TAG); the proxy answers v0.10.0's .info but
# refuses its source zip (403), so the controller and its CRD come from v0.9.0, the newest served.
LWS_PINNED = pins.LWS_IMAGE_TAG
LWS = "v0.9.0"

# Cilium, which DOKS runs as its CNI and whose CRDs it installs on every cluster: the plan's
# CiliumNetworkPolicies (infra/render/cilium_policy.py) need `ciliumnetworkpolicies.cilium.io`.
# DOKS does not publish its Cilium release; 1.17.6 (served) stands for it: the cilium.io/v2 schema
# the policies use (endpointSelector, fromEntities/toEntities, toPorts) is the same across 1.15-1.18.
CILIUM = "v1.17.6"

# The Prometheus operator that kube-prometheus-stack 81.4.3 ships (its appVersion; also
# infra/catalog/support_matrix.yaml): the PodMonitor / PrometheusRule CRDs.
PROMETHEUS_OPERATOR = "v0.88.1"


def _v(version: str) -> str:
    return version if version.startswith("v") else "v" + version


# CRD sources: what installs them in the plan (a Helm chart, a manifest URL, or DOKS itself) →
# (Go module, version, directories or files inside the module holding the CRD YAML). Read at test
# time with `go mod download -json MODULE@VERSION`; never copied into the repository.
CRD_MODULES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    pins.KEDA_CHART: ("github.com/kedacore/keda/v2", _v(pins.KEDA_CHART_VERSION), ("config/crd/bases",)),
    pins.KUBE_PROMETHEUS_STACK_CHART: (
        "github.com/prometheus-operator/prometheus-operator", PROMETHEUS_OPERATOR, ("example/prometheus-operator-crd",)),
    pins.LWS_CHART: ("sigs.k8s.io/lws", LWS, ("config/crd/bases",)),
    pins.AGENTGATEWAY_CRDS_CHART: (
        "github.com/agentgateway/agentgateway", _v(pins.AGENTGATEWAY_CHART_VERSION), ("controller/install/helm/agentgateway-crds/templates",)),
    pins.CERT_MANAGER_CHART: ("github.com/cert-manager/cert-manager", _v(pins.CERT_MANAGER_CHART_VERSION), ("deploy/crds",)),
    "cilium": ("github.com/cilium/cilium", CILIUM,
               ("pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnetworkpolicies.yaml",)),
    # The Gateway API standard channel: DOKS installs it on VPC-native 1.33 clusters, and the plan
    # applies GATEWAY_API_CRDS_URL where it does not; both are this module's config/crd/standard.
    "gateway-api": ("sigs.k8s.io/gateway-api", pins.GATEWAY_API_VERSION, ("config/crd/standard",)),
    # INFERENCE_POOL_CRDS_URL: the release asset v1-manifests.yaml is built from config/crd/bases
    # (inference.networking.k8s.io only; the x-k8s.io alpha CRDs are not in it).
    "inference-pool": (
        "sigs.k8s.io/gateway-api-inference-extension", pins.GATEWAY_API_INFERENCE_EXTENSION_VERSION,
        ("config/crd/bases/inference.networking.k8s.io_inferencepools.yaml",)),
}  # fmt: skip

# CRD sources the proxy does not serve at any version tried: what the tests do instead is in
# docs/testing.md (their objects are reported as not applied, never silently dropped).
NOT_SERVED: dict[str, str] = {
    pins.AMD_GPU_OPERATOR_CHART: f"github.com/ROCm/gpu-operator {pins.AMD_GPU_OPERATOR_CHART_VERSION} (403 for v1.2.0-v1.5.1)",
    "inference-objective": f"github.com/llm-d/llm-d-router {pins.LLM_D_ROUTER_VERSION} (403)",
}
# The API groups of those CRDs: objects of these groups are reported as not applied.
NOT_SERVED_GROUPS: dict[str, str] = {
    "amd.com": pins.AMD_GPU_OPERATOR_CHART,
    "llm-d.ai": "inference-objective",
}
