"""How long the planner takes: one model, and a stack of five, on this machine.

    python benchmarks/planner_speed.py [--repeat 20]

Prints the median and worst wall time of `plan_model` per model and for the whole stack (the
efficiency file is loaded once and cached, as in a real run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra.catalog.gpus import gpu_size  # noqa: E402
from infra.catalog.models import resolve_model  # noqa: E402
from infra.planner import Slo, Workload, plan_model  # noqa: E402

STACK = [
    (
        "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        "gpu-mi325x8-2048gb-contracted",
        Workload(2000, 300, 40),
        Slo(2000, 50),
    ),
    ("meta-llama/Llama-3.3-70B-Instruct-FP8", "gpu-mi300x8-1536gb", Workload(1000, 500, 10), Slo(1500, 40)),
    ("Qwen/Qwen3-30B-A3B", "gpu-mi300x8-1536gb", Workload(4000, 800, 5), Slo(3000, 30)),
    ("deepseek-ai/DeepSeek-R1-0528", "gpu-mi325x8-2048gb-contracted", Workload(3000, 1000, 5), Slo(5000, 80)),
    ("openai/gpt-oss-120b", "gpu-h200x8-1128gb", Workload(1000, 1000, 20), Slo(1000, 30)),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args(argv)
    resolved = [(resolve_model(m), gpu_size(g), w, s) for m, g, w, s in STACK]
    plan_model(*resolved[0])  # load the efficiency file once
    totals = []
    per_model: dict[str, list[float]] = {m: [] for m, *_ in STACK}
    for _ in range(args.repeat):
        start = time.perf_counter()
        for (name, *_), (arch, gpu, workload, slo) in zip(STACK, resolved, strict=True):
            t0 = time.perf_counter()
            plan_model(arch, gpu, workload, slo)
            per_model[name].append(time.perf_counter() - t0)
        totals.append(time.perf_counter() - start)
    for name, times in per_model.items():
        print(f"{name:45} median {1e3 * statistics.median(times):6.1f} ms   worst {1e3 * max(times):6.1f} ms")
    print(
        f"{'whole stack (5 models)':45} median {1e3 * statistics.median(totals):6.1f} ms   worst {1e3 * max(totals):6.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
