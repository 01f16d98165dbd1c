"""What the whole-plan invariants add to `infra plan` (issue 29: at most 5 %).

In one process, REPEATS times per stack: the offline plan without the invariants (load, plan_stack,
the mock-runtime declare, the plan views) and the invariants alone on its result (`check_plan`
over the rendered objects); reports the medians and the ratio. The process start and imports that
`infra plan` also pays (benchmarks/plan_time.py) are left out, so the share shown is an upper bound.

    python benchmarks/invariants_time.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from infra.config import load_stack_file
from infra.invariants import check_plan
from infra.offline import Plan, kubernetes_objects, record_stack_plan
from infra.stack_plan import plan_stack

ROOT = Path(__file__).resolve().parent.parent


def _plan_without_invariants(stack: str):
    cfg = load_stack_file(stack, ROOT)
    plan = plan_stack(cfg)
    resources, notes = record_stack_plan(plan)
    offline = Plan(stack=stack, project="inference-platform", resources=resources, models=plan.models_json(),
                   cost=plan.cost_json(), front_door=plan.front_door.to_json(), summary={"pools": plan.pools_json(), "notes": notes})
    return plan, offline


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--stacks", default="prod,staging,dev")
    args = parser.parse_args()
    print("| stack | plan without invariants (median s) | invariants (median ms) | share |")
    print("|---|---|---|---|")
    for stack in args.stacks.split(","):
        base, inv = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            plan, offline = _plan_without_invariants(stack)
            base.append(time.perf_counter() - start)
            start = time.perf_counter()
            check_plan(plan, kubernetes_objects(offline), offline.resources, offline.to_dict())
            inv.append(time.perf_counter() - start)
        b, i = statistics.median(base), statistics.median(inv)
        print(f"| {stack} | {b:.2f} | {i * 1000:.1f} | {i / b * 100:.1f} % |")


if __name__ == "__main__":
    main()
