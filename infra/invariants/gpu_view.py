"""The planner's GPU view matches the GPUs the pool's nodes will show.

A compute partition mode splits each physical GPU into logical ones (AMD SMI, "GPU partitioning":
DPX = two devices, each with half the compute dies; with NPS2 each also gets half the HBM). The
device plugin then advertises 16 `amd.com/gpu` of ~96/128 GB on an 8-GPU node, while the planner
sized layouts on 8 whole GPUs: tensor-parallel groups, memory fit and throughput would all be
wrong. The planner does not model partitions, so a partition mode other than SPX/NPS1 (the whole
GPU) is refused rather than planned wrongly.
"""

from __future__ import annotations

from infra.errors import Problem
from infra.invariants.keypaths import KeyPaths
from infra.stack_plan import StackPlan

WHOLE_GPU_MODES = frozenset({None, "AMD_PARTITION_MODE_SPX_NPS1"})


def check_gpu_view(plan: StackPlan, paths: KeyPaths) -> list[Problem]:
    problems = []
    for spec in plan.pools:
        if spec.partition_mode in WHOLE_GPU_MODES:
            continue
        gpu = spec.gpu
        problems.append(Problem(paths.pool(spec.pool_name, "partition_mode") or "", (
            f"{spec.partition_mode!r} shows each of the {gpu.gpus} GPUs as 2 (each with half the compute and memory: "
            f"{gpu.gpus * 2} × ~{gpu.accelerator.hbm_gb / 2:g} GB), but the planner sizes layouts on whole "
            f"{gpu.accelerator.hbm_gb:g} GB GPUs and cannot model partitions; allowed: AMD_PARTITION_MODE_SPX_NPS1 or unset")))
    return problems
