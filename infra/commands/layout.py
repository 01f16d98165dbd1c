"""`infra layout`: rank serving layouts for one model on one GPU size, or compare GPU sizes.

    infra layout --model Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 --gpu gpu-mi325x8-2048gb-contracted \\
        --input-tokens 2000 --output-tokens 300 --ttft-p90-ms 2000 --tpot-p90-ms 50 [--peak-rps 40] [--json]
    infra layout --model ... --gpu gpu-mi300x8-1536gb,gpu-mi325x8-2048gb,gpu-h200x8-1128gb ...
    infra layout --model ... --gpu all [--region atl1] ...

With one size, every candidate layout is listed best first. With several (comma-separated, or
`all` sizes of the catalog, `--region` keeping those listed in a region), each size's best layout
(`--top N` per size) is ranked by predicted cost per million output tokens within the SLO; every
figure carries the uncertainty band of its GPU family and model class (leave-one-source-out), and
the $/M range is the price at the band's two ends.

Prefill/decode-disaggregated layouts (`p1tp4-d1tp4`: 1 prefill engine of TP4, 1 decode engine
of TP4) rank next to the colocated ones unless `--no-pd`; `--fabric` (a fabric GPU size) adds P/D
units spanning two nodes (KV over RDMA) and replicas spanning 2 or 4 whole nodes (`tp8-ep-dp2-n2`:
wide EP with the all-to-all over RDMA, or `tp16-n2`: TP over nodes), each with a widened band. `--tp/--ep/--dp/--replicas-per-node` restrict the candidates (and drop P/D); `--concurrency C` also predicts each
candidate closed-loop at C concurrent requests per node (split over its replicas, as benchmark
clients do). `--model` accepts a Hugging Face id from the catalog or a path to a local config.json.
"""

from __future__ import annotations

import argparse
import json
import sys

from infra.catalog.gpus import GPU_SIZES, gpu_size
from infra.catalog.models import resolve_model
from infra.cli_args import float_in, fraction, int_in, positive_float, positive_int
from infra.commands import tables
from infra.domain import (
    MAX_INPUT_TOKENS,
    MAX_OUTPUT_TOKENS,
    MAX_PEAK_RPS,
    MAX_TPOT_P90_MS,
    MAX_TTFT_P90_MS,
    MAX_TURNS_PER_SESSION,
)
from infra.errors import UserError
from infra.planner import Slo, Workload, load_efficiency, plan_model
from infra.planner.compare import compare_gpus
from infra.planner.compare import summary as compare_summary
from infra.planner.kv_offload import offload_room_gib


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "layout",
        help="rank TP/EP/DP/replica layouts for a model on a GPU size by goodput per node",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", required=True, help="Hugging Face id (catalog) or path to a local config.json")
    p.add_argument("--hf-config", help="local config.json describing --model (for ids not in the catalog)")
    p.add_argument(
        "--gpu",
        required=True,
        help="GPU size slug (e.g. gpu-mi325x8-2048gb-contracted), several comma-separated, or `all`",
    )
    p.add_argument("--region", help="with --gpu all: only sizes the catalog lists in this region")
    p.add_argument("--input-tokens", type=int_in(1, MAX_INPUT_TOKENS), required=True, help="mean prompt tokens per request")
    p.add_argument("--output-tokens", type=int_in(1, MAX_OUTPUT_TOKENS), required=True, help="mean completion tokens per request")
    p.add_argument("--ttft-p90-ms", type=float_in(MAX_TTFT_P90_MS), required=True, help="p90 time-to-first-token limit")
    p.add_argument("--tpot-p90-ms", type=float_in(MAX_TPOT_P90_MS), required=True, help="p90 time-per-output-token limit")
    p.add_argument("--peak-rps", type=float_in(MAX_PEAK_RPS), help="peak requests/s of the workload (for nodes needed)")
    p.add_argument(
        "--prefix-cache-hit-rate", type=fraction, default=0.0, help="share of prompt tokens served from cache, in [0, 1)"
    )
    p.add_argument(
        "--turns-per-session", type=int_in(1, MAX_TURNS_PER_SESSION), default=1,
        help="multi-turn chat: turns per conversation; the hit rate is then predicted per layout, with and without a KV offload tier",
    )
    p.add_argument("--think-time-s", type=float_in(86400), default=60.0, help="with --turns-per-session: mean seconds between turns (default 60)")
    p.add_argument(
        "--kv-offload", default="auto",
        help="with --turns-per-session: none, auto (default: on where it raises goodput by 5%%) or cpu:GIB (a CPU tier of GIB per engine)",
    )
    p.add_argument("--usd-per-hour", type=positive_float, help="node price (required for cost on contract sizes)")
    p.add_argument(
        "--pd", action=argparse.BooleanOptionalAction, default=True,
        help="also rank prefill/decode-disaggregated layouts p<N>tp<A>-d<M>tp<B> (default on; off with --concurrency)",
    )
    p.add_argument("--fabric", action="store_true", help="the pool is a fabric (RDMA) pool: also try P/D units and replicas spanning nodes")
    p.add_argument("--tp", type=positive_int, help="only layouts with this tensor-parallel size")
    p.add_argument(
        "--ep",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="only layouts with (--ep) or without (--no-ep) expert parallelism",
    )
    p.add_argument("--dp", type=positive_int, help="only layouts with this data-parallel attention size")
    p.add_argument("--replicas-per-node", type=positive_int, help="only layouts with this many replicas per node")
    p.add_argument(
        "--concurrency", type=int_in(1, 100_000), help="also predict closed-loop at this many concurrent requests per node"
    )
    p.add_argument("--efficiency", help="efficiency factors file (default: the catalog's efficiency.json)")
    p.add_argument("--top", type=positive_int, default=None, help="show only the best N candidates (table and JSON)")
    p.add_argument("--json", action="store_true", help="print the candidates as JSON, best first")
    p.add_argument(
        "--reasons", action="store_true", help="print every candidate's full reason under the table"
    )
    p.set_defaults(func=run)


def _sizes(args) -> list:
    """The GPU sizes --gpu names (and --region keeps), in the order given."""
    if args.gpu.strip() == "all":
        sizes = [GPU_SIZES[slug] for slug in sorted(GPU_SIZES)]
        if args.region:
            sizes = [g for g in sizes if g.regions and args.region in g.regions]
            if not sizes:
                regions = sorted({r for g in GPU_SIZES.values() for r in (g.regions or ())})
                raise UserError(f"--region {args.region!r}: the catalog lists no GPU size there; listed: {', '.join(regions)}")
        return sizes
    if args.region:
        raise UserError("--region filters `--gpu all`; with named sizes, leave it out")
    slugs = [s.strip() for s in args.gpu.split(",") if s.strip()]
    if not slugs:
        raise UserError("--gpu is empty; name a GPU size slug, several comma-separated, or `all`")
    sizes = []
    for slug in slugs:
        gpu = gpu_size(slug)
        if gpu is None:
            raise UserError(f"--gpu {slug!r} is not a GPU size we know; known: {', '.join(sorted(GPU_SIZES))}")
        if gpu not in sizes:
            sizes.append(gpu)
    return sizes


def run(args) -> int:
    sizes = _sizes(args)
    arch = resolve_model(args.model, args.hf_config)
    if arch is None:
        raise UserError(
            f"--model {args.model!r} is not in the model catalog; pass --hf-config path/to/config.json "
            f"(or give the config.json path as --model)"
        )
    if args.input_tokens + args.output_tokens > arch.max_context:
        raise UserError(
            f"--input-tokens {args.input_tokens} + --output-tokens {args.output_tokens} = "
            f"{args.input_tokens + args.output_tokens} exceeds the {arch.max_context}-token context of {arch.id}; "
            "vLLM would refuse every such request"
        )
    workload = Workload(args.input_tokens, args.output_tokens, args.peak_rps, args.prefix_cache_hit_rate,
                        args.turns_per_session, args.think_time_s)
    slo = Slo(args.ttft_p90_ms, args.tpot_p90_ms)
    if workload.multi_turn:
        return _run_sessions(args, arch, sizes, workload, slo)
    if len(sizes) > 1:
        return _run_compare(args, arch, sizes, workload, slo)
    (gpu,) = sizes
    plan = plan_model(
        arch,
        gpu,
        workload,
        slo,
        usd_per_hour=args.usd_per_hour,
        tp=args.tp,
        ep=args.ep,
        dp=args.dp,
        replicas_per_node=args.replicas_per_node,
        concurrency=args.concurrency,
        efficiency=load_efficiency(args.efficiency) if args.efficiency else None,
        disaggregation=args.pd and args.concurrency is None,
        fabric=args.fabric,
    )
    candidates = plan.candidates[: args.top] if args.top is not None else plan.candidates
    if args.json:
        json.dump([c.to_json() for c in candidates], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(render_table(candidates, closed_loop=args.concurrency is not None))
    print()
    print(plan.reason)
    if args.reasons:
        for cand in candidates[1:]:
            print()
            print(cand.reason)
    if gpu.usd_per_hour is None and args.usd_per_hour is None:
        print(f"(no cost figures: {gpu.slug} is contract-priced; pass --usd-per-hour)")
    return 0


def _kv_offload_arg(text: str) -> tuple[str, float | None]:
    """`none`, `auto` or `cpu:GIB` → (kind, size)."""
    if text in ("none", "auto"):
        return text, None
    kind, _, size = text.partition(":")
    try:
        gib = float(size)
    except ValueError:
        gib = 0.0
    if kind != "cpu" or not 0 < gib < float("inf"):
        raise UserError(f"--kv-offload {text!r}: use none, auto or cpu:GIB (GiB of host memory per engine, > 0)")
    return kind, gib


def _run_sessions(args, arch, sizes, workload, slo) -> int:
    """Multi-turn chat: every layout at its own predicted hit rate, without and with a CPU tier."""
    from infra.domain import session_shape
    from infra.session_plan import session_decision

    if len(sizes) > 1:
        raise UserError("--turns-per-session plans one GPU size; name one --gpu")
    if args.prefix_cache_hit_rate:
        raise UserError("--turns-per-session predicts the prefix-cache hit rate: leave --prefix-cache-hit-rate out")
    if args.tp or args.ep is not None or args.dp or args.replicas_per_node or args.concurrency or args.efficiency:
        raise UserError("--turns-per-session ranks every colocated layout: leave --tp/--ep/--dp/--replicas-per-node/--concurrency/--efficiency out")
    try:
        session_shape(workload)
    except ValueError as err:
        raise UserError(f"--turns-per-session {args.turns_per_session}: {err}") from None
    kind, size = _kv_offload_arg(args.kv_offload)
    (gpu,) = sizes
    decision = session_decision(
        arch, gpu, workload, slo, None, kv_offload=kind, size_gib=size, router_kind="session", min_nodes=1,
        usd_per_hour=args.usd_per_hour, fabric=False, pool_nodes=None,
    )
    if size is not None:
        room = offload_room_gib(gpu, decision.chosen.plan.chosen.layout, kind)
        if size > room:
            raise UserError(f"--kv-offload cpu:{size:g}: an engine of {decision.chosen.plan.chosen.layout.name} on {gpu.slug} "
                            f"has {max(room, 0)} GiB of host memory beside the engine; allowed: 1 to {max(room, 0)}")
    plan = decision.chosen.plan
    candidates = plan.candidates[: args.top] if args.top is not None else plan.candidates
    if args.json:
        json.dump({"candidates": [c.to_json() for c in candidates], "prefix_cache": decision.to_json()}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(render_table(candidates, closed_loop=False))
    print()
    print(plan.reason)
    print()
    print(render_sessions(decision))
    return 0


def render_sessions(decision) -> str:
    """Hit rate and goodput of the chosen layout without and with the offload tier."""
    rows = []
    for label, arm in (("without offload", decision.without), ("with offload", decision.with_offload)):
        if arm is None:
            rows.append((label, "-", "-", "-", "-", "-", "no tier: it would hold no more than the GPU cache"))
            continue
        c, hit = arm.plan.chosen, arm.hit
        per = "per pod" if arm.offload and arm.offload.kind == "lmcache" else "per engine"
        tier = f"{arm.offload.kind} {arm.offload.size_gib:g} GiB {per}" if arm.offload else "-"
        rows.append((label, c.layout.name, tier, f"{hit.total:.0%}", f"{hit.offload:.0%}",
                     f"{c.goodput_rps_per_node:.2f}", f"p90 TTFT {c.ttft_p90_ms:.0f} ms" if c.ttft_p90_ms else ""))
    head = ("", "layout", "tier", tables.right("from cache"), tables.right("reloaded"), tables.right("req/s/node"), "")
    return tables.render(head, rows) + "\n" + decision.reason


def _run_compare(args, arch, sizes, workload, slo) -> int:
    if args.usd_per_hour is not None:
        raise UserError("--usd-per-hour prices one GPU size; with several, each is priced from the catalog")
    if args.concurrency is not None:
        raise UserError("--concurrency predicts the candidates of one GPU size; name one --gpu")
    options = compare_gpus(
        arch,
        sizes,
        workload,
        slo,
        per_gpu=args.top or 1,
        efficiency=load_efficiency(args.efficiency) if args.efficiency else None,
        tp=args.tp,
        ep=args.ep,
        dp=args.dp,
        replicas_per_node=args.replicas_per_node,
    )
    if not options:
        raise UserError(f"{arch.id} fits on none of the {len(sizes)} GPU size(s) at {workload.input_tokens + workload.output_tokens} tokens")
    if args.json:
        json.dump([o.to_json() for o in options], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(render_comparison(options))
    print()
    print(compare_summary(options))
    unpriced = sorted({o.gpu.slug for o in options if o.candidate.usd_per_hour is None})
    if unpriced:
        print(f"(no cost figures for contract-priced {', '.join(unpriced)}: rank them with one --gpu and --usd-per-hour)")
    return 0


def render_comparison(options, *, terminal: bool | None = None) -> str:
    """One row per GPU size × layout, cheapest per token first, with the band on every figure."""
    head = ["gpu size", "layout"] + [
        tables.right(h) for h in ("req/s/node", "band", "nodes", "$/h", "$/1M out", "$/1M range")
    ] + ["reason"]
    rows = []
    for o in options:
        c = o.candidate
        cost = o.usd_per_million_range
        rows.append([
            o.gpu.slug,
            c.name,
            f"{c.goodput_rps_per_node:.2f}",
            f"{c.goodput_low_rps_per_node:.1f}–{c.goodput_high_rps_per_node:.1f}" if c.goodput_rps_per_node > 0 else "-",
            _fmt(c.nodes_needed, "d"),
            _fmt(c.usd_per_hour, ".2f"),
            _fmt(c.usd_per_million_output_tokens, ".3f"),
            f"{cost[0]:.3f}–{cost[1]:.3f}" if cost else "-",
            c.short_reason,
        ])
    return tables.render(head, rows, terminal=terminal)


def _fmt(value, spec: str, none: str = "-") -> str:
    return none if value is None else format(value, spec)


def render_table(candidates, *, closed_loop: bool = False, terminal: bool | None = None) -> str:
    """One row per candidate, best first: layout and reason read left to right, numbers align right."""
    head: list = ["layout", "fits"] + [
        tables.right(h)
        for h in ("kv tokens", "max conc", "req/s/node", "band", "tok/s/gpu", "ttft p90", "tpot p90", "nodes", "$/h", "$/1M out")
    ]
    if closed_loop:
        head += [tables.right(h) for h in ("conc", "tok/s/node", "ttft mean", "tpot mean")]
    head.append("reason")
    rows = []
    for c in candidates:
        m = c.memory
        row = [
            c.name,
            "yes" if c.fits else "no",
            str(m.kv_tokens_per_replica) if c.fits else "-",
            str(m.max_concurrency_per_replica) if c.fits else "-",
            f"{c.goodput_rps_per_node:.2f}",
            f"{c.goodput_low_rps_per_node:.1f}–{c.goodput_high_rps_per_node:.1f}" if c.goodput_rps_per_node > 0 else "-",
            f"{c.output_tokens_per_s_per_gpu:.0f}",
            _fmt(c.ttft_p90_ms, ".0f"),
            _fmt(c.tpot_p90_ms, ".1f"),
            _fmt(c.nodes_needed, "d"),
            _fmt(c.usd_per_hour, ".2f"),
            _fmt(c.usd_per_million_output_tokens, ".3f"),
        ]
        if closed_loop:
            cl = c.closed_loop
            row += [
                _fmt(cl.concurrency if cl else None, "d"),
                _fmt(cl.output_tokens_per_s_per_node if cl else None, ".0f"),
                _fmt(cl.ttft_mean_ms if cl else None, ".0f"),
                _fmt(cl.tpot_mean_ms if cl else None, ".1f"),
            ]
        row.append(c.short_reason)
        rows.append(row)
    return tables.render(head, rows, terminal=terminal)
