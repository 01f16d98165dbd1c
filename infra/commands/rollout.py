"""`infra rollout status|promote|abort STACK MODEL`: move a layout rollout by its SLO gate.

  status    reads both variants' SLO series from Prometheus (the rollout recording rules) and says
            promote / hold / roll back, with the numbers; exit 0 for promote, 3 for hold, 4 for
            roll back, so a pipeline can act on it.
  promote   rewrites the stack file: the candidate's weight moves to the next step, or, from the
            last step, the candidate becomes the model's layout and the rollout block goes.
  abort     rewrites the stack file: the rollout block goes (the candidate's engines and extra
            nodes leave with the next `pulumi up`).

Edits are validated like `infra tune ingest --write`: the new text must load and plan, or nothing
is written. `pulumi up` then moves the engines and the split.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from infra.errors import Problem, UserError
from infra.rollout import gate
from infra.rollout.stackfile import ABORT, PROMOTE, edit_rollout

EXIT_BY_VERDICT = {gate.PROMOTE: 0, gate.HOLD: 3, gate.ROLL_BACK: 4}


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "rollout",
        help="a model's layout rollout: SLO gate status, promote to the next step, abort",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="rollout_action", metavar="ACTION")
    actions.required = True
    status = actions.add_parser("status", help="promote / hold / roll back from the variants' SLO series")
    _common(status)
    status.add_argument(
        "--prometheus", metavar="URL",
        help="Prometheus base URL (default: the stack's in-cluster Prometheus; from outside, "
        "`kubectl -n monitoring port-forward svc/kps-kube-prometheus-st-prometheus 9090` and http://localhost:9090)",
    )
    status.add_argument("--min-requests", type=int, default=gate.MIN_CANDIDATE_REQUESTS,
                        help=f"candidate requests in the last hour the gate needs (default {gate.MIN_CANDIDATE_REQUESTS})")
    status.add_argument("--json", action="store_true", help="print the decision as JSON")
    status.set_defaults(func=run_status)
    for action, text in ((PROMOTE, "advance the candidate's weight to the next step, or make it the layout"),
                         (ABORT, "remove the candidate (its engines and extra nodes go with the next `pulumi up`)")):
        sub = actions.add_parser(action, help=text)
        _common(sub)
        sub.set_defaults(func=run_edit, action=action)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", metavar="STACK", help="stack name (stacks/Pulumi.<STACK>.yaml)")
    parser.add_argument("model", metavar="MODEL", help="the model's name in the stack file")
    parser.add_argument("--root", type=Path, default=None, help="project root (default: the project around the current directory)")


def _plan_and_model(stack: str, model: str, root: Path | None):
    from infra.config import load_stack_file
    from infra.project import project_root
    from infra.stack_plan import plan_stack

    cfg = load_stack_file(stack, project_root(root))
    names = [m.name for m in cfg.models]
    if model not in names:
        raise UserError([Problem("MODEL", f"stack {stack} has no model {model!r}; models: {names}")])
    plan = plan_stack(cfg)
    facts = plan.model(model)
    if facts.rollout is None:
        raise UserError([Problem(f"models[{model}].rollout", f"model {model!r} of stack {stack} has no rollout")])
    return plan, facts


def run_status(args) -> int:
    from infra.render.observability import prometheus_url
    from infra.rollout.prometheus import variant_numbers

    plan, facts = _plan_and_model(args.stack, args.model, args.root)
    url = args.prometheus or prometheus_url()
    numbers = variant_numbers(url, args.model)
    slo = facts.config.slo
    decision = gate.decide(
        numbers["current"], numbers["candidate"], ttft_limit_s=slo.ttft_p90_ms / 1000, tpot_limit_s=slo.tpot_p90_ms / 1000,
        min_requests=args.min_requests,
    )
    report = status_report(args.model, facts, decision)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(format_status(report))
    return EXIT_BY_VERDICT[decision.verdict]


def status_report(model: str, facts, decision: gate.GateDecision) -> dict:
    r = facts.rollout
    cur, cand = decision.current, decision.candidate
    share = None
    if cur.requests_per_s is not None and cand.requests_per_s is not None and cur.requests_per_s + cand.requests_per_s > 0:
        share = round(100 * cand.requests_per_s / (cur.requests_per_s + cand.requests_per_s), 1)
    return {
        "model": model,
        "verdict": decision.verdict,
        "reasons": list(decision.reasons),
        "weight_percent": r.config.weight,
        "realised_percent": round(r.split.realised_percent, 1),
        "measured_candidate_share_percent": share,
        "next_step": r.next_step,
        "variants": {
            "current": {"layout": facts.layout.name, **_numbers(cur)},
            "candidate": {"layout": r.candidate_layout.name, **_numbers(cand)},
        },
        "slo": {"ttft_p90_ms": decision.ttft_limit_s * 1000, "tpot_p90_ms": decision.tpot_limit_s * 1000},
    }


def _numbers(v: gate.VariantNumbers) -> dict:
    return {k: (None if val is None else round(val, 4)) for k, val in vars(v).items()}


def format_status(report: dict) -> str:
    lines = [
        f"{report['model']}: {report['verdict'].upper()}",
        f"  weight {report['weight_percent']} % (realised {report['realised_percent']:g} % of engines), measured candidate share "
        + ("n/a" if report["measured_candidate_share_percent"] is None else f"{report['measured_candidate_share_percent']:g} %"),
    ]
    header = f"  {'variant':<10} {'layout':<14} {'p90 TTFT':>9} {'p90 TPOT':>9} {'unserved':>9} {'burn 5m':>8} {'burn 1h':>8} {'goodput/GPU':>12} {'req 1h':>8}"
    lines.append(header)
    for name in ("current", "candidate"):
        v = report["variants"][name]
        lines.append(
            f"  {name:<10} {v['layout']:<14} {_ms(v['ttft_p90_s']):>9} {_ms(v['tpot_p90_s']):>9} {_pct(v['error_ratio']):>9} "
            f"{_x(v['burn_short']):>8} {_x(v['burn_long']):>8} {_f(v['goodput_rps_per_gpu']):>12} {_f(v['requests_long'], 0):>8}"
        )
    lines += [f"  - {reason}" for reason in report["reasons"]]
    nxt = report["next_step"]
    if report["verdict"] == gate.PROMOTE:
        lines.append(f"  next: infra rollout promote STACK {report['model']}  → " + (f"{nxt} %" if nxt else "the candidate becomes the layout"))
    elif report["verdict"] == gate.ROLL_BACK:
        lines.append(f"  next: infra rollout abort STACK {report['model']}")
    return "\n".join(lines)


def _ms(v):
    return "n/a" if v is None else f"{v * 1000:.0f} ms"


def _pct(v):
    return "n/a" if v is None else f"{v:.1%}"


def _x(v):
    return "n/a" if v is None else f"{v:.2f}×"


def _f(v, digits: int = 3):
    return "n/a" if v is None else f"{v:.{digits}f}"


def run_edit(args) -> int:
    from infra.config import load_config, parse_stack_text
    from infra.project import project_root
    from infra.stack_plan import plan_stack
    from infra.tuning.stackfile import stack_file_path

    root = project_root(args.root)
    path = stack_file_path(args.stack, root / "stacks")

    def check(text: str) -> None:
        try:
            values, secret_keys = parse_stack_text(text, path.name)
            plan_stack(load_config(values, stack=args.stack, secret_keys=secret_keys, base_dir=root))
        except UserError as err:
            raise UserError(err.problems, source=f"rollout {args.action} refused, nothing written: the result does not validate in {path.name}") from None

    edit = edit_rollout(path, args.model, args.action, validate=check)
    print(edit.summary())
    if edit.removed:
        print("  the next `pulumi up` removes: " + "; ".join(edit.removed))
    return 0
