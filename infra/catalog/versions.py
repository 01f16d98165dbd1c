"""Every pinned version (images, charts, vLLM) in one place.

A diff of this file is how an upgrade shows up in review. Each value can be overridden in the
stack config where noted; nothing here is ever `latest`. The Kubernetes minors each in-cluster
pin supports, and where that was read, are in support_matrix.yaml (infra/compat.py).
"""

VLLM_VERSION = "0.33.0"
VLLM_IMAGE_ROCM = f"vllm/vllm-openai-rocm:v{VLLM_VERSION}"
VLLM_IMAGE_CUDA = f"vllm/vllm-openai:v{VLLM_VERSION}"

# The oldest vLLM that runs what `model_cache.kind: spaces` renders: `--load-format runai_streamer`
# with an `s3://` model path and `--model-loader-extra-config` keys `concurrency` and `distributed`.
# Checked in the PyPI wheels of 0.13.0, 0.14.0, 0.32.0 and 0.33.0 (vllm/model_executor/
# model_loader/runai_streamer_loader.py); the streamer itself arrived with vllm-project/vllm
# PRs #10191 and #10192 (late 2024), but releases between those and 0.13.0 were not checked.
VLLM_RUNAI_STREAMER_MIN_VERSION = "0.13.0"

# ROCm/k8s-device-plugin and its node labeller (self-managed runtime mode).
ROCM_DEVICE_PLUGIN_IMAGE = "rocm/k8s-device-plugin:1.31.0.9"
ROCM_NODE_LABELLER_IMAGE = "rocm/k8s-device-plugin:labeller-1.31.0.9"
ROCM_DEVICE_METRICS_EXPORTER_IMAGE = "rocm/device-metrics-exporter:v1.5.2"

# AMD GPU Operator (gpu-operator runtime mode) and its prerequisite.
AMD_GPU_OPERATOR_CHART_REPO = "https://rocm.github.io/gpu-operator"
AMD_GPU_OPERATOR_CHART = "gpu-operator-charts"
AMD_GPU_OPERATOR_CHART_VERSION = "v1.5.0"
CERT_MANAGER_CHART_REPO = "https://charts.jetstack.io"
CERT_MANAGER_CHART = "cert-manager"
CERT_MANAGER_CHART_VERSION = "v1.19.1"

# Small helper image for node tuning and weight prefetch (huggingface_hub CLI lives in vLLM's image,
# so the prefetch Job reuses the vLLM image instead).
BUSYBOX_IMAGE = "busybox:1.37.0"

# The pause container of the image pre-pull DaemonSet (it only holds the pod; the vLLM image is
# pulled by an init container that exits at once). Kubernetes' own pause image, pinned.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"

# Monitoring: kube-prometheus-stack (Prometheus operator v0.88, Grafana, Alertmanager,
# kube-state-metrics). Installed with helm.v3.Release because of its admission-webhook hooks.
KUBE_PROMETHEUS_STACK_CHART_REPO = "https://prometheus-community.github.io/helm-charts"
KUBE_PROMETHEUS_STACK_CHART = "kube-prometheus-stack"
KUBE_PROMETHEUS_STACK_CHART_VERSION = "81.4.3"

# KEDA: load-driven replica autoscaling for models on autoscaling pools (keda.sh/v1alpha1
# ScaledObject, Prometheus scaler). 2.18 is the first KEDA tested on Kubernetes 1.33 (2.17: 1.30 -
# 1.32); 2.18.3 is the newest 2.18 patch tagged in kedacore/charts (v2.18.3). Between 2.17 and 2.18 the
# ScaledObject CRD only gained the optional HPA-behavior `tolerance`, and the Prometheus trigger's
# metadata (serverAddress, query, threshold, ignoreNullValues) is unchanged.
KEDA_CHART_REPO = "https://kedacore.github.io/charts"
KEDA_CHART = "keda"
KEDA_CHART_VERSION = "2.18.3"

# The vLLM project's Rust request router (vllm-project/router), PyPI `vllm-router`: the build
# tests/e2e runs. No `vllm/vllm-router:v0.1.17` Docker tag could be confirmed, so the router pod
# runs the pinned Python base image and installs the hash-locked wheel set
# images/vllm-router/requirements.txt (vllm-router's wheel is cp38-abi3 manylinux_2_28 x86_64;
# its dependencies are locked for CPython 3.12) in an initContainer; `router.image` overrides it
# with an image built from images/vllm-router/Dockerfile. The registrar sidecar runs the same
# base image (stdlib only).
ROUTER_VERSION = "0.1.17"
ROUTER_BASE_IMAGE = "python:3.12-slim-bookworm"
# The router pod's client proxy (issue 30: the router's admin routes stay on loopback): NGINX's
# unprivileged image (runs as uid 101, listens above 1024), stable line.
CLIENT_PROXY_IMAGE = "nginxinc/nginx-unprivileged:1.28.0-alpine"

# The llm-d request path (`router.kind: gateway`, infra/render/gateway.py and epp.py); the
# pins move together, each read at its tag:
# - Agentgateway: a Gateway API implementation conformant with the Inference Extension
#   (gateway-api-inference-extension site-src/implementations/gateways.md @ v1.6.0). Charts are
#   published as OCI artifacts `cr.agentgateway.dev/charts/<chart>:v<version>`
#   (agentgateway/agentgateway .github/workflows/release.yml @ v1.4.1); the chart's appVersion,
#   and so the controller and proxy image tags, is the release version.
AGENTGATEWAY_CHART_REPO = "oci://cr.agentgateway.dev/charts"
AGENTGATEWAY_CHART = "agentgateway"
AGENTGATEWAY_CRDS_CHART = "agentgateway-crds"
AGENTGATEWAY_CHART_VERSION = "v1.4.1"
# - The InferencePool API (inference.networking.k8s.io/v1): the release asset with only the v1
#   CRD (Makefile target `artifacts` @ v1.6.0 builds `v1-manifests.yaml` from config/crd).
GATEWAY_API_INFERENCE_EXTENSION_VERSION = "v1.6.0"
INFERENCE_POOL_CRDS_URL = (
    "https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/"
    f"{GATEWAY_API_INFERENCE_EXTENSION_VERSION}/v1-manifests.yaml"
)
# - Gateway API itself (standard channel), for clusters where DOKS does not manage it (DOKS
#   installs the Gateway API CRDs on VPC-native clusters from 1.33). Agentgateway v1.4.1 is built
#   against sigs.k8s.io/gateway-api v1.6.1 (its go.mod).
GATEWAY_API_VERSION = "v1.6.1"
GATEWAY_API_CRDS_URL = (
    f"https://github.com/kubernetes-sigs/gateway-api/releases/download/{GATEWAY_API_VERSION}/standard-install.yaml"
)
# - The endpoint picker (EPP) and InferenceObjective now live in llm-d/llm-d-router: image
#   `ghcr.io/llm-d/llm-d-router-endpoint-picker:<tag>` (.github/ISSUE_TEMPLATE/new-release.md @
#   v0.10.0), CRD `inferenceobjectives.llm-d.ai` (config/crd/bases @ v0.10.0, no release asset).
LLM_D_ROUTER_VERSION = "v0.10.0"
EPP_IMAGE = f"ghcr.io/llm-d/llm-d-router-endpoint-picker:{LLM_D_ROUTER_VERSION}"
INFERENCE_OBJECTIVE_CRD_URL = (
    f"https://raw.githubusercontent.com/llm-d/llm-d-router/{LLM_D_ROUTER_VERSION}/"
    "config/crd/bases/llm-d.ai_inferenceobjectives.yaml"
)


def vllm_version_of_image(image: str) -> tuple[int, int, int] | None:
    """The vLLM release an image tag names, when it names one: `vllm/vllm-openai-rocm:v0.33.0` and
    `…:0.33.0` → (0, 33, 0); AMD's `rocm/vllm:rocm6.4.1_vllm_0.9.1_20250702` → (0, 9, 1) (the
    ROCm version in front is skipped). None for a tag that names no vLLM version (a digest, a
    custom build): nothing can be told from it."""
    import re

    tag = image.rsplit("/", 1)[-1].partition("@")[0]
    if ":" not in tag:
        return None
    tag = tag.split(":", 1)[1]
    for pattern in (r"vllm[_-]v?(\d+)\.(\d+)\.(\d+)", r"^v?(\d+)\.(\d+)\.(\d+)(?![\d.])"):
        match = re.search(pattern, tag)
        if match:
            return (int(match[1]), int(match[2]), int(match[3]))
    return None


def parse_version(text: str) -> tuple[int, int, int]:
    major, minor, patch = (int(p) for p in text.split("."))
    return (major, minor, patch)


# The P/D router: the vLLM project's Rust router (PyPI `vllm-router`, vllm-project/router) in
# `--vllm-pd-disaggregation` mode, one Deployment per P/D model (render/pd_router.py). No
# `vllm/vllm-router:v0.1.17` image tag could be confirmed (serving-research A4), so the pod
# installs the pinned wheel into a pinned Python base image at start.
PD_ROUTER_VERSION = "0.1.17"
PD_ROUTER_BASE_IMAGE = "python:3.12-slim-bookworm"
# The router pod's client proxy (issue 30: the router's admin routes stay on loopback): NGINX's
# unprivileged image (runs as uid 101, listens above 1024), stable line.
CLIENT_PROXY_IMAGE = "nginxinc/nginx-unprivileged:1.28.0-alpine"

# Multi-node replicas on fabric pools (gpu_pools[].fabric: true; docs/serving.md "Multi-node
# replicas"), installed only on clusters with a fabric pool:
# - LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): one group of pods per replica, the leader and
#   nodes_per_replica − 1 workers. Chart `oci://registry.k8s.io/lws/charts/lws` version 0.10.0
#   (kubernetes-sigs/lws site/content/en/docs/installation/_index.md @ v0.10.0: chart version
#   without the v, namespace lws-system; charts/lws/Chart.yaml appVersion v0.10.0). The chart's
#   values.yaml defaults the manager image tag to `main` with pullPolicy Always, so the tag is set
#   to the release explicitly.
LWS_CHART_REPO = "oci://registry.k8s.io/lws/charts"
LWS_CHART = "lws"
LWS_CHART_VERSION = "0.10.0"
LWS_IMAGE_REPOSITORY = "registry.k8s.io/lws/lws"
LWS_IMAGE_TAG = "v0.10.0"
LWS_NAMESPACE = "lws-system"
# - Multus CNI, thick plugin (k8snetworkplumbingwg/multus-cni deployments/multus-daemonset-thick.yml
#   @ v4.3.0, the newest tag; the file's image is `snapshot-thick`, the release workflow
#   .github/workflows/image-push-release.yml tags each release `<tag>-thick`): attaches each
#   fabric NIC to an engine pod through a host-device NetworkAttachmentDefinition. DOKS fabric
#   nodes ship the RDMA shared device plugin (rdma/fabric0..7) but not Multus.
MULTUS_VERSION = "v4.3.0"
MULTUS_IMAGE = f"ghcr.io/k8snetworkplumbingwg/multus-cni:{MULTUS_VERSION}-thick"


# Every chart the stack may install, as (chart, version, repository): what `infra charts pull`
# downloads into charts/ and `infra plan` templates (docs/charts.md). The sha256 of each archive is
# recorded beside these versions in chart_digests.json (infra/charts/digests.py).
PINNED_CHARTS: tuple[tuple[str, str, str], ...] = (
    (AMD_GPU_OPERATOR_CHART, AMD_GPU_OPERATOR_CHART_VERSION, AMD_GPU_OPERATOR_CHART_REPO),
    (CERT_MANAGER_CHART, CERT_MANAGER_CHART_VERSION, CERT_MANAGER_CHART_REPO),
    (KUBE_PROMETHEUS_STACK_CHART, KUBE_PROMETHEUS_STACK_CHART_VERSION, KUBE_PROMETHEUS_STACK_CHART_REPO),
    (KEDA_CHART, KEDA_CHART_VERSION, KEDA_CHART_REPO),
    (AGENTGATEWAY_CRDS_CHART, AGENTGATEWAY_CHART_VERSION, AGENTGATEWAY_CHART_REPO),
    (AGENTGATEWAY_CHART, AGENTGATEWAY_CHART_VERSION, AGENTGATEWAY_CHART_REPO),
    (LWS_CHART, LWS_CHART_VERSION, LWS_CHART_REPO),
)
