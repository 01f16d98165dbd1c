"""Validation of an explicit layout against a model and a GPU size: human-readable problems.

The config validator prefixes each message with the key path; the search uses the same rules to
skip layouts vLLM would refuse to start.
"""

from __future__ import annotations

from infra.catalog.gpus import GpuSize
from infra.catalog.models import ModelArch
from infra.domain import Layout
from infra.planner.memory import memory_per_gpu

KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")


def shape_problems(arch: ModelArch, gpu: GpuSize, layout: Layout) -> list[str]:
    """Problems with the parallel shape alone (no memory arithmetic); cheap, used by the search."""
    problems: list[str] = []
    n = gpu.gpus
    tp, dp, r = layout.tp, layout.dp, layout.replicas_per_node
    if tp < 1 or dp < 1 or r < 1:
        return [
            f"tp, dp and replicas_per_node must be at least 1 (got tp={tp}, dp={dp}, replicas_per_node={r})"
        ]
    nodes = layout.nodes_per_replica
    if nodes > 1:
        problems += _multi_node_problems(gpu, layout)
    else:
        if n % tp:
            problems.append(f"tp={tp} does not divide the {n} GPUs per node of {gpu.slug}")
        used = tp * dp * r
        if used > n:
            problems.append(
                f"tp × dp × replicas_per_node = {tp}×{dp}×{r} = {used} GPUs, more than the {n} per node of {gpu.slug}"
            )
    if arch.num_attention_heads % tp:
        problems.append(
            f"tp={tp} does not divide the {arch.num_attention_heads} attention heads of {arch.id}"
        )
    kv = arch.num_kv_heads
    if arch.attention == "gqa" and kv % tp and tp % kv:
        problems.append(f"tp={tp} and the {kv} KV heads of {arch.id} do not divide one another")
    if layout.ep and not arch.is_moe:
        problems.append(f"ep (expert parallelism) needs a mixture-of-experts model; {arch.id} is dense")
    if dp > 1 and not arch.is_moe:
        problems.append(
            f"dp={dp} (data-parallel attention) is for mixture-of-experts models; "
            f"use replicas_per_node for more copies of dense {arch.id}"
        )
    if layout.ep and arch.is_moe and arch.num_experts % (tp * dp):
        problems.append(
            f"ep over tp × dp = {tp * dp} GPUs does not divide the {arch.num_experts} experts of {arch.id}"
        )
    return problems


def _multi_node_problems(gpu: GpuSize, layout: Layout) -> list[str]:
    """A replica over nodes_per_replica whole nodes: fabric size, every GPU of its nodes used, one
    replica per node; with ep each DP rank inside one node, without ep one TP group over all."""
    n, nodes, tp, dp = gpu.gpus, layout.nodes_per_replica, layout.tp, layout.dp
    problems = []
    if not gpu.fabric:
        problems.append(f"nodes_per_replica={nodes} needs an RDMA fabric GPU size; {gpu.slug} has no fabric")
    if layout.replicas_per_node != 1:
        problems.append(f"replicas_per_node={layout.replicas_per_node} with nodes_per_replica={nodes}: a replica that spans nodes is the only one on each of them (give replicas_per_node 1)")
    if tp * dp != nodes * n:
        problems.append(
            f"gpus_per_replica tp × dp = {tp}×{dp} = {tp * dp}; a replica over nodes_per_replica={nodes} nodes of "
            f"{gpu.slug} uses all {nodes} × {n} = {nodes * n} GPUs"
        )
    if layout.ep:
        if tp > n or n % tp:
            problems.append(f"tp={tp} with ep over nodes: each DP rank stays inside one node, so tp must divide the {n} GPUs per node")
    elif dp > 1:
        problems.append(
            f"dp={dp} without ep over nodes: data parallelism across nodes is for expert parallelism (give ep true), "
            "or span the nodes with one TP group (tp = nodes_per_replica × GPUs per node, dp 1)"
        )
    return problems


def check_layout(arch: ModelArch, gpu: GpuSize, layout: Layout) -> list[str]:
    """Everything wrong with running `layout` of `arch` on `gpu`; empty when it can start."""
    problems = shape_problems(arch, gpu, layout)
    if layout.kv_cache_dtype not in KV_CACHE_DTYPES:
        problems.append(
            f"kv_cache_dtype {layout.kv_cache_dtype!r} is not one of {', '.join(KV_CACHE_DTYPES)}"
        )
    if not 0.0 < layout.gpu_memory_utilization <= 1.0:
        problems.append(f"gpu_memory_utilization {layout.gpu_memory_utilization} must be in (0, 1]")
    if layout.max_num_seqs < 1:
        problems.append(f"max_num_seqs {layout.max_num_seqs} must be at least 1")
    if layout.max_model_len is not None and layout.max_model_len > arch.max_context:
        problems.append(
            f"max_model_len {layout.max_model_len} exceeds the {arch.max_context}-token context of {arch.id}"
        )
    if layout.max_num_batched_tokens < 1:
        problems.append(f"max_num_batched_tokens {layout.max_num_batched_tokens} must be at least 1")
    if problems:
        return problems
    kv_dtype = "fp8" if layout.kv_cache_dtype.startswith("fp8") else "auto"
    mem = memory_per_gpu(
        arch, gpu, layout.with_(kv_cache_dtype=kv_dtype), context_tokens=layout.max_model_len or 2048
    )
    if not mem.fits:
        problems.append(f"{layout.name} of {arch.id} on {gpu.slug}: {mem.problem}")
    return problems
