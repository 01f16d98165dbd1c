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
    # The MI300X reports 205 822 885 888 bytes (191.7 GiB), not its marketing 192e9:
    # budget 0.90 × 205.82 GB = 185.24 GB. Weights 236.3 + activations 1.5 + runtime 2.5 = 240.3 GB,
    # short by 240.3 - 185.2 = 55.1 GB (the old decimal reading, 0.90 × 192 = 172.8 GB, said 67.5).
    assert "exceed the 185.2 GB budget (0.90 × 205.8 GB, the 191.7 GiB a 192 GB mi300x reports)" in problems[0]
    short = float(problems[0].split(" by ")[-1].split(" GB")[0])
    assert 54.5 < short < 55.5


def test_qwen3_235b_fp8_fits_tp2_on_mi325x():
    mem = memory_per_gpu(QWEN_FP8, MI325X_8, Layout(tp=2, replicas_per_node=4, kv_cache_dtype="fp8"), 2300)
    # Hand count per GPU: experts 227.1 GB / 2, attention 3.35 GB (K/V projections split 2 ways),
    # routers 0.05 GB, embedding + LM head 2.49 GB / 2  → 118.2 GB
    assert mem.weights_gb == pytest.approx(118.2, abs=0.3)
    assert mem.fits
    # 256 GiB = 274.88 GB reported; budget 0.90 × 274.88 = 247.39 GB (was 0.90 × 256 = 230.4)
    assert mem.hbm_gb == pytest.approx(274.878, abs=0.001)
    assert mem.budget_gb == pytest.approx(247.390, abs=0.001)
    # KV = budget - weights - activations - runtime (2.5 + 1.5 collectives) ≈ 247.4 - 118.2 - act - 4
    assert mem.kv_cache_gb == pytest.approx(mem.budget_gb - mem.weights_gb - mem.activations_gb - 4.0)
    assert mem.kv_cache_gb > 120
    assert check_layout(QWEN_FP8, MI325X_8, Layout(tp=2, replicas_per_node=4)) == []


@pytest.mark.parametrize(
    ("slug", "hbm_bytes", "budget_gb"),
    [
        # budget = 0.90 × bytes the device reports, in 1e9 bytes
        ("gpu-mi300x8-1536gb", 205_822_885_888, 185.241),  # rocm-smi VRAM total, 191.7 GiB
        ("gpu-mi325x8-2048gb-contracted", 256 * 2**30, 247.390),  # 274.878e9
        ("gpu-mi350x8-2304gb-contracted", 288 * 2**30, 278.314),  # 309.238e9
        ("gpu-h100x8-640gb", int(79.2 * 2**30), 76.536),  # 85.040e9, vLLM's total_gpu_memory
        ("gpu-h200x8-1128gb", int(139.8 * 2**30), 135.098),  # 150.109e9
    ],
)
def test_budget_is_a_fraction_of_the_capacity_the_device_reports(slug, hbm_bytes, budget_gb):
    node = gpu_size(slug)
    assert node.accelerator.hbm_bytes == hbm_bytes
    mem = memory_per_gpu(resolve_model("Qwen/Qwen3-8B"), node, Layout(tp=1), 2000)
    assert mem.budget_gb == pytest.approx(budget_gb, abs=0.001)


def test_marketing_capacity_stays_in_names_and_display():
    assert MI300X_1.accelerator.hbm_gb == 192 and MI300X_1.hbm_gb_total == 192
    assert MI325X_8.hbm_gb_total == 2048 and MI325X_8.accelerator.hbm_bytes * MI325X_8.gpus == 2048 * 2**30
    assert H100_8.hbm_gb_total == 640


def test_kv_bytes_per_token_unchanged():
    # Qwen3-235B: 94 layers × 4 KV heads × 128 dims × 2 (K, V) × 2 bytes (BF16) = 192 512 B/token for
    # the whole model; TP4 holds one KV head per rank: 48 128 B; FP8 KV halves it: 24 064 B.
    assert QWEN_FP8.kv_bytes_per_token("auto", tp=1, context_tokens=2300) == 94 * 4 * 128 * 2 * 2
    assert QWEN_FP8.kv_bytes_per_token("fp8", tp=4, context_tokens=2300) == 94 * 1 * 128 * 2 * 1
    # Llama-3.1-70B: 80 layers × 8 KV heads × 128 × 2 × 2 = 327 680 B/token; TP8 FP8: 20 480 B
    assert LLAMA_70B.kv_bytes_per_token("auto", tp=1, context_tokens=4096) == 80 * 8 * 128 * 2 * 2
    assert LLAMA_70B.kv_bytes_per_token("fp8", tp=8, context_tokens=4096) == 80 * 1 * 128 * 2 * 1


def test_qwen3_235b_fp8_fits_one_mi325x_with_a_few_gb_of_kv():
    """236.3 GB of weights on one MI325X: the 256 GiB it reports leave room (0.90 × 192 GB did not on
    an MI300X, and 0.90 × 256e9 = 230.4 GB would not have here)."""
    lay = Layout(tp=1, replicas_per_node=8, kv_cache_dtype="fp8", max_num_seqs=32, max_num_batched_tokens=8192)
    mem = memory_per_gpu(QWEN_FP8, MI325X_8, lay, 2300)
    assert mem.budget_gb == pytest.approx(247.390, abs=0.001)  # 0.90 × 274.878
    assert mem.weights_gb == pytest.approx(236.34, abs=0.01)
    # KV = 247.39 - 236.34 weights - 1.18 activations - 2.5 runtime (no collectives) = 7.37 GB;
    # 94 layers × 4 KV heads × 128 × 2 (K, V) × 1 byte (FP8) = 96 256 B/token
    assert mem.kv_cache_gb == pytest.approx(7.37, abs=0.01)
    assert mem.kv_bytes_per_token_per_gpu == 96_256
    # 7.3729e9 // 96 256 = 76 597 tokens → 76 592 in 16-token blocks → 33 sequences of 2300 tokens
    assert mem.kv_tokens_per_replica == 76_592
    assert mem.max_concurrency_per_replica == 33
    assert mem.fits


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
