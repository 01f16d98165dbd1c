"""Replicas that span nodes of a fabric pool: shapes, the RDMA collective cost, ranking and reasons."""

from __future__ import annotations

import dataclasses

from infra.catalog.gpus import GPU_SIZES, RDMA_GB_S
from infra.catalog.models import match_catalog
from infra.domain import Layout, Slo, Workload
from infra.planner.checks import shape_problems
from infra.planner.efficiency import load_efficiency
from infra.planner.performance import replica_model
from infra.planner.search import multi_node_shapes, plan_model

R1_BF16 = match_catalog("unsloth/DeepSeek-R1-BF16")
FABRIC = GPU_SIZES["gpu-mi325x8-2048gb-fabric-contracted"]
PLAIN = GPU_SIZES["gpu-mi325x8-2048gb-contracted"]
WORKLOAD, SLO = Workload(5600, 140, 20.0), Slo(2000, 50)


def test_multi_node_shapes_fill_whole_nodes_and_need_a_fabric_size():
    shapes = multi_node_shapes(R1_BF16, FABRIC, pool_nodes=2)
    assert (8, True, 2, 2) in shapes and (16, False, 1, 2) in shapes
    assert all(tp * dp == 8 * nodes for tp, _ep, dp, nodes in shapes)
    assert all(nodes <= 2 for *_, nodes in shapes)
    wide = Layout(tp=8, ep=True, dp=2, nodes_per_replica=2)
    assert shape_problems(R1_BF16, FABRIC, wide) == []
    assert any("fabric" in p for p in shape_problems(R1_BF16, PLAIN, wide))
    assert any("uses all 2 × 8 = 16 GPUs" in p for p in shape_problems(R1_BF16, FABRIC, wide.with_(dp=1)))
    assert any("only one on each" in p for p in shape_problems(R1_BF16, FABRIC, wide.with_(replicas_per_node=2)))


def test_the_all_to_all_over_the_nic_costs_more_than_over_xgmi():
    """The same 16-rank group: collectives inside one (hypothetical 16-GPU) node vs over two nodes."""
    eff = load_efficiency().for_family(FABRIC.accelerator.family)
    wide = Layout(tp=8, ep=True, dp=2, nodes_per_replica=2, kv_cache_dtype="fp8")
    over_nic = replica_model(R1_BF16, FABRIC.accelerator, 8, wide, WORKLOAD, eff)
    in_node = replica_model(R1_BF16, FABRIC.accelerator, 16, wide.with_(nodes_per_replica=1), WORKLOAD, eff)
    for running in (32.0, 512.0):
        assert over_nic.breakdown([running])["comm"][0] > in_node.breakdown([running])["comm"][0]
    # per token the NIC path binds: the gap grows with the batch
    gap = [over_nic.breakdown([n])["comm"][0] - in_node.breakdown([n])["comm"][0] for n in (32.0, 512.0)]
    assert gap[1] > gap[0]
    assert RDMA_GB_S == 50.0


def test_fabric_search_ranks_multi_node_candidates_with_reasons_and_a_wider_band():
    plan = plan_model(R1_BF16, FABRIC, WORKLOAD, SLO, fabric=True, pool_nodes=4)
    wide = [c for c in plan.candidates if c.layout.multi_node]
    single = [c for c in plan.candidates if not c.layout.multi_node]
    assert wide and single
    c = next(c for c in wide if c.name == "tp8-ep-dp2-n2")
    assert c.fits and "crosses the RDMA fabric" in c.reason and "no multi-node measurement" in c.reason
    assert c.band.low < single[0].band.low and c.band.high > single[0].band.high
    assert c.goodput_rps_per_node == c.goodput_rps_per_replica / 2
    assert c.nodes_needed % 2 == 0
    assert "multi-node layout" in plan.reason or plan.chosen.layout.multi_node
    # not on a plain pool, and not without fabric
    assert not any(c.layout.multi_node for c in plan_model(R1_BF16, FABRIC, WORKLOAD, SLO).candidates)


def test_a_model_that_fits_no_node_gets_a_multi_node_replica():
    """A checkpoint four times DeepSeek-R1's size holds on no single MI325X node: the fabric search
    spans nodes, and the reason says so."""
    huge = dataclasses.replace(R1_BF16, id="huge", moe_intermediate_size=R1_BF16.moe_intermediate_size * 3)
    plan = plan_model(huge, FABRIC, WORKLOAD, Slo(10000, 200), fabric=True, pool_nodes=4)
    assert plan.chosen.fits and plan.chosen.layout.multi_node
    assert "no layout within one node" in plan.reason


def test_a_model_no_node_holds_is_pointed_at_a_fabric_pool():
    """The stack's "does not fit" error names the smallest fabric span that holds the model."""
    from infra.stack_plan import multi_node_fit

    huge = dataclasses.replace(R1_BF16, id="huge", moe_intermediate_size=R1_BF16.moe_intermediate_size * 3)
    slug, nodes = multi_node_fit(huge, WORKLOAD)
    assert GPU_SIZES[slug].fabric and nodes in (2, 4)
    assert multi_node_fit(dataclasses.replace(R1_BF16, id="vast", moe_intermediate_size=R1_BF16.moe_intermediate_size * 40), WORKLOAD) is None
