"""When does prefill/decode disaggregation pay? The planner's best P/D layout against its best
colocated layout over prompt/answer mixes and SLOs, as the Markdown table in docs/planner.md.

    .venv/bin/python benchmarks/pd_crossover.py [--model ID] [--gpu SLUG]

Each cell is best P/D goodput ÷ best colocated goodput per node (> 1: P/D wins) and the P/D
layout. Pure planner arithmetic (no GPUs): re-run it after a recalibration and paste the table.
"""

from __future__ import annotations

import argparse

from infra.catalog.gpus import gpu_size
from infra.catalog.models import resolve_model
from infra.planner import Slo, Workload, plan_model
from infra.planner.search import PdCandidate

MIXES = ((8000, 100), (5600, 140), (2000, 300), (2000, 1000), (500, 1000))
SLOS = ((2000, 50), (1000, 25), (5000, 100))


def cell(arch, gpu, w: Workload, slo: Slo) -> str:
    plan = plan_model(arch, gpu, w, slo, disaggregation=True)
    ok = [c for c in plan.candidates if c.fits and c.goodput_rps_per_node > 0]
    pds = [c for c in ok if isinstance(c, PdCandidate)]
    cos = [c for c in ok if not isinstance(c, PdCandidate)]
    if not pds:
        return "no P/D meets it"
    if not cos:
        return f"P/D only ({pds[0].name})"
    # best on paper on each side; † marks a layout `auto` holds back unmeasured (thin memory, choice.py)
    pd, co = (max(side, key=lambda c: c.goodput_rps_per_node) for side in (pds, cos))
    ratio = pd.goodput_rps_per_node / co.goodput_rps_per_node
    mark = "**" if ratio > 1 else ""
    return f"{mark}{ratio:.2f}×{mark} {pd.name}{'†' if pd.held_back else ''} vs {co.name}{'†' if co.held_back else ''}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="Qwen/Qwen3-235B-A22B-Instruct-2507-FP8")
    ap.add_argument("--gpu", default="gpu-mi325x8-2048gb-contracted")
    args = ap.parse_args()
    arch, gpu = resolve_model(args.model), gpu_size(args.gpu)
    print(f"{arch.id} on {gpu.slug}: best P/D ÷ best colocated goodput per node (bold: P/D wins; "
          "†: held back unmeasured, thin memory)\n")
    print("| tokens in / out | " + " | ".join(f"TTFT {t} ms, TPOT {p} ms" for t, p in SLOS) + " |")
    print("|---|" + "---|" * len(SLOS))
    for i, o in MIXES:
        cells = [cell(arch, gpu, Workload(i, o), Slo(t, p)) for t, p in SLOS]
        print(f"| {i} / {o} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
