"""Written reasons for the scanner findings the platform accepts, as checkov skip annotations.

`scripts/scan_security.py` runs checkov 3.3.30 over every rendered object and fails CI on any
finding, unless the object carries `checkov.io/skip<N>: <check id>=<reason>` (checkov's own
suppression format for Kubernetes objects). The reasons are written here once, by check, and
attached by the renderer of each object that needs them — so the exception sits where the object
is rendered and a reader of the manifest sees why.
"""

from __future__ import annotations

from typing import Any

ANNOTATION_PREFIX = "checkov.io/skip"

# Accepted for every workload the platform renders, with the reason.
CPU_LIMITS = ("CKV_K8S_11", "no CPU limits by design: CFS quota throttling adds latency spikes to serving; CPU requests reserve the cores")
PULL_POLICY = ("CKV_K8S_15", "images are pinned (tags in infra/catalog/versions.py, or image@sha256 digests); IfNotPresent keeps multi-GB images cached on the node")
DIGEST = ("CKV_K8S_43", "images are tag-pinned in infra/catalog/versions.py; image@sha256 digests are accepted wherever an image is configurable and prod warns on tag-only images")
COMMON = (CPU_LIMITS, PULL_POLICY, DIGEST)

# vLLM engines (infra/render/model_service.py engine_security explains each).
ENGINE = COMMON + (
    ("CKV_K8S_23", "the vLLM ROCm image runs as root: the shared weight and compile caches on NFS are root-owned"),
    ("CKV_K8S_40", "the vLLM ROCm image runs as root (see CKV_K8S_23)"),
    ("CKV_K8S_22", "vLLM, Triton and AITER write JIT artefacts and temp files across the image's filesystem"),
    ("CKV_K8S_31", "ROCm: seccomp Unconfined as AMD documents for vLLM (NUMA syscalls); see engine_security"),
    ("CKV_K8S_25", "ROCm multi-GPU pods add SYS_PTRACE (pidfd_getfd for GPU IPC handles); fabric pods add IPC_LOCK (RDMA memory registration)"),
    ("CKV_K8S_37", "every capability is dropped; only SYS_PTRACE / IPC_LOCK are added back where the GPU runtime needs them"),
    ("CKV_K8S_35", "vLLM reads its API key from VLLM_API_KEY or its command line only (the Hugging Face and S3 clients from env too): env keeps keys off the command line"),
)
# Jobs running the vLLM image to download weights into the root-owned cache.
PREFETCH = COMMON + (
    ("CKV_K8S_23", "writes the root-owned shared weight cache with the vLLM image (runs as root)"),
    ("CKV_K8S_40", "writes the root-owned shared weight cache with the vLLM image (runs as root)"),
    ("CKV_K8S_22", "the Hugging Face and S3 clients write temp files and their caches"),
    ("CKV_K8S_35", "huggingface_hub reads HF_TOKEN and the S3 client its keys from the environment only"),
)
# Privileged node agents (kube-system): they change node settings or attach NICs.
NODE_AGENT = COMMON + (
    ("CKV_K8S_16", "a node agent: writes /proc/sys (NUMA balancing) or attaches host NICs (Multus); privileged by purpose"),
    ("CKV_K8S_20", "privileged node agent (see CKV_K8S_16)"),
    ("CKV_K8S_23", "privileged node agent (see CKV_K8S_16)"),
    ("CKV_K8S_40", "privileged node agent (see CKV_K8S_16)"),
    ("CKV_K8S_22", "privileged node agent (see CKV_K8S_16)"),
    ("CKV_K8S_31", "privileged node agent (see CKV_K8S_16)"),
    ("CKV_K8S_37", "privileged node agent (see CKV_K8S_16)"),
    ("CKV_K8S_28", "privileged node agent (see CKV_K8S_16)"),
    ("CKV_K8S_29", "privileged node agent (see CKV_K8S_16)"),
    ("CKV_K8S_8", "a one-shot node setting then sleep (or the Multus daemon): nothing to probe"),
    ("CKV_K8S_38", "Multus reads pod annotations from the API; the tuning agent mounts no token it uses"),
)
# Multus (thick plugin), as upstream's deployments/multus-daemonset-thick.yml renders it.
MULTUS = NODE_AGENT + (
    ("CKV_K8S_17", "Multus attaches host NICs to pods: it runs in the host PID namespace (upstream manifest)"),
    ("CKV_K8S_19", "Multus configures pod networking from the host network namespace (upstream manifest)"),
    ("CKV_K8S_13", "upstream's resources for the Multus daemon are kept; it is a node agent, not a workload"),
    ("CKV_K8S_9", "the Multus daemon serves the CNI socket on the host: nothing to probe over the pod network"),
)
MULTUS_RBAC = (("CKV_K8S_49", "Multus's upstream ClusterRole: every verb on its own API group (k8s.cni.cncf.io) only"),)
# Pods whose sidecars have nothing to probe.
NO_PROBE_SIDECAR = (
    ("CKV_K8S_8", "the registrar sidecar has no server to probe; the router and client proxy containers are probed"),
    ("CKV_K8S_9", "the registrar sidecar has no server to probe; the router and client proxy containers are probed"),
)
ROUTER = COMMON + NO_PROBE_SIDECAR
# Pods that watch the API with their token (endpoint pickers, P/D routers' service discovery).
API_WATCHER = COMMON + (
    ("CKV_K8S_38", "watches pods / EndpointSlices with the service account token (a read-only, namespaced Role)"),
)
PAUSE = COMMON + (
    ("CKV_K8S_8", "a pause container that only holds the pre-pulled image: nothing to probe"),
    ("CKV_K8S_9", "a pause container that only holds the pre-pulled image: nothing to probe"),
)


def annotations(reasons: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """checkov skip annotations, one per check (ids unique, order kept)."""
    seen: dict[str, str] = {}
    for check, reason in reasons:
        seen.setdefault(check, reason)
    return {f"{ANNOTATION_PREFIX}{i}": f"{check}={reason}" for i, (check, reason) in enumerate(seen.items(), start=1)}


def accept(obj: dict[str, Any], reasons: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """`obj` with the skip annotations of `reasons` added to its metadata (returned for chaining)."""
    meta = obj.setdefault("metadata", {})
    meta["annotations"] = {**meta.get("annotations", {}), **annotations(reasons)}
    return obj
