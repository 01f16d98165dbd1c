"""A model's multi-turn sessions and KV offload tier in the stack plan (infra/planner/kv_offload.py).

Binds the planner to one model of a stack: its pool, its configured layout, the front door's
session affinity; checks a configured tier against the host memory an engine pod has. Single-turn
workloads (no `workload.turns_per_session`) get no decision: their plans are what they were.
"""

from __future__ import annotations

from infra.catalog.gpus import GpuSize
from infra.catalog.models import ModelArch
from infra.domain import Layout, Slo, Workload
from infra.errors import Problem
from infra.planner.kv_offload import OffloadDecision, Planner, decide, offload_room_gib
from infra.planner.search import ModelPlan, evaluate_layout, plan_model

# Front doors that send a session's turns back to the replica that served it (vllm-router's
# consistent hash on x-session-id, its cache-aware policy, the gateway's prefix/session scorers);
# round-robin and a plain Service spread turns over every replica.
STICKY_ROUTERS = frozenset({"session", "prefix", "gateway"})


def session_decision(
    arch: ModelArch, gpu: GpuSize, workload: Workload, slo: Slo, explicit: Layout | None, *,
    kv_offload: str, size_gib: float | None, router_kind: str, min_nodes: int,
    usd_per_hour: float | None, fabric: bool, pool_nodes: int | None, efficiency=None,
) -> OffloadDecision | None:
    """Plan the model with its sessions, without and with an offload tier (None: single-turn);
    `efficiency`: the stack's own factors (stacks/factors.STACK.json), as for single-turn models."""
    if not workload.multi_turn or getattr(explicit, "disaggregated", False):
        return None  # a P/D layout's prefill engines are planned without the session model

    def search(w: Workload, layout: Layout | None) -> ModelPlan:
        if explicit is not None:
            return plan_model(arch, gpu, w, slo, explicit, usd_per_hour=usd_per_hour, fabric=fabric, pool_nodes=pool_nodes,
                              efficiency=efficiency)
        if layout is None:
            return plan_model(arch, gpu, w, slo, usd_per_hour=usd_per_hour, fabric=fabric, pool_nodes=pool_nodes, efficiency=efficiency)
        return plan_model(arch, gpu, w, slo, usd_per_hour=usd_per_hour, tp=layout.tp, ep=layout.ep, dp=layout.dp,
                          replicas_per_node=layout.replicas_per_node, efficiency=efficiency)

    def evaluate(w: Workload, layout: Layout):
        return evaluate_layout(arch, gpu, w, slo, layout, usd_per_hour=usd_per_hour, efficiency=efficiency)

    def affinity(layout: Layout) -> float:
        return 1.0 if router_kind in STICKY_ROUTERS else 1.0 / max(1, layout.replicas_for_nodes(max(1, min_nodes)))

    return decide(Planner(search, evaluate, explicit), arch, gpu, workload, requested=kv_offload, size_gib=size_gib,
                  router_affinity=affinity)


def offload_fit_problems(path: str, gpu: GpuSize, layout: Layout, kind: str, size_gib: float | None, whose: str = "") -> list[Problem]:
    """A configured tier must fit the host memory an engine pod of `layout` has beside the engine:
    per data-parallel engine for kind cpu, once per pod for kind lmcache (one shared server).
    `whose`: " (the rollout candidate's engines)" when the layout is a candidate's."""
    if kind in ("none", "auto") or size_gib is None:
        return []
    if gpu.ram_gib <= 0:
        return [Problem(f"{path}.kv_offload", f"the host memory of {gpu.slug} is not in the catalog: add its ram_gib to infra/catalog/gpu_sizes.json")]
    room = offload_room_gib(gpu, layout, kind)
    if size_gib > room:
        holder = ("the engine pod's one LMCache server (shared by its data-parallel engines)" if kind == "lmcache"
                  else "an engine" + (f" (each of the {layout.dp} data-parallel engines of a replica pins its own)" if layout.dp > 1 else ""))
        return [Problem(
            f"{path}.kv_offload.size_gib",
            f"{size_gib:g} GiB does not fit{whose}: {holder} of {layout.name} on {gpu.slug} ({gpu.ram_gib} GiB RAM per node) "
            f"has {max(room, 0)} GiB of host memory beside the engine itself; allowed: 1 to {max(room, 0)}",
        )]
    return []
