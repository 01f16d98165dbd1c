"""Calibrate the planner on the published measurements and report its error, source by source.

    python benchmarks/calibrate.py [--data DIR] [--write] [--max-nfev N]

Reads benchmarks/data/serving_sweeps.csv and published_serving_benchmarks.csv, fits the planner's
factors (infra.planner.fit: per GPU family, two scales per non-vLLM engine), then leaves each
independent source out in turn, re-fits and predicts that source's rows. Prints the
leave-one-source-out error (the honest figure) next to the fitted one, by source and by GPU
family × model class × engine. `--write` stores the fitted factors with their uncertainty bands
in infra/catalog/efficiency.json and the per-row, per-fold results in
benchmarks/results/calibration.json, which tests/planner/test_calibration.py reads back.

About 4–5 minutes on 2 busy cores (one fold per source, warm-started at half the evaluations).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from infra.planner.calibration import calibrate, coverage, headline, is_current  # noqa: E402
from infra.planner.efficiency import (  # noqa: E402
    DEFAULT_PATH,
    EfficiencyFactors,
    EfficiencyTable,
    cell_key,
    save_efficiency,
)
from infra.planner.evidence import load_observations  # noqa: E402
from infra.planner.fit import FitSpec  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
RESULTS = ROOT / "benchmarks" / "results" / "calibration.json"


def _table(rows: dict, names: list[str]) -> str:
    out = ["| group | rows | sources | median APE | median pred/meas |", "|---|---:|---:|---:|---:|"]
    for name in names:
        s = rows.get(name)
        if s:
            out.append(f"| {name} | {s.rows} | {s.sources} | {s.median_ape:.1%} | {s.median_ratio:.2f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--write", action="store_true", help="write efficiency.json and benchmarks/results/calibration.json")
    parser.add_argument("--max-nfev", type=int, default=40, help="function evaluations of the full fit (folds: half)")
    args = parser.parse_args(argv)

    observations, excluded = load_observations(args.data)
    print(f"{len(observations)} usable measurements ({sum(is_current(o) for o in observations)} on current engine builds), "
          f"{len(excluded)} left out:")
    reasons: dict[str, int] = {}
    for e in excluded:
        reasons[e.reason] = reasons.get(e.reason, 0) + 1
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"  {n:4}  {reason}")
    started = time.perf_counter()
    today = dt.date.today().isoformat()
    cal = calibrate(
        observations,
        EfficiencyTable({"default": EfficiencyFactors()}),
        FitSpec(max_nfev=args.max_nfev),
        FitSpec(max_nfev=max(1, args.max_nfev // 2)),  # folds warm-start from the full fit: half the evaluations
        fitted_by="benchmarks/calibrate.py on serving_sweeps.csv + published_serving_benchmarks.csv (current engine builds)",
        fitted_at=today,
        progress=lambda s: print(f"  fold without {s}: {time.perf_counter() - started:.0f} s", flush=True),
    )
    held, fitted = headline(cal), headline(cal, held_out=False)
    names = ["vllm-rocm-moe", "all", "rocm-moe", "vllm"] + sorted(k for k in held if k.startswith("source:")) + sorted(
        k for k in held if k.startswith("group:")
    )
    print("\nLeave-one-source-out (each source predicted by a fit that never saw it):")
    print(_table(held, names))
    print("\nFitted (every current row in the fit; flattering):")
    print(_table(fitted, ["vllm-rocm-moe", "all", "rocm-moe", "vllm", "early-software", "tensorrt-llm"]))
    print("\nUncertainty bands (measured ÷ predicted, 10th–90th percentile of held-out rows):")
    for key, band in sorted(cal.table.uncertainty.items()):
        print(f"  {key:22} {band.low:.2f}–{band.high:.2f}  ({band.rows} rows, {band.sources} sources)")
    cover = coverage(cal)
    print("\nBand coverage per family × class × engine cell (held-out rows inside the band the planner uses):")
    print("| cell | rows | band | covered |\n|---|---:|---:|---:|")
    for key, c in cover.items():
        print(f"| {key} | {c['rows']} | {c['low']:.2f}–{c['high']:.2f} | {c['covered']:.0%} |")
    print(f"cells with factors of their own: {', '.join(sorted(cal.table.cells)) or 'none'}")
    print(f"\n{time.perf_counter() - started:.0f} s")
    if args.write:
        save_efficiency(DEFAULT_PATH, cal.table)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        meas = cal.measured
        doc = {
            "fitted_at": today,
            "headline": {k: v.to_json() for k, v in held.items()},
            "fitted": {k: v.to_json() for k, v in fitted.items()
                       if k in ("vllm-rocm-moe", "all", "rocm-moe", "vllm", "early-software", "tensorrt-llm")},
            "coverage": cover,
            "folds": {source: t.to_json() for source, t in cal.folds.items()},
            "rows": [
                {
                    "label": o.label,
                    "source": o.source,
                    "cell": cell_key(o.family, o.moe, o.engine_key),
                    "measured_output_tok_s": None if not np.isfinite(m) else round(float(m), 2),
                    "held_out": None if not np.isfinite(h) else round(float(h), 2),
                    "fitted": None if not np.isfinite(f) else round(float(f), 2),
                }
                for o, m, h, f in zip(cal.observations, meas, cal.held_out, cal.fitted, strict=True)
            ],
        }
        RESULTS.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {DEFAULT_PATH.relative_to(ROOT)} and {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
