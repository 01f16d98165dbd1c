"""Memory arithmetic and layout validation, pinned on hand-checked cases."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.catalog.gpus import GPU_SIZES, gpu_size
from infra.catalog.models import CATALOG, resolve_model
from infra.planner import Layout, check_layout, memory_per_gpu
from infra.planner.memory import weight_bytes_per_gpu

QWEN_FP8 = resolve_model("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8")
LLAMA_70B = resolve_model("meta-llama/Llama-3.1-70B-Instruct")
MI300X_1 = gpu_size("gpu-mi300x1-192gb")
MI325X_8 = gpu_size("gpu-mi325x8-2048gb-contracted")
H100_8 = gpu_size("gpu-h100x8-640gb")


def test_qwen3_235b_fp8_does_not_fit_one_mi300x_and_says_by_how_much():
    problems = check_layout(QWEN_FP8, MI300X_1, Layout(tp=1))
    assert len(problems) == 1
    # 236.3 GB of weights against 0.90 × 192 = 172.8 GB: short by more than 63 GB
    assert "exceed the 172.8 GB budget" in problems[0]
    short = float(problems[0].split(" by ")[-1].split(" GB")[0])
    assert 63.5 < short < 70


def test_qwen3_235b_fp8_fits_tp2_on_mi325x():
    mem = memory_per_gpu(QWEN_FP8, MI325X_8, Layout(tp=2, replicas_per_node=4, kv_cache_dtype="fp8"), 2300)
    # Hand count per GPU: experts 227.1 GB / 2, attention 3.35 GB (K/V projections split 2 ways),
    # routers 0.05 GB, embedding + LM head 2.49 GB / 2  → 118.2 GB
    assert mem.weights_gb == pytest.approx(118.2, abs=0.3)
    assert mem.fits
    assert mem.kv_cache_gb > 100
    assert check_layout(QWEN_FP8, MI325X_8, Layout(tp=2, replicas_per_node=4)) == []


def test_kv_capacity_hand_checked_llama_70b_tp8():
    lay = Layout(tp=8, kv_cache_dtype="fp8", max_num_batched_tokens=8192)
    mem = memory_per_gpu(LLAMA_70B, gpu_size("gpu-mi300x8-1536gb"), lay, 4096)
    per_token = 2 * 80 * 1 * 128 * 1  # one KV head per rank, FP8
    assert mem.kv_bytes_per_token_per_gpu == per_token
    assert mem.kv_tokens_per_replica == pytest.approx(mem.kv_cache_gb * 1e9 / per_token, rel=0.001)
    assert mem.max_concurrency_per_replica == mem.kv_tokens_per_replica // 4096


def test_expert_weights_split_over_all_gpus_of_a_replica():
    tp8 = weight_bytes_per_gpu(QWEN_FP8, 8, 1)
    dp8 = weight_bytes_per_gpu(QWEN_FP8, 1, 8)
    experts = QWEN_FP8.routed_expert_weight_bytes / 8
    assert tp8 > experts and dp8 > experts
    # dp8 keeps every rank's attention whole, so it holds more dense weights per GPU than tp8
    assert dp8 > tp8


@pytest.mark.parametrize(
    ("layout", "needle"),
    [
        (Layout(tp=3), "does not divide the 8 GPUs"),
        (Layout(tp=4, replicas_per_node=4), "more than the 8 per node"),
        (Layout(tp=8, ep=True), "needs a mixture-of-experts model"),
        (Layout(tp=2, dp=2), "use replicas_per_node"),
        (Layout(tp=1, max_model_len=10**6), "exceeds the 131072-token context"),
        (Layout(tp=1, kv_cache_dtype="int8"), "kv_cache_dtype"),
    ],
)
def test_check_layout_names_each_problem(layout, needle):
    problems = check_layout(LLAMA_70B, gpu_size("gpu-mi300x8-1536gb"), layout)
    assert any(needle in p for p in problems), problems


def test_heads_must_divide():
    small = resolve_model("Qwen/Qwen3-8B")  # 32 heads, 8 KV heads
    node = gpu_size("gpu-mi300x8-1536gb")
    assert check_layout(small, node, Layout(tp=8)) == []
    from dataclasses import replace

    odd = replace(small, num_attention_heads=28, num_kv_heads=4)
    problems = check_layout(odd, node, Layout(tp=8))
    assert any("28 attention heads" in p for p in problems)


def test_llama_70b_bf16_does_not_fit_one_h100_but_tp2_fp8_does():
    node = gpu_size("gpu-h100x1-80gb")
    assert check_layout(LLAMA_70B, node, Layout(tp=1))
    fp8 = resolve_model("meta-llama/Llama-3.1-70B-Instruct-FP8")
    assert check_layout(fp8, H100_8, Layout(tp=2, replicas_per_node=4)) == []


_ARCHS = [e.arch for e in CATALOG]
_NODES = [s for s in GPU_SIZES.values() if s.gpus == 8]


@settings(max_examples=150, deadline=None)
@given(
    arch=st.sampled_from(_ARCHS),
    gpu=st.sampled_from(_NODES),
    kv=st.sampled_from(["auto", "fp8"]),
    context=st.integers(256, 32768),
    tokens=st.sampled_from([2048, 8192, 16384]),
    util=st.floats(0.7, 0.95),
)
def test_more_gpus_per_replica_never_reduce_kv_capacity(arch, gpu, kv, context, tokens, util):
    previous = None
    for tp in (1, 2, 4, 8):
        lay = Layout(
            tp=tp,
            kv_cache_dtype=kv,
            max_num_batched_tokens=tokens,
            gpu_memory_utilization=util,
            max_model_len=4096,
        )
        mem = memory_per_gpu(arch, gpu, lay, context)
        capacity = max(0, mem.kv_tokens_per_replica)
        if previous is not None:
            assert capacity >= previous, (arch.id, gpu.slug, tp)
        previous = capacity
