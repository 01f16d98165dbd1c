"""`infra plan STACK`: the offline plan — what the stack contains, costs, and why.

Runs the real Pulumi program under the mock runtime (no credentials), prints a summary for humans,
and optionally writes the deterministic JSON Plan (`--json FILE`) and every Kubernetes object as a
YAML manifest (`--out DIR`, one file per object, ready for `kubectl diff -f DIR`).

`--out DIR` must be new, empty, or a directory an earlier `infra plan --out` wrote: the files it
wrote are listed in DIR/.infra-manifests, and only those are replaced on the next run. Anything
else in DIR is left alone.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import yaml

from infra.catalog.doks import is_exact_version
from infra.commands.files import check_output_dir, check_output_file, write_failed
from infra.errors import Problem, UserError
from infra.front_door import FrontDoor
from infra.offline import Plan, build_plan, kubernetes_objects, money

# Lists the files `infra plan --out` wrote into a directory; nothing else there is ever removed.
MARKER = ".infra-manifests"
_MARKER_HEADER = "# written by `infra plan --out`; the next run into this directory removes exactly these files\n"
_MANIFEST_NAME = re.compile(r"^[^/\\]+\.yaml$")


def register(subparsers) -> None:
    p = subparsers.add_parser("plan", help="offline plan of a stack (no cloud, no credentials)", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stack", help="stack name: stacks/Pulumi.<stack>.yaml")
    p.add_argument("--json", metavar="FILE", help="write the deterministic JSON plan to FILE ('-' for stdout)")
    p.add_argument("--out", metavar="DIR", help="write every Kubernetes object as YAML into DIR")
    p.add_argument("--quiet", action="store_true", help="do not print the summary")
    p.add_argument("--root", type=Path, default=None, help="project root holding Pulumi.yaml and stacks/ (default: the project around the current directory)")
    p.set_defaults(func=run)


def run(args) -> int:
    # Every output is checked before the plan runs: a bad path should not cost a whole plan.
    if args.json and args.json != "-":
        check_output_file(Path(args.json), "--json")
    if args.out:
        previous_manifests(Path(args.out))
    plan = build_plan(args.stack, args.root)
    if args.json == "-":
        print(plan.to_json(), end="")
    elif args.json:
        try:
            Path(args.json).write_text(plan.to_json())
        except OSError as err:
            raise write_failed(err, "--json", args.json) from None
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


def previous_manifests(out: Path) -> set[str]:
    """The files an earlier `--out` run left in `out`, which this run may replace.

    A directory without the marker may hold anything (`--out .` is the project root, `--out
    stacks` the stack files), so it is only used when it is empty: guessing which YAML files are
    ours once deleted Pulumi.yaml.
    """
    check_output_dir(out, "--out")
    if not out.exists():
        return set()
    marker = out / MARKER
    if not marker.is_file():
        if any(out.iterdir()):
            raise UserError([Problem(
                f"--out {out}",
                f"directory is not empty and has no {MARKER} from an earlier `infra plan --out`; "
                "pick an empty or new directory",
            )])
        return set()
    lines = marker.read_text().splitlines()  # unreadable: main reports the OSError in one line
    # Only plain *.yaml names: a hand-edited marker must not reach outside the directory.
    return {line.strip() for line in lines if _MANIFEST_NAME.match(line.strip())}


def write_manifests(plan: Plan, out: Path) -> int:
    previous = previous_manifests(out)
    objects = kubernetes_objects(plan)
    files = {manifest_filename(obj): obj for obj in objects}
    if len(files) != len(objects):  # never drop an object: the identity invariant should have refused the plan
        names = [manifest_filename(obj) for obj in objects]
        twice = sorted({n for n in names if names.count(n) > 1})
        raise RuntimeError(f"--out would write several objects to one file: {twice}")
    clobbered = sorted(name for name in files if name not in previous and (out / name).exists())
    if clobbered:
        raise UserError([Problem(
            f"--out {out}",
            f"{clobbered[0]} is already there and was not written by `infra plan`; pick an empty or new directory",
        )])
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name in sorted(previous):
            (out / name).unlink(missing_ok=True)
        # The marker goes first, so an interrupted run still leaves every file it wrote listed.
        (out / MARKER).write_text(_MARKER_HEADER + "".join(f"{name}\n" for name in sorted(files)))
        for name, obj in files.items():
            (out / name).write_text(yaml.safe_dump(obj, sort_keys=False, default_flow_style=False))
    except OSError as err:
        raise write_failed(err, "--out", out) from None
    return len(files)


def _version_label(version: str) -> str:
    """`1.33` → `1.33.x`; an exact DOKS slug (`1.33.1-do.5`) as given."""
    return version if is_exact_version(version) else f"{version}.x"


def render_summary(plan: Plan, *, terminal: bool | None = None) -> str:
    from infra.commands import tables  # rich: only a printed summary needs it, not `--quiet` or `--json -`

    s = plan.summary
    existing = s.get("existing_cluster")
    if existing is not None:
        context = f"context {existing['context']}" if existing["context"] else "its current-context"
        cluster = f"existing cluster (the `kubeconfig` secret, {context}; no VPC, cluster or node pool created)"
    else:
        cluster = (f"Kubernetes {_version_label(s['kubernetes_version_prefix'])}, HA control plane: {'yes' if s['ha'] else 'no'}, "
                   f"protected: {'yes' if s['protect'] else 'no'}")
    lines = [f"Stack {plan.stack} — environment {s['environment']}, region {s['region']}, {cluster}", ""]
    pools = []
    for p in s["pools"]:
        count = f"{p['min_nodes']}–{p['max_nodes']} (autoscaled)" if p["autoscale"] else f"{p['min_nodes']}"
        if p.get("rollout_nodes"):
            count += f" + {p['rollout_nodes']} for rollouts"
        price = money(p["usd_per_node_hour"]) + "/node-h" + (" (from config)" if p["price_source"] == "config" else "")
        if p["price_source"] == "unknown":
            price = "contract price not set"
        pools.append((p["name"], p["size"], f"{p['gpus_per_node']}×{p['gpu']}", count, price))
    lines += ["GPU pools:", tables.render(("pool", "size", "GPUs per node", "nodes", "price"), pools, terminal=terminal)]
    if plan.front_door:
        lines += ["", "Front door:"] + FrontDoor(**{**plan.front_door, "urls": tuple(plan.front_door["urls"]),
                                                     "models": tuple(plan.front_door["models"])}).lines()
    lines += ["", "Models:"]
    for m in plan.models:
        pred = m["predicted"]
        lines.append(
            f"  {m['name']} ({m['source']}) on {m['pool']}: layout {m['layout']['name']} [{m['layout_source']}], "
            f"replicas {_replicas(m['replicas'])}"
        )
        figures = []
        measured = m.get("measured")
        if pred.get("goodput_rps_per_node") is not None:
            figures.append(_goodput_words(pred, plan.stack, m["name"], measured=bool(measured)))
        if pred.get("ttft_p90_ms") is not None:
            figures.append(f"p90 TTFT {pred['ttft_p90_ms']:.0f} ms")
        if pred.get("tpot_p90_ms") is not None:
            figures.append(f"p90 TPOT {pred['tpot_p90_ms']:.1f} ms")
        if pred.get("usd_per_million_output_tokens") is not None:
            figures.append(f"${pred['usd_per_million_output_tokens']:.2f}/M output tokens")
        if pred.get("nodes_needed") is not None and not measured:
            figures.append(f"{pred['nodes_needed']} node(s) for peak")
        if figures:
            lines.append("    predicted: " + ", ".join(figures))
        if measured:
            lines.append("    measured: " + _measured_line(measured, pred))
        if m.get("time_to_ready"):
            lines.append("    cold start: " + _cold_start_line(m))
        if m.get("prefix_cache"):
            lines.append("    prefix cache: " + _prefix_cache_line(m["prefix_cache"]))
        if m.get("reason"):
            lines.append("    why: " + m["reason"])
        if m.get("alternatives"):
            lines.append("    runners-up: " + ", ".join(m["alternatives"]))
        if m.get("rollout"):
            lines += rollout_lines(m)
    c = plan.cost
    lines += [
        "",
        f"Cost: {money(c['usd_per_hour_min'])}–{money(c['usd_per_hour_max'])} per hour, "
        f"{money(c['usd_per_month_min'])}–{money(c['usd_per_month_max'])} per month ({c['hours_per_month']} h)",
    ]
    items = [
        (i["item"], money(i["usd_per_hour_min"]), money(i["usd_per_hour_max"]), i.get("price", ""))
        for i in c["items"]
    ]
    lines.append(
        tables.render(("item", tables.right("min $/h"), tables.right("max $/h"), "price"), items, terminal=terminal)
    )
    for missing in c.get("not_included", []):
        lines.append(f"  not included: {missing}")
    if s.get("notes"):
        lines += ["", "Notes:"] + [f"  - {n}" for n in s["notes"]]
    lines += ["", f"Resources ({len(plan.resources)}):"]
    lines += render_tree(plan.resources)
    lines += chart_lines(plan.charts)
    return "\n".join(lines)


def chart_lines(charts: list[dict]) -> list[str]:
    """One line per templated Helm release: its objects by kind, hooks and CRDs counted apart."""
    lines = []
    for entry in charts:
        if not entry.get("templated"):
            continue
        counts: dict[str, int] = {}
        for part in entry["parts"]:
            label = part["object"]["kind"] if part["part"] == "template" else f"{part['part']} {part['object']['kind']}"
            counts[label] = counts.get(label, 0) + 1
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        if not lines:
            lines += ["", "Helm releases, templated offline:"]
        lines.append(f"  {entry['release']} ({entry['chart']} {entry['version']}, {len(entry['parts'])} objects): {kinds}")
    return lines


def rollout_lines(m: dict) -> list[str]:
    """A model's rollout in the summary: both variants, the split, the cost and what promote removes."""
    r = m["rollout"]
    cand = r["candidate"]
    pred = cand["predicted"]
    after = (
        f"`infra rollout promote` → {r['next_step']} %"
        if r["next_step"] is not None
        else f"`infra rollout promote` → {cand['layout']['name']} becomes the layout; removes {', '.join(r['promote_removes'])}"
    )
    cost = "" if r["usd_per_hour_extra"] is None else f" ({money(r['usd_per_hour_extra'])}/h)"
    figures = [f"{pred['goodput_rps_per_node']:.2f} req/s per node"]
    if pred.get("ttft_p90_ms") is not None:
        figures.append(f"p90 TTFT {pred['ttft_p90_ms']:.0f} ms, TPOT {pred['tpot_p90_ms']:.1f} ms")
    return [
        f"    rollout: current {m['layout']['name']} ×{r['current_replicas']} | candidate {cand['layout']['name']} "
        f"×{cand['replicas']} at {r['weight_percent']} % of requests (realised {r['realised_percent']:g} %: "
        f"{r['split_by']}), steps {r['steps']}",
        f"    running both: +{r['extra_nodes']} node(s){cost}; candidate predicted " + ", ".join(figures),
        f"    next: {after}; `infra rollout abort` removes {', '.join(r['abort_removes'])}",
    ]


def _goodput_words(pred: dict, stack: str, model: str, *, measured: bool) -> str:
    """`goodput 19.42 req/s/node (10.80–24.43), sized on 10.80 until measured — `infra bench prod
    qwen3-235b``: the prediction, the band its GPU family and model class earned on sources the fit
    never saw (leave-one-source-out), and what sizes the pool (issue 13)."""
    text = f"goodput {pred['goodput_rps_per_node']:.2f} req/s/node"
    band = pred.get("goodput_band_rps_per_node")
    if not band or band[0] is None:
        return text
    low, high = band
    text += f" ({low:.2f}–{high:.2f})"
    if not measured and pred["goodput_rps_per_node"] > 0:
        text += f", sized on {low:.2f} until measured — `infra bench {stack} {model}`"
    return text


def _measured_line(measured: dict, pred: dict) -> str:
    """`5.09 req/s/node (bench 2026-12-02, vLLM 0.33.0); planner predicted 15.49; 3 node(s) for peak`:
    the measurement sizes the pool, the prediction stays next to it so a gap is visible."""
    when = f"bench {measured['measured_at'][:10]}" if measured.get("measured_at") else "bench date not recorded"
    if measured.get("vllm_version"):
        when += f", vLLM {measured['vllm_version']}"
    text = f"{measured['goodput_rps_per_node']:.2f} req/s/node ({when})"
    if pred.get("goodput_rps_per_node") is not None:
        text += f"; planner predicted {pred['goodput_rps_per_node']:.2f}"
    if measured.get("nodes_needed") is not None:
        text += f"; {measured['nodes_needed']} node(s) for peak"
    return text


def _prefix_cache_line(pc: dict) -> str:
    """`without offload 39 % of prompt tokens from cache, 8.71 req/s/node; with a 776 GiB cpu tier
    50 % (15 % reloaded, 3 ms a turn), 10.40 req/s/node — tier on (kv_offload auto: ...)` (issue 26)."""
    def arm(entry: dict) -> str:
        hit = entry["hit_rate"]
        text = f"{hit['total']:.0%} of prompt tokens from cache"
        if hit["offload"]:
            text += f" ({hit['offload']:.0%} reloaded from host memory, {hit['reload_ms']:.0f} ms a turn)"
        return f"{text}, {entry['goodput_rps_per_node']:.2f} req/s/node on {entry['layout']}"

    text = "without offload " + arm(pc["without_offload"])
    w = pc.get("with_offload")
    if w:
        per = "per pod (one LMCache server its engines share)" if w["kv_offload"]["kind"] == "lmcache" else "per engine"
        text += f"; with a {w['kv_offload']['size_gib']:g} GiB {w['kv_offload']['kind']} tier {per} " + arm(w)
    return f"{text} — tier {'on' if pc['enabled'] else 'off'}"


def _cold_start_line(model: dict) -> str:
    """`a new replica serves after ~9 min from the Spaces bucket (...); ...; scale-up: 1 replica per
    5 min after a 210 s window`: the time-to-ready and the autoscaling it sizes (issue 20)."""
    text = model["time_to_ready"]["summary"]
    auto = (model.get("replicas") or {}).get("autoscaling") or {}
    up = auto.get("scale_up")
    if up:
        text += (
            f"; scale-up: {up['pods_per_period']} replica(s) per {up['period_seconds'] // 60} min after a "
            f"{up['stabilization_window_seconds']} s window"
        )
        if not up["arrives_within_budget"]:
            text += " (a new replica arrives after the 1 h SLO page window: raise min_nodes to absorb bursts)"
    return text


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
    """`8`; `4–12, autoscaled above 117 requests in flight (from the plan) or 4 queued per replica`;
    or `4 (pool allows 12; ...)`."""
    low, high, auto = replicas["min"], replicas["max"], replicas.get("autoscaling")
    if low == high:
        return f"{low}"
    if auto and auto.get("sides"):
        prefill, decode = auto["sides"]["prefill"], auto["sides"]["decode"]
        return (
            f"{low}–{high} units; autoscaled per side: prefill {prefill['min_engines']}–{prefill['max_engines']} engines on "
            f"{auto['waiting_per_replica']:g} queued per engine, decode {decode['min_engines']}–{decode['max_engines']} engines "
            f"above {auto['target_running_per_replica']} requests in flight per engine (from the {auto['target_running_source']})"
        )
    if auto:
        return (
            f"{low}–{high}, autoscaled above {auto['target_running_per_replica']} requests in flight "
            f"(from the {auto['target_running_source']}) or {auto['waiting_per_replica']:g} queued per replica"
        )
    return f"{low} (pool allows {high}; replica autoscaling off)"
