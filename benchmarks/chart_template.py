#!/usr/bin/env python3
"""Templating a stack's Helm releases: cold (no cache) and cached, CPU seconds, medians.

    INFRA_CHART_DIR=/path/to/archives python benchmarks/chart_template.py [--stack prod] [--repeats 5]

Per repeat, with a fresh cache: the whole offline plan (`offline_plan`: record, value check,
templating, invariants) without archives and with them (cold), paired, so "cold templating adds"
is the issue's figure; then templating alone (`template_releases`) cold, with every release's
values changed (a new values key: the CRDs, cached by archive digest alone, are not parsed again)
and fully cached. Prints per release the kinds rendered and the medians. The issue's budget: cold
templating of all releases adds at most 1 s; cached, nothing measurable. CPU time (process time,
all threads, Helm's Go runtime included) is reported beside wall time: the machine is shared.
"""

from __future__ import annotations

import argparse
import copy
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
    archives = os.environ.get("INFRA_CHART_DIR")
    if not archives:
        parser.error("set INFRA_CHART_DIR to a directory of chart archives")
    from infra.charts.releases import template_releases
    from infra.config import load_stack_file
    from infra.offline import offline_plan, record_stack_plan
    from infra.stack_plan import plan_stack

    plan = plan_stack(load_stack_file(args.stack, ROOT))
    resources, _ = record_stack_plan(plan)
    moved = copy.deepcopy(resources)  # the same releases in another namespace: new values keys, same archives
    for res in moved:
        if res["type"].endswith(":Release"):
            res["inputs"]["namespace"] = f"{res['inputs'].get('namespace') or 'default'}-moved"
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in ("plan", "plan+cold", "cold", "changed", "cached")}
    entries: list = []
    with tempfile.TemporaryDirectory() as empty:
        offline_plan(plan, ROOT)  # warm the imports once
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as cache:
                os.environ["INFRA_CHART_CACHE"] = cache
                os.environ["INFRA_CHART_DIR"] = empty
                runs["plan"].append(_timed(lambda: offline_plan(plan, ROOT))[1:])
                os.environ["INFRA_CHART_DIR"] = archives
                runs["plan+cold"].append(_timed(lambda: offline_plan(plan, ROOT))[1:])
            with tempfile.TemporaryDirectory() as cache:
                os.environ["INFRA_CHART_CACHE"] = cache
                entries, wall, cpu = _timed(lambda: template_releases(resources, None)[0])
                runs["cold"].append((wall, cpu))
                runs["changed"].append(_timed(lambda: template_releases(moved, None))[1:])
                runs["cached"].append(_timed(lambda: template_releases(resources, None))[1:])
    for entry in entries:
        kinds = Counter(p["object"]["kind"] if p["part"] == "template" else f"{p['part']} {p['object']['kind']}"
                        for p in entry["parts"])
        state = f"{len(entry['parts'])} objects" if entry["templated"] else "not templated (no archive)"
        print(f"{entry['release']} ({entry['chart']} {entry['version']}): {state}")
        if kinds:
            print("   " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))))
    labels = {
        "plan": "offline plan, no archives", "plan+cold": "offline plan, templating cold",
        "cold": "templating alone, cold", "changed": "values changed (CRDs cached)", "cached": "cached",
    }
    for key, label in labels.items():
        wall, cpu = (statistics.median(x[i] for x in runs[key]) for i in (0, 1))
        print(f"{label:32s}: wall median {wall:.3f} s, CPU median {cpu:.3f} s ({args.repeats} runs)")
    for i, what in ((0, "wall"), (1, "CPU")):
        extra = statistics.median(c[i] - p[i] for c, p in zip(runs["plan+cold"], runs["plan"], strict=True))
        print(f"cold templating adds to the plan: {extra:.3f} s {what} (median of paired runs)")
    print(f"load average: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
