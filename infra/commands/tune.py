"""`infra tune ingest|calibrate`: turn benchmark results into a layout decision and planner factors.

ingest: parse `vllm bench serve` result JSON, compute each layout's goodput within the p90 SLOs,
print a comparison (or `--json`), draw the latency-vs-rate chart, and with `--write` record the
winner in the stack file as an explicit layout with provenance.
calibrate: re-fit the planner's efficiency factors from the measured points and report the
prediction error before and after.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from infra.cli_args import float_in, fraction
from infra.commands import tables, tune_telemetry
from infra.domain import MAX_TPOT_P90_MS, MAX_TTFT_P90_MS, Provenance, SloRecord, WorkloadRecord
from infra.errors import Problem, UserError
from infra.tuning import calibrate as calibration
from infra.tuning.chart import render_latency_chart
from infra.tuning.goodput import DEFAULT_MAX_FAILED_FRACTION, Comparison, compare_layouts
from infra.tuning.readiness import ready_seconds_value
from infra.tuning.results import SweepPoint, layout_fields, load_results
from infra.tuning.stackfile import stack_file_path, write_measured_layout

DEFAULT_CHART_NAME = "latency-vs-rate.svg"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "tune",
        help="ingest benchmark results: goodput per layout, the winner, planner re-calibration",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="tune_action", metavar="ACTION")
    actions.required = True

    ingest = actions.add_parser(
        "ingest",
        help="goodput per layout from `vllm bench serve` results; --write records the winner",
        description="Goodput per layout (max request rate within both p90 SLOs), the winner and why the others lost.",
    )
    _add_results_args(ingest)
    ingest.add_argument("--json", action="store_true", help="print the comparison as JSON")
    ingest.add_argument(
        "--chart",
        metavar="SVG",
        help=f"where to write the latency chart (default: {DEFAULT_CHART_NAME} next to the first RESULTS)",
    )
    ingest.add_argument("--no-chart", action="store_true", help="do not write the chart")
    ingest.add_argument(
        "--write",
        action="store_true",
        help="record the winner in stacks/Pulumi.<stack>.yaml as an explicit layout with provenance",
    )
    ingest.set_defaults(func=run_ingest)

    calibrate = actions.add_parser(
        "calibrate",
        help="re-fit the planner's efficiency factors from measured goodput or live telemetry; report error before/after",
        description="Re-fit the planner's factors from benchmark RESULTS (`--save` into the catalog), or from the "
        "cluster's steady windows with --prometheus (`--write` into the stack's own factors file).",
    )
    _add_results_args(calibrate, required=False)
    tune_telemetry.add_arguments(calibrate)
    calibrate.add_argument("--json", action="store_true", help="print the calibration report as JSON")
    calibrate.add_argument(
        "--save", action="store_true", help="write the re-fitted factors into the planner's efficiency catalog"
    )
    calibrate.add_argument(
        "--efficiency-file", type=Path, help="efficiency table to start from and --save to (default: the planner's catalog)"
    )
    calibrate.set_defaults(func=run_calibrate)


def _add_results_args(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    parser.add_argument("results", nargs="+" if required else "*", metavar="RESULTS", help="result JSON files or directories of them")
    parser.add_argument("--stack", help="stack name (stacks/Pulumi.<stack>.yaml): SLOs and model default from it")
    parser.add_argument("--model", help="model name in the stack")
    parser.add_argument("--ttft-p90-ms", type=float_in(MAX_TTFT_P90_MS), help="p90 time-to-first-token SLO (default: the stack model's)")
    parser.add_argument("--tpot-p90-ms", type=float_in(MAX_TPOT_P90_MS), help="p90 time-per-output-token SLO (default: the stack model's)")
    parser.add_argument(
        "--layout", help="layout name for results that carry no `layout` metadata (runs made by hand)"
    )
    parser.add_argument(
        "--max-failed-fraction",
        type=fraction,
        default=DEFAULT_MAX_FAILED_FRACTION,
        help="a rate fails when more than this share of its requests failed (default: %(default)s)",
    )
    parser.add_argument("--stacks-dir", type=Path, help=argparse.SUPPRESS)


# --- ingest ------------------------------------------------------------------------------------


def run_ingest(args) -> int:
    if args.stack and not args.model:
        raise UserError([Problem("--stack", f"{args.stack!r} needs --model: which of its models the results are for")])
    points = load_results(args.results, layout_override=args.layout)
    _check_models(points, args.model)
    ttft, tpot, stack_model = _slos(args)
    comparison = compare_layouts(points, ttft_p90_ms=ttft, tpot_p90_ms=tpot, max_failed_fraction=args.max_failed_fraction)
    require_usable_points(comparison, points)

    chart_path = None
    if not args.no_chart:
        chart_path = Path(args.chart) if args.chart else _default_chart_path(args.results)
        chart_path.parent.mkdir(parents=True, exist_ok=True)
        title = f"{args.model or 'measured'}: p90 latency vs request rate"
        chart_path.write_text(render_latency_chart(comparison, title=title), encoding="utf-8")

    written = None
    if args.write:
        stack_model = stack_model or _stack_model(args, "--write")
        conditions = _require_stack_conditions(stack_model, points, ttft, tpot, "--write")
        written = _write_winner(args, points, comparison, stack_model, conditions)

    if args.json:
        payload = comparison.to_json()
        if chart_path:
            payload["chart"] = str(chart_path)
        if written:
            payload["written"] = written
        print(json.dumps(payload, indent=2, sort_keys=False))
    else:
        print(format_comparison(comparison))
        if chart_path:
            print(f"\nchart: {chart_path}")
        if written:
            print(f"wrote {written['layout']} to {written['stack_file']} (models[{written['model']}].layout)")
    return 0


def format_comparison(comparison: Comparison, *, terminal: bool | None = None) -> str:
    """The human table: one row per layout, best first, then the reasons."""
    lines = [f"SLO: p90 TTFT <= {comparison.ttft_p90_ms:g} ms, p90 TPOT <= {comparison.tpot_p90_ms:g} ms", ""]
    header = ("", "layout", tables.right("goodput req/s"), tables.right("out tok/s"), "limited by", "rates measured (req/s)")
    rows = []
    for g in comparison.layouts:
        goodput = f"{'>= ' if g.lower_bound else ''}{g.goodput_rps:.2f}"
        limited = {"ttft": "p90 TTFT", "tpot": "p90 TPOT", "errors": "failed requests", None: "-"}[g.limited_by]
        if g.goodput_rps <= 0 and g.points:
            limited = "never meets SLO"
        rates = ",".join(f"{p.request_rate_rps:g}" for p in g.points) or "-"
        tokens = f"{g.output_throughput_tok_s:.0f}" if g.output_throughput_tok_s else "-"
        rows.append(("*" if g.name == comparison.winner else "", g.name, goodput, tokens, limited, rates))
    lines.append(tables.render(header, rows, terminal=terminal))
    lines.append("")
    if comparison.winner:
        lines.append(f"winner: {comparison.winner} - {comparison.layout(comparison.winner).reason}")
    else:
        lines.append("winner: none - no layout met both SLOs at any measured rate; sweep lower rates or relax the SLO")
    losers = [g for g in comparison.layouts if g.name != comparison.winner]
    if losers:
        lines.append("why the others lost:")
        lines += [f"  {g.name}: {g.reason}" for g in losers]
    notes = [f"  {g.name}: {n}" for g in comparison.layouts for n in g.notes]
    if notes:
        lines.append("notes:")
        lines += notes
    return "\n".join(lines)


def _write_winner(
    args, points: list[SweepPoint], comparison: Comparison, stack_model: calibration.StackModel, conditions: StackConditions
) -> dict:
    if comparison.winner is None:
        raise UserError("no layout met both SLOs at any measured rate; nothing written")
    winner = comparison.layout(comparison.winner)
    fields, _missing = layout_fields(points, winner.name)
    mine = [p for p in points if p.layout == winner.name]
    dates = [p.measured_at for p in mine if p.measured_at]
    provenance = Provenance(
        measured_at=max(dates).isoformat() if dates else None,
        vllm_version=_single_meta(mine, "vllm_version"),
        image=_single_meta(mine, "image"),
        measured_goodput_rps=winner.goodput_rps,
        predicted_goodput_rps=_predicted_goodput(stack_model, fields),
        source_results=sorted({_display_path(p.source.split("#")[0]) for p in mine}),
        slo=SloRecord(ttft_p90_ms=float(conditions.slo[0]), tpot_p90_ms=float(conditions.slo[1])),
        workload=WorkloadRecord(input_tokens=int(conditions.workload[0]), output_tokens=int(conditions.workload[1]),
                                **_sessions_measured(mine)),
        gpu=conditions.gpu,
        **_time_to_ready(mine),
    )
    path = stack_file_path(args.stack, args.stacks_dir)
    write_measured_layout(path, args.model, fields, provenance, validate=_stack_text_check(stack_model, path, winner.name))
    return {"stack_file": str(path), "model": args.model, "layout": winner.name, "fields": fields}


def _stack_text_check(stack_model: calibration.StackModel, path: Path, layout: str):
    """The edited stack file must load and plan (layout checks included) before it replaces the old one."""

    def check(text: str) -> None:
        from infra.config import load_config, parse_stack_text
        from infra.stack_plan import plan_stack

        try:
            values, secret_keys = parse_stack_text(text, path.name)
            plan_stack(load_config(values, stack=stack_model.stack, secret_keys=secret_keys, base_dir=stack_model.root))
        except UserError as err:
            raise UserError(
                err.problems, source=f"--write refused, nothing written: the measured winner {layout} does not validate in {path.name}"
            ) from None

    return check


def _sessions_measured(points: list[SweepPoint]) -> dict:
    """The multi-turn replay the winner was measured with (`infra bench --dataset multi-turn`
    metadata), so the recorded goodput says it includes the prefix-cache hits of those sessions."""
    if _single_meta(points, "workload") != "multi-turn":
        return {}
    turns, think = _single_meta(points, "turns_per_session"), _single_meta(points, "think_time_s")
    try:
        return {"turns_per_session": int(turns), "think_time_s": float(think)}
    except (TypeError, ValueError):
        return {}


def _time_to_ready(points: list[SweepPoint]) -> dict:
    """The winner's measured time-to-ready and weight source (`infra bench` metadata), for the
    provenance: the slowest recorded load, from a single known source; nothing when unrecorded."""
    source = _single_meta(points, "weights_source")
    seconds = [s for s in (ready_seconds_value(p.metadata.get("ready_seconds")) for p in points) if s is not None]
    if source not in ("huggingface", "nfs", "spaces", "local") or not seconds:
        return {}
    return {"ready_seconds": max(seconds), "weights_source": source}


def _predicted_goodput(stack_model: calibration.StackModel, fields: dict) -> float | None:
    """The planner's per-node goodput for this exact layout, or None when it cannot be asked."""
    try:
        context = calibration.model_context(stack_model)
    except calibration.PlannerUnavailable:
        return None
    # 0 (fits, never meets the SLO) is recorded as null: provenance holds only positive rates.
    return calibration.predict_goodput_rps(context, fields) or None


# --- calibrate ---------------------------------------------------------------------------------


def run_calibrate(args) -> int:
    if args.prometheus:
        return tune_telemetry.run_calibrate_prometheus(args)
    if not args.results:
        raise UserError([Problem("RESULTS", "give benchmark result files, or --prometheus URL to calibrate from live telemetry")])
    if args.write:
        raise UserError([Problem("--write", "is for --prometheus (the stack's factors file); benchmark RESULTS use --save")])
    points = load_results(args.results, layout_override=args.layout)
    _check_models(points, args.model)
    ttft, tpot, stack_model = _slos(args)
    stack_model = stack_model or _stack_model(args, "calibrate")
    _require_stack_conditions(stack_model, points, ttft, tpot, "calibrate")
    comparison = compare_layouts(points, ttft_p90_ms=ttft, tpot_p90_ms=tpot, max_failed_fraction=args.max_failed_fraction)
    require_usable_points(comparison, points)
    context = calibration.model_context(stack_model)
    from infra.planner import load_efficiency

    table = load_efficiency(args.efficiency_file) if args.efficiency_file else None
    report = calibration.calibrate(context, comparison, points, table)
    saved = calibration.save_factors(report, args.efficiency_file) if args.save else None
    if args.json:
        payload = report.to_json()
        if saved:
            payload["saved_to"] = str(saved)
        print(json.dumps(payload, indent=2))
    else:
        print(format_calibration(report))
        if saved:
            print(f"saved the re-fitted {report.family} factors to {saved}")
    return 0


def format_calibration(report: calibration.CalibrationReport, *, terminal: bool | None = None) -> str:
    """Measured against predicted goodput per layout, before and after the fit, then the factors."""
    lines = [f"efficiency factors for GPU family {report.family}: fitted on {len(report.layouts)} measured layout(s)", ""]
    header = ("layout", *(tables.right(h) for h in ("measured req/s", "before", "after", "held out")))
    rows = [
        (
            e.name,
            f"{e.measured_rps:.2f}",
            calibration.error_cell(e.before_rps, e.measured_rps),
            calibration.error_cell(e.after_rps, e.measured_rps),
            calibration.error_cell(e.held_out_rps, e.measured_rps) if len(report.layouts) >= 3 else "-",
        )
        for e in report.layouts
    ]
    lines.append(tables.render(header, rows, terminal=terminal))
    held = report.mape_held_out
    lines.append("")
    lines.append(
        f"mean absolute error: {report.mape_before:.1f}% before, {report.mape_after:.1f}% after"
        + (f", {held:.1f}% on held-out layouts (leave-one-out)" if held is not None else " (measure 3+ layouts for a held-out figure)")
    )
    changed = report.changed_factors()
    if changed:
        lines.append("factors:")
        lines += [f"  {k}: {b:.4g} -> {a:.4g}" for k, (b, a) in changed.items()]
    if report.excluded:
        lines.append("not used:")
        lines += [f"  {x}" for x in report.excluded]
    return "\n".join(lines)


# --- shared ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StackConditions:
    """What a measured goodput holds for: the stack model's SLO and workload and its pool's GPU."""

    slo: tuple[float, float]  # (ttft_p90_ms, tpot_p90_ms)
    workload: tuple[int, int]  # (input_tokens, output_tokens)
    gpu: str  # size slug


def _stack_model(args, action: str) -> calibration.StackModel:
    """The validated config of `--model` in `--stack`, which `action` cannot do without."""
    if not (args.stack and args.model):
        what = "which stack file and which model to record the winner for" if action == "--write" else (
            "the model architecture, GPU and workload come from the stack"
        )
        raise UserError(f"{action} needs --stack and --model: {what}")
    return calibration.load_stack_model(args.stack, args.model, stacks_dir=args.stacks_dir)


def _require_stack_conditions(
    stack_model: calibration.StackModel, points: list[SweepPoint], ttft: float, tpot: float, action: str
) -> StackConditions:
    """Refuse to record or calibrate from a measurement made under other conditions than the stack's.

    Goodput is a rate *within an SLO* for *a prompt/answer length* on *a GPU*: measured under a
    `--tpot-p90-ms` override, with other token counts (`input_tokens`/`output_tokens` metadata) or
    on another GPU size (`gpu`), it would size this model's pool — or re-fit its factors — from
    the wrong figure. All mismatches are reported together. Results without that metadata (runs
    made by hand) are taken at their word.
    """
    stack_slo, stack_tokens, stack_gpu = stack_model.slo, stack_model.workload, stack_model.gpu
    problems: list[Problem] = []
    for flag, used, stacked in zip(("--ttft-p90-ms", "--tpot-p90-ms"), (ttft, tpot), stack_slo, strict=True):
        if used != stacked:
            problems.append(Problem(flag, f"{used:g} is not the stack's SLO {stacked:g}; omit it or pass {stacked:g}"))
    for index, key in enumerate(("input_tokens", "output_tokens")):
        recorded = _meta_values(points, key)
        if recorded and recorded != {str(stack_tokens[index])}:
            problems.append(
                Problem(f"RESULTS {key}", f"measured with {', '.join(sorted(recorded))}; the stack's workload has {stack_tokens[index]}")
            )
    recorded_gpu = _meta_values(points, "gpu")
    if recorded_gpu and recorded_gpu != {stack_gpu}:
        problems.append(Problem("RESULTS gpu", f"measured on {', '.join(sorted(recorded_gpu))}; the stack's pool is {stack_gpu}"))
    if problems:
        where = f"stack {stack_model.stack} model {stack_model.entry.name}"
        head = f"{action} refused: results not measured under the conditions of {where} (re-run `infra bench`)"
        raise UserError(problems, source=head)
    return StackConditions(slo=(ttft, tpot), workload=stack_tokens, gpu=stack_gpu)


def _meta_values(points: list[SweepPoint], key: str) -> set[str]:
    return {str(p.metadata[key]).strip() for p in points if key in p.metadata}


def _slos(args) -> tuple[float, float, calibration.StackModel | None]:
    """The p90 SLOs to judge goodput by: the flags, else the stack model's (then loaded and
    returned too, so callers need not load it again)."""
    ttft, tpot, stack_model = args.ttft_p90_ms, args.tpot_p90_ms, None
    # A named stack is always loaded, even when both SLO flags are given: `--stack nosuch` must not
    # pass silently.
    if args.stack and args.model:
        stack_model = calibration.load_stack_model(args.stack, args.model, stacks_dir=args.stacks_dir)
        ttft = ttft if ttft is not None else stack_model.slo[0]
        tpot = tpot if tpot is not None else stack_model.slo[1]
    problems = []
    if ttft is None:
        problems.append(Problem("--ttft-p90-ms", "needed (or --stack and --model whose slo.ttft_p90_ms is set)"))
    if tpot is None:
        problems.append(Problem("--tpot-p90-ms", "needed (or --stack and --model whose slo.tpot_p90_ms is set)"))
    if problems:
        raise UserError(problems)
    return float(ttft), float(tpot), stack_model


_MAX_LISTED = 10


def require_usable_points(comparison: Comparison, points: list[SweepPoint]) -> None:
    """Every result was set aside (invalid values, saturation runs, missing p90s): that is not a
    comparison with no winner but input that measured nothing usable — exit 2 saying why."""
    if any(g.points for g in comparison.layouts):
        return
    skipped = [(p.source, "; ".join(p.skip_reasons())) for p in points if p.skip_reasons()]
    problems = [Problem(source, why) for source, why in skipped[:_MAX_LISTED]]
    if len(skipped) > _MAX_LISTED:
        problems.append(Problem("", f"… and {len(skipped) - _MAX_LISTED} more"))
    head = (
        f"no usable sweep point in RESULTS ({len(points)} result{'s' if len(points) != 1 else ''}, all skipped; "
        "goodput needs numeric request_rate, completed, p90_ttft_ms and p90_tpot_ms — run `vllm bench serve` "
        "at finite --request-rate values with --metric-percentiles 90)"
    )
    raise UserError(problems or [Problem("", "nothing to compare")], source=head)


def _check_models(points: list[SweepPoint], model: str | None) -> None:
    """Results of another model must not decide this model's layout."""
    recorded = {p.metadata["model"] for p in points if "model" in p.metadata}
    if model and recorded - {model}:
        raise UserError(
            [Problem("RESULTS", f"results were measured for model {sorted(recorded)}, not {model!r}")]
        )
    if not model and len(recorded) > 1:
        raise UserError([Problem("RESULTS", f"results mix models {sorted(recorded)}; pass --model or split them")])


def _single_meta(points: list[SweepPoint], key: str) -> str | None:
    values = {p.metadata[key] for p in points if key in p.metadata}
    if len(values) > 1:
        raise UserError([Problem(key, f"the winner's results disagree on {key}: {sorted(values)}")])
    return values.pop() if values else None


def _default_chart_path(results: list[str]) -> Path:
    first = Path(results[0])
    return (first if first.is_dir() else first.parent) / DEFAULT_CHART_NAME


def _display_path(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path
