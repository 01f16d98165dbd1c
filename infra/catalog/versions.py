"""Every pinned version (images, charts, vLLM) in one place.

A diff of this file is how an upgrade shows up in review. Each value can be overridden in the
stack config where noted; nothing here is ever `latest`. The Kubernetes minors each in-cluster
pin supports, and where that was read, are in support_matrix.yaml (infra/compat.py).
"""

VLLM_VERSION = "0.33.0"
VLLM_IMAGE_ROCM = f"vllm/vllm-openai-rocm:v{VLLM_VERSION}"
VLLM_IMAGE_CUDA = f"vllm/vllm-openai:v{VLLM_VERSION}"

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

# vLLM production-stack request router (session / prefix-aware / round-robin routing). Tags are
# `v<helm chart version>`, published by the project's scheduled release workflow; CLI flags used:
# --service-discovery k8s, --k8s-label-selector, --routing-logic, --session-key.
ROUTER_IMAGE = "lmcache/lmstack-router:v0.1.12"
