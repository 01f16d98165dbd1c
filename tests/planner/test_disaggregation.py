"""Prefill/decode disaggregation: the layout grammar, the KV-transfer model, P/D goodput in the
search, the MoRI-IO blog's published outcome, and the problems a P/D layout can have."""

from __future__ import annotations

from dataclasses import replace

import pytest

from infra.catalog.gpus import gpu_size
from infra.catalog.models import resolve_model
from infra.domain import Layout, PdLayout, is_pd_layout_name, parse_layout_name, parse_pd_layout_name
from infra.planner import Slo, Workload, load_efficiency, plan_model
from infra.planner.attainment import colocated_attainment, pd_attainment
from infra.planner.disaggregation import (
    CONNECTOR_OVERHEAD_S,
    TRANSFER_EFFICIENCY,
    balanced_units,
    connector_for,
    kv_transfer,
    link_for,
    pd_problems,
)
from infra.planner.search import PdCandidate

QWEN_FP8 = resolve_model("Qwen/Qwen3-235B-A22B-FP8")
MI300X_8 = gpu_size("gpu-mi300x8-1536gb")
MI325X_8 = gpu_size("gpu-mi325x8-2048gb-contracted")
FABRIC = gpu_size("gpu-mi325x8-2048gb-fabric-contracted")
H100_8 = gpu_size("gpu-h100x8-640gb")
CDNA3 = load_efficiency().for_family("cdna3")


# --------------------------------------------------------------------------- grammar


def test_pd_names_parse_and_round_trip():
    assert parse_pd_layout_name("p1tp4-d1tp4") == {
        "prefill_instances": 1, "prefill_tp": 4, "decode_instances": 1, "decode_tp": 4,
        "prefill_ep": False, "decode_ep": False,
    }
    for name in ("p1tp4-d1tp4", "p2tp2-ep-d1tp4-ep", "p4tp1-d1tp4-ep"):
        assert PdLayout(**parse_pd_layout_name(name)).name == name
        assert is_pd_layout_name(name)
    assert not is_pd_layout_name("tp4-ep-r2")


@pytest.mark.parametrize("bad", ["p1tp4", "p1tp4-d1", "p0tp4-d1tp4", "p1tp4-d1tp0", "p1-tp4-d1tp4", "p1tp4-ep-d1tp4-r2"])
def test_malformed_pd_names_name_the_grammar(bad):
    with pytest.raises(ValueError, match=r"p<N>tp<A>\[-ep\]-d<M>tp<B>\[-ep\]"):
        parse_pd_layout_name(bad)


def test_a_pd_layout_answers_what_a_layout_answers():
    pd = PdLayout(1, 4, 1, 4, gpus_per_node=8)
    assert (pd.gpus_per_replica, pd.gpus_per_node_used, pd.replicas_per_node, pd.nodes_per_unit) == (8, 8, 1, 1)
    wide = PdLayout(1, 8, 1, 8, gpus_per_node=8)
    assert wide.spans_nodes and wide.nodes_per_unit == 2
    assert pd.side("prefill") == Layout(tp=4, max_num_seqs=256, max_num_batched_tokens=8192)
    # colocated names still parse as before
    assert parse_layout_name("tp4-ep-r2")["tp"] == 4


# --------------------------------------------------------------------------- KV transfer


def test_kv_transfer_bytes_follow_layers_heads_head_dim_and_dtype():
    pd = PdLayout(1, 4, 1, 4, gpus_per_node=8, kv_cache_dtype="fp8")
    tr = kv_transfer(QWEN_FP8, MI300X_8, pd, 2000)
    # Qwen3-235B: 94 layers × 4 KV heads × 128 × (K and V) × 1 byte (FP8) = 96,256 B per token
    assert tr.bytes_total == pytest.approx(94 * 4 * 128 * 2 * 2000)
    assert tr.bytes_per_link == pytest.approx(tr.bytes_total / 4)  # one KV head per TP4 rank
    assert tr.link == "xgmi" and tr.link_gb_s == pytest.approx(448 / 7)
    assert tr.seconds == pytest.approx(tr.bytes_per_link / (64e9 * TRANSFER_EFFICIENCY) + CONNECTOR_OVERHEAD_S)
    bf16 = kv_transfer(QWEN_FP8, MI300X_8, replace(pd, kv_cache_dtype="auto"), 2000)
    assert bf16.bytes_total == pytest.approx(2 * tr.bytes_total)


def test_links_xgmi_in_a_node_nvlink_on_nvidia_rdma_across_nodes():
    assert link_for(MI300X_8, False)[0] == "xgmi"
    assert link_for(H100_8, False) == ("nvlink", 450)
    assert link_for(FABRIC, True) == ("rdma", 50.0)
    assert connector_for(MI300X_8) == "MoRIIOConnector" and connector_for(H100_8) == "NixlConnector"


# --------------------------------------------------------------------------- problems


def test_a_unit_spanning_nodes_needs_a_fabric_pool_large_enough():
    wide = PdLayout(1, 8, 1, 8, gpus_per_node=8)
    assert any("fabric pool" in p for p in pd_problems(QWEN_FP8, MI325X_8, wide))
    assert pd_problems(QWEN_FP8, FABRIC, wide, fabric=True, pool_nodes=2) == []
    assert any("the pool has 1" in p for p in pd_problems(QWEN_FP8, FABRIC, wide, fabric=True, pool_nodes=1))


@pytest.mark.parametrize("name", ["p8tp1-d8tp1", "p4tp2-ep-d4tp2-ep", "p1tp4-d1tp8", "p2tp4-d1tp8"])
def test_a_unit_over_nodes_whose_engines_share_nodes_is_a_problem(name):
    """Each fabric NIC attaches to one pod: only whole-node engines can hold their node's NICs."""
    pd = PdLayout(**parse_pd_layout_name(name), gpus_per_node=8)
    (problem,) = [p for p in pd_problems(QWEN_FP8, FABRIC, pd, fabric=True, pool_nodes=4) if "one pod at a time" in p]
    assert problem.startswith(f"{name} spans {pd.nodes_per_unit} nodes") and "p1tp8-d1tp8" in problem


@pytest.mark.parametrize("name", ["p1tp8-d1tp8", "p1tp8-ep-d1tp8-ep", "p2tp8-d1tp8"])
def test_a_unit_of_whole_node_engines_may_span_nodes(name):
    pd = PdLayout(**parse_pd_layout_name(name), gpus_per_node=8)
    assert pd.span_problem() is None and pd.fabric_nics
    assert pd_problems(QWEN_FP8, FABRIC, pd, fabric=True, pool_nodes=4) == []


def test_units_over_nodes_count_whole_units_of_nodes():
    wide = PdLayout(1, 8, 1, 8, gpus_per_node=8)
    assert [wide.replicas_for_nodes(n) for n in (2, 3, 4)] == [1, 1, 2]
    assert wide.replicas_per_node_share == 0.5
    one = PdLayout(1, 4, 1, 4, gpus_per_node=8)
    assert one.replicas_for_nodes(3) == 3 and not one.fabric_nics and one.span_problem() is None


def test_a_gpu_without_a_kv_connector_is_a_problem():
    acc = replace(MI300X_8.accelerator, vendor="intel")
    odd = replace(MI300X_8, accelerator=acc)
    assert any("no KV connector" in p for p in pd_problems(QWEN_FP8, odd, PdLayout(1, 4, 1, 4, gpus_per_node=8)))


def test_a_tp_the_heads_do_not_allow_is_a_problem_of_its_side():
    problems = pd_problems(QWEN_FP8, MI300X_8, PdLayout(1, 3, 1, 4, gpus_per_node=8))
    assert any(p.startswith("prefill: tp=3") for p in problems)


# --------------------------------------------------------------------------- search


def test_pd_candidates_rank_next_to_colocated_ones_and_the_reason_says_why():
    w, slo = Workload(2000, 300, prefix_cache_hit_rate=0.3), Slo(2000, 50)
    plan = plan_model(QWEN_FP8, MI325X_8, w, slo, usd_per_hour=24.0, disaggregation=True)
    pds = [c for c in plan.candidates if isinstance(c, PdCandidate)]
    assert pds and any(not isinstance(c, PdCandidate) for c in plan.candidates)
    assert "P/D wins" in plan.reason or "P/D does not pay" in plan.reason
    top = pds[0]
    assert top.tpot_p90_ms <= 50 + 1e-6 and top.ttft_p90_ms <= 2000 + 1e-6
    assert top.to_json()["disaggregation"]["kv_transfer_link"] == "xgmi"
    # without the flag the search is what it was
    plain = plan_model(QWEN_FP8, MI325X_8, w, slo, usd_per_hour=24.0)
    assert not any(isinstance(c, PdCandidate) for c in plain.candidates)


def test_prompt_heavy_short_answers_favour_pd_answer_heavy_do_not():
    slo = Slo(2000, 50)
    heavy = plan_model(QWEN_FP8, MI325X_8, Workload(2000, 300, prefix_cache_hit_rate=0.3), slo, disaggregation=True)
    best = max((c for c in heavy.candidates if c.fits), key=lambda c: c.goodput_rps_per_node)
    assert isinstance(best, PdCandidate) and best.name.startswith("p4tp1-d1tp4"), heavy.reason
    assert f"P/D wins on paper: {best.name}" in heavy.reason
    # its TP1 prefill engines keep 236 GB of weights on each GPU: held back until benched
    assert "its prefill engines leave" in best.held_back and not isinstance(heavy.chosen, PdCandidate)
    light = plan_model(QWEN_FP8, MI300X_8, Workload(2000, 1000), Slo(1000, 50), disaggregation=True)
    assert not isinstance(light.chosen, PdCandidate)


def test_an_explicit_pd_layout_is_evaluated_as_given():
    pd = PdLayout(1, 4, 1, 4, True, True, 8, kv_cache_dtype="fp8", decode_max_num_seqs=64)
    plan = plan_model(QWEN_FP8, MI300X_8, Workload(2000, 1000), Slo(1000, 50), pd)
    assert isinstance(plan.chosen, PdCandidate) and plan.chosen.name == "p1tp4-ep-d1tp4-ep"
    assert plan.chosen.layout.decode_max_num_seqs == 64
    assert plan.reason.startswith("explicit layout: ")
    assert plan.chosen.goodput_low_rps_per_node < plan.chosen.goodput_rps_per_node  # carries the band


def test_a_fabric_pool_adds_units_across_two_nodes():
    plan = plan_model(QWEN_FP8, FABRIC, Workload(2000, 300), Slo(2000, 50), usd_per_hour=24.0, disaggregation=True,
                      fabric=True, pool_nodes=2)
    wide = [c for c in plan.candidates if isinstance(c, PdCandidate) and c.layout.spans_nodes]
    assert wide and all(c.prediction.transfer is None or c.prediction.transfer.link == "rdma" for c in wide)
    # only what the stack renders: one whole-node engine per side, each the one pod on its node
    assert {c.name for c in wide} == {"p1tp8-d1tp8", "p1tp8-ep-d1tp8-ep"}
    assert all(c.fits for c in wide)
    spanning = {s.name for s in balanced_units(FABRIC, QWEN_FP8, fabric=True) if s.spans_nodes}
    assert spanning == {"p1tp8-d1tp8", "p1tp8-ep-d1tp8-ep"}
    assert not any(s.spans_nodes for s in balanced_units(FABRIC, QWEN_FP8))


# --------------------------------------------------------------------------- MoRI-IO blog


def test_moriio_blog_outcome_1p1d_tp4_beats_2x_tp4():
    """vLLM blog 2026-04-07 (MoRI-IO KV connector): one 8×MI300X node, Qwen3-235B-A22B-FP8, random
    dataset ISL 2000 / OSL 1000, 100 requests, max_num_seqs 64, --max-num-batched-tokens 4096 (P/D)
    / 8192 (colocated). At 8 req/s the share of requests meeting TTFT < 1 s and ITL < 50 ms was
    30/100 for 2×TP4, 26/100 for 1×TP8 and 70/100 (READ) – 73/100 (WRITE) for 1P+1D TP4.
    Predicted (docs/planner.md): 22 %, 11 % and 64 %. Asserted: the order, and P/D ≥ 2× 2×TP4."""
    w = Workload(2000, 1000)
    run = {"requests": 100, "rate_rps": 8.0, "ttft_s": 1.0, "itl_s": 0.05}
    common = {"kv_cache_dtype": "fp8", "max_num_seqs": 64, "max_num_batched_tokens": 8192, "max_model_len": 16384}
    two_tp4 = colocated_attainment(QWEN_FP8, MI300X_8, Layout(tp=4, ep=True, replicas_per_node=2, **common), w, CDNA3, **run)
    one_tp8 = colocated_attainment(QWEN_FP8, MI300X_8, Layout(tp=8, ep=True, **common), w, CDNA3, **run)
    pd = PdLayout(1, 4, 1, 4, True, True, 8, prefill_max_num_batched_tokens=4096, decode_max_num_seqs=64,
                  kv_cache_dtype="fp8", max_model_len=16384)
    disagg = pd_attainment(QWEN_FP8, MI300X_8, pd, w, CDNA3, **run)
    assert disagg.share > two_tp4.share and disagg.share > one_tp8.share
    assert disagg.share >= 2.0 * two_tp4.share
    assert 0.5 <= disagg.share <= 0.9 and 0.1 <= two_tp4.share <= 0.45
    # the mechanism the blog shows: colocated ITL is bimodal (~30 ms steps, ~150 ms with a prompt chunk)
    assert 20 <= two_tp4.step_ms <= 40 and 90 <= two_tp4.stall_ms <= 200
    # and at low load the P/D unit meets every request (the blog: 100 % up to ~5 req/s)
    assert pd_attainment(QWEN_FP8, MI300X_8, pd, w, CDNA3, **{**run, "rate_rps": 2.0}).share == 1.0
