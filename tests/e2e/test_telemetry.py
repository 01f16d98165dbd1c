"""The planner learns from a real engine: CPU vLLM under load → Prometheus with the rendered rules →
`infra tune calibrate --prometheus` → factors that move the prediction toward the measurement.

How the CPU engine is modelled (honestly, and for this test only): the GPU catalog has no CPU, so
the test adds one size, `cpu-e2e`, to the in-process catalog (monkeypatch): one "GPU" per node
with figures of one x86 core — DRAM bandwidth, BF16 GEMM rate, no FP8 — and its own calibration
family `cpu-e2e`, which starts from the catalog's default factors (what the planner assumes for a
family it has never seen). Each engine of `engine_pair` (one core each) is one such node. The
stack (stacks/Pulumi.e2e.yaml in a scratch project) names the tiny Llama by a stand-in id with
`hf_config` = its real config.json, and the engines' layout and batch limits (inputs.LAYOUT).

Inputs from the project: the rules are `render_prometheus_rules(observed_models(plan.models))` of
that stack's plan, so the prediction series are the plan's; the command is `infra.cli.main`.
Changed for the test, and only this: rule groups evaluate every 1 s, scrapes every 2 s, and the
rules' 5 m rate windows are RATE_WINDOW (with the steadiness check's lag to match), so windows of
WINDOW_S seconds are steady within a couple of minutes instead of an hour.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import yaml

from infra.catalog import gpus as gpu_catalog
from infra.cli import main
from tests.e2e import harness, inputs
from tests.e2e.conftest import timed

RATE_WINDOW = "20s"
WINDOW_S = 20
STEP_S = 2
LOAD_S = 200  # long enough for ≥ 3 steady windows with margin on a loaded 2-core runner (3–5 seen at 150 s)
CLIENTS_PER_ENGINE = 4
STACK = "e2e"

# One x86 core as a "GPU": ~20 GB/s of DRAM bandwidth, ~0.1 TFLOPS BF16 (AVX-512 / AMX-less), no
# FP8. Memory: the planner's fixed runtime allowance (2.5 GB per GPU) plus room for the engines'
# KV space (VLLM_CPU_KVCACHE_SPACE, 1 GiB); the tiny model's KV never binds (max_num_seqs does).
CPU = gpu_catalog.Accelerator(
    vendor="amd", model="cpu-e2e", family="cpu-e2e", hbm_gb=5.0, hbm_bytes=5 * 2**30, hbm_bandwidth_tb_s=0.02,
    bf16_tflops=0.1, fp8_tflops=0.0, link_gb_s=10.0, supports_fp8=False,
)
CPU_SIZE = gpu_catalog.GpuSize(
    slug="cpu-e2e", accelerator=CPU, gpus=1, vcpus=1, ram_gib=4, boot_disk_gib=None, scratch_disk_gib=None, usd_per_hour=0.05,
)


def _stack_file(model_dir: Path) -> str:
    lay = inputs.LAYOUT
    return yaml.safe_dump({"config": {
        "inference-platform:environment": "dev",
        "inference-platform:region": "tor1",
        "inference-platform:network": {"vpc_cidr": "10.31.0.0/20"},
        "inference-platform:cluster": {"version": "1.33", "system_pool": {"size": "s-4vcpu-8gb", "nodes": 1}},
        "inference-platform:gpu_pools": [{"name": "cpu", "size": "cpu-e2e", "nodes": 2}],
        "inference-platform:model_cache": {"kind": "none"},
        "inference-platform:models": [{
            "name": inputs.MODEL, "source": "e2e/tiny-llama", "served_model_name": inputs.SERVED,
            "hf_config": str(model_dir / "config.json"), "pool": "cpu",
            "layout": {"tp": lay.tp, "max_num_seqs": lay.max_num_seqs, "max_num_batched_tokens": lay.max_num_batched_tokens,
                       "max_model_len": lay.max_model_len},
            "workload": {"input_tokens": inputs.WORKLOAD.input_tokens, "output_tokens": inputs.WORKLOAD.output_tokens,
                         "peak_rps": inputs.WORKLOAD.peak_rps},
            "slo": {"ttft_p90_ms": inputs.SLO.ttft_p90_ms, "tpot_p90_ms": inputs.SLO.tpot_p90_ms},
        }],
        "inference-platform:router": {"kind": "service"},
        "inference-platform:observability": {"enabled": True},
    }}, sort_keys=False)


@pytest.fixture(scope="module")
def cpu_catalog():
    mp = pytest.MonkeyPatch()
    mp.setitem(gpu_catalog.GPU_SIZES, CPU_SIZE.slug, CPU_SIZE)
    mp.setattr("infra.tuning.telemetry.RATE_LAG_S", 20)
    yield
    mp.undo()


@pytest.fixture(scope="module")
def project(cpu_catalog, tiny_models, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("telemetry-project")
    (root / "stacks").mkdir()
    (root / "stacks" / f"Pulumi.{STACK}.yaml").write_text(_stack_file(tiny_models["llama"]))
    return root


def _plan(root: Path):
    from infra.config import load_stack_file
    from infra.stack_plan import plan_stack

    return plan_stack(load_stack_file(STACK, root))


def _rule_groups(root: Path) -> list[dict]:
    from infra.render import observability
    from infra.stack_plan import observed_models

    plan = _plan(root)
    models = observed_models(plan.models)
    rules = observability.render_prometheus_rules(models, observability.GpuRuntimeFacts(vendor="amd"), observability.MonitoringSettings())
    groups = [g for obj in rules for g in obj["spec"]["groups"]]
    for g in groups:
        g["interval"] = "1s"
        for r in g["rules"]:
            r["expr"] = r["expr"].replace("[5m]", f"[{RATE_WINDOW}]")
    return groups


def _load(urls: list[str], seconds: float) -> dict:
    """Closed loop: CLIENTS_PER_ENGINE clients per engine, each sending the next request when the
    last one finished (the workload's prompt and answer lengths)."""
    stop = time.monotonic() + seconds
    counts = {"ok": 0, "failed": 0}
    lock = threading.Lock()
    prompt = " ".join(f"w{i}" for i in range(inputs.WORKLOAD.input_tokens // 2))

    def client(url):
        while time.monotonic() < stop:
            body = {"model": inputs.SERVED, "prompt": prompt, "max_tokens": inputs.WORKLOAD.output_tokens,
                    "min_tokens": inputs.WORKLOAD.output_tokens, "ignore_eos": True}
            status, _ = harness.http("POST", url + "/v1/completions", body=body, headers=harness.bearer(inputs.API_KEY))
            with lock:
                counts["ok" if status == 200 else "failed"] += 1

    threads = [threading.Thread(target=client, args=(u,)) for u in urls for _ in range(CLIENTS_PER_ENGINE)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts


@pytest.fixture(scope="module")
def loaded_prometheus(prometheus_bin, procs, engine_pair, project, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("telemetry-prometheus")
    rules = tmp / "rules.yml"
    rules.write_text(yaml.safe_dump({"groups": _rule_groups(project)}, sort_keys=False))
    labels = {"namespace": "inference-engines", "model": inputs.MODEL, "node": "e2e"}
    config = {
        # 2 s scrapes with a 2 s timeout: a CPU engine saturated by the load answers /metrics late,
        # and each missed scrape is a gap in the recorded series.
        "global": {"scrape_interval": "2s", "evaluation_interval": "1s", "scrape_timeout": "2s"},
        "rule_files": [str(rules)],
        "scrape_configs": [{"job_name": "vllm", "static_configs": [
            {"targets": [e.url.removeprefix("http://")], "labels": {**labels, "component": "vllm", "pod": e.name}}
            for e in engine_pair]}],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    port = harness.free_port()
    proc = procs.start("prometheus-telemetry", [prometheus_bin["prometheus"], f"--config.file={tmp / 'prometheus.yml'}",
                                                f"--storage.tsdb.path={tmp / 'data'}",
                                                f"--web.listen-address={harness.LOOPBACK}:{port}", "--log.level=warn"], port=port)
    harness.wait_http(proc, "/-/ready", timeout=60, extra_tails=procs.tails)
    time.sleep(5)  # counters scraped once before the load, or rate() sees no increase
    with timed(f"telemetry: {LOAD_S} s closed-loop load on {len(engine_pair)} CPU engines"):
        counts = _load([e.url for e in engine_pair], LOAD_S)
    assert counts["ok"] > 50 and counts["failed"] == 0, counts
    time.sleep(WINDOW_S + 2 * STEP_S)  # the last loaded window is closed before calibrating
    return proc


def test_every_planner_series_is_recorded_from_the_real_engines(loaded_prometheus, project):
    """The planner group's records (and so the dashboard row, which reads them) exist over the run."""
    records = {r["record"] for g in _rule_groups(project) if ".planner." in g["name"] for r in g["rules"]}
    url = f"{loaded_prometheus.url}/api/v1/query?query=" + "group%20by%20(__name__)%20(last_over_time(%7B__name__%3D~%22model%3Aplanner_.%2B%22%7D%5B10m%5D))"
    present = {r["metric"]["__name__"] for r in harness.get_json(url)["data"]["result"]}
    assert records and records <= present, sorted(records - present)


def _calibrate(url: str, root: Path, capsys, *extra: str) -> tuple[int, str]:
    code = main(["tune", "calibrate", "--prometheus", url, "--stack", STACK, "--stacks-dir", str(root / "stacks"),
                 "--since", "6m", "--step", f"{STEP_S}s", "--window", f"{WINDOW_S}s", *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_calibrate_from_the_real_prometheus_moves_the_prediction_halfway_and_a_rerun_changes_nothing(
    loaded_prometheus, project, capsys
):
    with timed("telemetry: infra tune calibrate --prometheus --write"):
        code, out = _calibrate(loaded_prometheus.url, project, capsys, "--json", "--write")
    assert code == 0, out
    report = json.loads(out)
    (family,) = report["families"]
    assert family["family"] == "cpu-e2e"
    new = [o for o in family["observations"] if o["new"]]
    if len(new) < 3:
        with capsys.disabled():  # every window's verdict, untruncated, for the CI log
            print(json.dumps(report["windows"], indent=1))
    assert len(new) >= 3, report["windows"]
    measured = sum(o["output_tokens_per_s_per_node"] for o in new) / len(new)
    before = sum(o["predicted_before"] for o in new) / len(new)
    after = sum(o["predicted_after"] for o in new) / len(new)
    with capsys.disabled():
        print(json.dumps(report, indent=1))
        print(f"output tokens/s per node: measured {measured:.1f}, predicted {before:.1f} before, {after:.1f} after")
    assert abs(after - measured) <= 0.5 * abs(before - measured), (measured, before, after)

    path = project / "stacks" / f"factors.{STACK}.json"
    written = path.read_bytes()
    doc = json.loads(written)
    assert doc["provenance"]["cluster"] == f"{STACK}-doks"
    assert inputs.MODEL in doc["measured"]
    notes = "\n".join(_plan(project).notes)
    assert f"stacks/factors.{STACK}.json (from telemetry" in notes and f"model {inputs.MODEL}: measured" in notes

    code, out = _calibrate(loaded_prometheus.url, project, capsys, "--write")
    assert code == 0 and "no new steady window since the last run" in out, out
    assert path.read_bytes() == written
