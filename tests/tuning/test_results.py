"""Parsing `vllm bench serve --save-result` output (format of the pinned vLLM 0.33.0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.errors import UserError
from infra.tuning.results import collect_result_files, layout_fields, load_results, parse_result
from tests.conftest import TESTS_DIR
from tests.fixtures.bench.vllm_results import bench_metadata, vllm_result

FIXTURES = TESTS_DIR / "fixtures" / "bench" / "staging-qwen3-235b"


def _write(path: Path, *objects: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(o) for o in objects) + "\n")
    return path


def test_reads_fields_as_vllm_writes_them():
    point = parse_result(
        vllm_result("tp4-ep-r2", 3.5, 812.5, 41.25, num_prompts=500, failed=5, metadata={"run_id": "r1"}),
        source="x.json",
    )
    assert point.layout == "tp4-ep-r2"
    assert point.request_rate_rps == 3.5
    assert (point.completed, point.failed) == (495, 5)
    assert (point.ttft_p90_ms, point.tpot_p90_ms) == (812.5, 41.25)
    assert point.output_throughput_tok_s == pytest.approx(point.request_throughput_rps * 300)
    assert point.request_goodput_rps is not None
    assert point.measured_at.isoformat() == "2026-12-02T18:15:00"
    assert point.model_id == "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"
    assert point.metadata == {"layout": "tp4-ep-r2", "run_id": "r1"}
    assert point.failed_fraction == pytest.approx(0.01)
    assert point.missing() == []


def test_layout_name_is_canonicalised_and_validated():
    assert parse_result(vllm_result(" tp4-ep-r2 ", 1, 1, 1), source="a").layout == "tp4-ep-r2"
    with pytest.raises(UserError, match="a.json.*not a layout name"):
        parse_result(vllm_result("four-gpus", 1, 1, 1), source="a.json")


def test_missing_layout_is_an_error_unless_overridden():
    result = vllm_result(None, 2, 500, 30)
    with pytest.raises(UserError, match="--metadata layout="):
        parse_result(result, source="hand.json")
    assert parse_result(result, source="hand.json", layout_override="tp8-r1").layout == "tp8-r1"


def test_missing_and_odd_values_become_none():
    result = vllm_result("tp8-r1", "inf", None, 30, drop=("completed", "output_throughput"))
    result["request_goodput"] = None  # run without --goodput
    result["p90_tpot_ms"] = float("nan")  # numpy NaN for an empty sample set
    point = parse_result(result, source="b.json")
    assert point.request_rate_rps is None  # "inf" is a burst, not a rate
    assert point.completed is None and point.output_throughput_tok_s is None
    assert point.request_goodput_rps is None
    assert point.missing() == ["request_rate", "completed", "p90_ttft_ms", "p90_tpot_ms"]


def test_appended_results_and_pytorch_twins(tmp_path):
    _write(tmp_path / "sweep.json", vllm_result("tp4-r2", 1, 400, 20), vllm_result("tp4-r2", 2, 450, 25))
    (tmp_path / "sweep.pytorch.json").write_text("[]")
    points = load_results([tmp_path])
    assert [(p.request_rate_rps, p.source.endswith(("#1", "#2"))) for p in points] == [(1.0, True), (2.0, True)]
    assert collect_result_files([tmp_path]) == [tmp_path / "sweep.json"]


def test_unusable_files_are_reported_together(tmp_path):
    _write(tmp_path / "ok.json", vllm_result("tp4-r2", 1, 400, 20))
    (tmp_path / "broken.json").write_text("{not json")
    _write(tmp_path / "nolayout.json", vllm_result(None, 1, 400, 20))
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(UserError) as err:
        load_results([tmp_path, tmp_path / "absent.json"])
    text = err.value.render()
    assert "absent.json: no such file" in text
    with pytest.raises(UserError) as err:
        load_results([tmp_path])
    text = err.value.render()
    assert "3 problems" in text and "broken.json" in text and "nolayout.json" in text and "list.json" in text


def test_empty_directory_is_an_error(tmp_path):
    with pytest.raises(UserError, match="no vLLM benchmark results"):
        load_results([tmp_path])


def test_layout_fields_from_bench_metadata():
    fields = {"max_num_seqs": 128, "max_num_batched_tokens": 16384, "gpu_memory_utilization": 0.9, "kv_cache_dtype": "fp8", "max_model_len": 4096}
    points = [
        parse_result(vllm_result("tp4-ep-r2", r, 500, 30, metadata=bench_metadata(fields)), source=f"{r}.json")
        for r in (1, 2)
    ]
    got, missing = layout_fields(points, "tp4-ep-r2")
    assert got == {"tp": 4, "ep": True, "dp": 1, "replicas_per_node": 2, **fields}
    assert missing == []
    bare = [parse_result(vllm_result("tp8-r1", 1, 500, 30), source="x")]
    assert layout_fields(bare, "tp8-r1") == ({"tp": 8, "ep": False, "dp": 1, "replicas_per_node": 1}, list(fields))
    # a replica over two nodes (measured by hand: infra bench does not sweep them) keeps its node count
    wide = [parse_result(vllm_result("tp8-ep-dp2-n2", 1, 500, 30), source="y")]
    assert layout_fields(wide, "tp8-ep-dp2-n2")[0] == {"tp": 8, "ep": True, "dp": 2, "replicas_per_node": 1, "nodes_per_replica": 2}


def test_layout_fields_disagreeing_is_an_error():
    points = [
        parse_result(vllm_result("tp8-r1", 1, 1, 1, metadata={"layout_max_num_seqs": s}), source=s) for s in ("64", "128")
    ]
    with pytest.raises(UserError, match="disagree on max_num_seqs"):
        layout_fields(points, "tp8-r1")


def test_committed_fixtures_parse():
    points = load_results([FIXTURES])
    assert {p.layout for p in points} == {"tp4-ep-r2", "tp8-ep-r1", "tp2-r4"}
    assert len(points) == 17  # the three .pytorch.json twins are not results
    assert all(p.metadata["model"] == "qwen3-235b" for p in points)


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("p90_ttft_ms", "fast", 'invalid value p90_ttft_ms="fast" (expected a number of milliseconds ≥ 0)'),
        ("p90_tpot_ms", float("nan"), "invalid value p90_tpot_ms=NaN"),
        ("p90_ttft_ms", -5, "invalid value p90_ttft_ms=-5"),
        ("completed", 12.5, "invalid value completed=12.5 (expected a whole number of requests ≥ 0)"),
        ("completed", "400", 'invalid value completed="400"'),
        ("failed", [], "invalid value failed=[]"),
        ("request_rate", "fast", 'invalid value request_rate="fast" (expected requests per second > 0)'),
        ("request_rate", 0, "invalid value request_rate=0"),
        ("request_rate", "-inf", 'invalid value request_rate="-inf"'),
        ("request_rate", "inf", "request_rate inf (saturation run) has no rate to compare"),
        ("request_rate", float("inf"), "request_rate inf (saturation run) has no rate to compare"),
    ],
)
def test_invalid_values_are_named_with_the_value_not_called_missing(key, value, reason):
    result = vllm_result("tp4-r2", 2, 500, 30)
    result[key] = value
    point = parse_result(result, source="x.json")
    (got,) = point.skip_reasons()
    assert got.startswith(reason)
    assert key in point.missing()  # still unusable for goodput


def test_absent_and_invalid_fields_are_reported_separately():
    result = vllm_result("tp4-r2", 2, None, 30, drop=("completed",))
    result["p90_tpot_ms"] = "slow"
    assert parse_result(result, source="x.json").skip_reasons() == [
        'invalid value p90_tpot_ms="slow" (expected a number of milliseconds ≥ 0)',
        "missing completed, p90_ttft_ms",
    ]
    assert parse_result(vllm_result("tp4-r2", "4.0", 500, 30), source="y.json").request_rate_rps == 4.0
