"""`infra tune calibrate --prometheus URL --stack S [--model M] [--since 7d] [--write]`.

Reads the measured-vs-predicted series (infra/render/planner_rules.py) of the stack's models from
the cluster's Prometheus, keeps the steady windows (infra/tuning/telemetry.py), re-fits the GPU
family's factors on them (infra/tuning/telemetry_fit.py), reports the error before and after, and
with `--write` stores them in stacks/factors.<stack>.json, which `infra plan S` then uses.
Any bad answer from Prometheus is one line and exit 2, and nothing is written.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from infra.commands import tables
from infra.durations import duration_seconds
from infra.errors import Problem, UserError
from infra.render.model_service import ENGINES_NAMESPACE
from infra.stack_factors import (
    MeasuredModel,
    StackFactors,
    factors_path,
    load_stack_factors,
    save_stack_factors,
)
from infra.tuning.prometheus import PrometheusClient, PrometheusError, check_url
from infra.tuning.telemetry import WINDOW_S, Observation, fetch_series, iso, observations
from infra.tuning.telemetry_fit import FamilyFit, ModelSubject, fit_family_from_windows

DEFAULT_SINCE = "7d"
DEFAULT_STEP = "1m"


def add_arguments(parser) -> None:
    group = parser.add_argument_group("from live telemetry (instead of RESULTS)")
    group.add_argument("--prometheus", metavar="URL", help="the cluster's Prometheus (e.g. a port-forward: http://localhost:9090)")
    group.add_argument("--since", default=DEFAULT_SINCE, help="how far back to look for steady windows (default: %(default)s)")
    group.add_argument("--step", default=DEFAULT_STEP, help="query resolution (default: %(default)s)")
    group.add_argument("--window", default=f"{WINDOW_S // 60}m", help="length of one steady window (default: %(default)s)")
    group.add_argument(
        "--write", action="store_true", help="store the re-fitted factors in stacks/factors.<stack>.json (used by `infra plan`)"
    )


def _now() -> float:
    return time.time()


def _seconds(flag: str, text: str) -> int:
    try:
        return int(duration_seconds(text))
    except ValueError as err:
        raise UserError([Problem(flag, str(err))]) from None


def _check_args(args) -> tuple[int, int, int]:
    problems = []
    if args.results:
        problems.append(Problem("RESULTS", "give either benchmark RESULTS or --prometheus, not both"))
    if not args.stack:
        problems.append(Problem("--stack", "needed with --prometheus: the models, layouts and factors file are the stack's"))
    for flag in ("--save", "--efficiency-file"):
        if getattr(args, flag.lstrip("-").replace("-", "_")):
            problems.append(Problem(flag, "not with --prometheus: telemetry factors go to the stack's own file (--write)"))
    if problems:
        raise UserError(problems)
    check_url(args.prometheus)
    since, step, window = _seconds("--since", args.since), _seconds("--step", args.step), _seconds("--window", args.window)
    if window < 2 * step or window % step:
        raise UserError([Problem("--window", f"{args.window} must be a multiple of --step {args.step} and at least two steps")])
    if since < window:
        raise UserError([Problem("--since", f"{args.since} is shorter than one window ({args.window})")])
    return since, step, window


def _subjects(plan, names: list[str]) -> dict[str, ModelSubject]:
    """The models to calibrate from. A model in a layout rollout (`models[].rollout`) is left out:
    its series mix the current and the candidate layout, and a fit would blame one for the other."""
    out = {}
    for m in plan.models:
        if m.config.name not in names or not m.plan.chosen.fits:
            continue
        if getattr(m, "rollout", None) is not None:
            print(f"model {m.config.name}: left out, a layout rollout is in progress (its series mix two layouts)", file=sys.stderr)
            continue
        out[m.config.name] = ModelSubject(m.config.name, m.arch, m.pool.gpu, m.layout)
    if not out:
        raise UserError([Problem("--model" if len(names) == 1 else "--stack", "no model to calibrate: none fits, or each is in a layout rollout")])
    return out


def run_calibrate_prometheus(args) -> int:
    since, step, window = _check_args(args)
    from infra.config import load_stack_file
    from infra.planner import load_efficiency
    from infra.project import project_root
    from infra.stack_plan import plan_stack

    root = args.stacks_dir.parent if args.stacks_dir is not None else project_root()
    cfg = load_stack_file(args.stack, root)
    names = [m.name for m in cfg.models]
    if args.model and args.model not in names:
        raise UserError([Problem("--model", f"stack {args.stack} has no model {args.model!r}; models: {names}")])
    plan = plan_stack(cfg)
    subjects = _subjects(plan, [args.model] if args.model else names)
    previous = load_stack_factors(root, args.stack)
    client = PrometheusClient(args.prometheus)
    end = float(int(_now()) // step * step)
    start = end - since

    found: list[Observation] = []
    verdicts: dict[str, list] = {}
    empty: list[str] = []
    for name, subject in subjects.items():
        series = fetch_series(client, name, start - window, end, step)
        if not any(series[k] for k in ("served_rps_per_node", "output_tokens_per_s_per_node")):
            empty.append(name)
            continue
        obs, verdicts[name] = observations(series, name, subject.layout.name, start, end, step, window)
        found += obs
    if len(empty) == len(subjects):
        raise PrometheusError(
            f"Prometheus at {client.base_url} has no planner series for {', '.join(empty)} over the last {args.since} "
            "(model:planner_measured_*: are the stack's rules deployed and the engines scraped?); nothing written"
        )
    stored = [Observation.from_json(o) for o in (previous.observations if previous else ())]
    seen = {o.key for o in stored}
    new = [o for o in found if o.key not in seen]
    current = {name: s.layout.name for name, s in subjects.items()}
    usable = [o for o in stored if current.get(o.model) == o.layout]
    set_aside = [o for o in stored if o.model in current and current[o.model] != o.layout]

    if not new:
        if previous is None:
            raise UserError(
                [Problem(name, _why_not_steady(v)) for name, v in verdicts.items()] or [Problem("--prometheus", "no window")],
                source=f"no steady window over the last {args.since} to fit to; nothing written",
            )
        print(f"no new steady window since the last run ({len(stored)} stored); factors unchanged: {previous.path}")
        return 0

    catalog = load_efficiency()
    fits: list[FamilyFit] = []
    # A family none of the stack's pools is any more (the pool's size changed) is dropped: `infra plan`
    # refuses a factors file whose factors would apply to no model.
    in_use = {p.gpu.accelerator.family for p in cfg.gpu_pools}
    families = {f: v for f, v in (previous.families.items() if previous else ()) if f in in_use}
    for family in sorted({subjects[o.model].family for o in new}):
        mine_new = [o for o in new if subjects[o.model].family == family]
        mine_stored = [o for o in usable if o.model in subjects and subjects[o.model].family == family]
        # From the previous run's factors, else the catalog's cell of the models' class (family-wide
        # when the family serves both dense and MoE models): with_family then replaces the cells.
        classes = {subjects[o.model].arch.is_moe for o in mine_new}
        base = families.get(family) or catalog.for_family(family, moe=classes.pop() if len(classes) == 1 else None)
        fit = fit_family_from_windows(subjects, family, catalog, base, mine_stored, mine_new)
        fits.append(fit)
        families[family] = fit.after

    all_obs = stored + new
    result = StackFactors(
        stack=args.stack,
        families=families,
        engines={f: "vllm" for f in families},
        provenance=_provenance(args, client, plan, all_obs, previous),
        observations=tuple(o.to_json() for o in sorted(all_obs, key=lambda o: (o.model, o.start))),
        measured=_measured(all_obs),
        comments=previous.comments if previous else {},  # the file's top-level `_` comments stay
    )
    written = _write(root, args.stack, result, cfg) if args.write else None
    if args.json:
        print(json.dumps(_report_json(fits, verdicts, set_aside, written), indent=2))
    else:
        print(format_report(fits, verdicts, set_aside))
        if written:
            print(f"\nwrote {written}: `infra plan {args.stack}` now uses these factors")
        else:
            print("\n(report only: --write stores the factors for the stack)")
    return 0


def _why_not_steady(verdicts: list) -> str:
    reasons: dict[str, int] = {}
    for v in verdicts:
        key = v.reason.split(":")[0]
        reasons[key] = reasons.get(key, 0) + 1
    return f"{len(verdicts)} window(s), none steady: " + ", ".join(f"{n}× {r}" for r, n in sorted(reasons.items()))


def _provenance(args, client: PrometheusClient, plan, all_obs: list[Observation], previous: StackFactors | None) -> dict:
    images = _images(client, max(o.end for o in all_obs))
    if not images:
        images = sorted({s.resolved_image for s in plan.services}) + ["(from the stack plan: no kube_pod_container_info)"]
    return {
        "prometheus": client.base_url,
        "cluster": plan.cluster.name,
        "window": {"from": iso(min(o.start for o in all_obs)), "to": iso(max(o.end for o in all_obs))},
        "images": images,
        "fitted_at": iso(max(o.end for o in all_obs)),  # the data's time, not the wall clock's: reruns agree
        "runs": int(previous.provenance.get("runs", 0) if previous else 0) + 1,
    }


def _images(client: PrometheusClient, at: float) -> list[str]:
    """The vLLM containers' images kube-state-metrics saw (none without kube-state-metrics)."""
    result = client.query(f'group by (image) (kube_pod_container_info{{namespace="{ENGINES_NAMESPACE}", container="vllm"}})', at)
    return sorted({s.labels["image"] for s in result if "image" in s.labels})


def _measured(all_obs: list[Observation]) -> dict[str, MeasuredModel]:
    """Per model: the busiest steady window with both p90s within the SLO; else the busiest at all."""
    out = {}
    for model in sorted({o.model for o in all_obs}):
        mine = [o for o in all_obs if o.model == model]
        within = [o for o in mine if o.within_slo]
        best = max(within or mine, key=lambda o: (o.served_rps_per_node, o.start))
        out[model] = MeasuredModel(best.served_rps_per_node, best.within_slo, iso(best.start), iso(best.end), len(mine))
    return out


def _write(root: Path, stack: str, result: StackFactors, cfg) -> Path:
    """Write the file, then plan the stack with it; a plan that fails restores the old file."""
    from infra.stack_plan import plan_stack

    path = factors_path(root, stack)
    old = path.read_bytes() if path.exists() else None
    save_stack_factors(path, result)
    try:
        plan_stack(cfg)
    except UserError as err:
        if old is None:
            path.unlink()
        else:
            path.write_bytes(old)
        raise UserError(err.problems, source="--write refused, nothing written: the stack does not plan with the fitted factors") from None
    return path


def _cell(predicted: float | None, measured: float) -> str:
    if predicted is None:
        return "-"
    return f"{predicted:.1f} ({(predicted - measured) / measured * 100:+.0f}%)"


def format_report(fits: list[FamilyFit], verdicts: dict[str, list], set_aside: list[Observation], *, terminal: bool | None = None) -> str:
    lines = []
    for name, vs in verdicts.items():
        steady = sum(v.steady for v in vs)
        lines.append(f"model {name}: {steady} steady window(s) of {len(vs)}" + (f" ({_why_not_steady([v for v in vs if not v.steady]).split(': ', 1)[1]})" if steady < len(vs) else ""))
    for fit in fits:
        lines += ["", f"GPU family {fit.family}: output tokens/s per node, measured vs predicted at the measured load"]
        header = ("model", "window", tables.right("in flight/node"), tables.right("measured"), tables.right("before"), tables.right("after"), tables.right("held out"))
        rows = [
            (
                e.observation.model + ("" if e.new else " (stored)"),
                iso(e.observation.start),
                f"{e.observation.in_flight_per_node:.1f}",
                f"{e.observation.output_tokens_per_s_per_node:.1f}",
                _cell(e.before, e.observation.output_tokens_per_s_per_node),
                _cell(e.after, e.observation.output_tokens_per_s_per_node),
                _cell(e.held_out, e.observation.output_tokens_per_s_per_node),
            )
            for e in fit.errors
        ]
        lines.append(tables.render(header, rows, terminal=terminal))
        held = fit.mape("held_out")
        lines.append(
            f"mean absolute error: {fit.mape('before'):.1f}% before, {fit.mape('after'):.1f}% after"
            + (f", {held:.1f}% on new windows held out (leave-one-window-out)" if held is not None else " (3+ windows for a held-out figure)")
        )
        changed = fit.changed()
        if changed:
            lines.append("factors:")
            lines += [f"  {k}: {b:.4g} -> {a:.4g}" + (" (bounded this run)" if k in fit.bounded else "") for k, (b, a) in changed.items()]
    if set_aside:
        lines.append(f"stored windows of another layout, kept in the file but not fitted: {len(set_aside)}")
    return "\n".join(lines)


def _report_json(fits: list[FamilyFit], verdicts: dict[str, list], set_aside: list[Observation], written: Path | None) -> dict:
    return {
        "windows": {name: {"total": len(vs), "steady": sum(v.steady for v in vs), "rejected": [
            {"from": iso(v.start), "reason": v.reason} for v in vs if not v.steady]} for name, vs in verdicts.items()},
        "families": [
            {
                "family": fit.family,
                "mean_abs_error_pct": {k: _r(fit.mape(k)) for k in ("before", "after", "held_out")},
                "observations": [
                    {**e.observation.to_json(), "new": e.new, "predicted_before": _r(e.before), "predicted_after": _r(e.after),
                     "predicted_held_out": _r(e.held_out)}
                    for e in fit.errors
                ],
                "factors": {k: {"before": round(b, 6), "after": round(a, 6)} for k, (b, a) in fit.changed().items()},
                "bounded": list(fit.bounded),
            }
            for fit in fits
        ],
        "set_aside": len(set_aside),
        "written": str(written) if written else None,
    }


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
