"""`infra plan STACK`: the offline plan — what the stack contains, costs, and why.

Runs the real Pulumi program under the mock runtime (no credentials), prints a summary for humans,
and optionally writes the deterministic JSON Plan (`--json FILE`) and every Kubernetes object as a
YAML manifest (`--out DIR`, one file per object, ready for `kubectl diff -f DIR`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from infra.offline import Plan, build_plan, kubernetes_objects


def register(subparsers) -> None:
    p = subparsers.add_parser("plan", help="offline plan of a stack (no cloud, no credentials)", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stack", help="stack name: stacks/Pulumi.<stack>.yaml")
    p.add_argument("--json", metavar="FILE", help="write the deterministic JSON plan to FILE ('-' for stdout)")
    p.add_argument("--out", metavar="DIR", help="write every Kubernetes object as YAML into DIR")
    p.add_argument("--quiet", action="store_true", help="do not print the summary")
    p.add_argument("--root", type=Path, default=None, help="repository root holding stacks/ (default: this checkout)")
    p.set_defaults(func=run)


def run(args) -> int:
    plan = build_plan(args.stack, args.root)
    if args.json == "-":
        print(plan.to_json(), end="")
    elif args.json:
        Path(args.json).write_text(plan.to_json())
    if args.out:
        written = write_manifests(plan, Path(args.out))
        if not args.quiet and args.json != "-":
            print(f"wrote {written} manifests to {args.out}")
    if not args.quiet and args.json != "-":
        print(render_summary(plan))
    return 0


def manifest_filename(obj: dict) -> str:
    meta = obj.get("metadata", {})
    ns = meta.get("namespace") or "cluster"
    return f"{ns}--{obj['kind'].lower()}--{meta.get('name', 'unnamed')}.yaml"


def write_manifests(plan: Plan, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.yaml"):
        old.unlink()
    objects = kubernetes_objects(plan)
    for obj in objects:
        (out / manifest_filename(obj)).write_text(yaml.safe_dump(obj, sort_keys=False, default_flow_style=False))
    return len(objects)


def _money(value) -> str:
    return "n/a" if value is None else f"${value:,.2f}"


def render_summary(plan: Plan) -> str:
    s = plan.summary
    lines = [
        f"Stack {plan.stack} — environment {s['environment']}, region {s['region']}, "
        f"Kubernetes {s['kubernetes_version_prefix']}.x, HA control plane: {'yes' if s['ha'] else 'no'}, "
        f"protected: {'yes' if s['protect'] else 'no'}",
        "",
        "GPU pools:",
    ]
    for p in s["pools"]:
        count = f"{p['min_nodes']}–{p['max_nodes']} nodes (autoscaled)" if p["autoscale"] else f"{p['min_nodes']} node(s)"
        price = _money(p["usd_per_node_hour"]) + "/node-h" + (" (from config)" if p["price_source"] == "config" else "")
        if p["price_source"] == "unknown":
            price = "contract price not set"
        lines.append(f"  {p['name']:<16} {p['size']:<38} {p['gpus_per_node']}×{p['gpu']}  {count}  {price}")
    lines += ["", "Models:"]
    for m in plan.models:
        pred = m["predicted"]
        lines.append(
            f"  {m['name']} ({m['source']}) on {m['pool']}: layout {m['layout']['name']} [{m['layout_source']}], "
            f"replicas {_replicas(m['replicas'])}"
        )
        figures = []
        if pred.get("goodput_rps_per_node") is not None:
            figures.append(f"goodput {pred['goodput_rps_per_node']:.2f} req/s/node")
        if pred.get("ttft_p90_ms") is not None:
            figures.append(f"p90 TTFT {pred['ttft_p90_ms']:.0f} ms")
        if pred.get("tpot_p90_ms") is not None:
            figures.append(f"p90 TPOT {pred['tpot_p90_ms']:.1f} ms")
        if pred.get("usd_per_million_output_tokens") is not None:
            figures.append(f"${pred['usd_per_million_output_tokens']:.2f}/M output tokens")
        if pred.get("nodes_needed") is not None:
            figures.append(f"{pred['nodes_needed']} node(s) for peak")
        if figures:
            lines.append("    predicted: " + ", ".join(figures))
        if m.get("reason"):
            lines.append("    why: " + m["reason"])
        if m.get("alternatives"):
            lines.append("    runners-up: " + ", ".join(m["alternatives"]))
    c = plan.cost
    lines += [
        "",
        f"Cost: {_money(c['usd_per_hour_min'])}–{_money(c['usd_per_hour_max'])} per hour, "
        f"{_money(c['usd_per_month_min'])}–{_money(c['usd_per_month_max'])} per month ({c['hours_per_month']} h)",
    ]
    for item in c["items"]:
        lines.append(f"  {item['item']:<22} {_money(item['usd_per_hour_min'])}–{_money(item['usd_per_hour_max'])}/h")
    for missing in c.get("not_included", []):
        lines.append(f"  not included: {missing}")
    if s.get("notes"):
        lines += ["", "Notes:"] + [f"  - {n}" for n in s["notes"]]
    lines += ["", f"Resources ({len(plan.resources)}):"]
    lines += render_tree(plan.resources)
    return "\n".join(lines)


def render_tree(resources: list[dict]) -> list[str]:
    by_parent: dict[str | None, list[dict]] = {}
    for r in resources:
        by_parent.setdefault(r["parent"], []).append(r)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for r in sorted(by_parent.get(parent, []), key=lambda r: (r["type"], r["name"])):
            flags = []
            if r["options"].get("protect"):
                flags.append("protected")
            if r["options"].get("ignoreChanges"):
                flags.append("ignores " + ",".join(r["options"]["ignoreChanges"]))
            suffix = f"  [{'; '.join(flags)}]" if flags else ""
            lines.append(f"  {'  ' * depth}{r['type'].rsplit(':', 1)[-1]} {r['name']}{suffix}")
            walk(f"{r['type'].split('$')[-1]}::{r['name']}", depth + 1)

    roots = [p for p in by_parent if p is None or not any(f"{r['type']}::{r['name']}" == p for r in resources)]
    for root in sorted(roots, key=lambda p: p or ""):
        walk(root, 0)
    return lines


def _replicas(replicas: dict) -> str:
    """`8`; `4–12, autoscaled above 4 queued requests per replica`; or `4 (pool allows 12; ...)`."""
    low, high, auto = replicas["min"], replicas["max"], replicas.get("autoscaling")
    if low == high:
        return f"{low}"
    if auto:
        return f"{low}–{high}, autoscaled above {auto['waiting_per_replica']:g} queued requests per replica"
    return f"{low} (pool allows {high}; replica autoscaling off)"
