"""Memory per GPU for one layout: weights, activations, runtime overhead, and what is left for KV cache.

vLLM takes `gpu_memory_utilization × HBM` as its budget (HBM: the total the device reports, in
bytes — binary capacity, ~7 % above the marketing "GB" read as 10^9 bytes), loads its weight shard, profiles one
forward pass of `max_num_batched_tokens` tokens to measure peak activations, and hands the rest to
the KV cache. This module reproduces that arithmetic:

- weights: attention and dense MLPs are split over the TP ranks (K/V projections are replicated
  once tp exceeds the KV heads), the vocabulary-parallel embedding and LM head likewise; routed
  experts are split over every GPU of the replica (tp × dp), whether sharded whole (EP) or sliced;
- KV bytes per token per GPU: a TP rank holds ceil(kv_heads / tp) heads (so KV heads are
  replicated when tp > kv_heads); an MLA latent is held whole by every rank; FP8 KV halves it;
- runtime overhead: HIP/CUDA context, graph pools and communicator buffers, which vLLM counts as
  non-torch memory; a flat figure per GPU, larger when collectives are set up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.catalog.gpus import GpuSize
from infra.catalog.models import ModelArch
from infra.domain import Layout

GB = 1e9
# Context, allocator fragmentation and graph pools (~2.5 GB measured on vLLM V1), plus RCCL/NCCL
# and custom all-reduce buffers when the engine spans GPUs.
RUNTIME_OVERHEAD_GB = 2.5
COLLECTIVE_BUFFERS_GB = 1.5
KV_BLOCK_TOKENS = 16  # vLLM allocates KV in blocks of 16 tokens


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-GPU memory of one replica (GB = 1e9 bytes) and what it allows."""

    hbm_gb: float  # the device's reported capacity in 1e9 bytes (MI300X: 205.8, not its marketing 192)
    budget_gb: float  # gpu_memory_utilization × HBM
    weights_gb: float
    activations_gb: float
    runtime_overhead_gb: float
    kv_cache_gb: float  # budget - weights - activations - overhead (negative: does not fit)
    kv_bytes_per_token_per_gpu: float
    kv_tokens_per_replica: int
    context_tokens: int  # tokens one sequence holds at the end of the workload's request
    max_concurrency_per_replica: int  # sequences the KV cache holds at that context
    max_model_len: int
    fits: bool
    problem: str = ""

    def to_json(self) -> dict:
        return {
            "hbm_gb": round(self.hbm_gb, 1),
            "budget_gb": round(self.budget_gb, 1),
            "weights_gb": round(self.weights_gb, 2),
            "activations_gb": round(self.activations_gb, 2),
            "runtime_overhead_gb": round(self.runtime_overhead_gb, 2),
            "kv_cache_gb": round(self.kv_cache_gb, 2),
            "kv_bytes_per_token_per_gpu": int(round(self.kv_bytes_per_token_per_gpu)),
            "kv_tokens_per_replica": self.kv_tokens_per_replica,
            "max_concurrency_per_replica": self.max_concurrency_per_replica,
        }


def weight_bytes_per_gpu(arch: ModelArch, tp: int, dp: int = 1) -> float:
    """Weight bytes one GPU holds for a replica of tp × dp GPUs (with or without EP: the expert
    bytes per GPU are the same on average; EP shards whole experts, TP slices each one)."""
    kv_proj = arch.kv_projection_params_per_layer
    attention_other = arch.attention_params_per_layer - kv_proj
    kv_share = 0.0
    if kv_proj:
        kv_share = (
            math.ceil(arch.num_kv_heads / tp) / arch.num_kv_heads
            if arch.num_kv_heads >= tp
            else 1.0 / arch.num_kv_heads
        )
    dense_elems = (
        arch.num_layers * (attention_other / tp + kv_proj * kv_share)
        + arch.num_dense_mlp_layers * arch.dense_mlp_params_per_layer / tp
        + arch.num_moe_layers * (arch.shared_expert_params_per_layer / tp + arch.router_params_per_layer)
    )
    experts = arch.routed_expert_weight_bytes / (tp * dp)
    return dense_elems * arch.dense_bytes_per_param + experts + arch.embedding_weight_bytes / tp


def activation_bytes_per_gpu(arch: ModelArch, layout: Layout) -> float:
    """Peak activations of vLLM's profiling pass: hidden states of max_num_batched_tokens tokens
    through a layer (a few live copies), the MLP/expert intermediate of this rank, and fp32 logits
    for max_num_seqs sequences over this rank's vocabulary shard."""
    tokens = layout.max_num_batched_tokens
    tp = layout.tp
    if arch.is_moe:
        mlp_width = 2 * arch.num_experts_per_tok * arch.moe_intermediate_size / tp
    else:
        mlp_width = 2 * arch.intermediate_size / tp
    per_token = (8 * arch.hidden_size + 1.5 * mlp_width) * 2.0
    logits = layout.max_num_seqs * arch.vocab_size / tp * 4.0 * 2
    return tokens * per_token + logits


def default_max_model_len(arch: ModelArch, context_tokens: int) -> int:
    """Room for requests twice the workload's mean length, as a power of two (≥ 4096), capped by the
    model's context: a mean is not a maximum, and vLLM rejects prompts beyond max-model-len."""
    want = max(4096, 1 << max(0, (2 * context_tokens - 1).bit_length()))
    return min(arch.max_context, want)


def memory_per_gpu(arch: ModelArch, gpu: GpuSize, layout: Layout, context_tokens: int) -> MemoryBreakdown:
    """The memory breakdown of one GPU of one replica, and the KV capacity it leaves."""
    hbm_bytes = gpu.accelerator.hbm_bytes
    budget = hbm_bytes * layout.gpu_memory_utilization
    weights = weight_bytes_per_gpu(arch, layout.tp, layout.dp)
    activations = activation_bytes_per_gpu(arch, layout)
    overhead = (RUNTIME_OVERHEAD_GB + (COLLECTIVE_BUFFERS_GB if layout.gpus_per_replica > 1 else 0.0)) * GB
    kv_bytes = budget - weights - activations - overhead
    per_token = arch.kv_bytes_per_token(layout.kv_cache_dtype, tp=layout.tp, context_tokens=context_tokens)
    max_model_len = layout.max_model_len or default_max_model_len(arch, context_tokens)
    if kv_bytes > 0:
        tokens_per_rank = int(kv_bytes // per_token) // KV_BLOCK_TOKENS * KV_BLOCK_TOKENS
    else:
        tokens_per_rank = 0
    tokens = tokens_per_rank * layout.dp
    concurrency = layout.dp * (tokens_per_rank // max(1, context_tokens))
    problem = ""
    if kv_bytes <= 0:
        short = (weights + activations + overhead - budget) / GB
        problem = (
            f"weights {weights / GB:.1f} GB + activations {activations / GB:.1f} GB + runtime "
            f"{overhead / GB:.1f} GB per GPU exceed the {budget / GB:.1f} GB budget "
            f"({layout.gpu_memory_utilization:.2f} × {hbm_bytes / GB:.1f} GB, the "
            f"{hbm_bytes / 2**30:.1f} GiB a {gpu.accelerator.hbm_gb:g} GB {gpu.accelerator.model} reports) "
            f"by {short:.1f} GB"
        )
    elif tokens_per_rank < max_model_len:
        problem = (
            f"KV cache of {kv_bytes / GB:.1f} GB per GPU holds {tokens_per_rank} tokens, fewer than "
            f"max_model_len {max_model_len}; vLLM refuses to start"
        )
    return MemoryBreakdown(
        hbm_gb=hbm_bytes / GB,
        budget_gb=budget / GB,
        weights_gb=weights / GB,
        activations_gb=activations / GB,
        runtime_overhead_gb=overhead / GB,
        kv_cache_gb=kv_bytes / GB,
        kv_bytes_per_token_per_gpu=per_token,
        kv_tokens_per_replica=tokens,
        context_tokens=context_tokens,
        max_concurrency_per_replica=concurrency,
        max_model_len=max_model_len,
        fits=not problem,
        problem=problem,
    )
