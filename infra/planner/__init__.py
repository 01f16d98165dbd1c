"""The layout planner: memory fit, performance model, goodput-ranked TP/EP/DP/replica layouts.

Pure Python, no Pulumi imports, deterministic. Entry points:

- `plan_model(arch, gpu, workload, slo, layout=None, *, usd_per_hour=None)` → `ModelPlan`
- `check_layout(arch, gpu, layout)` → list of problems (empty when the layout can start)
- `nodes_for_peak(peak_rps, goodput_rps_per_node)` → nodes that carry the peak with headroom
- `slo_shortfall(plan, slo)` → why no layout of a plan serves any load within the SLO, or None
- `estimated_load_seconds(arch, source=..., ...)` → startup budget for the vLLM pod
- `load_efficiency()` / `save_efficiency(path, table)` → the calibrated factors file

docs/planner.md explains the model, its assumptions and its measured error.
"""

from infra.domain import Layout, Slo, Workload, layout_name, parse_layout_name
from infra.planner.checks import check_layout
from infra.planner.efficiency import (
    EfficiencyFactors,
    EfficiencyTable,
    load_efficiency,
    save_efficiency,
)
from infra.planner.loading import (
    ReadinessPlan,
    WeightSource,
    estimate_load,
    estimated_load_seconds,
    plan_readiness,
)
from infra.planner.memory import MemoryBreakdown, memory_per_gpu
from infra.planner.search import (
    Candidate,
    ClosedLoop,
    ModelPlan,
    evaluate_layout,
    nodes_for_peak,
    plan_model,
    slo_shortfall,
)

__all__ = [
    "evaluate_layout",
    "Candidate",
    "ClosedLoop",
    "EfficiencyFactors",
    "EfficiencyTable",
    "Layout",
    "MemoryBreakdown",
    "ModelPlan",
    "Slo",
    "Workload",
    "check_layout",
    "estimated_load_seconds",
    "estimate_load",
    "plan_readiness",
    "ReadinessPlan",
    "WeightSource",
    "layout_name",
    "load_efficiency",
    "memory_per_gpu",
    "nodes_for_peak",
    "parse_layout_name",
    "plan_model",
    "save_efficiency",
    "slo_shortfall",
]
