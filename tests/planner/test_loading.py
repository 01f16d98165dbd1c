"""The load-time model: throughput per source, contention, compile caches, the readiness plan."""

from __future__ import annotations

import pytest

from infra.catalog.models import resolve_model
from infra.planner import loading
from infra.planner.loading import WeightSource, estimate_load, estimated_load_seconds, plan_readiness

QWEN_235B = resolve_model("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", None)


def test_the_reference_checkpoint_weighs_about_236_gb():
    assert QWEN_235B.weight_bytes_total / 1e9 == pytest.approx(236.3, abs=0.5)


@pytest.mark.parametrize(
    ("kind", "gb_per_s", "limited_by"),
    [
        ("huggingface", 0.15, "Hugging Face download per pod"),
        ("nfs", 0.35, "NFS client per node"),
        ("spaces", 1.25, "node public network"),
    ],
)
def test_one_replica_per_source(kind, gb_per_s, limited_by):
    est = estimate_load(QWEN_235B, WeightSource(kind), gpus_per_replica=8)
    assert est.bytes_per_s / 1e9 == pytest.approx(gb_per_s)
    assert est.limited_by == limited_by


def test_spaces_is_the_fastest_source_and_hugging_face_the_slowest():
    times = {k: estimate_load(QWEN_235B, WeightSource(k), gpus_per_replica=8).total_s for k in ("huggingface", "nfs", "spaces")}
    assert times["spaces"] < times["nfs"] < times["huggingface"]
    # 236 GB at 1.25 GB/s ≈ 189 s of streaming (the HBM copy overlaps) + 300 s cold MoE warm-up.
    assert times["spaces"] == pytest.approx(236.3 / 1.25 + 300, abs=2)


def test_many_loaders_share_the_nfs_share_and_the_bucket():
    one = estimate_load(QWEN_235B, WeightSource("nfs", nfs_tier="standard"), gpus_per_replica=8)
    four = estimate_load(QWEN_235B, WeightSource("nfs", nfs_tier="standard"), gpus_per_replica=8, concurrent_loaders=4)
    assert four.bytes_per_s == pytest.approx(one.bytes_per_s / 4) and "share" in four.limited_by
    eight = estimate_load(QWEN_235B, WeightSource("spaces"), gpus_per_replica=8, concurrent_loaders=8)
    assert eight.limited_by == "Spaces bucket request limit"
    assert eight.bytes_per_s == pytest.approx(loading.SPACES_BUCKET_BYTES_PER_S / 8)


def test_replicas_on_one_node_share_its_network():
    est = estimate_load(QWEN_235B, WeightSource("spaces"), gpus_per_replica=4, replicas_per_node=2, concurrent_loaders=2)
    assert est.bytes_per_s == pytest.approx(loading.NODE_PUBLIC_BYTES_PER_S / 2)


def test_few_streamer_connections_limit_a_single_gpu_replica():
    est = estimate_load(QWEN_235B, WeightSource("spaces", streamer_concurrency=4), gpus_per_replica=1)
    assert est.limited_by == "4 Spaces connections"


def test_a_warm_compile_cache_shortens_the_warm_up():
    cold = estimate_load(QWEN_235B, WeightSource("nfs"), gpus_per_replica=8)
    warm = estimate_load(QWEN_235B, WeightSource("nfs"), gpus_per_replica=8, compile_cache_warm=True)
    assert warm.warmup_s == pytest.approx(cold.warmup_s * loading.WARM_WARMUP_FACTOR)


def test_the_conservative_figure_is_unchanged_for_the_old_sources():
    """The startup probe's budget from NFS and Hugging Face is what it was before the model grew."""
    assert estimated_load_seconds(QWEN_235B, source="nfs", gpus_per_replica=8) == 1492
    assert estimated_load_seconds(QWEN_235B, source="huggingface", gpus_per_replica=8) == 2843


def test_an_unknown_source_is_refused():
    with pytest.raises(ValueError, match="source must be one of"):
        WeightSource("ftp")


def test_readiness_plan_prefers_a_measurement_and_uses_the_shared_cache_only_on_nfs():
    nfs = plan_readiness(QWEN_235B, WeightSource("nfs"), gpus_per_replica=8, replicas_per_node=1, first_rollout_replicas=2)
    spaces = plan_readiness(QWEN_235B, WeightSource("spaces"), gpus_per_replica=8, replicas_per_node=1, first_rollout_replicas=2)
    assert nfs.new_replica.compile_cache_warm and not spaces.new_replica.compile_cache_warm
    assert not nfs.first_start.compile_cache_warm  # a rollout of a new image compiles afresh
    assert spaces.scale_up_s == loading.NODE_PROVISION_S + loading.IMAGE_PULL_S + spaces.serving_after_s
    measured = plan_readiness(
        QWEN_235B, WeightSource("spaces"), gpus_per_replica=8, replicas_per_node=1, first_rollout_replicas=2, measured_ready_seconds=900
    )
    assert measured.serving_after_s == 900 and measured.rollout_s == 900
    assert measured.probe_budget_s == max(measured.first_start.budget_s, 1350)
    assert "measured by infra bench" in measured.summary()
    assert "from the Spaces bucket" in spaces.summary() and "new node" in spaces.summary()
