"""Fit the planner's efficiency factors to published serving benchmarks and report the model's error.

    python benchmarks/calibrate.py [--csv PATH] [--write] [--json OUT]

Reads benchmarks/data/published_serving_benchmarks.csv (a copy of the team's shared benchmark table,
kept in the repo so the fit is reproducible from a clone; override with --csv), turns each row into
the planner's terms (model, GPU size, layout, prompt/completion lengths, closed-loop concurrency,
which tokens the throughput counts), fits a handful of factors per GPU family on a fixed training
split (every third usable row is held out), and prints per-row and per-source absolute percentage
errors on the training rows, the held-out rows and all rows. `--write` stores the fitted factors in
infra/catalog/efficiency.json (the file the planner loads).

No per-row factors: every row of a family is predicted with the same factors. Rows the model
cannot describe (pipeline parallelism, undisclosed layouts, MXFP4 on a GPU we do not list, an
ambiguous metric) are listed with the reason they were left out.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infra.catalog.gpus import gpu_size  # noqa: E402
from infra.catalog.models import resolve_model  # noqa: E402
from infra.domain import Layout, Workload  # noqa: E402
from infra.planner.efficiency import (  # noqa: E402
    DEFAULT_PATH,
    EfficiencyFactors,
    EfficiencyTable,
    load_efficiency,
    save_efficiency,
)
from infra.planner.search import predict_closed_loop  # noqa: E402

DEFAULT_CSV = ROOT / "benchmarks" / "data" / "published_serving_benchmarks.csv"

GPU_SLUGS = {
    "MI300X": "gpu-mi300x8-1536gb",
    "MI325X": "gpu-mi325x8-2048gb-contracted",
    "H100 SXM": "gpu-h100x8-640gb",
    "H200 SXM": "gpu-h200x8-1128gb",
}
# Dataset mean lengths for MLPerf tasks where the row says "var": outputs derived from the rows
# themselves (output tok/s ÷ req/s: 301 for OpenOrca, 144 for the Mixtral mix); inputs are the
# task's published means as we understand them (uncertain, see benchmarks/README.md).
MLPERF_LENGTHS = {"OpenOrca": (300, 301), "MLPerf mixtral mix": (200, 144)}
ASSUMED_MAX_NUM_SEQS = 256  # vLLM's default when a max-load row does not state its batch limit
FITTED = (
    "hbm_efficiency",
    "compute_efficiency",
    "moe_compute_efficiency",
    "step_overhead_ms",
    "seq_overhead_us",
    "collective_latency_per_peer_us",
)
MOE_ONLY = ("moe_compute_efficiency",)
BOUNDS = {
    "hbm_efficiency": (0.2, 0.95),
    "moe_hbm_efficiency": (0.1, 0.95),
    "compute_efficiency": (0.1, 0.9),
    "moe_compute_efficiency": (0.03, 0.9),
    "step_overhead_ms": (0.2, 30.0),
    "seq_overhead_us": (0.5, 200.0),
    "collective_latency_per_peer_us": (0.5, 40.0),
}


@dataclass(frozen=True)
class Row:
    """One published measurement in the planner's terms."""

    index: int
    source: str
    family: str
    gpu_slug: str
    model_id: str
    engine: str
    layout: Layout | None
    input_tokens: int
    output_tokens: int
    concurrency: int  # clients per node (closed loop)
    metric: str  # "output" | "total" | "rate" (MLPerf Server/Interactive: throughput set by the rate)
    measured: float | None  # tokens/s per node as the metric counts them
    measured_tpot_ms: float | None
    rate_rps: float | None
    excluded: str  # why the row is not used ("" when used)
    early_software: bool = False  # notes say "early-2025 software": reported, not fitted

    @property
    def label(self) -> str:
        lay = self.layout.name if self.layout else "?"
        return f"{self.source[:10]:10} {self.gpu_slug.split('-')[1][:7]:7} {self.model_id.split('/')[-1][:24]:24} {lay:12} {self.input_tokens}/{self.output_tokens} c={self.concurrency}"


def _source(text: str) -> str:
    for key, short in (
        ("mlcommons", "mlperf-v5.1"),
        ("performance-results", "amd-perf-page"),
        ("rocm-blogs", "rocm-blogs"),
        ("oracle", "oracle-blog"),
        ("dstack", "dstack"),
        ("vultr", "vultr"),
    ):
        if key in text:
            return short
    return "other"


def _model_id(model: str, precision: str) -> str:
    name = re.sub(r"\s*\(.*?\)", "", model).strip()
    name = name.replace("Llama-2-70B", "Llama-2-70b-hf")
    if "FP8" in precision.upper() and "deepseek" not in name.lower():
        name += "-FP8"
    return name


def parse_rows(path: Path) -> list[Row]:
    rows = []
    with path.open(newline="") as fh:
        for i, rec in enumerate(csv.DictReader(fh)):
            rows.append(_parse(i, rec))
    return rows


def _num(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except (ValueError, AttributeError):
        return None


def _parse(i: int, rec: dict) -> Row:
    notes = rec["notes"]
    source = _source(rec["source"])
    hw = rec["hardware"].strip()
    slug = GPU_SLUGS.get(hw, "")
    gpu = gpu_size(slug) if slug else None
    family = gpu.accelerator.family if gpu else ""
    model_id = _model_id(rec["model"], rec["precision"])
    engine = rec["engine"]
    conc_text = rec["concurrency_or_rate"]
    excluded = ""
    if not gpu:
        excluded = f"GPU {hw} is not a DO size"
    elif "MXFP4" in rec["precision"] or "finetuned" in rec["model"]:
        excluded = "MXFP4 / modified model (open division), not comparable"
    elif resolve_model(model_id) is None:
        excluded = f"{model_id} not in the catalog (sparse attention not modelled)"
    elif not rec["tp"]:
        excluded = "layout not stated"
    elif "PP" in rec["dp_or_replicas"]:
        excluded = "pipeline parallelism not modelled"
    elif "ambiguous" in notes:
        excluded = "metric ambiguous (notes)"
    elif not rec["throughput_tok_s_total"]:
        excluded = "no number (qualitative row)"

    tp = int(rec["tp"] or 1)
    reps_text = rec["dp_or_replicas"].strip()
    dp, replicas = 1, 1
    if reps_text == "DP-attn":
        dp, tp = tp, 1
    elif reps_text.isdigit():
        replicas = int(reps_text)
    ep = bool(rec["ep"].strip())

    # sequence lengths
    isl, osl = _num(rec["isl"]), _num(rec["osl"])
    for key, (mi, mo) in MLPERF_LENGTHS.items():
        if rec["isl"].startswith(key):
            isl, osl = mi, mo
    if isl is None or osl is None:
        if not excluded:
            excluded = "sequence lengths not stated"
        isl, osl = isl or 1000, osl or 1000

    # load: closed-loop clients per node, or an open-loop rate
    metric = "total" if "input+output" in notes else "output"
    rate = None
    seqs_match = re.search(r"max_num_seqs (\d+)", notes + " " + conc_text)
    max_num_seqs = int(seqs_match.group(1)) if seqs_match else ASSUMED_MAX_NUM_SEQS
    m_rate = re.match(r"(Server|Interactive) ([\d.]+) req/s", conc_text)
    if m_rate:
        metric, rate = "rate", float(m_rate.group(2))
        concurrency = 0
    elif conc_text.startswith("Offline") or conc_text.startswith("offline") or "max load" in conc_text:
        concurrency = max_num_seqs * replicas
    elif m := re.match(r"(?:batch|conc) (\d+)", conc_text):
        concurrency = int(m.group(1))
        max_num_seqs = max(max_num_seqs, concurrency)
    else:
        concurrency = 0
        if not excluded:
            excluded = f"load {conc_text!r} not understood"
    layout = Layout(
        tp=tp,
        ep=ep,
        dp=dp,
        replicas_per_node=replicas,
        max_num_seqs=max_num_seqs // max(1, dp) if dp > 1 else max_num_seqs,
        max_num_batched_tokens=8192,
        kv_cache_dtype="fp8" if "KV" in rec["precision"] or "fp8 KV" in rec["precision"] else "auto",
    )
    return Row(
        index=i,
        source=source,
        family=family,
        gpu_slug=slug or hw,
        model_id=model_id,
        engine=engine,
        layout=layout,
        input_tokens=int(isl),
        output_tokens=int(osl),
        concurrency=concurrency,
        metric=metric,
        measured=_num(rec["throughput_tok_s_total"]),
        measured_tpot_ms=_num(rec["tpot_ms"]),
        rate_rps=rate,
        excluded=excluded,
        early_software="early-2025 software" in notes,
    )


def in_fit(row: Row) -> bool:
    """Rows the factors are fitted to: usable, not held out, and not flagged by their notes as measured
    on early-2025 engine builds (immature MLA/MoE kernels; their error is still reported)."""
    return not row.excluded and not is_holdout(row) and not row.early_software


def is_holdout(row: Row) -> bool:
    """Every third usable row (by file order) is held out of the fit."""
    return row.index % 3 == 2


@dataclass
class Prediction:
    row: Row
    predicted: float | None  # tokens/s per node, same metric as measured
    predicted_tpot_ms: float | None

    @property
    def ape(self) -> float | None:
        if self.predicted is None or not self.row.measured:
            return None
        return abs(self.predicted - self.row.measured) / self.row.measured

    @property
    def tpot_ape(self) -> float | None:
        if self.predicted_tpot_ms is None or not self.row.measured_tpot_ms:
            return None
        return abs(self.predicted_tpot_ms - self.row.measured_tpot_ms) / self.row.measured_tpot_ms


def predict(row: Row, table: EfficiencyTable) -> Prediction:
    arch = resolve_model(row.model_id)
    gpu = gpu_size(row.gpu_slug)
    workload = Workload(row.input_tokens, row.output_tokens)
    if row.metric == "rate":
        from infra.planner.memory import memory_per_gpu
        from infra.planner.performance import ReplicaModel

        lay = row.layout.with_(max_model_len=4096)
        mem = memory_per_gpu(arch, gpu, lay, row.input_tokens + row.output_tokens)
        if not mem.fits:
            return Prediction(row, None, None)
        model = ReplicaModel(arch, gpu, lay, workload, table.for_family(gpu.accelerator.family))
        n_max = min(mem.max_concurrency_per_replica, lay.max_num_seqs * lay.dp)
        point = model.at_rate(row.rate_rps / lay.replicas_per_node, n_max)
        tpot = point.tpot_mean_s * 1e3 if point.stable else None
        return Prediction(row, None, tpot)
    cl = predict_closed_loop(
        arch, gpu, row.layout.with_(max_model_len=4096), workload, row.concurrency, table
    )
    if cl is None:
        return Prediction(row, None, None)
    value = cl.total_tokens_per_s_per_node if row.metric == "total" else cl.output_tokens_per_s_per_node
    return Prediction(row, value, cl.tpot_mean_ms)


def _objective(rows: list[Row], table: EfficiencyTable) -> float:
    """Mean absolute log error of throughput, plus half-weight TPOT error where measured."""
    total, weight = 0.0, 0.0
    for row in rows:
        p = predict(row, table)
        if row.metric != "rate":
            if p.predicted is None or p.predicted <= 0:
                total += 3.0
            else:
                total += abs(math.log(p.predicted / row.measured))
            weight += 1.0
        if row.measured_tpot_ms:
            # Open-loop (rate) rows: TPOT near saturation is very sensitive, so a lower weight.
            w = 0.25 if row.metric == "rate" else 0.5
            if p.predicted_tpot_ms and p.predicted_tpot_ms != float("inf"):
                total += w * min(3.0, abs(math.log(p.predicted_tpot_ms / row.measured_tpot_ms)))
            else:
                total += w * 3.0
            weight += w
    return total / max(1.0, weight)


def _to_vector(f: EfficiencyFactors, keys: tuple[str, ...]) -> list[float]:
    return [math.log(getattr(f, k)) for k in keys]


def _from_vector(base: EfficiencyFactors, v: list[float], keys: tuple[str, ...]) -> EfficiencyFactors:
    values = {}
    for k, x in zip(keys, v, strict=True):
        lo, hi = BOUNDS[k]
        values[k] = min(hi, max(lo, math.exp(x)))
    return replace(base, **values)


def nelder_mead(fn, x0: list[float], step: float = 0.3, iterations: int = 250) -> tuple[list[float], float]:
    """Plain Nelder–Mead (deterministic; no SciPy needed)."""
    n = len(x0)
    simplex = [list(x0)] + [[x + (step if i == j else 0.0) for j, x in enumerate(x0)] for i in range(n)]
    values = [fn(x) for x in simplex]
    for _ in range(iterations):
        order = sorted(range(n + 1), key=lambda i: values[i])
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        centroid = [sum(p[j] for p in simplex[:-1]) / n for j in range(n)]
        worst = simplex[-1]
        refl = [c + (c - w) for c, w in zip(centroid, worst, strict=True)]
        fr = fn(refl)
        if fr < values[0]:
            exp = [c + 2 * (c - w) for c, w in zip(centroid, worst, strict=True)]
            fe = fn(exp)
            simplex[-1], values[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = refl, fr
        else:
            con = [c + 0.5 * (w - c) for c, w in zip(centroid, worst, strict=True)]
            fc = fn(con)
            if fc < values[-1]:
                simplex[-1], values[-1] = con, fc
            else:
                best = simplex[0]
                simplex = [best] + [
                    [b + 0.5 * (x - b) for b, x in zip(best, p, strict=True)] for p in simplex[1:]
                ]
                values = [values[0]] + [fn(p) for p in simplex[1:]]
        if max(values) - min(values) < 1e-5:
            break
    i = min(range(n + 1), key=lambda k: values[k])
    return simplex[i], values[i]


def fit(rows: list[Row], start: EfficiencyTable) -> EfficiencyTable:
    """Fit FITTED factors per family on `rows` (used, non-held-out)."""
    table = start
    for family in sorted({r.family for r in rows}):
        fam_rows = [r for r in rows if r.family == family]
        base = start.for_family(family)
        has_moe = any(resolve_model(r.model_id).is_moe for r in fam_rows)
        keys = tuple(k for k in FITTED if has_moe or k not in MOE_ONLY)

        def fn(v, base=base, family=family, fam_rows=fam_rows, keys=keys, table=table):
            return _objective(fam_rows, table.with_family(family, _from_vector(base, v, keys)))

        best, _ = nelder_mead(fn, _to_vector(base, keys))
        best, _ = nelder_mead(fn, best, step=0.1)
        table = table.with_family(family, _from_vector(base, best, keys))
    return table


def _pct(x: float | None) -> str:
    return "   n/a" if x is None else f"{100 * x:5.1f}%"


def report(preds: list[Prediction], out=sys.stdout) -> dict:
    """Print per-row and summary errors; return the summary as a dict."""

    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    thr = [p for p in preds if p.row.metric != "rate"]
    train = [p for p in thr if in_fit(p.row)]
    hold = [p for p in thr if is_holdout(p.row) and not p.row.early_software]
    early = [p for p in thr if p.row.early_software]
    print(
        f"{'row':>3} {'split':5} {'case':80} {'measured':>9} {'predicted':>9} {'err':>6}  {'tpot meas/pred ms':>18}",
        file=out,
    )
    for p in preds:
        r = p.row
        split = "early" if r.early_software else "hold" if is_holdout(r) else "fit"
        meas = f"{r.measured:9.0f}" if r.metric != "rate" and r.measured else f"{'rate':>9}"
        pred = f"{p.predicted:9.0f}" if p.predicted else f"{'-':>9}"
        tp = ""
        if r.measured_tpot_ms:
            tp = (
                f"{r.measured_tpot_ms:8.1f}/{p.predicted_tpot_ms:.1f}"
                if p.predicted_tpot_ms
                else f"{r.measured_tpot_ms:8.1f}/-"
            )
        print(f"{r.index:3} {split:5} {r.label:80} {meas} {pred} {_pct(p.ape)}  {tp:>18}", file=out)
    summary = {
        "throughput_rows": len(thr),
        "median_ape_all": med([p.ape for p in thr]),
        "median_ape_fit": med([p.ape for p in train]),
        "median_ape_holdout": med([p.ape for p in hold]),
        "median_ape_early_software": med([p.ape for p in early]),
        "median_ape_excluding_early_software": med([p.ape for p in thr if not p.row.early_software]),
        "median_tpot_ape_all": med([p.tpot_ape for p in preds]),
        "per_source": {},
    }
    for source in sorted({p.row.source for p in preds}):
        mine = [p for p in thr if p.row.source == source]
        summary["per_source"][source] = {
            "rows": len(mine),
            "median_ape": med([p.ape for p in mine]),
            "median_ape_holdout": med([p.ape for p in mine if is_holdout(p.row) or p.row.early_software]),
            "median_tpot_ape": med([p.tpot_ape for p in preds if p.row.source == source]),
        }
    print("", file=out)
    print(
        f"throughput rows: {summary['throughput_rows']}; median abs error all {_pct(summary['median_ape_all'])}, "
        f"fit {_pct(summary['median_ape_fit'])}, held out {_pct(summary['median_ape_holdout'])}, "
        f"early-2025 software (not fitted) {_pct(summary['median_ape_early_software'])}; "
        f"TPOT median abs error {_pct(summary['median_tpot_ape_all'])}",
        file=out,
    )
    for source, s in summary["per_source"].items():
        print(
            f"  {source:14} rows {s['rows']:2}  throughput {_pct(s['median_ape'])} (not fitted {_pct(s['median_ape_holdout'])})"
            f"  TPOT {_pct(s['median_tpot_ape'])}",
            file=out,
        )
    return summary


def leave_one_source_out(used: list[Row]) -> dict:
    """Refit without each source (all its rows unseen) and report its median throughput error."""
    print("\nleave one source out (fit on every other source's fit rows and held-out rows):")
    out = {}
    for source in sorted({r.source for r in used}):
        train = [r for r in used if r.source != source and not r.early_software]
        table = fit(train, EfficiencyTable({"default": EfficiencyFactors()}))
        mine = [predict(r, table) for r in used if r.source == source and r.metric != "rate"]
        errors = [p.ape for p in mine if p.ape is not None]
        out[source] = statistics.median(errors) if errors else None
        print(f"  {source:14} rows {len(mine):2}  throughput median abs error {_pct(out[source])}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    ap.add_argument("--write", action="store_true", help=f"write the fitted factors to {DEFAULT_PATH}")
    ap.add_argument("--no-fit", action="store_true", help="only report the error of the current factors")
    ap.add_argument("--json", type=Path, help="write the summary (and per-row predictions) as JSON")
    ap.add_argument(
        "--leave-one-source-out",
        action="store_true",
        help="also refit without each source in turn and report that source's error (slower)",
    )
    args = ap.parse_args(argv)

    rows = parse_rows(args.csv)
    used = [r for r in rows if not r.excluded]
    print(f"{len(rows)} rows, {len(used)} usable; excluded:")
    for r in rows:
        if r.excluded:
            print(f"  row {r.index:2} ({r.source}, {r.model_id.split('/')[-1]}): {r.excluded}")
    # Fit from the built-in priors, not from the current file, so that re-running is reproducible.
    start = load_efficiency() if args.no_fit else EfficiencyTable({"default": EfficiencyFactors()})
    t0 = time.perf_counter()
    table = start if args.no_fit else fit([r for r in used if in_fit(r)], start)
    fit_s = time.perf_counter() - t0
    table = EfficiencyTable(
        table.families,
        fitted_by="benchmarks/calibrate.py on published_serving_benchmarks.csv (holdout: every third row)",
        fitted_at=start.fitted_at if args.no_fit else time.strftime("%Y-%m-%d"),
    )
    for fam in sorted(table.families):
        print(
            f"factors {fam}: "
            + json.dumps({k: round(v, 4) for k, v in asdict(table.for_family(fam)).items()})
        )
    print(f"(fit took {fit_s:.1f} s)\n")
    preds = [predict(r, table) for r in used]
    summary = report(preds)
    if args.leave_one_source_out:
        summary["leave_one_source_out"] = leave_one_source_out(used)
    if args.write:
        save_efficiency(DEFAULT_PATH, table)
        print(f"\nwrote {DEFAULT_PATH}")
    if args.json:
        summary["rows"] = [
            {
                "row": p.row.index,
                "source": p.row.source,
                "fitted": in_fit(p.row),
                "metric": p.row.metric,
                "measured": p.row.measured,
                "predicted": p.predicted,
                "ape": p.ape,
                "tpot_measured_ms": p.row.measured_tpot_ms,
                "tpot_predicted_ms": p.predicted_tpot_ms,
            }
            for p in preds
        ]
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
