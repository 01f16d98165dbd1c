"""Host memory of a GPU node, shared among its engine pods, and what a KV offload tier may take.

A node keeps back a headroom for kubelet, system-reserved and DaemonSets; the rest is shared
among the replicas in proportion to their GPUs (an engine pod's memory request and limit). Inside
that share live the engine's processes, its /dev/shm (memory-backed) and, with `kv_offload`, the
offload tier's pinned host buffers. The renderer (render/model_service.py) sizes pods with these
same functions, so what the planner offers as offload room is what the pod gets (here, beside
the GPU sizes, because both the planner and the renderers read it).
"""

from __future__ import annotations

import math

# Node resources kept back before the rest is shared among GPU replicas in proportion to their GPUs.
NODE_HEADROOM_FRACTION = 0.10
NODE_HEADROOM_MIN_MEMORY_GIB = 8

# What a vLLM engine itself holds in host memory besides /dev/shm and an offload tier: the API
# server and engine-core processes (about 8 GiB) and, per GPU rank, a worker process with torch,
# the ROCm/CUDA runtime and its staging buffers (about 8 GiB). An estimate from the RSS of engines
# we have run, with margin; page cache of the weight files is reclaimable and not counted.
ENGINE_BASE_GIB = 8
ENGINE_PER_RANK_GIB = 8


def pod_memory_gib(node_ram_gib: int, node_gpus: int, gpus_per_pod: int) -> int:
    """An engine pod's memory request (= limit): its GPU share of the node's RAM after headroom."""
    headroom = max(NODE_HEADROOM_MIN_MEMORY_GIB, math.ceil(node_ram_gib * NODE_HEADROOM_FRACTION))
    return max(4, math.floor((node_ram_gib - headroom) * gpus_per_pod / node_gpus))


def shm_gib(gpus_per_pod: int, pod_memory: int) -> int:
    """/dev/shm for NCCL/RCCL and the multiprocess executor: grows with the ranks in a replica.

    One GPU needs little (8 GiB); TP/EP/DP ranks exchange tensors through shared memory, so
    16 GiB + 8 GiB per rank, capped at 64 GiB and at a quarter of the pod's memory (memory-backed
    emptyDir counts against the pod's memory).
    """
    want = 8 if gpus_per_pod == 1 else min(64, 16 + 8 * gpus_per_pod)
    return max(1, min(want, pod_memory // 4))


def engine_host_gib(gpus_per_pod: int, pod_memory: int) -> int:
    """Host memory an engine pod needs before any offload tier: processes and /dev/shm."""
    return ENGINE_BASE_GIB + ENGINE_PER_RANK_GIB * gpus_per_pod + shm_gib(gpus_per_pod, pod_memory)


def offload_room_gib(node_ram_gib: int, node_gpus: int, gpus_per_pod: int) -> int:
    """Host memory left in an engine pod for a KV offload tier (0 or less: none)."""
    pod = pod_memory_gib(node_ram_gib, node_gpus, gpus_per_pod)
    return pod - engine_host_gib(gpus_per_pod, pod)
