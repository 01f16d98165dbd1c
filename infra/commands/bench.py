"""`infra bench <stack> <model>`: render (and with --apply, run) benchmark sweeps per layout.

It always writes the manifests, `sweep.json` and an offline kubectl runner (`run.sh`) into --out,
so it works offline with no credentials. With --apply it runs the sweep through the Kubernetes API
(one layout at a time) and collects the results into --out/results for `infra tune ingest`. Both
runners follow one step list (infra/tuning/sweep_steps.py): run.sh is generated from it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

from infra.cli_args import positive_int
from infra.commands.bench_runner import apply_bundle
from infra.commands.files import check_output_dir, write_failed
from infra.domain import Layout, is_pd_layout_name, parse_layout_name, parse_pd_layout_name
from infra.errors import Problem, UserError
from infra.tuning.bench import (
    MULTI_TURN,
    BenchOptions,
    BenchTarget,
    LayoutSweep,
    default_rates,
    make_sweep,
    render_bench,
)

_TOP = re.compile(r"^top([0-9]+)$")
MAX_TOP = 20
# One node under test: no LLM node serves 10,000 requests per second, and each rate runs at least
# --seconds-per-rate seconds of arrivals, so a typo such as 1e9 would ask for billions of prompts.
MAX_RATE_RPS = 10_000.0
MAX_RATES = 50


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="render in-cluster benchmark sweeps (vllm bench serve) for candidate layouts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("stack", help="stack name (stacks/Pulumi.<stack>.yaml)")
    parser.add_argument("model", help="model name in the stack")
    parser.add_argument(
        "--layouts",
        default="top3",
        help="topN (the planner's N best layouts) or comma-separated layout names, e.g. tp4-ep-r2,tp8-ep-r1",
    )
    parser.add_argument("--rates", help="comma-separated request rates (req/s); default: around each layout's predicted goodput")
    parser.add_argument("--out", type=Path, help="directory for the manifests (default: bench-<stack>-<model>-<run>)")
    parser.add_argument("--run-id", help="names the results directory and labels objects (default: UTC time)")
    parser.add_argument(
        "--dataset", default="random",
        help="random (the workload's lengths, default), multi-turn (the workload's sessions replayed with think times and "
        "growing shared prefixes; needs workload.turns_per_session), or a vLLM dataset name with --dataset-path",
    )
    parser.add_argument("--dataset-path", help="dataset file path inside the cache volume, for --dataset other than random")
    parser.add_argument("--seconds-per-rate", type=positive_int, default=180, help="arrivals per rate last at least this long")
    parser.add_argument("--min-prompts", type=positive_int, default=300, help="at least this many requests per rate")
    parser.add_argument("--apply", action="store_true", help="run the sweep on the cluster (needs the `kubernetes` package)")
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig for --apply (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def run(args) -> int:
    run_id = args.run_id or datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", run_id) or run_id.endswith(("-", ".", "_")):
        raise UserError([Problem("--run-id", f"{run_id!r} must be a Kubernetes label value (letters, digits, -._)")])
    if args.dataset == MULTI_TURN and args.dataset_path:
        raise UserError([Problem("--dataset-path", f"not used with --dataset {MULTI_TURN}: the trace is generated from the workload")])
    if args.dataset not in ("random", MULTI_TURN) and not args.dataset_path:
        raise UserError([Problem("--dataset-path", f"needed with --dataset {args.dataset}")])
    opts = BenchOptions(
        run_id=run_id,
        dataset=args.dataset,
        dataset_path=args.dataset_path,
        seconds_per_rate=args.seconds_per_rate,
        min_prompts=args.min_prompts,
    )
    rates = parse_rates(args.rates)
    parse_top(args.layouts)  # a bad topN is refused before any planning
    if args.apply:
        check_apply_possible(args.kubeconfig)  # before anything is written: a run that cannot start writes nothing
    out = args.out or Path(f"bench-{args.stack}-{args.model}-{run_id}")
    check_output_dir(out, "--out")  # before the planning, which a bad path would waste
    target, planner = stack_target(args.stack, args.model, root=args.root)
    sweeps = choose_sweeps(target, planner, args.layouts, rates, opts)
    bundle = render_bench(target, sweeps, opts)
    try:
        for relative, content in bundle.files().items():
            path = out / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        (out / "run.sh").chmod(0o755)
    except OSError as err:
        raise write_failed(err, "--out", out) from None
    print(f"wrote {len(bundle.files())} files to {out}/ for {args.model} on {args.stack} (run {run_id}):")
    for sweep in sweeps:
        predicted = f", predicted goodput {sweep.predicted_goodput_rps:.2f} req/s per node" if sweep.predicted_goodput_rps else ""
        rates = ",".join(f"{r:g}" for r in sweep.rates_rps)
        print(f"  {sweep.layout.name}: rates {rates} req/s{predicted}")
    if args.apply:
        incomplete = apply_bundle(bundle, out, kubeconfig=args.kubeconfig)
        if incomplete:
            # Like run.sh: the other layouts ran and every point measured was collected, but a
            # sweep that did not finish must not look like a clean run to a script or CI job.
            print(
                f"{len(incomplete)} of {len(bundle.sweeps)} layout sweeps did not complete: "
                + ", ".join(f"{name} ({state})" for name, state in incomplete),
                file=sys.stderr,
            )
            return 1
    else:
        print(f"run it with: {out}/run.sh   (or: infra bench {args.stack} {args.model} --apply)")
    return 0


def parse_rates(text: str | None) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        rates = tuple(float(r) for r in text.split(",") if r.strip())
    except ValueError:
        raise UserError([Problem("--rates", f"{text!r} is not a comma-separated list of numbers")]) from None
    allowed = f"give 1 to {MAX_RATES} rates, each greater than 0 and at most {MAX_RATE_RPS:,.0f} req/s (one node under test)"
    if not rates or len(rates) > MAX_RATES:
        raise UserError([Problem("--rates", f"{len(rates)} rates; {allowed}")])
    bad = [r for r in rates if not (0 < r <= MAX_RATE_RPS)]  # also refuses nan and inf
    if bad:
        raise UserError([Problem("--rates", f"{bad[0]:g} is out of range; {allowed}")])
    if len(set(rates)) != len(rates):
        raise UserError([Problem("--rates", "a rate is listed twice; give each rate once")])
    return rates


def parse_top(text: str) -> int | None:
    """N of `--layouts topN` (1..MAX_TOP), or None for a list of layout names."""
    top = _TOP.match(text.strip())
    if top is None:
        return None
    n = int(top.group(1))
    if not 1 <= n <= MAX_TOP:
        raise UserError([Problem("--layouts", f"{text.strip()!r}: N of topN must be from 1 to {MAX_TOP} (the planner's N best layouts)")])
    return n


def check_apply_possible(kubeconfig: Path | None) -> None:
    """`--apply` needs the kubernetes package and a readable kubeconfig: refuse before writing manifests."""
    try:
        import kubernetes  # noqa: F401
    except ImportError:
        raise UserError(
            "--apply needs the `kubernetes` Python package (pip install 'kubernetes>=31'); or drop --apply and run "
            "the written run.sh with kubectl"
        ) from None
    if kubeconfig is not None:
        where, path = f"--kubeconfig {kubeconfig}", kubeconfig
    elif os.environ.get("KUBECONFIG"):
        first = os.environ["KUBECONFIG"].split(os.pathsep)[0]
        where, path = f"KUBECONFIG {first}", Path(first).expanduser()
    else:
        path = Path("~/.kube/config").expanduser()
        where = f"default kubeconfig {path}"
    fetch = "fetch one with `doctl kubernetes cluster kubeconfig save <cluster>`, or pass --kubeconfig FILE"
    if not path.is_file():
        raise UserError([Problem(where, f"no such file; {fetch}")])
    try:
        path.open("rb").close()
    except OSError as err:
        raise UserError([Problem(where, f"cannot read it: {err.strerror or err}")]) from None


# --- stack → target ------------------------------------------------------------------------------


class _Planner:
    """The planner bound to one model of one stack (None-safe wrapper for tests and callers)."""

    def __init__(self, arch, gpu, workload, slo, usd_per_hour):
        self.arch, self.gpu, self.workload, self.slo, self.usd_per_hour = arch, gpu, workload, slo, usd_per_hour

    def top(self, n: int):
        from infra.planner import plan_model

        plan = plan_model(self.arch, self.gpu, self.workload, self.slo, usd_per_hour=self.usd_per_hour, disaggregation=True)
        return [c for c in plan.candidates if c.fits][:n]

    def for_pd(self, name: str):
        """The planner's prediction for a P/D layout name (decode batch limit tuned)."""
        from infra.planner import plan_model

        plan = plan_model(self.arch, self.gpu, self.workload, self.slo, usd_per_hour=self.usd_per_hour, disaggregation=True)
        return next((c for c in plan.candidates if c.name == name), None)

    def for_shape(self, shape: dict):
        """The planner's best candidate of this tp/ep/dp/replicas shape (batch limits tuned)."""
        from infra.planner import plan_model

        shape = dict(shape)
        nodes = shape.pop("nodes_per_replica", 1)
        if nodes > 1:
            # A sweep runs one engine pod per layout on one node; a replica over nodes is a
            # LeaderWorkerSet the bench does not deploy (docs/serving.md, multi-node replicas).
            raise UserError(f"a replica over {nodes} nodes is not benchmarked by `infra bench` (it sweeps one node per layout)")
        plan = plan_model(self.arch, self.gpu, self.workload, self.slo, usd_per_hour=self.usd_per_hour, **shape)
        return plan.candidates[0] if plan.candidates else None


def stack_target(stack: str, model: str, *, root: Path | None = None) -> tuple[BenchTarget, _Planner]:
    """Map the validated stack config to the benchmark's inputs through the platform's own
    config → model-service mapping, so a bench engine is configured like the production one."""
    import dataclasses

    from infra.config import load_stack_file
    from infra.project import project_root
    from infra.stack_plan import plan_stack

    cfg = load_stack_file(stack, project_root(root))
    if not any(m.name == model for m in cfg.models):
        raise UserError([Problem("model", f"stack {stack} has no model {model!r}; models: {[m.name for m in cfg.models]}")])
    # A model whose SLO no layout is predicted to meet can still be measured: that is how the
    # prediction gets corrected.
    plan = plan_stack(cfg, allow_problems=True)
    entry = plan.model(model)
    service = dataclasses.replace(
        plan.service(model),
        # One node per sweep; bench engines are internal and short-lived: no API key, no HF token.
        nodes_min=1,
        nodes_max=1,
        hf_token_secret=None,
        api_key_secret=None,
    )
    target = BenchTarget(stack, model, service, entry.config.workload.to_workload(), entry.config.slo.to_slo())
    planner = _Planner(entry.arch, entry.pool.gpu, target.workload, target.slo, entry.pool.node_usd_per_hour)
    return target, planner


def choose_sweeps(
    target: BenchTarget, planner: _Planner, layouts: str, rates: tuple[float, ...] | None, opts: BenchOptions
) -> list[LayoutSweep]:
    """`topN` → the planner's N best fitting layouts; names → those shapes with the planner's
    batch limits (or the stack's explicit layout when the name matches it)."""
    chosen: list[tuple[Layout, float | None]] = []
    top = parse_top(layouts)
    if top:
        for cand in planner.top(top):
            chosen.append((cand.layout, cand.goodput_rps_per_node))
        if not chosen:
            raise UserError([Problem("--layouts", "the planner found no layout that fits; name layouts explicitly")])
    else:
        problems = []
        for name in [n.strip() for n in layouts.split(",") if n.strip()]:
            if is_pd_layout_name(name):
                try:
                    parse_pd_layout_name(name)
                except ValueError as err:
                    problems.append(Problem("--layouts", str(err)))
                    continue
                cand = planner.for_pd(name)
                if cand is None or not cand.fits:
                    why = "; ".join(cand.problems) if cand and cand.problems else "the planner has no such P/D layout on this GPU"
                    problems.append(Problem("--layouts", f"{name}: {why}"))
                    continue
                chosen.append((cand.layout, cand.goodput_rps_per_node))
                continue
            try:
                shape = parse_layout_name(name)
            except ValueError as err:
                problems.append(Problem("--layouts", str(err)))
                continue
            if target.service.layout.name == name and target.service.layout != Layout():
                cand = planner.for_shape(shape)
                chosen.append((target.service.layout, cand.goodput_rps_per_node if cand else None))
                continue
            try:
                cand = planner.for_shape(shape)
            except UserError as err:  # no shape of that name fits the node and the model's heads
                problems.append(Problem("--layouts", f"{name}: {err.render()}"))
                continue
            if cand is None or not cand.fits:
                why = "; ".join(cand.problems) if cand and cand.problems else "it does not fit on this GPU"
                problems.append(Problem("--layouts", f"{name}: {why}"))
                continue
            chosen.append((cand.layout, cand.goodput_rps_per_node))
        if problems:
            raise UserError(problems)
    if len({layout.name for layout, _ in chosen}) != len(chosen):
        raise UserError([Problem("--layouts", "a layout is listed twice")])
    return [make_sweep(layout, rates or default_rates(predicted), opts, predicted) for layout, predicted in chosen]
