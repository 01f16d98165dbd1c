"""`layout: auto` when nothing is measured: ranked on the band's low end, thin-memory layouts held
back (in the ranking, marked, with the bench run that would justify them), rules in the JSON."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from infra.catalog.gpus import gpu_size
from infra.catalog.models import resolve_model
from infra.planner import Slo, Workload, plan_model
from infra.planner.choice import (
    MIN_KV_SEQUENCES,
    MIN_KV_SHARE,
    break_ties,
    given_up,
    kv_sequences_needed,
    rank_key,
)
from infra.planner.efficiency import Band

QWEN_FP8 = resolve_model("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8")
MI325X_8 = gpu_size("gpu-mi325x8-2048gb-contracted")
# The seed workload of the issue: chat with long prompts, 8×MI325X, p90 TTFT 2 s / TPOT 50 ms.
SEED = (Workload(5600, 140, peak_rps=40), Slo(ttft_p90_ms=2000, tpot_p90_ms=50))


@pytest.fixture(scope="module")
def seed_plan():
    return plan_model(QWEN_FP8, MI325X_8, *SEED, bench_prefix="infra bench prod qwen3-235b")


def test_the_seed_workload_chooses_a_layout_with_room_for_32_sequences(seed_plan):
    chosen = seed_plan.chosen
    assert chosen.memory.max_concurrency_per_replica >= 32
    assert chosen.memory.kv_cache_gb / chosen.memory.budget_gb >= MIN_KV_SHARE
    assert not chosen.held_back and chosen.goodput_rps_per_node > 0


def test_the_thin_layout_stays_in_the_ranking_marked_with_the_bench_run_that_would_justify_it(seed_plan):
    (tp1,) = [c for c in seed_plan.candidates if c.name == "tp1-r8"]
    # predicted faster, but ~12 sequences of KV room and 3 % of the budget: not chosen unmeasured
    assert tp1.goodput_low_rps_per_node > seed_plan.chosen.goodput_low_rps_per_node
    assert tp1.memory.max_concurrency_per_replica < 32
    assert "under the 32 needed" in tp1.held_back and "memory margin" in tp1.held_back
    assert tp1.bench_command == f"infra bench prod qwen3-235b --layouts tp1-r8,{seed_plan.chosen.name}"
    as_json = tp1.to_json()
    assert as_json["held_back"] == tp1.held_back and as_json["bench_command"] == tp1.bench_command
    assert as_json["kv_sequences_needed"] == 32


def test_the_reason_says_what_the_choice_gives_up(seed_plan):
    reason = seed_plan.reason
    assert reason.startswith(f"chose {seed_plan.chosen.name}:")
    assert "it gives up tp1-r8, predicted at 7." in reason
    assert "held back unmeasured: its KV cache holds" in reason
    assert "`infra bench prod qwen3-235b --layouts tp1-r8," in reason


def test_the_rules_are_stated_in_the_plan_json(seed_plan):
    rules = seed_plan.to_json()["choice_rules"]
    assert rules["min_kv_sequences"] == MIN_KV_SEQUENCES == 32
    assert rules["min_kv_share_of_memory_budget"] == MIN_KV_SHARE
    assert "low end" in rules["ranked_on"] and "p90 TPOT" in rules["kv_sequences_needed"]


def test_kv_sequences_needed_is_littles_law_at_the_band_low_end_and_the_slo_latencies(seed_plan):
    workload = Workload(2000, 300)
    slo = Slo(ttft_p90_ms=2000, tpot_p90_ms=50)
    c = replace(seed_plan.chosen, goodput_rps_per_replica=4.0, band=Band(0.5, 1.3))
    # 4 req/s × 0.5 = 2 req/s in flight for 2 s + 299 × 50 ms = 16.95 s: 34 sequences
    assert kv_sequences_needed(c, workload, slo) == math.ceil(2.0 * 16.95) == 34
    slow = replace(c, goodput_rps_per_replica=0.5)
    assert kv_sequences_needed(slow, workload, slo) == 32  # never under the floor


def test_unmeasured_layouts_rank_on_the_low_end_of_their_band(seed_plan):
    a, b = [c for c in seed_plan.candidates if not c.held_back and c.goodput_rps_per_node > 0][:2]
    # b predicts more, but its band (say, a replica over nodes) is wider: a sizes fewer nodes
    wide = replace(b, goodput_rps_per_node=a.goodput_rps_per_node * 1.1, band=Band(a.band.low * 0.8, 1.5))
    ranked = break_ties(sorted([wide, a], key=rank_key))
    assert ranked[0] is a
    assert wide.goodput_rps_per_node > a.goodput_rps_per_node and wide.goodput_low_rps_per_node < a.goodput_low_rps_per_node


def test_when_every_serving_layout_is_held_back_the_best_is_chosen_and_the_reason_says_so(seed_plan):
    ranked = [replace(c, held_back=c.held_back or "it is thin") for c in seed_plan.candidates]
    ranked = sorted(ranked, key=rank_key)
    assert ranked[0].held_back and "every layout that meets the SLO is held back" in given_up(ranked)
