"""The shared value types: layout names and keys, and the provenance of a measured layout."""

from __future__ import annotations

import datetime

import pytest
from pydantic import ValidationError

from infra.domain import (
    LAYOUT_KEYS,
    LAYOUT_LIMIT_KEYS,
    LAYOUT_SHAPE_KEYS,
    Layout,
    Provenance,
    Slo,
    Workload,
    layout_name,
    parse_layout_name,
)

WRITTEN = {  # as `infra tune ingest --write` records it
    "measured_at": "2026-12-02T18:16:00",
    "vllm_version": "0.33.0",
    "image": "vllm/vllm-openai-rocm:v0.33.0",
    "measured_goodput_rps": 5.086,
    "predicted_goodput_rps": 15.532,
    "source_results": ["results/tp4-ep-r2/rate-1.json"],
}


def test_layout_names_round_trip():
    shapes = (
        Layout(tp=4, ep=True, replicas_per_node=2),
        Layout(tp=1, ep=True, dp=8),
        Layout(tp=8),
        Layout(tp=8, ep=True, dp=2, nodes_per_replica=2),
        Layout(tp=16, nodes_per_replica=2),
    )
    for layout in shapes:
        assert parse_layout_name(layout.name) == {k: layout.fields()[k] for k in LAYOUT_SHAPE_KEYS}
    assert layout_name(4, True, 1, 2) == "tp4-ep-r2"
    assert layout_name(8, True, 2, 1, 2) == "tp8-ep-dp2-n2"
    for bad in ("tp99", "tp8-ep-dp2-r1-n2", "tp8-n0"):
        with pytest.raises(ValueError, match="not a layout name"):
            parse_layout_name(bad)


def test_a_multi_node_replica_counts_its_gpus_per_node_and_its_share_of_a_node():
    wide = Layout(tp=8, ep=True, dp=2, nodes_per_replica=2)
    assert (wide.gpus_per_replica, wide.gpus_per_node_used, wide.replicas_per_node_share) == (16, 8, 0.5)
    assert wide.multi_node and not Layout(tp=4, replicas_per_node=2).multi_node
    assert Layout(tp=4, replicas_per_node=2).replicas_per_node_share == 2


def test_layout_fields_are_the_stack_file_keys_in_order():
    assert list(Layout().fields()) == list(LAYOUT_KEYS)
    assert LAYOUT_SHAPE_KEYS == ("tp", "ep", "dp", "replicas_per_node", "nodes_per_replica")
    assert LAYOUT_LIMIT_KEYS == ("max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "kv_cache_dtype", "max_model_len")


def test_measured_provenance_reads_as_written():
    p = Provenance.model_validate(WRITTEN)
    assert p.measured and p.measured_goodput_rps == 5.086 and p.predicted_goodput_rps == 15.532
    assert p.label() == "bench 2026-12-02, vLLM 0.33.0"


@pytest.mark.parametrize("provenance", [{}, {"vllm_version": "0.33.0"}, {**WRITTEN, "measured_goodput_rps": None}])
def test_provenance_without_a_goodput_is_no_measurement(provenance):
    assert not Provenance.model_validate(provenance).measured


@pytest.mark.parametrize("bad", [0, -1.5, "fast", True, float("nan"), float("inf")])
def test_goodput_that_is_not_a_positive_finite_number_is_refused(bad):
    with pytest.raises(ValidationError) as err:
        Provenance.model_validate({**WRITTEN, "measured_goodput_rps": bad})
    assert [e["loc"] for e in err.value.errors()] == [("measured_goodput_rps",)]


def test_unquoted_timestamp_and_missing_details_still_label():
    p = Provenance.model_validate({"measured_goodput_rps": 4, "measured_at": datetime.datetime(2026, 12, 2, 18, 16)})
    assert p.measured_at == "2026-12-02T18:16:00" and p.label() == "bench 2026-12-02"
    assert Provenance.model_validate({"measured_goodput_rps": 4}).label() == "bench date not recorded"


def test_recorded_conditions_are_compared_and_older_provenance_has_none():
    p = Provenance.model_validate(
        {**WRITTEN, "slo": {"ttft_p90_ms": 2000, "tpot_p90_ms": 50},
         "workload": {"input_tokens": 2000, "output_tokens": 300}, "gpu": "gpu-mi300x8-1536gb"}
    )
    assert p.changed_conditions(Slo(2000, 50), Workload(2000, 300), "gpu-mi300x8-1536gb") == []
    assert p.changed_conditions(Slo(2000, 40), Workload(2000, 300), "gpu-mi300x8-1536gb") == [
        "SLO p90 TTFT/TPOT 2000/50 ms → 2000/40 ms"
    ]
    older = Provenance.model_validate(WRITTEN)  # written before slo/workload/gpu were recorded
    assert older.changed_conditions(Slo(1, 1), Workload(1, 1), "other") == []


@pytest.mark.parametrize(
    "key, value", [("slo", {"ttft_p90_ms": 2000}), ("workload", {"input_tokens": 0, "output_tokens": 1}), ("gpu", 3), ("extra", 1)]
)
def test_malformed_recorded_conditions_are_refused(key, value):
    with pytest.raises(ValidationError) as err:
        Provenance.model_validate({**WRITTEN, key: value})
    assert err.value.errors()[0]["loc"][0] == key
