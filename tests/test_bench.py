"""`infra bench`: manifests valid for Kubernetes 1.33, flags known to the pinned vLLM, and the sweep
script's data path (run against a stand-in `vllm` that saves results the way vLLM 0.33.0 does)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from infra.catalog.gpus import gpu_size
from infra.commands import bench as bench_cmd
from infra.errors import UserError
from infra.planner.layout import Layout, Slo, Workload
from infra.render.model_service import CacheSpec, ModelServiceSpec
from infra.tuning import bench
from infra.tuning.bench_flags import known_bench_flags
from infra.tuning.goodput import compare_layouts
from infra.tuning.results import layout_fields, load_results

REPO = Path(__file__).resolve().parent.parent


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
    deployment, service, headless, job = _bundle().layouts[0][1]
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
    # Production selects inference-platform/model=qwen3-235b; the bench pods never match it.
    assert deployment["spec"]["selector"]["matchLabels"]["inference-platform/model"] != "qwen3-235b"
    assert service["spec"]["selector"] == headless["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert headless["spec"]["clusterIP"] == "None"
    assert pod["metadata"]["labels"][bench.BENCH_RUN_LABEL] == "20261202-1830"


def test_job_waits_for_every_replica_and_writes_to_the_cache_volume():
    _, service, headless, job = _bundle().layouts[0][1]
    spec = job["spec"]["template"]["spec"]
    wait = spec["initContainers"][0]["command"][-1]
    assert f"{headless['metadata']['name']}.inference.svc.cluster.local" in wait and ">= 2" in wait
    assert spec["nodeSelector"] == {"doks.digitalocean.com/node-pool": "mi300x-8"}
    assert spec["tolerations"][0]["key"] == "amd.com/gpu"
    container = spec["containers"][0]
    assert "amd.com/gpu" not in container["resources"]["requests"]
    assert container["volumeMounts"] == [{"name": "cache", "mountPath": "/models"}]  # read-write
    script = container["command"][-1]
    assert "out=/models/bench/staging/qwen3-235b/20261202-1830/tp4-ep-r2" in script
    assert f"http://{service['metadata']['name']}.inference.svc.cluster.local:8000" in script
    assert [ln for ln in script.splitlines() if ln.startswith("sweep ")] == ["sweep 1 100", "sweep 2 120", "sweep 4 240"]
    assert job["spec"]["activeDeadlineSeconds"] > 1500 * 1.5


def test_api_key_reaches_the_client_as_openai_api_key():
    job = _bundle(_target(cache=False, api_key="k"))
    env = job.layouts[0][1][-1]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "k", "key": "api-key"}}} in env


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
    assert bench_cmd.collect_results(run.stdout, collected) == 3
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
    assert len(manifests) == 12
    for path in manifests:
        kubernetes_validate.validate(yaml.safe_load(path.read_text()), "1.33", strict=True)
    assert os.access(out / "run.sh", os.X_OK)
    assert "run it with" in capsys.readouterr().out


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
