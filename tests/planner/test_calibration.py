"""The efficiency file and the calibration against published benchmarks."""

from __future__ import annotations

import json
import sys

import pytest

from infra.errors import UserError
from infra.planner import EfficiencyFactors, load_efficiency, save_efficiency
from infra.planner.efficiency import DEFAULT_PATH, EfficiencyTable, table_from_json
from tests.conftest import ROOT as TESTS_ROOT

ROOT = TESTS_ROOT
sys.path.insert(0, str(ROOT / "benchmarks"))
import calibrate  # noqa: E402

CSV = calibrate.DEFAULT_CSV


def test_the_shipped_file_loads_and_has_calibrated_families():
    table = load_efficiency()
    assert DEFAULT_PATH.exists()
    assert {"default", "cdna3", "hopper"} <= set(table.families)
    for factors in table.families.values():
        for name in (
            "hbm_efficiency",
            "moe_hbm_efficiency",
            "compute_efficiency",
            "moe_compute_efficiency",
            "link_efficiency",
        ):
            assert 0 < getattr(factors, name) <= 1
    assert table.for_family("never-calibrated") == table.families["default"]


def test_save_and_load_round_trip(tmp_path):
    table = EfficiencyTable({"default": EfficiencyFactors()}).with_family(
        "cdna3", EfficiencyFactors(hbm_efficiency=0.61, step_overhead_ms=2.5)
    )
    path = tmp_path / "eff.json"
    save_efficiency(path, table)
    doc = json.loads(path.read_text())
    assert doc["format"] == 1
    assert doc["families"]["cdna3"] == {"hbm_efficiency": 0.61, "step_overhead_ms": 2.5}  # only overrides
    again = load_efficiency(path)
    assert again.for_family("cdna3").hbm_efficiency == 0.61
    assert again.for_family("cdna3").seq_overhead_us == EfficiencyFactors().seq_overhead_us


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({"format": 2, "families": {}}, "format"),
        ({"format": 1, "families": {"cdna3": {"hbm_eficiency": 0.5}}}, "unknown efficiency factor"),
        ({"format": 1, "families": {"cdna3": {"hbm_efficiency": "fast"}}}, "must be a number"),
    ],
)
def test_bad_efficiency_files_are_user_errors(doc, needle):
    with pytest.raises(UserError, match=needle):
        table_from_json(doc)


def test_fractions_above_one_are_clamped():
    table = table_from_json({"format": 1, "families": {"default": {"hbm_efficiency": 1.7}}})
    assert table.for_family("x").hbm_efficiency == 1.0


def test_every_csv_row_is_interpreted_or_excluded_with_a_reason():
    rows = calibrate.parse_rows(CSV)
    assert len(rows) >= 70
    used = [r for r in rows if not r.excluded]
    assert len(used) >= 50
    for row in rows:
        if row.excluded:
            assert len(row.excluded) > 10
        else:
            assert row.metric in ("output", "total", "rate")
            assert row.layout.tp * row.layout.dp * row.layout.replicas_per_node <= 8
    # the notes column decides what the throughput counts
    assert any(r.metric == "total" for r in used) and any(r.metric == "output" for r in used)


def test_calibrated_factors_meet_the_accuracy_bar_on_held_out_rows():
    rows = [r for r in calibrate.parse_rows(CSV) if not r.excluded]
    table = load_efficiency()
    preds = [calibrate.predict(r, table) for r in rows]
    import statistics

    throughput = [p for p in preds if p.row.metric != "rate"]
    assert len(throughput) >= 40
    all_rows = statistics.median(p.ape for p in throughput if p.ape is not None)
    held_out = statistics.median(
        p.ape
        for p in throughput
        if calibrate.is_holdout(p.row) and not p.row.early_software and p.ape is not None
    )
    assert all_rows <= 0.25
    assert held_out <= 0.25
