"""The efficiency file, the published measurements and the planner's honest error.

The calibration (benchmarks/calibrate.py, ~3 min) records each leave-one-source-out fold's factors
and the error they give in benchmarks/results/calibration.json. These tests re-predict every held-out
row with the recorded fold factors and the code as it is now: a change to the model that makes the
leave-one-source-out error worse by more than 2 points fails here until the calibration is re-run
(and shows the new figure).
"""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from infra.errors import UserError
from infra.planner import EfficiencyFactors, load_efficiency, save_efficiency
from infra.planner.calibration import folds_from_json, held_out_predictions, is_current
from infra.planner.efficiency import DEFAULT_PATH, EfficiencyTable, cell_key, table_from_json
from infra.planner.evidence import load_observations, prepare
from infra.planner.fit import FitSpec, factors_for, fit_table, subset
from tests.conftest import ROOT

DATA = ROOT / "benchmarks" / "data"
RESULTS = json.loads((ROOT / "benchmarks" / "results" / "calibration.json").read_text())
TOLERANCE = 0.02  # the recorded median may get worse by at most 2 points before a re-calibration


@pytest.fixture(scope="module")
def evidence():
    observations, excluded = load_observations(DATA)
    return observations, excluded, prepare(observations, load_efficiency())


@pytest.fixture(scope="module")
def held_out(evidence):
    observations, _, prep = evidence
    return held_out_predictions(prep, folds_from_json(RESULTS["folds"]))


def _median_ape(observations, predicted, keep) -> float:
    pairs = [
        (p, o.output_tok_s)
        for o, p, k in zip(observations, predicted, keep, strict=True)
        if k and o.output_tok_s and np.isfinite(p)
    ]
    return statistics.median(abs(p / m - 1) for p, m in pairs)


def test_the_shipped_file_loads_with_calibrated_families_engines_and_bands():
    table = load_efficiency()
    assert DEFAULT_PATH.exists()
    assert {"default", "cdna3", "cdna4", "hopper", "blackwell"} <= set(table.families)
    assert {"sglang", "trtllm", "atom"} <= set(table.engines)
    for factors in table.families.values():
        for name in ("hbm_efficiency", "moe_hbm_efficiency", "kv_hbm_efficiency", "compute_efficiency", "link_efficiency"):
            assert 0 < getattr(factors, name) <= 1
    assert table.for_family("never-calibrated") == table.families["default"]
    for key in ("cdna3/moe", "cdna3/dense", "hopper/moe", "hopper/dense", "all/moe", "all/dense"):
        band = table.band(*key.split("/")[0:1], key.endswith("moe")) if not key.startswith("all/") else table.uncertainty[key]
        assert 0 < band.low <= 1.0 <= band.high and band.rows >= 8


def test_save_and_load_round_trip(tmp_path):
    table = EfficiencyTable({"default": EfficiencyFactors()}).with_family(
        "cdna3", EfficiencyFactors(hbm_efficiency=0.61, step_overhead_ms=2.5)
    )
    path = tmp_path / "eff.json"
    save_efficiency(path, table)
    doc = json.loads(path.read_text())
    assert doc["format"] == 2
    assert doc["families"]["cdna3"] == {"hbm_efficiency": 0.61, "step_overhead_ms": 2.5}  # only overrides
    again = load_efficiency(path)
    assert again.for_family("cdna3").hbm_efficiency == 0.61
    assert again.for_family("cdna3").seq_overhead_us == EfficiencyFactors().seq_overhead_us


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({"format": 1, "families": {}}, "format"),
        ({"format": 2, "families": {"cdna3": {"hbm_eficiency": 0.5}}}, "unknown factor"),
        ({"format": 2, "families": {"cdna3": {"hbm_efficiency": "fast"}}}, "must be a number"),
        ({"format": 2, "uncertainty": {"cdna3/moe": {"low": "x"}}}, "needs numbers low and high"),
        ({"format": 2, "cells": {"cdna3/moe/vllm": {"step_overhead": 2}}}, r"cells\.cdna3/moe/vllm: unknown factor"),
    ],
)
def test_bad_efficiency_files_are_user_errors(doc, needle):
    with pytest.raises(UserError, match=needle):
        table_from_json(doc)


def test_fractions_above_one_are_clamped_and_other_engines_scale_from_vllm():
    table = table_from_json(
        {"format": 2, "families": {"default": {"hbm_efficiency": 1.7}}, "engines": {"sglang": {"kernel_scale": 0.5}}}
    )
    assert table.for_family("x").hbm_efficiency == 1.0
    assert table.for_family("x", "sglang").hbm_efficiency == 0.5
    assert table.for_family("x", "vllm") == table.for_family("x")


def test_every_measurement_is_used_or_left_out_with_a_reason(evidence):
    observations, excluded, _ = evidence
    assert len(observations) >= 600
    assert len({o.source for o in observations}) >= 10
    assert sum(o.rocm_moe for o in observations) >= 100
    for e in excluded:
        assert len(e.reason) > 10
    for o in observations:
        assert o.layout.gpus_per_replica * o.replicas <= 8 and o.input_tokens > 0 and o.output_tokens > 0


def test_leave_one_source_out_error_meets_the_bar_and_did_not_regress(evidence, held_out):
    observations, _, _ = evidence
    current = [is_current(o) for o in observations]
    rocm_moe = [c and o.rocm_moe for o, c in zip(observations, current, strict=True)]
    overall = _median_ape(observations, held_out, current)
    rocm = _median_ape(observations, held_out, rocm_moe)
    recorded = RESULTS["headline"]
    assert overall <= recorded["all"]["median_ape"] + TOLERANCE, (overall, recorded["all"])
    assert rocm <= recorded["rocm-moe"]["median_ape"] + TOLERANCE, (rocm, recorded["rocm-moe"])
    # the acceptance bars of the ROCm MoE subset: median error and bias
    assert rocm <= 0.25
    ratios = [p / o.output_tok_s for o, p, k in zip(observations, held_out, rocm_moe, strict=True) if k and o.output_tok_s and np.isfinite(p)]
    assert 0.85 <= statistics.median(ratios) <= 1.15


def test_the_recorded_held_out_predictions_are_what_the_code_predicts(evidence, held_out):
    """benchmarks/results/calibration.json is the output of this code on this data (not edited)."""
    observations, _, _ = evidence
    # Labels repeat (a sweep measured twice, or by two clients), so rows pair up in file order.
    recorded: dict[str, list[float | None]] = {}
    for r in RESULTS["rows"]:
        recorded.setdefault(r["label"], []).append(r["held_out"])
    for o, p in zip(observations, held_out, strict=True):
        queue = recorded.get(o.label) or [None]
        want = queue.pop(0)
        if want is not None and np.isfinite(p):
            assert p == pytest.approx(want, rel=0.02), o.label


def test_the_fit_lowers_the_error_of_a_family_it_starts_far_from(evidence):
    """The fitting routine itself, on one source, from deliberately bad factors."""
    observations, _, prep = evidence
    mask = np.asarray([o.source == "rocm-blogs" for o in observations])
    sub = subset(prep, mask)
    bad = EfficiencyTable({"default": EfficiencyFactors(hbm_efficiency=0.2, compute_efficiency=0.1)})
    from infra.planner.evidence import predict_prepared

    before = _median_ape(sub.observations, predict_prepared(sub, factors_for(sub, bad)).output_tok_s, [True] * len(sub.observations))
    fitted = fit_table(sub, bad, FitSpec(max_nfev=15)).table
    after = _median_ape(sub.observations, predict_prepared(sub, factors_for(sub, fitted)).output_tok_s, [True] * len(sub.observations))
    assert after < before / 2


def test_the_band_holds_at_least_80_percent_of_held_out_rows_in_every_cell_with_10_rows(evidence, held_out):
    """Issue 23's bar: per family × model class × engine cell, the 10–90 % band the planner gives
    that cell contains ≥ 80 % of the cell's held-out rows (measured ÷ predicted by a fit that never
    saw the row's source); the recorded coverage table is what the code computes."""
    observations, _, _ = evidence
    table = load_efficiency()
    cells: dict[str, list[float]] = {}
    for o, p in zip(observations, held_out, strict=True):
        if is_current(o) and o.output_tok_s and np.isfinite(p) and p > 0:
            cells.setdefault(cell_key(o.family, o.moe, o.engine_key), []).append(o.output_tok_s / p)
    assert len(cells) >= 10
    for key, ratios in cells.items():
        family, cls, engine = key.split("/")
        band = table.band(family, cls == "moe", engine)
        # the band's edges are held-out rows themselves: re-predicted from the stored (rounded) fold
        # factors they move by ~1e-4, so the edges get 0.1 % of slack (1 % let rows that lie just
        # outside the band count as covered) and the recorded share may differ by one edge row
        covered = sum(band.low * 0.999 <= r <= band.high * 1.001 for r in ratios) / len(ratios)
        if len(ratios) >= 10:
            assert covered >= 0.8, (key, len(ratios), band, covered)
        recorded = RESULTS["coverage"][key]
        assert recorded["rows"] == len(ratios), key
        assert recorded["covered"] == pytest.approx(covered, abs=1 / len(ratios) + 1e-3), key


def test_a_sparse_cell_takes_the_widest_neighbouring_band_never_a_narrower_one():
    table = load_efficiency()
    for key, band in table.uncertainty.items():
        if key.count("/") != 2 or band.rows >= 10:
            continue
        family, cls, engine = key.split("/")
        neighbours = [
            b for k, b in table.uncertainty.items()
            if k.count("/") == 2 and k != key and b.rows >= 10 and (k.startswith(f"{family}/{cls}/") or k.endswith(f"/{cls}/{engine}"))
        ] + [table.uncertainty[k] for k in (f"{family}/{cls}", f"all/{cls}") if k in table.uncertainty]
        assert band.low <= min(b.low for b in neighbours) and band.high >= max(b.high for b in neighbours), key


def test_vllm_on_rocm_moe_has_factors_of_its_own_and_stops_borrowing():
    """The planner's cell (vLLM, MoE, cdna3) is fitted on vLLM rows, not scaled from SGLang/ATOM ones."""
    table = load_efficiency()
    assert "cdna3/moe/vllm" in table.cells
    assert table.for_family("cdna3", "vllm", moe=True) == table.cells["cdna3/moe/vllm"]
    assert table.for_family("cdna3", "vllm", moe=True) != table.for_family("cdna3")
    assert table.band("cdna3", True) == table.uncertainty["cdna3/moe/vllm"]
    # in-cluster calibration of the family supersedes the published-data cell
    assert "cdna3/moe/vllm" not in table.with_family("cdna3", table.for_family("cdna3")).cells


@pytest.mark.xfail(
    strict=True,
    reason="issue 23's bar is not met: 49 current vLLM-on-ROCm MoE rows (not 60) from 5 sources; leave-one-source-out "
    "25.3 %, predicted ÷ measured 1.25 — 40 rows come from one source (Moreh's MI355X runs of vLLM 0.10.1/0.11.1 at TP8), "
    "whose small-batch steps (≤ 8 clients, over-predicted 1.51×) no other source's rows measure; the MLPerf v5.1 "
    "partners' Mixtral rows are on the v5.0 build, not current (docs/planner.md)",
)
def test_vllm_on_rocm_moe_meets_the_issue_23_bar(evidence, held_out):
    """≥ 60 current vLLM-on-ROCm MoE rows from ≥ 3 sources; held-out median error ≤ 25 % and
    median predicted ÷ measured within 0.85–1.15."""
    observations, _, _ = evidence
    pairs = [
        (p, o.output_tok_s, o.source)
        for o, p in zip(observations, held_out, strict=True)
        if is_current(o) and o.rocm_moe and o.engine == "vllm" and o.output_tok_s and np.isfinite(p)
    ]
    assert len(pairs) >= 60 and len({s for *_, s in pairs}) >= 3
    assert statistics.median(abs(p / m - 1) for p, m, _ in pairs) <= 0.25
    assert 0.85 <= statistics.median(p / m for p, m, _ in pairs) <= 1.15
