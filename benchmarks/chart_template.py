#!/usr/bin/env python3
"""Templating a stack's Helm releases: cold (no cache) and cached, CPU seconds, medians.

    INFRA_CHART_DIR=/path/to/archives python benchmarks/chart_template.py [--stack prod] [--repeats 5]

Plans the stack once (charts not templated: no archive directory is searched for it), then for
each repeat templates every release whose archive is in $INFRA_CHART_DIR into a fresh cache
(cold) and again from that cache (cached), and prints per release the kinds rendered and the
medians. The issue's budget: cold templating of all releases adds at most 1 s; cached, nothing
measurable. CPU time (process time) is reported beside wall time: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", default="prod")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if not os.environ.get("INFRA_CHART_DIR"):
        parser.error("set INFRA_CHART_DIR to a directory of chart archives")
    from infra.charts.releases import template_releases
    from infra.config import load_stack_file
    from infra.offline import record_stack_plan
    from infra.stack_plan import plan_stack

    resources, _ = record_stack_plan(plan_stack(load_stack_file(args.stack, ROOT)))
    cold, cached = [], []
    entries = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            os.environ["INFRA_CHART_CACHE"] = cache
            entries, wall, cpu = _timed(lambda: template_releases(resources, None)[0])
            cold.append((wall, cpu))
            _, wall, cpu = _timed(lambda: template_releases(resources, None)[0])
            cached.append((wall, cpu))
    for entry in entries:
        kinds = Counter(p["object"]["kind"] if p["part"] == "template" else f"{p['part']} {p['object']['kind']}"
                        for p in entry["parts"])
        state = f"{len(entry['parts'])} objects" if entry["templated"] else "not templated (no archive)"
        print(f"{entry['release']} ({entry['chart']} {entry['version']}): {state}")
        if kinds:
            print("   " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))))
    for label, runs in (("cold", cold), ("cached", cached)):
        print(f"{label:6s}: wall median {statistics.median(w for w, _ in runs):.3f} s, "
              f"CPU median {statistics.median(c for _, c in runs):.3f} s ({args.repeats} runs)")
    print(f"load average: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
