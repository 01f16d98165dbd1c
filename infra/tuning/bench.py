"""Kubernetes manifests for an in-cluster benchmark sweep: one bundle per candidate layout.

Per layout, four objects in the model's namespace:
- a Deployment of the model with that layout on one node of the pool, rendered by the model
  service renderer (same image, args, probes, cache, env as production), with its replicas
  required on one node: goodput is measured per node;
- its ClusterIP Service (what the benchmark client sends to) and a headless Service whose DNS
  answers with one address per *ready* replica;
- a Job that waits until every replica is ready (the headless name resolves to all of them),
  then runs `vllm bench serve` from the same pinned image once per request rate: Poisson
  arrivals (`--burstiness 1`), the workload's input/output lengths, `--percentile-metrics
  ttft,tpot,itl,e2el --metric-percentiles 50,90,99`, `--goodput` with the model's SLOs, and
  `--metadata layout=<name> ...` so every result names its layout, engine limits, image and run.
  Each result is saved on the shared cache volume under `bench/<stack>/<model>/<run>/<layout>/`
  and echoed to the log as one `BENCH_RESULT <file> <json>` line, so `kubectl logs` alone can
  collect it (also when the stack has no cache volume).

Isolation from production, which shares the cluster and the namespace: production selects its
engines by `app.kubernetes.io/name=vllm` plus `inference-platform/model` (model Service, PDB,
router discovery, the vLLM PodMonitor, kube-state-metrics joins in the recording rules and
alerts), and its SLO rules and KEDA query filter vLLM series by `--served-model-name`. A bench
engine matching any of them would take real user traffic, or page on the sweep's deliberately
overloaded rates and scale production up. So bench pods carry none of those labels (their own
`app.kubernetes.io/name=vllm-bench` and `inference-platform/bench-*` keys instead) and serve
the model under `<model>-bench-<layout>`.

Layouts run one after another (each takes the node's GPUs), in the order of one step list
(`infra/tuning/sweep_steps.py`): `infra bench --apply` runs it through the Kubernetes API and the
offline `run.sh` is generated from it.

The benchmark client runs on the GPU node it measures (tolerating the GPU taint, no GPU
request): the multi-GB vLLM image is already there, and the client's few CPUs fit in the node
headroom the model service keeps back. Every flag is checked against the pinned release's
`vllm bench serve` parser (vllm_bench_flags.json).
"""

from __future__ import annotations

import copy
import inspect
import json
import math
import shlex
from dataclasses import dataclass, replace

from infra.catalog import versions
from infra.catalog.vllm_flags import VLLM_PORT
from infra.domain import LAYOUT_LIMIT_KEYS, Layout, Slo, Workload, session_shape
from infra.errors import Problem, UserError
from infra.render import model_service as ms
from infra.render import network_policy as netpol
from infra.tuning import multi_turn_trace, readiness
from infra.tuning.bench_flags import known_bench_flags
from infra.tuning.results import META_LAYOUT_FIELD_PREFIX
from infra.tuning.sweep_steps import RESULT_LINE_PREFIX, render_run_script

BENCH_RUN_LABEL = "inference-platform/bench-run"
BENCH_MODEL_LABEL = "inference-platform/bench-model"
BENCH_LAYOUT_LABEL = "inference-platform/bench-layout"
BENCH_APP = "vllm-bench"  # never `vllm`: production selectors and PodMonitors key on that
BENCH_CLIENT_APP = "vllm-bench-client"  # not BENCH_APP: the headless DNS must count engines only
BENCH_PREFETCH_APP = "vllm-bench-prefetch"
MANAGED_BY = "infra-bench"
RESULTS_SUBDIR = "bench"
PERCENTILE_METRICS = "ttft,tpot,itl,e2el"
METRIC_PERCENTILES = "50,90,99"
DEFAULT_RATE_FACTORS = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5)  # × the predicted goodput
FALLBACK_RATES = (0.5, 1, 2, 3, 4, 6, 8, 12, 16)  # when there is no prediction to centre on
CLIENT_CPU = "2"
CLIENT_MEMORY = "6Gi"
_MAX_NAME = 42  # the model service renderer's limit for a model name (it derives longer names)
# `--dataset multi-turn`: conversations replayed with think times and growing shared prefixes
# through vLLM's `timed_trace` dataset, one trace per rate written in the client pod by
# infra/tuning/multi_turn_trace.py (shipped as text: the vLLM image has Python, not this project).
MULTI_TURN = "multi-turn"
TRACE_SCRIPT = "/tmp/multi_turn_trace.py"
TRACE_FILE = "/tmp/multi-turn-trace.jsonl"


@dataclass(frozen=True)
class BenchTarget:
    """What is benchmarked: the model as production runs it, its traffic and SLOs.

    service: the model's ModelServiceSpec as the platform renders it (layout replaced per sweep).
    """

    stack: str
    model: str
    service: ms.ModelServiceSpec
    workload: Workload
    slo: Slo


@dataclass(frozen=True)
class LayoutSweep:
    """One layout and the request rates to offer it (with requests per rate)."""

    layout: Layout
    rates_rps: tuple[float, ...]
    num_prompts: tuple[int, ...]
    predicted_goodput_rps: float | None = None


@dataclass(frozen=True)
class BenchOptions:
    """How the sweep runs.

    run_id: names the results directory and labels every object (e.g. 20261202-183012).
    dataset: "random" (synthetic prompts of the workload's lengths), "multi-turn" (the workload's
        sessions: turns, think time, growing history; `multi_turn_trace`), or a vLLM dataset name
        with `dataset_path` (a path inside the cache volume, e.g. /models/datasets/chat.json).
    seconds_per_rate: arrivals last at least this long per rate, so the p90 covers a steady state.
    min_prompts: and at least this many requests (a p90 over 300 has 30 samples above it).
    warmups: requests sent before each measurement (first-request compilation, cold caches).
    """

    run_id: str
    dataset: str = "random"
    dataset_path: str | None = None
    seconds_per_rate: int = 180
    min_prompts: int = 300
    warmups: int = 16
    seed: int = 0


# --- sweep sizing ------------------------------------------------------------------------------


def default_rates(predicted_goodput_rps: float | None) -> tuple[float, ...]:
    """Rates bracketing the prediction (the planner over- or under-shoots by up to ~2×)."""
    if not predicted_goodput_rps or predicted_goodput_rps <= 0:
        return FALLBACK_RATES
    return tuple(sorted({_round_rate(predicted_goodput_rps * f) for f in DEFAULT_RATE_FACTORS}))


def prompts_for_rate(rate_rps: float, opts: BenchOptions) -> int:
    return max(opts.min_prompts, math.ceil(rate_rps * opts.seconds_per_rate))


def make_sweep(layout: Layout, rates: tuple[float, ...], opts: BenchOptions, predicted: float | None = None) -> LayoutSweep:
    rates = tuple(sorted(set(rates)))
    return LayoutSweep(layout, rates, tuple(prompts_for_rate(r, opts) for r in rates), predicted)


def _round_rate(rate: float) -> float:
    """Two significant digits: 3.37 → 3.4, 12.6 → 13."""
    if rate <= 0:
        return 0.0
    scale = 10 ** max(0, 1 - math.floor(math.log10(rate)))
    return math.floor(rate * scale + 0.5) / scale  # half up: 12.5 → 13


# --- names -------------------------------------------------------------------------------------


def bench_name(model: str, layout: Layout) -> str:
    """`<model>-bench-<layout>`, shortened to the renderer's 42-character limit when needed."""
    name = f"{model}-bench-{layout.name}"
    if len(name) <= _MAX_NAME:
        return name
    keep = _MAX_NAME - len(layout.name) - 3
    return f"{model[:keep].rstrip('-')}-b-{layout.name}"


def bench_selector(model: str, layout: Layout) -> dict[str, str]:
    """Per model and layout: the headless DNS must count one layout's engines only; and no key
    or value production selects on (`app.kubernetes.io/name=vllm`, `inference-platform/model`)."""
    return {"app.kubernetes.io/name": BENCH_APP, BENCH_MODEL_LABEL: model, BENCH_LAYOUT_LABEL: layout.name}


def bench_labels(model: str, layout: Layout | None, run_id: str, component: str) -> dict[str, str]:
    """A run stays findable (`kubectl get all -l inference-platform/bench-run=<id>`) without
    reusing a key production selects on; `app.kubernetes.io/name` differs per kind (see BENCH_*_APP)."""
    labels = {
        "app.kubernetes.io/part-of": ms.PART_OF,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/component": component,
        BENCH_MODEL_LABEL: model,
        BENCH_RUN_LABEL: run_id,
    }
    if layout is not None:
        labels["app.kubernetes.io/instance"] = bench_name(model, layout)
        labels[BENCH_LAYOUT_LABEL] = layout.name
    return labels


def results_dir(target: BenchTarget, opts: BenchOptions, layout: Layout, mount_path: str) -> str:
    return f"{mount_path}/{RESULTS_SUBDIR}/{target.stack}/{target.model}/{opts.run_id}/{layout.name}"


def result_filename(rate_rps: float) -> str:
    return f"rate-{rate_rps:g}.json"


# --- the benchmark client ----------------------------------------------------------------------


def bench_metadata(target: BenchTarget, layout: Layout, opts: BenchOptions) -> list[str]:
    """`--metadata` pairs: what `infra tune ingest` needs to name, rebuild and date the layout."""
    service = target.service
    limits = layout.with_(max_model_len=layout.max_model_len or service.max_model_len).fields()
    pairs = {
        "layout": layout.name,
        **{f"{META_LAYOUT_FIELD_PREFIX}{key}": limits[key] for key in LAYOUT_LIMIT_KEYS},
        "stack": target.stack,
        "model": target.model,
        "gpu": service.gpu.slug,
        "image": service.resolved_image,
        "vllm_version": versions.VLLM_VERSION,
        "run_id": opts.run_id,
        "input_tokens": target.workload.input_tokens,
        "output_tokens": target.workload.output_tokens,
        # Time-to-ready (issue 20): where the engines read their weights; ready_seconds itself is
        # measured in the Job and appended by sweep_script.
        "weights_source": readiness.weights_source_of(service.weights is not None, service.cache is not None),
    }
    if opts.dataset == MULTI_TURN:
        pairs |= {"workload": MULTI_TURN, "turns_per_session": target.workload.turns_per_session,
                  "think_time_s": f"{target.workload.think_time_s:g}"}
    return [f"{k}={v}" for k, v in pairs.items() if v is not None]


def bench_serve_args(
    target: BenchTarget, layout: Layout, rate_rps: float, num_prompts: int, opts: BenchOptions, *, base_url: str, result_dir: str
) -> list[str]:
    """Arguments after `vllm bench serve` for one rate."""
    return (
        _common_args(target, layout, opts, base_url=base_url, result_dir=result_dir)
        + ["--num-prompts", str(num_prompts), "--request-rate", f"{rate_rps:g}", "--result-filename", result_filename(rate_rps)]
        + _list_args(target, layout, opts)
    )


def bench_tokenizer(service: ms.ModelServiceSpec) -> str:
    """The tokenizer the client counts tokens with: the engine's own checkpoint.

    An HF id resolves from the shared cache at `main`; a pinned commit is read straight from its
    snapshot directory, since `vllm bench serve` has no revision flag and the offline cache holds
    no `main` ref for a checkpoint prefetched by commit.
    """
    if service.revision and service.cache is not None:
        repo_dir = "models--" + service.source.replace("/", "--")
        return f"{service.cache.hf_home}/hub/{repo_dir}/snapshots/{service.revision}"
    return service.source


def _common_args(target: BenchTarget, layout: Layout, opts: BenchOptions, *, base_url: str, result_dir: str) -> list[str]:
    service = target.service
    served_name = bench_served_model_name(target, layout)
    args = [
        "--backend", "openai",
        "--base-url", base_url,
        "--endpoint", "/v1/completions",
        # The bench engine's own served name: requests never carry production's model name.
        "--model", served_name,
        "--served-model-name", served_name,
        "--tokenizer", bench_tokenizer(service),
    ]
    if opts.dataset == MULTI_TURN:
        # self-timed replay: the trace's timestamps schedule the turns (--request-rate is recorded only)
        args += ["--dataset-name", "timed_trace", "--dataset-path", opts.dataset_path or TRACE_FILE,
                 "--timed-trace-chunk-hash-size", str(multi_turn_trace.CHUNK_TOKENS)]
        return args + _run_args(opts, result_dir)
    args += ["--dataset-name", opts.dataset]
    if opts.dataset_path:
        args += ["--dataset-path", opts.dataset_path]
    if opts.dataset == "random":
        args += [
            "--random-input-len", str(target.workload.input_tokens),
            "--random-output-len", str(target.workload.output_tokens),
            "--random-range-ratio", "0",
        ]
    else:
        args += ["--output-len", str(target.workload.output_tokens)]
    return args + ["--burstiness", "1"] + _run_args(opts, result_dir)  # Poisson arrivals


def _run_args(opts: BenchOptions, result_dir: str) -> list[str]:
    return [
        "--seed", str(opts.seed),
        "--num-warmups", str(opts.warmups),
        "--percentile-metrics", PERCENTILE_METRICS,
        "--metric-percentiles", METRIC_PERCENTILES,
        "--disable-tqdm",
        "--save-result",
        "--result-dir", result_dir,
    ]


def _list_args(target: BenchTarget, layout: Layout, opts: BenchOptions) -> list[str]:
    """Options taking several values (nargs): last, so nothing after them is swallowed."""
    return [
        "--goodput", f"ttft:{target.slo.ttft_p90_ms:g}", f"tpot:{target.slo.tpot_p90_ms:g}",
        "--metadata", *bench_metadata(target, layout, opts),
    ]


def unknown_bench_flags(args: list[str]) -> list[str]:
    """Flags in `args` that the pinned `vllm bench serve` does not accept."""
    known = set(known_bench_flags()["flags"])
    return [a for a in args if a.startswith("--") and a.split("=", 1)[0] not in known]


def sweep_script(target: BenchTarget, sweep: LayoutSweep, opts: BenchOptions, *, base_url: str, result_dir: str) -> str:
    """POSIX sh: a `sweep RATE REQUESTS` function, called once per rate. A failed rate is reported
    and the sweep goes on (an engine overloaded at the top rate must not lose the rates below)."""
    def wrapped(args: list[str]) -> list[str]:
        lines, current = [], ""
        for token in args:
            piece = shlex.quote(token)
            if token.startswith("--") and current:
                lines.append(current)
                current = ""
            current = f"{current} {piece}".strip()
        lines.append(current)
        return [f"      {line} \\" for line in lines]

    name = '"rate-$1.json"'
    lines = [
        "set -u",
        f"out={shlex.quote(result_dir)}",
        f"{readiness.READY_ENV}=$(cat {readiness.READY_FILE} 2>/dev/null || true)",
        'mkdir -p "$out"',
        "failed=0",
        *_trace_script_lines(opts),
        "sweep() {  # $1: request rate (req/s), $2: requests",
        f"  echo \"--- {sweep.layout.name} at $1 req/s ($2 requests)\"",
        *_trace_lines(target, opts),
        "  if vllm bench serve \\",
        *wrapped(_common_args(target, sweep.layout, opts, base_url=base_url, result_dir=result_dir)),
        f'      --num-prompts "$2" --request-rate "$1" --result-filename {name} \\',
        *wrapped(_list_args(target, sweep.layout, opts))[:-1],
        wrapped(_list_args(target, sweep.layout, opts))[-1].removesuffix(" \\") + f' "ready_seconds=${readiness.READY_ENV}"; then',
        f"    printf '%s %s ' {RESULT_LINE_PREFIX} {name}; tr -d '\\n' < \"$out/rate-$1.json\"; echo",
        "  else",
        '    echo "rate $1 failed"; failed=1',
        "  fi",
        "}",
    ]
    lines += [f"sweep {rate:g} {prompts}" for rate, prompts in zip(sweep.rates_rps, sweep.num_prompts, strict=True)]
    lines.append('exit "$failed"')
    return "\n".join(lines) + "\n"


def multi_turn_trace_args(target: BenchTarget, opts: BenchOptions) -> list[str]:
    """`multi_turn_trace.py` options for the target's sessions (rate and requests are the sweep's)."""
    shape = session_shape(target.workload)
    if shape is None:
        raise UserError([Problem("--dataset", f"{MULTI_TURN} needs the model's workload.turns_per_session above 1")])
    answer_s = target.workload.output_tokens * target.slo.tpot_p90_ms / 1e3
    return [
        "--turns", str(shape.turns), "--new-tokens", str(max(1, round(shape.new_tokens_per_turn))),
        "--output-tokens", str(target.workload.output_tokens), "--think-time-s", f"{shape.think_time_s:g}",
        "--answer-s", f"{answer_s:g}", "--seed", str(opts.seed),
    ]


def _trace_script_lines(opts: BenchOptions) -> list[str]:
    """Ship the trace generator's text into the pod (a quoted heredoc: nothing in it expands)."""
    if opts.dataset != MULTI_TURN:
        return []
    return [f"cat > {TRACE_SCRIPT} <<'MULTI_TURN_TRACE'", inspect.getsource(multi_turn_trace).rstrip("\n"), "MULTI_TURN_TRACE"]


def _trace_lines(target: BenchTarget, opts: BenchOptions) -> list[str]:
    """In `sweep`: write this rate's trace before the benchmark replays it."""
    if opts.dataset != MULTI_TURN:
        return []
    args = " ".join(shlex.quote(a) for a in multi_turn_trace_args(target, opts))
    return [
        f'  if ! python3 {TRACE_SCRIPT} --rate "$1" --requests "$2" {args} > {TRACE_FILE}; then',
        '    echo "rate $1 failed: no trace"; failed=1; return',
        "  fi",
    ]


def _wait_for_replicas_script(host: str, replicas: int) -> str:
    """Wait until the headless Service resolves to every replica (only ready pods are published)."""
    check = (
        "import socket, sys\n"
        "try:\n"
        f"    ips = {{a[4][0] for a in socket.getaddrinfo({host!r}, {VLLM_PORT}, type=socket.SOCK_STREAM)}}\n"
        "except socket.gaierror:\n"
        "    ips = set()\n"
        f"print(f'{{len(ips)}} of {replicas} replicas ready', flush=True)\n"
        f"sys.exit(0 if len(ips) >= {replicas} else 1)\n"
    )
    # The time it took is the engines' time-to-ready (infra/tuning/readiness.py).
    return readiness.timed_wait(f"python3 -c {shlex.quote(check)}")


# --- manifests ---------------------------------------------------------------------------------


def bench_served_model_name(target: BenchTarget, layout: Layout) -> str:
    """Production's SLO rules and KEDA query filter vLLM series by the served name; a bench
    engine under production's name would feed its overload into both."""
    return bench_name(target.model, layout)


def bench_service_spec(target: BenchTarget, layout: Layout) -> ms.ModelServiceSpec:
    """The production spec with this layout, one node, and the bench name and served name."""
    name = bench_name(target.model, layout)
    return replace(
        target.service, name=name, served_model_name=bench_served_model_name(target, layout),
        layout=layout, nodes_min=1, nodes_max=1,
    )


def render_layout_bench(target: BenchTarget, sweep: LayoutSweep, opts: BenchOptions) -> list[dict]:
    """Deployment, Service, headless Service and sweep Job for one layout, in apply order."""
    spec = bench_service_spec(target, sweep.layout)
    problems = [Problem(f"layout {sweep.layout.name}", f"`vllm bench serve` in vLLM {versions.VLLM_VERSION} has no {f}")
                for f in unknown_bench_flags(bench_serve_args(target, sweep.layout, 1.0, 1, opts, base_url="x", result_dir="x"))]
    if problems:
        raise UserError(problems)
    selector = bench_selector(target.model, sweep.layout)
    engine_labels = {**bench_labels(target.model, sweep.layout, opts.run_id, "engine"), **selector}
    if getattr(sweep.layout, "disaggregated", False):
        return _render_pd_bench(target, spec, sweep, opts, engine_labels)

    # The model service renderer's labels and selectors are production's contract (router,
    # monitors, PDB, Service): replaced wholesale, not extended.
    deployment = copy.deepcopy(ms.render_deployment(spec))
    deployment["metadata"]["labels"] = dict(engine_labels)
    deployment["metadata"].pop("annotations", None)  # the Pulumi await timeout means nothing here
    deployment["spec"]["selector"] = {"matchLabels": dict(selector)}
    pod = deployment["spec"]["template"]
    pod["metadata"]["labels"] = dict(engine_labels)
    pod_spec = pod["spec"]
    pod_spec.pop("topologySpreadConstraints", None)
    # All replicas of the layout on one node: goodput is compared per node. The first pod matches
    # its own term, so it may start anywhere; the rest follow it.
    pod_spec["affinity"] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": dict(selector)}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }

    service = copy.deepcopy(ms.render_service(spec))
    service["metadata"]["labels"] = dict(engine_labels)
    service["spec"]["selector"] = dict(selector)
    headless = copy.deepcopy(service)
    headless["metadata"]["name"] = f"{spec.name}-pods"
    headless["metadata"].pop("annotations", None)
    headless["spec"]["clusterIP"] = "None"
    headless["spec"].pop("type", None)

    job = _render_job(target, spec, sweep, opts, selector)
    return [deployment, service, headless, bench_network_policy(spec, sweep.layout, target.model, opts), job]


def bench_network_policy(spec: ms.ModelServiceSpec, layout: Layout, model: str, opts: BenchOptions) -> dict:
    """The flows of one layout's bench under the engines' namespace's default deny (issue 30): its
    client and engines (and, for P/D, its router) reach each other on every port, and without a
    weight cache the client fetches the tokenizer from the model hub. Production's `engines` policy
    already lets the bench engines load weights (they carry the engine component label), but no
    production policy selects the client, so without this one every request of a sweep was dropped."""
    run = {BENCH_MODEL_LABEL: model, BENCH_LAYOUT_LABEL: layout.name}
    egress: list[dict] = [{"to": [{"podSelector": {"matchLabels": dict(run)}}]}]
    if spec.cache is None:
        egress.append({"to": [netpol.internet_peer()], "ports": [{"port": netpol.HTTPS_PORT, "protocol": "TCP"}]})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": spec.name,
            "namespace": spec.namespace,
            "labels": bench_labels(model, layout, opts.run_id, "network-policy"),
            "annotations": {"inference-platform/why": "a bench's client, engines and P/D router talk to each other; "
                                                      "its client may fetch the tokenizer from the hub"},
        },
        "spec": {
            "podSelector": {"matchLabels": dict(run)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": dict(run)}}]}],
            "egress": egress,
        },
    }


def _render_pd_bench(target: BenchTarget, spec: ms.ModelServiceSpec, sweep: LayoutSweep, opts: BenchOptions, labels: dict) -> list[dict]:
    """A P/D layout under test: its prefill and decode engines and P/D router, as production renders
    them (render/pd_service.py) under the bench name, the bench labels added (the selectors of the
    P/D objects are theirs), and the sweep Job against the router. The headless Service the Job
    waits on lists the decode engines."""
    from infra.render.pd_service import PD_ROLE_LABEL, PdServiceSpec, render_pd_service

    objects = [o for o in render_pd_service(PdServiceSpec(spec, sweep.layout, units=1)) if o["kind"] != "PodDisruptionBudget"]
    objects = [o for o in objects if o["kind"] != "Job"]  # the bench prefetches weights itself
    for obj in objects:
        obj["metadata"]["labels"] = {**obj["metadata"].get("labels", {}), **labels}
        obj["metadata"].pop("annotations", None)
        template = obj.get("spec", {}).get("template")
        if template is not None:  # the run's keys on the pods too (not their names: selectors), for its NetworkPolicy
            run = {k: labels[k] for k in (BENCH_MODEL_LABEL, BENCH_LAYOUT_LABEL, BENCH_RUN_LABEL) if k in labels}
            template["metadata"]["labels"] = {**template["metadata"].get("labels", {}), **run}
    decode = {**ms.selector_labels(spec.name), PD_ROLE_LABEL: "decode"}
    headless = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{spec.name}-pods", "namespace": spec.namespace, "labels": dict(labels)},
        "spec": {"clusterIP": "None", "selector": decode,
                 "ports": [{"name": "http", "port": VLLM_PORT, "targetPort": "http", "protocol": "TCP"}]},
    }
    policy = bench_network_policy(spec, sweep.layout, target.model, opts)
    return [*objects, headless, policy, _render_job(target, spec, sweep, opts, decode)]


def job_name(spec: ms.ModelServiceSpec) -> str:
    return f"{spec.name}-sweep"


def job_deadline_seconds(spec: ms.ModelServiceSpec, sweep: LayoutSweep, opts: BenchOptions) -> int:
    """Model load (the service's own startup budget and image pull) plus every rate's arrivals,
    drain and warm-up, with 50% slack."""
    per_rate = sum(p / r + 120 for p, r in zip(sweep.num_prompts, sweep.rates_rps, strict=True))
    return math.ceil(ms.startup_budget_seconds(spec) + ms.IMAGE_PULL_ALLOWANCE_SECONDS + 1.5 * per_rate)


def _render_job(target: BenchTarget, spec: ms.ModelServiceSpec, sweep: LayoutSweep, opts: BenchOptions, engines: dict) -> dict:
    namespace = spec.namespace
    base_url = f"http://{ms.service_name(spec)}.{namespace}.svc.cluster.local:{VLLM_PORT}"
    headless_host = f"{spec.name}-pods.{namespace}.svc.cluster.local"
    mount = spec.cache.mount_path if spec.cache else "/results"
    out_dir = results_dir(target, opts, sweep.layout, mount)
    env = [
        {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"},
        {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    volumes: list[dict]
    if spec.cache is not None:
        # The tokenizer comes from the prefetched weights; results land on the same volume.
        env += [{"name": "HF_HOME", "value": spec.cache.hf_home}, {"name": "HF_HUB_OFFLINE", "value": "1"}]
        volumes = [{"name": "cache", "persistentVolumeClaim": {"claimName": spec.cache.pvc_name}}]
        mounts = [{"name": "cache", "mountPath": spec.cache.mount_path}]
    else:
        env += [{"name": "HF_HOME", "value": "/results/hf"}]
        if spec.hf_token_secret:
            env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": spec.hf_token_secret, "key": ms.HF_TOKEN_KEY}}})
        volumes = [{"name": "results", "emptyDir": {}}]
        mounts = [{"name": "results", "mountPath": "/results"}]
    if spec.api_key_secret:
        # The openai backend of `vllm bench serve` sends OPENAI_API_KEY as a bearer token.
        env.append({"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": spec.api_key_secret, "key": ms.API_KEY_KEY}}})
    client_resources = {"requests": {"cpu": CLIENT_CPU, "memory": CLIENT_MEMORY}, "limits": {"memory": CLIENT_MEMORY}}
    job_labels = {**bench_labels(target.model, sweep.layout, opts.run_id, "bench-client"), "app.kubernetes.io/name": BENCH_CLIENT_APP}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(spec),
            "namespace": namespace,
            "labels": job_labels,
            "annotations": {
                "inference-platform/layout": sweep.layout.name,
                "inference-platform/rates-rps": ",".join(f"{r:g}" for r in sweep.rates_rps),
            },
        },
        "spec": {
            "backoffLimit": 0,  # a retry would re-measure every rate; failures are in the log
            "activeDeadlineSeconds": job_deadline_seconds(spec, sweep, opts),
            "template": {
                "metadata": {"labels": job_labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "nodeSelector": spec.pool_selector,
                    "tolerations": [{"key": spec.gpu.taint_key, "operator": "Exists", "effect": "NoSchedule"}],
                    "affinity": {
                        "podAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [{
                                "weight": 100,
                                "podAffinityTerm": {
                                    "labelSelector": {"matchLabels": dict(engines)},
                                    "topologyKey": "kubernetes.io/hostname",
                                },
                            }]
                        }
                    },
                    "initContainers": [{
                        "name": "wait-for-replicas",
                        "image": spec.resolved_image,
                        "command": ["/bin/sh", "-c", _wait_for_replicas_script(headless_host, spec.layout.replicas_per_node)],
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                        "volumeMounts": [readiness.READY_MOUNT],
                    }],
                    "containers": [{
                        "name": "bench",
                        "image": spec.resolved_image,
                        "command": ["/bin/sh", "-c", sweep_script(target, sweep, opts, base_url=base_url, result_dir=out_dir)],
                        "env": env,
                        "resources": client_resources,
                        "volumeMounts": [*mounts, readiness.READY_MOUNT],
                    }],
                    "volumes": [*volumes, readiness.READY_VOLUME],
                },
            },
        },
    }


# --- the bundle --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchBundle:
    """Everything `infra bench` writes: manifests per layout (in run order) and the runner."""

    target: BenchTarget
    options: BenchOptions
    sweeps: tuple[LayoutSweep, ...]
    layouts: tuple[tuple[str, list[dict]], ...]  # (directory name, objects)
    prefetch: dict | None

    def files(self) -> dict[str, str]:
        """Relative path → content, ready to write under --out."""
        out: dict[str, str] = {}
        if self.prefetch:
            out["00-prefetch/job.yaml"] = _yaml(self.prefetch)
        for directory, objects in self.layouts:
            for obj in objects:
                out[f"{directory}/{_file_stem(obj)}.yaml"] = _yaml(obj)
        out["run.sh"] = render_run_script(self)
        out["sweep.json"] = json.dumps(self.to_json(), indent=2) + "\n"
        return out

    def to_json(self) -> dict:
        return {
            "stack": self.target.stack,
            "model": self.target.model,
            "run_id": self.options.run_id,
            "slo": {"ttft_p90_ms": self.target.slo.ttft_p90_ms, "tpot_p90_ms": self.target.slo.tpot_p90_ms},
            "layouts": [
                {
                    "name": s.layout.name,
                    "directory": d,
                    "rates_rps": list(s.rates_rps),
                    "num_prompts": list(s.num_prompts),
                    "predicted_goodput_rps": s.predicted_goodput_rps,
                }
                for s, (d, _) in zip(self.sweeps, self.layouts, strict=True)
            ],
        }


def render_bench(target: BenchTarget, sweeps: list[LayoutSweep], opts: BenchOptions) -> BenchBundle:
    if not sweeps:
        raise UserError("no layouts to benchmark")
    layouts = []
    for index, sweep in enumerate(sweeps, start=1):
        layouts.append((f"{index:02d}-{sweep.layout.name}", render_layout_bench(target, sweep, opts)))
    prefetch = None
    if target.service.cache is not None or target.service.weights is not None:
        # Fills the cache (or the Spaces bucket) if production never ran; idempotent (skips when
        # the marker exists).
        spec = replace(target.service, name=f"{target.model}-bench"[:_MAX_NAME])
        prefetch = ms.render_prefetch_job(spec)
        if prefetch is not None:
            labels = {**bench_labels(target.model, None, opts.run_id, "prefetch"), "app.kubernetes.io/name": BENCH_PREFETCH_APP}
            prefetch["metadata"]["labels"] = dict(labels)
            prefetch["spec"]["template"]["metadata"]["labels"] = dict(labels)
    return BenchBundle(target, opts, tuple(sweeps), tuple(layouts), prefetch)


def _file_stem(obj: dict) -> str:
    kind = obj["kind"].lower()
    name = obj["metadata"]["name"]
    return f"{kind}-{name}"


def _yaml(obj: dict) -> str:
    """YAML for humans: scripts as `|` blocks, no anchors for repeated label maps."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data):
            return True

    def _str(dumper, value: str):
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str)
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, width=4096)
