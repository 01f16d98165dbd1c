"""One end-to-end run per command through the real entry point (`python -m infra.cli` in a fresh
process): argument parsing, imports, exit codes and the streams as a shell sees them. Every other
CLI test calls `infra.cli.main` in-process (tests/conftest.py `run_cli`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from infra.cli import COMMAND_MODULES
from tests.conftest import ROOT, make_project, plan_of, table_rows


def infra(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "infra.cli", *argv], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )
    # Nothing a shell user sees may be a traceback or an interpreter complaint at exit.
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    return proc


def test_plan(tmp_path):
    out_json = tmp_path / "plan.json"
    proc = infra("plan", "staging", "--json", str(out_json), "--out", str(tmp_path / "manifests"))
    assert proc.returncode == 0, proc.stderr
    assert "Models:" in proc.stdout and "Cost:" in proc.stdout
    assert out_json.read_text() == plan_of("staging").to_json()


def test_diff(tmp_path):
    old = plan_of("prod").to_dict()
    new = json.loads(json.dumps(old))
    for res in new["resources"]:
        if res["type"] == "digitalocean:index/kubernetesCluster:KubernetesCluster":
            res["inputs"]["region"] = "nyc2"
    (tmp_path / "a.json").write_text(json.dumps(old))
    (tmp_path / "b.json").write_text(json.dumps(new))
    proc = infra("diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--fail-on-replace")
    assert proc.returncode == 3 and "REPLACE" in proc.stdout


def test_layout():
    proc = infra(
        "layout", "--model", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "--gpu", "gpu-mi325x8-2048gb-contracted",
        "--input-tokens", "2000", "--output-tokens", "300", "--ttft-p90-ms", "2000", "--tpot-p90-ms", "50", "--top", "2",
    )
    assert proc.returncode == 0, proc.stderr
    header, *rows = table_rows(proc.stdout)  # a pipe, not a terminal: the plain ASCII table
    assert header[0] == "layout" and len(rows) == 2 and "\x1b[" not in proc.stdout


def test_new_env(tmp_path):
    shutil.copytree(ROOT / "stacks", make_project(tmp_path) / "stacks", dirs_exist_ok=True)
    proc = infra("new-env", "qa", "--from", "dev", "--root", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "stacks" / "Pulumi.qa.yaml").is_file()


def test_doctor(httpserver, tmp_path):
    from tests.test_preflight import TOKEN, _serve

    _serve(httpserver)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("pulumi", "kubectl"):
        (bin_dir / tool).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / tool).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGITALOCEAN_")}
    env.update(DIGITALOCEAN_TOKEN=TOKEN, DIGITALOCEAN_API_URL=httpserver.url_for("/"), PATH=f"{bin_dir}{os.pathsep}{env['PATH']}")
    proc = infra("doctor", "staging", env=env)
    assert proc.returncode in (0, 1), proc.stderr  # 1: a check failed, which the table says
    rows = {row[1]: row[0] for row in table_rows(proc.stdout)}
    assert rows["api token"] == "PASS" and rows["pulumi cli"] == "PASS"
    assert TOKEN not in proc.stdout + proc.stderr


def test_bench(tmp_path):
    out = tmp_path / "bench"
    proc = infra("bench", "staging", "qwen3-235b", "--layouts", "tp8-ep-r1", "--out", str(out), "--run-id", "r1")
    assert proc.returncode == 0, proc.stderr
    assert os.access(out / "run.sh", os.X_OK) and (out / "sweep.json").is_file()


def test_tune(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(ROOT / "tests" / "fixtures" / "bench" / "staging-qwen3-235b", results)
    proc = infra("tune", "ingest", str(results), "--ttft-p90-ms", "2000", "--tpot-p90-ms", "50", "--no-chart")
    assert proc.returncode == 0, proc.stderr
    assert "winner: tp4-ep-r2" in proc.stdout


def test_a_user_mistake_is_one_line_and_exit_two(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    proc = infra("plan", "dev", "--json", str(tmp_path / "missing" / "x.json"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: --json ")


def test_every_command_has_a_smoke_test():
    commands = {module.rsplit(".", 1)[-1] for module in COMMAND_MODULES}
    assert {name for name in globals() if name.startswith("test_")} >= {f"test_{c}" for c in commands}


def test_catalog(httpserver, tmp_path):
    from tests.test_catalog_sync import DOC, _serve, answer_from

    _serve(httpserver, answer_from(DOC))
    catalog = tmp_path / "gpu_sizes.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGITALOCEAN_")}
    env.update(DIGITALOCEAN_TOKEN="dop_v1_" + "0" * 64, DIGITALOCEAN_API_URL=httpserver.url_for("/"))
    shutil.copy(ROOT / "infra" / "catalog" / "gpu_sizes.json", catalog)
    proc = infra("catalog", "sync", "--catalog", str(catalog), "--check", env=env)
    assert proc.returncode in (0, 1), proc.stderr  # 1: the answer differs from the catalog, which it says


def test_rollout(tmp_path):
    from tests.rollout.conftest import staging_with_rollout_text

    root = make_project(tmp_path / "project")
    (root / "stacks" / "Pulumi.staging.yaml").write_text(staging_with_rollout_text())
    proc = infra("rollout", "promote", "staging", "qwen3-235b", "--root", str(root))
    assert proc.returncode == 0, proc.stderr
    assert "20 % → 50 %" in proc.stdout
    proc = infra("rollout", "status", "staging", "qwen3-235b", "--root", str(root), "--prometheus", "http://127.0.0.1:9")
    assert proc.returncode == 2 and proc.stderr.startswith("error: --prometheus")


def test_charts(tmp_path):
    """`infra charts pull --check` with no archives: each pinned chart is MISSING, exit 1, no network."""
    pytest.importorskip("helm_python")
    proc = infra("charts", "pull", "--check", "--dest", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    assert "MISSING" in proc.stdout and "keda-2.18.3.tgz" in proc.stdout
