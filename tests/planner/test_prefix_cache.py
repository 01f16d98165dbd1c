"""The session model's prefix-cache hit rates (infra/planner/prefix_cache.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.domain import SessionShape, Workload, derived_new_tokens_per_turn, session_shape
from infra.planner.prefix_cache import prefix_hit, survival, tokens_for_survival


def test_single_turn_traffic_has_no_session_model():
    assert session_shape(Workload(2000, 300)) is None


def test_derived_new_tokens_make_the_mean_prompt_the_input_tokens():
    turns, output = 8, 300
    new = derived_new_tokens_per_turn(5600, output, turns)
    prompts = [new + (k - 1) * (new + output) for k in range(1, turns + 1)]
    assert sum(prompts) / turns == pytest.approx(5600)
    shape = session_shape(Workload(5600, output, None, 0.0, turns, 60.0))
    assert shape.reusable_share == pytest.approx(1 - new / 5600)


def test_answers_that_outgrow_the_prompt_are_refused():
    with pytest.raises(ValueError, match="turns_per_session"):
        session_shape(Workload(500, 300, None, 0.0, 8, 60.0))
    with pytest.raises(ValueError, match="new_tokens_per_turn 600"):
        session_shape(Workload(500, 300, None, 0.0, 8, 60.0, 600))


def test_survival_is_the_chance_a_think_time_is_shorter_than_the_eviction_horizon():
    # 10,000 tokens of cache, 100 tokens/s touched: evicted 100 s after last use; mean think 100 s
    assert survival(10_000, 100, 100) == pytest.approx(1 - math.exp(-1))
    assert survival(0, 100, 100) == 0.0
    assert survival(10_000, 0, 100) == 1.0
    assert survival(tokens_for_survival(0.99, 100, 100), 100, 100) == pytest.approx(0.99)


SHAPE = SessionShape(turns=8, new_tokens_per_turn=400.0, think_time_s=60.0, reusable_share=0.9)


def _hit(gpu_tokens, offload_tokens, **kw):
    args = dict(input_tokens=4000, output_tokens=300, rps_per_engine=2.0, affinity=1.0,
                reload_s_per_token=1e-6, prefill_s_per_token=5e-6)
    args.update(kw)
    return prefix_hit(SHAPE, gpu_tokens=gpu_tokens, offload_tokens=offload_tokens, **args)


def test_an_offload_tier_larger_than_the_gpu_cache_adds_hits_at_a_reload_cost():
    gpu_only = _hit(200_000, 0)
    tiered = _hit(200_000, 2_000_000)
    assert gpu_only.offload == 0 and gpu_only.reload_ms == 0
    assert tiered.gpu == pytest.approx(gpu_only.gpu)
    assert tiered.total > gpu_only.total
    # an offload hit saves the recompute less the reload: 1 - 1/5 of it
    assert tiered.effective == pytest.approx(tiered.gpu + 0.8 * tiered.offload)
    assert tiered.reload_ms > 0


def test_a_tier_no_larger_than_the_gpu_cache_adds_nothing():
    """The tier stores every block the GPU computes: it is inclusive."""
    assert _hit(200_000, 150_000).total == pytest.approx(_hit(200_000, 0).total)


def test_a_reload_slower_than_recompute_saves_nothing():
    slow = _hit(100_000, 2_000_000, reload_s_per_token=1e-5)
    assert slow.offload > 0
    assert slow.effective == pytest.approx(slow.gpu)


def test_turns_spread_over_replicas_rarely_find_their_history():
    assert _hit(200_000, 0, affinity=0.25).total == pytest.approx(0.25 * _hit(200_000, 0).total)


caps = st.floats(min_value=0, max_value=1e8, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(
    gpu_a=caps, gpu_extra=caps, off_a=caps, off_extra=caps,
    rps=st.floats(min_value=0, max_value=1e3, allow_nan=False),
    think=st.floats(min_value=0.1, max_value=3600, allow_nan=False),
    turns=st.integers(min_value=2, max_value=64),
    affinity=st.floats(min_value=0.01, max_value=1.0),
    reload_s=st.floats(min_value=0, max_value=1e-4), prefill_s=st.floats(min_value=1e-7, max_value=1e-4),
)
def test_more_cache_never_predicts_a_lower_hit_rate(gpu_a, gpu_extra, off_a, off_extra, rps, think, turns, affinity,
                                                     reload_s, prefill_s):
    shape = SessionShape(turns, 300.0, think, 0.8)
    common = dict(input_tokens=3000, output_tokens=200, rps_per_engine=rps, affinity=affinity,
                  reload_s_per_token=reload_s, prefill_s_per_token=prefill_s)
    small = prefix_hit(shape, gpu_tokens=gpu_a, offload_tokens=off_a, **common)
    more_gpu = prefix_hit(shape, gpu_tokens=gpu_a + gpu_extra, offload_tokens=off_a, **common)
    more_offload = prefix_hit(shape, gpu_tokens=gpu_a, offload_tokens=off_a + off_extra, **common)
    for bigger in (more_gpu, more_offload):
        assert bigger.total >= small.total - 1e-12
        assert bigger.effective >= small.effective - 1e-12
    assert more_gpu.gpu >= small.gpu - 1e-12
    assert 0.0 <= small.total <= 1.0


def test_a_tier_shared_by_the_ranks_serves_turns_that_land_on_another_rank():
    """LMCache's one server per pod: a turn the dp front end sends to another rank of the replica
    misses that rank's GPU cache but finds the history in the shared tier (issue 37 follow-up)."""
    args = dict(input_tokens=2000, output_tokens=200, rps_per_engine=0.5, reload_s_per_token=1e-6, prefill_s_per_token=1e-4)
    own = prefix_hit(SHAPE, gpu_tokens=5e4, offload_tokens=5e5, affinity=1 / 8, **args)
    shared = prefix_hit(SHAPE, gpu_tokens=5e4, offload_tokens=5e5, affinity=1 / 8, offload_affinity=1.0, **args)
    assert shared.gpu == own.gpu and shared.offload > 4 * own.offload
    assert shared.total <= SHAPE.reusable_share + 1e-9
    assert prefix_hit(SHAPE, gpu_tokens=5e4, offload_tokens=0.0, affinity=1 / 8, offload_affinity=1.0, **args).offload == 0.0
