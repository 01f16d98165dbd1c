"""Reading a measured layout's goodput from its provenance: what sizes the pool instead of the prediction."""

from __future__ import annotations

import datetime

import pytest

from infra.planner.measured import measured_goodput

WRITTEN = {  # as `infra tune ingest --write` records it
    "measured_at": "2026-12-02T18:16:00",
    "vllm_version": "0.33.0",
    "image": "vllm/vllm-openai-rocm:v0.33.0",
    "measured_goodput_rps": 5.086,
    "predicted_goodput_rps": 15.532,
    "source_results": ["results/tp4-ep-r2/rate-1.json"],
}


def test_measured_goodput_is_read_per_node_as_written():
    measured, problems = measured_goodput(WRITTEN)
    assert problems == []
    assert measured.goodput_rps_per_node == 5.086
    assert measured.predicted_at_measurement_rps == 15.532
    assert measured.label() == "bench 2026-12-02, vLLM 0.33.0"


@pytest.mark.parametrize("provenance", [None, {}, {"vllm_version": "0.33.0"}, {**WRITTEN, "measured_goodput_rps": None}])
def test_measured_goodput_absent_means_the_prediction_sizes(provenance):
    assert measured_goodput(provenance) == (None, [])


@pytest.mark.parametrize("bad", [0, -1.5, "fast", True, float("nan"), float("inf")])
def test_measured_goodput_that_is_not_a_positive_number_is_a_problem(bad):
    measured, problems = measured_goodput({**WRITTEN, "measured_goodput_rps": bad})
    assert measured is None
    assert [key for key, _ in problems] == ["measured_goodput_rps"]
    assert repr(bad) in problems[0][1] and "> 0" in problems[0][1]


def test_measured_predicted_value_is_checked_too():
    _, problems = measured_goodput({**WRITTEN, "predicted_goodput_rps": "high"})
    assert [key for key, _ in problems] == ["predicted_goodput_rps"]


def test_measured_unquoted_timestamp_and_missing_details_still_label():
    measured, _ = measured_goodput(
        {"measured_goodput_rps": 4, "measured_at": datetime.datetime(2026, 12, 2, 18, 16), "vllm_version": None}
    )
    assert measured.measured_at == "2026-12-02T18:16:00" and measured.label() == "bench 2026-12-02"
    undated, _ = measured_goodput({"measured_goodput_rps": 4})
    assert undated.label() == "bench date not recorded"


def test_recorded_conditions_are_compared_and_older_provenance_has_none():
    measured, problems = measured_goodput(
        {**WRITTEN, "slo": {"ttft_p90_ms": 2000, "tpot_p90_ms": 50},
         "workload": {"input_tokens": 2000, "output_tokens": 300}, "gpu": "gpu-mi300x8-1536gb"}
    )
    assert problems == []
    assert measured.changed_conditions((2000, 50), (2000, 300), "gpu-mi300x8-1536gb") == []
    assert measured.changed_conditions((2000, 40), (2000, 300), "gpu-mi300x8-1536gb") == [
        "SLO p90 TTFT/TPOT 2000/50 ms → 2000/40 ms"
    ]
    older, _ = measured_goodput(WRITTEN)  # written before slo/workload/gpu were recorded
    assert older.changed_conditions((1, 1), (1, 1), "other") == []


@pytest.mark.parametrize("key, value", [("slo", {"ttft_p90_ms": 2000}), ("workload", {"input_tokens": 0, "output_tokens": 1}), ("gpu", 3)])
def test_malformed_recorded_conditions_are_problems(key, value):
    measured, problems = measured_goodput({**WRITTEN, key: value})
    assert measured is None and [k for k, _ in problems] == [key]
