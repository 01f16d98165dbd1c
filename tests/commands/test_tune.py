"""`infra tune ingest` end to end: table, JSON, chart, --write into a copy of the staging stack."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest
import yaml

from infra.commands import tune
from infra.errors import UserError
from tests.conftest import ROOT as TESTS_ROOT
from tests.conftest import table_rows

REPO = TESTS_ROOT
FIXTURES = REPO / "tests" / "fixtures" / "bench" / "staging-qwen3-235b"


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="infra")
    tune.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture
def results(tmp_path) -> Path:
    copy = tmp_path / "results"
    shutil.copytree(FIXTURES, copy)
    return copy


@pytest.fixture
def stack_root(tmp_path) -> Path:
    root = tmp_path / "repo"
    (root / "stacks").mkdir(parents=True)
    shutil.copy(REPO / "stacks" / "Pulumi.staging.yaml", root / "stacks")
    return root


def test_table_names_the_winner_and_why_the_others_lost(results, capsys):
    assert run(["tune", "ingest", str(results), "--ttft-p90-ms", "2000", "--tpot-p90-ms", "50"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "SLO: p90 TTFT <= 2000 ms, p90 TPOT <= 50 ms"
    header, *rows = table_rows(out)
    assert header == ["", "layout", "goodput req/s", "out tok/s", "limited by", "rates measured (req/s)"]
    assert [(r[0], r[1]) for r in rows] == [("*", "tp4-ep-r2"), ("", "tp8-ep-r1"), ("", "tp2-r4")]
    assert rows[2][4] == "never meets SLO"
    assert "winner: tp4-ep-r2 - highest goodput 5.09 rps" in out
    assert "tp8-ep-r1: 4.12 rps, 19% below tp4-ep-r2" in out
    assert "tp2-r4: never meets the SLO" in out
    assert (results / "latency-vs-rate.svg").read_text().startswith("<svg")


def test_json_output(results, capsys, tmp_path):
    chart = tmp_path / "out" / "c.svg"
    run(["tune", "ingest", str(results), "--ttft-p90-ms", "2000", "--tpot-p90-ms", "50", "--json", "--chart", str(chart)])
    payload = json.loads(capsys.readouterr().out)
    assert payload["winner"] == "tp4-ep-r2"
    assert [g["name"] for g in payload["layouts"]] == ["tp4-ep-r2", "tp8-ep-r1", "tp2-r4"]
    first = payload["layouts"][0]
    assert first["goodput_rps"] == pytest.approx(5.086, abs=1e-3)
    assert first["reason"] and first["points"][0]["request_rate_rps"] == 1
    assert payload["chart"] == str(chart) and chart.is_file()


def test_slos_default_to_the_stack_model(results, stack_root, capsys):
    run(["tune", "ingest", str(results), "--stack", "staging", "--model", "qwen3-235b", "--no-chart",
         "--stacks-dir", str(stack_root / "stacks"), "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert payload["slo"] == {"ttft_p90_ms": 2000.0, "tpot_p90_ms": 50.0}
    # A tighter TPOT on the command line overrides the stack and changes the outcome.
    run(["tune", "ingest", str(results), "--stack", "staging", "--model", "qwen3-235b", "--no-chart",
         "--stacks-dir", str(stack_root / "stacks"), "--json", "--tpot-p90-ms", "30"])
    payload = json.loads(capsys.readouterr().out)
    assert payload["slo"]["tpot_p90_ms"] == 30 and payload["layouts"][0]["goodput_rps"] < 2.2


def test_write_records_the_winner_with_provenance(results, stack_root, capsys):
    stack = stack_root / "stacks" / "Pulumi.staging.yaml"
    before = stack.read_text()
    run(["tune", "ingest", str(results), "--stack", "staging", "--model", "qwen3-235b", "--write",
         "--no-chart", "--stacks-dir", str(stack_root / "stacks")])
    assert "wrote tp4-ep-r2 to" in capsys.readouterr().out
    after = stack.read_text()
    assert [ln for ln in before.splitlines() if ln.lstrip().startswith("#")] == [
        ln for ln in after.splitlines() if ln.lstrip().startswith("#")
    ]
    model = yaml.safe_load(after)["config"]["inference-platform:models"][0]
    layout = model["layout"]
    assert {k: layout[k] for k in ("tp", "ep", "dp", "replicas_per_node", "max_num_seqs", "kv_cache_dtype")} == {
        "tp": 4, "ep": True, "dp": 1, "replicas_per_node": 2, "max_num_seqs": 128, "kv_cache_dtype": "fp8"
    }
    provenance = layout["provenance"]
    assert provenance["vllm_version"] == "0.33.0"
    assert provenance["image"] == "vllm/vllm-openai-rocm:v0.33.0"
    assert provenance["measured_goodput_rps"] == pytest.approx(5.086, abs=1e-3)
    assert provenance["measured_at"] == "2026-12-02T18:16:00"  # the latest of the winner's runs
    assert len(provenance["source_results"]) == 7 and all("tp4-ep-r2" in s for s in provenance["source_results"])


def test_written_stack_still_validates(results, stack_root):
    config = pytest.importorskip("infra.config")
    run(["tune", "ingest", str(results), "--stack", "staging", "--model", "qwen3-235b", "--write",
         "--no-chart", "--stacks-dir", str(stack_root / "stacks")])
    loaded = config.load_stack_file("staging", root=stack_root)
    layout = loaded.models[0].layout
    assert (layout.tp, layout.ep, layout.replicas_per_node) == (4, True, 2)
    assert layout.provenance.vllm_version == "0.33.0"


def test_user_errors(results, stack_root):
    with pytest.raises(UserError, match="--ttft-p90-ms"):
        run(["tune", "ingest", str(results), "--no-chart"])
    with pytest.raises(UserError, match="--write needs --stack and --model"):
        run(["tune", "ingest", str(results), "--ttft-p90-ms", "1", "--tpot-p90-ms", "1", "--write", "--no-chart"])
    with pytest.raises(UserError, match="not 'llama'"):
        run(["tune", "ingest", str(results), "--model", "llama", "--ttft-p90-ms", "1", "--tpot-p90-ms", "1", "--no-chart"])
    stack = stack_root / "stacks" / "Pulumi.staging.yaml"
    stack.write_text(stack.read_text().replace("slo: {ttft_p90_ms: 2000,", "slo: {ttft_p90_ms: 100,"))
    with pytest.raises(UserError, match="nothing written"):
        run(["tune", "ingest", str(results), "--stack", "staging", "--model", "qwen3-235b", "--write", "--no-chart",
             "--stacks-dir", str(stack_root / "stacks")])


def test_write_records_the_conditions_it_was_measured_under(results, stack_root):
    run(["tune", "ingest", str(results), "--stack", "staging", "--model", "qwen3-235b", "--write",
         "--no-chart", "--stacks-dir", str(stack_root / "stacks")])
    provenance = yaml.safe_load((stack_root / "stacks" / "Pulumi.staging.yaml").read_text())["config"][
        "inference-platform:models"][0]["layout"]["provenance"]
    assert provenance["slo"] == {"ttft_p90_ms": 2000, "tpot_p90_ms": 50}
    assert provenance["workload"] == {"input_tokens": 2000, "output_tokens": 300}
    assert provenance["gpu"] == "gpu-mi300x8-1536gb"


@pytest.mark.parametrize("action", [["ingest", "--write", "--no-chart"], ["calibrate"]])
def test_an_slo_override_is_refused_for_write_and_calibrate(results, stack_root, capsys, action):
    """Goodput under a --tpot-p90-ms override must not size the pool or re-fit the factors that
    the stack's own SLO is planned with."""
    from infra import cli

    stack = stack_root / "stacks" / "Pulumi.staging.yaml"
    before = stack.read_text()
    code = cli.main(["tune", action[0], str(results), *action[1:], "--stack", "staging", "--model", "qwen3-235b",
                     "--tpot-p90-ms", "30", "--stacks-dir", str(stack_root / "stacks")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"error: {'--write' if action[0] == 'ingest' else 'calibrate'} refused" in err
    assert "--tpot-p90-ms: 30 is not the stack's SLO 50" in err
    assert stack.read_text() == before
    # The same override without --write only compares: allowed.
    assert run(["tune", "ingest", str(results), "--stack", "staging", "--model", "qwen3-235b", "--no-chart",
                "--tpot-p90-ms", "30", "--stacks-dir", str(stack_root / "stacks")]) == 0


def test_results_from_another_workload_or_gpu_are_refused(results, stack_root, capsys):
    from infra import cli

    for path in results.rglob("*.json"):
        data = json.loads(path.read_text())
        if isinstance(data, dict):  # not the .pytorch.json side files
            data.update(input_tokens="1000", output_tokens="300", gpu="gpu-mi325x8-2048gb")
            path.write_text(json.dumps(data))
    code = cli.main(["tune", "ingest", str(results), "--stack", "staging", "--model", "qwen3-235b", "--write",
                     "--no-chart", "--stacks-dir", str(stack_root / "stacks")])
    err = capsys.readouterr().err
    assert code == 2
    assert "RESULTS input_tokens: measured with 1000; the stack's workload has 2000" in err
    assert "RESULTS gpu: measured on gpu-mi325x8-2048gb; the stack's pool is gpu-mi300x8-1536gb" in err
    assert "output_tokens" not in err  # 300 matches


def test_write_records_the_planners_prediction(results, stack_root):
    run(["tune", "ingest", str(results), "--stack", "staging", "--model", "qwen3-235b", "--write",
         "--no-chart", "--stacks-dir", str(stack_root / "stacks")])
    provenance = yaml.safe_load((stack_root / "stacks" / "Pulumi.staging.yaml").read_text())["config"][
        "inference-platform:models"][0]["layout"]["provenance"]
    assert provenance["predicted_goodput_rps"] > 0


def test_calibrate_command_reports_and_saves(results, stack_root, tmp_path, capsys):
    from infra.planner.efficiency import DEFAULT_PATH

    table = tmp_path / "efficiency.json"
    shutil.copy(DEFAULT_PATH, table)
    before = table.read_text()
    run(["tune", "calibrate", str(results), "--stack", "staging", "--model", "qwen3-235b", "--json", "--save",
         "--efficiency-file", str(table), "--stacks-dir", str(stack_root / "stacks")])
    payload = json.loads(capsys.readouterr().out)
    assert payload["mean_abs_error_pct"]["after"] < payload["mean_abs_error_pct"]["before"]
    assert payload["saved_to"] == str(table) and table.read_text() != before
    with pytest.raises(UserError, match="calibrate needs --stack and --model"):
        run(["tune", "calibrate", str(results), "--ttft-p90-ms", "1", "--tpot-p90-ms", "1"])


def _unusable_results(tmp_path: Path) -> Path:
    from tests.fixtures.bench.vllm_results import vllm_result

    out = tmp_path / "unusable"
    out.mkdir()
    bad = vllm_result("tp4-ep-r2", 2, 500, 30)
    bad["p90_ttft_ms"] = "fast"
    nan = vllm_result("tp4-ep-r2", 3, 500, 30)
    nan["p90_ttft_ms"] = float("nan")
    (out / "a.json").write_text(json.dumps(bad))
    (out / "b.json").write_text(json.dumps(nan))
    (out / "c.json").write_text(json.dumps(vllm_result("tp4-ep-r2", "inf", 500, 30)))
    return out


def test_ingest_with_no_usable_point_exits_two_and_says_why(tmp_path, capsys):
    from infra import cli

    results = _unusable_results(tmp_path)
    code = cli.main(["tune", "ingest", str(results), "--ttft-p90-ms", "2000", "--tpot-p90-ms", "50", "--no-chart"])
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    err = captured.err
    assert err.startswith("error: no usable sweep point in RESULTS (3 results, all skipped")
    assert f'{results / "a.json"}: invalid value p90_ttft_ms="fast"' in err
    assert f"{results / 'b.json'}: invalid value p90_ttft_ms=NaN" in err
    assert f"{results / 'c.json'}: request_rate inf (saturation run) has no rate to compare" in err
    assert not (results / "latency-vs-rate.svg").exists()


def test_ingest_notes_name_invalid_values_when_other_points_are_usable(results, tmp_path, capsys):
    extra = _unusable_results(tmp_path)
    assert run(["tune", "ingest", str(results), str(extra), "--ttft-p90-ms", "2000", "--tpot-p90-ms", "50", "--no-chart"]) == 0
    out = capsys.readouterr().out
    assert 'a.json: skipped, invalid value p90_ttft_ms="fast"' in out
    assert "c.json: skipped, request_rate inf (saturation run) has no rate to compare" in out
    assert "skipped, missing p90_ttft_ms" not in out


def test_calibrate_with_no_usable_point_exits_two(tmp_path, stack_root, capsys):
    from infra import cli

    results = _unusable_results(tmp_path)
    code = cli.main(["tune", "calibrate", str(results), "--stack", "staging", "--model", "qwen3-235b",
                     "--stacks-dir", str(stack_root / "stacks")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no usable sweep point in RESULTS") and "invalid value p90_ttft_ms" in err


@pytest.mark.parametrize("action", [["ingest", "--no-chart"], ["ingest", "--write", "--no-chart"], ["calibrate"]])
@pytest.mark.parametrize(
    ("stack", "model", "expected"),
    [
        ("nope", "qwen3-235b", "error: no stack file "),
        ("staging", "llama", "error: --model: stack staging has no model 'llama'; models: ['qwen3-235b']"),
    ],
)
def test_unknown_stack_or_model_is_one_line(results, stack_root, capsys, action, stack, model, expected):
    """The stack's conditions come from its validated config: an unknown stack or model is one
    clear line, not a traceback."""
    from infra import cli

    for path in results.rglob("*.json"):
        data = json.loads(path.read_text())
        if isinstance(data, dict):  # results made by hand carry no model: only the stack can say
            data.pop("model", None)
            path.write_text(json.dumps(data))
    code = cli.main(["tune", action[0], str(results), *action[1:], "--stack", stack, "--model", model,
                     "--stacks-dir", str(stack_root / "stacks")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(expected) and err.count("\n") == 1


def test_write_refuses_a_layout_the_stack_cannot_run_and_writes_nothing(results, stack_root, capsys):
    # Before: tp99-r1 from the result files went into the stack file, and the next plan failed.
    for path in results.rglob("*.json"):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and data.get("layout") == "tp4-ep-r2":
            data["layout"] = "tp99-r1"
            path.write_text(json.dumps(data))
    stack = stack_root / "stacks" / "Pulumi.staging.yaml"
    before = stack.read_text()
    from infra import cli

    code = cli.main(["tune", "ingest", str(results), "--stack", "staging", "--model", "qwen3-235b", "--write",
                     "--no-chart", "--stacks-dir", str(stack_root / "stacks")])
    err = capsys.readouterr().err
    assert code == 2 and stack.read_text() == before
    assert "--write refused, nothing written: the measured winner tp99-r1 does not validate" in err
    assert "models[0].layout.tp: 99 is out of range" in err


def test_a_named_stack_is_loaded_even_when_the_slos_are_given(results, stack_root):
    # Before: `--stack nosuch` with both SLO flags was never looked at.
    with pytest.raises(UserError, match="no stack file"):
        run(["tune", "ingest", str(results), "--stack", "nosuch", "--model", "qwen3-235b", "--ttft-p90-ms", "2000",
             "--tpot-p90-ms", "50", "--no-chart", "--stacks-dir", str(stack_root / "stacks")])


def _add_metadata(results: Path, **pairs: str) -> None:
    """As `infra bench` results carry them: `--metadata key=value` lands as top-level strings."""
    for path in results.rglob("*.json"):
        if path.name.endswith(".pytorch.json"):
            continue
        obj = json.loads(path.read_text())
        obj.update(pairs)
        path.write_text(json.dumps(obj))


def test_write_keeps_the_measured_time_to_ready_and_the_plan_prefers_it(results, stack_root):
    """Issue 20: ready_seconds + weights_source from the results land in the provenance, and the
    plan's time-to-ready uses the measurement because the staging stack reads from NFS too."""
    from infra.config import load_stack_file
    from infra.stack_plan import plan_stack

    _add_metadata(results, weights_source="nfs", ready_seconds="412")
    run(["tune", "ingest", str(results), "--stack", "staging", "--model", "qwen3-235b", "--write",
         "--no-chart", "--stacks-dir", str(stack_root / "stacks")])
    provenance = yaml.safe_load((stack_root / "stacks" / "Pulumi.staging.yaml").read_text())["config"][
        "inference-platform:models"][0]["layout"]["provenance"]
    assert provenance["ready_seconds"] == 412 and provenance["weights_source"] == "nfs"
    plan = plan_stack(load_stack_file("staging", root=stack_root))
    readiness = plan.models[0].readiness
    assert readiness.measured_s == 412 and readiness.serving_after_s == 412
    assert plan.models_json()[0]["time_to_ready"]["serving_after_source"] == "measured"


def test_a_time_to_ready_measured_from_another_source_is_kept_but_not_used(results, stack_root):
    from infra.config import load_stack_file
    from infra.stack_plan import plan_stack

    _add_metadata(results, weights_source="spaces", ready_seconds="300")
    run(["tune", "ingest", str(results), "--stack", "staging", "--model", "qwen3-235b", "--write",
         "--no-chart", "--stacks-dir", str(stack_root / "stacks")])
    plan = plan_stack(load_stack_file("staging", root=stack_root))
    assert plan.models[0].layout.replicas_per_node == 2
    assert plan.models[0].readiness.measured_s is None  # the stack reads from NFS


def test_results_without_time_to_ready_write_nulls(results, stack_root):
    run(["tune", "ingest", str(results), "--stack", "staging", "--model", "qwen3-235b", "--write",
         "--no-chart", "--stacks-dir", str(stack_root / "stacks")])
    provenance = yaml.safe_load((stack_root / "stacks" / "Pulumi.staging.yaml").read_text())["config"][
        "inference-platform:models"][0]["layout"]["provenance"]
    assert provenance["ready_seconds"] is None and provenance["weights_source"] is None


def test_write_records_the_sessions_of_a_multi_turn_replay(results, stack_root):
    """Issue 26: results of `infra bench --dataset multi-turn` carry the sessions they replayed
    (metadata workload, turns_per_session, think_time_s); the provenance's workload keeps them, so
    the recorded goodput says it includes those sessions' prefix-cache hits."""
    from infra.config import load_stack_file

    _add_metadata(results, workload="multi-turn", turns_per_session="8", think_time_s="300")
    run(["tune", "ingest", str(results), "--stack", "staging", "--model", "qwen3-235b", "--write",
         "--no-chart", "--stacks-dir", str(stack_root / "stacks")])
    provenance = yaml.safe_load((stack_root / "stacks" / "Pulumi.staging.yaml").read_text())["config"][
        "inference-platform:models"][0]["layout"]["provenance"]
    assert provenance["workload"] == {"input_tokens": 2000, "output_tokens": 300, "turns_per_session": 8, "think_time_s": 300}
    workload = load_stack_file("staging", root=stack_root).models[0].layout.provenance.workload
    assert (workload.turns_per_session, workload.think_time_s) == (8, 300.0)
