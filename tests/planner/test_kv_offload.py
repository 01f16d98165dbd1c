"""Planning multi-turn sessions without and with a KV offload tier (infra/planner/kv_offload.py)."""

from __future__ import annotations

from infra.catalog.gpus import gpu_size
from infra.catalog.models import resolve_model
from infra.domain import KvOffload, Layout, Slo, Workload
from infra.planner.kv_offload import AUTO_MIN_GAIN, Planner, decide, offload_room_per_engine_gib
from infra.planner.search import evaluate_layout, plan_model

REFERENCE = "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"
# The reference chat: 5600-token prompts, most of them the previous turns, 8 turns 5 minutes apart.
CHAT = Workload(5600, 300, 40, 0.0, 8, 300.0)


def _decide(model, slug, slo, workload, requested="auto", size_gib=None, explicit=None, affinity=1.0):
    arch, gpu = resolve_model(model, None), gpu_size(slug)

    def search(w, layout):
        if explicit is not None:
            return plan_model(arch, gpu, w, slo, explicit)
        if layout is None:
            return plan_model(arch, gpu, w, slo)
        return plan_model(arch, gpu, w, slo, tp=layout.tp, ep=layout.ep, dp=layout.dp, replicas_per_node=layout.replicas_per_node)

    planner = Planner(search, lambda w, layout: evaluate_layout(arch, gpu, w, slo, layout), explicit)
    return decide(planner, arch, gpu, workload, requested=requested, size_gib=size_gib, router_affinity=lambda _: affinity)


def test_single_turn_workloads_are_not_touched():
    assert _decide("Qwen/Qwen3-8B", "gpu-mi300x8-1536gb", Slo(1000, 25), Workload(2000, 300, 10)) is None


def test_reference_chat_on_mi300x_gains_from_a_cpu_tier():
    d = _decide(REFERENCE, "gpu-mi300x8-1536gb", Slo(2000, 50), CHAT)
    without, with_ = d.without, d.with_offload
    assert d.offload is not None and d.offload.kind == "cpu"
    assert with_.hit.total > without.hit.total
    assert with_.hit.offload > 0 and with_.hit.reload_ms > 0
    assert with_.plan.chosen.goodput_rps_per_node >= without.plan.chosen.goodput_rps_per_node * (1 + AUTO_MIN_GAIN)
    assert with_.plan.chosen.ttft_p90_ms < without.plan.chosen.ttft_p90_ms
    # the tier fits what an engine pod can spare
    assert d.offload.size_gib <= offload_room_per_engine_gib(gpu_size("gpu-mi300x8-1536gb"), d.chosen.plan.chosen.layout)
    doc = d.to_json()
    assert doc["enabled"] and doc["with_offload"]["hit_rate"]["total"] > doc["without_offload"]["hit_rate"]["total"]
    assert "pays" in d.reason


def test_auto_leaves_the_tier_off_where_host_memory_is_smaller_than_the_gpu_cache():
    """An MI325X node has 1280 GiB of RAM for 2 TB of HBM: a tier within a pod's share holds no
    more than the GPU cache it copies."""
    d = _decide(REFERENCE, "gpu-mi325x8-2048gb", Slo(2000, 50), CHAT)
    assert d.offload is None
    assert "left off" in d.reason


def test_a_configured_tier_is_planned_and_compared():
    d = _decide("Qwen/Qwen3-8B", "gpu-mi300x8-1536gb", Slo(1000, 25), CHAT, requested="cpu", size_gib=100.0,
                explicit=Layout(tp=1, replicas_per_node=8, kv_cache_dtype="fp8"))
    assert d.offload == KvOffload("cpu", 100.0)
    assert d.chosen is d.with_offload
    assert d.with_offload.hit.total >= d.without.hit.total


def test_none_still_says_what_a_tier_would_bring():
    d = _decide("Qwen/Qwen3-8B", "gpu-mi300x8-1536gb", Slo(1000, 25), CHAT, requested="none")
    assert d.offload is None
    assert d.reason.startswith("kv_offload none")


def test_round_robin_routing_loses_most_hits():
    sticky = _decide("Qwen/Qwen3-8B", "gpu-mi300x8-1536gb", Slo(1000, 25), CHAT, requested="none")
    spread = _decide("Qwen/Qwen3-8B", "gpu-mi300x8-1536gb", Slo(1000, 25), CHAT, requested="none", affinity=0.125)
    assert spread.without.hit.total < sticky.without.hit.total / 3


def test_a_tier_on_a_size_whose_host_memory_is_unknown_asks_for_it():
    """A catalog entry without the node's RAM (ram_gib 0) cannot size a tier: one problem naming the key."""
    from dataclasses import replace

    from infra.session_plan import offload_fit_problems

    gpu = replace(gpu_size("gpu-mi300x8-1536gb"), ram_gib=0)
    (problem,) = offload_fit_problems("models[0]", gpu, Layout(tp=4, ep=True, replicas_per_node=2), "cpu", 100.0)
    assert problem.path == "models[0].kv_offload"
    assert "host memory of gpu-mi300x8-1536gb is not in the catalog" in problem.message and "ram_gib" in problem.message
    assert offload_fit_problems("models[0]", gpu, Layout(tp=4, ep=True, replicas_per_node=2), "none", None) == []


def test_one_lmcache_server_per_pod_is_shared_by_its_data_parallel_engines():
    """kind lmcache runs one LMCache server per engine container, which its dp ranks share: the pod's
    room holds one L1 buffer, and each engine's share is the buffer over its ranks (issue 37); kind
    cpu pins one tier per engine."""
    from infra.planner.kv_offload import offload_room_gib

    gpu = gpu_size("gpu-mi300x8-1536gb")
    layout = Layout(tp=2, dp=4, ep=True)
    assert offload_room_gib(gpu, layout, "lmcache") >= 4 * offload_room_gib(gpu, layout, "cpu")
    tier = KvOffload("lmcache", 400.0)
    assert tier.gib_per_engine(4) == 100.0 and tier.gib_per_pod(4) == 400.0
    native = KvOffload("cpu", 100.0)
    assert native.gib_per_engine(4) == 100.0 and native.gib_per_pod(4) == 400.0
