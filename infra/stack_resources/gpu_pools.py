"""One GPU node pool's inputs: labels, the vendor's taint, and what `pulumi up` must not reset.

GPU pools are separate `KubernetesNodePool` resources (never the cluster's default pool) so that
resizing, adding or removing GPU capacity never touches the cluster itself. `size` and
`gpu_partition_mode` are create-time: changing either replaces the pool (all its nodes), which
`infra diff` flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.catalog.gpus import GpuSize
from infra.specs import GpuPoolSpec

POOL_LABEL = "inference-platform/pool"
GPU_VENDOR_LABEL = "inference-platform/gpu-vendor"
GPU_MODEL_LABEL = "inference-platform/gpu-model"

# DOKS itself taints GPU nodes `amd.com/gpu:NoSchedule` / `nvidia.com/gpu:NoSchedule` (key only,
# empty value; DO docs "Automatic Application of Labels and Taints to Nodes"). We declare the very
# same taint on the pool, so it is visible in the plan and survives even if DOKS stops adding it,
# without ever producing a second taint with the same key and effect (Kubernetes rejects those).
GPU_TAINT_VALUE = ""
GPU_TAINT_EFFECT = "NoSchedule"

# Engine (camelCase) name of the node count, for ignore_changes on autoscaled pools.
NODE_COUNT_PROPERTY = "nodeCount"
# ... and of the partition mode, ignored on AMD pools that leave it to DOKS.
PARTITION_MODE_PROPERTY = "gpuPartitionMode"


def pool_ignore_changes(autoscaled: bool, vendor: str, partition_mode: str | None) -> list[str]:
    """What `pulumi up` must not reset on a GPU pool.

    - The node count of an autoscaled pool belongs to the cluster autoscaler.
    - An AMD pool without a configured partition mode gets DOKS's default. Should the API report
      that default back, an unset input would read as a change of a create-time field, i.e. a
      replacement of every node, on every run; ignoring the unmanaged field rules that out.
      Configuring a mode later removes the ignore, so that change still shows as a replacement.
    """
    ignored = [NODE_COUNT_PROPERTY] if autoscaled else []
    if vendor == "amd" and partition_mode is None:
        ignored.append(PARTITION_MODE_PROPERTY)
    return ignored


def gpu_pool_labels(pool_name: str, gpu: GpuSize, extra: Mapping[str, str]) -> dict[str, str]:
    """Node labels for a GPU pool: user labels first, ours win on conflict."""
    return {
        **dict(extra),
        POOL_LABEL: pool_name,
        GPU_VENDOR_LABEL: gpu.vendor,
        GPU_MODEL_LABEL: gpu.accelerator.model,
    }


def gpu_pool_taints(gpu: GpuSize) -> list[dict[str, str]]:
    """The taint DOKS applies to this vendor's GPU nodes."""
    return [{"key": gpu.taint_key, "value": GPU_TAINT_VALUE, "effect": GPU_TAINT_EFFECT}]


def gpu_pool_inputs(spec: GpuPoolSpec, cluster_id: Any) -> dict[str, Any]:
    """The `KubernetesNodePool` inputs of a planned pool, fixed or autoscaled."""
    autoscaled = spec.autoscaled
    return {
        "clusterId": cluster_id,
        "name": spec.pool_name,
        "size": spec.gpu.slug,
        "nodeCount": spec.node_count,
        "autoScale": autoscaled,
        "minNodes": spec.min_nodes if autoscaled else None,
        "maxNodes": spec.max_nodes if autoscaled else None,
        "gpuPartitionMode": spec.partition_mode,
        "labels": gpu_pool_labels(spec.pool_name, spec.gpu, spec.labels),
        "taints": gpu_pool_taints(spec.gpu),
        "tags": list(spec.tags),
    }
