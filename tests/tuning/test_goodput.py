"""Goodput per layout: interpolation, noise, failed requests, missing fields, winner and reasons."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.tuning.goodput import compare_layouts, layout_goodput, monotone_fit
from infra.tuning.results import load_results, parse_result
from tests.conftest import TESTS_DIR
from tests.fixtures.bench.vllm_results import vllm_result

FIXTURES = TESTS_DIR / "fixtures" / "bench" / "staging-qwen3-235b"
SLO = {"ttft_p90_ms": 2000.0, "tpot_p90_ms": 50.0}


def _points(layout: str, rows, **kw):
    return [
        parse_result(vllm_result(layout, rate, ttft, tpot, **kw), source=f"{layout}-{i}.json")
        for i, (rate, ttft, tpot) in enumerate(rows)
    ]


def test_interpolates_between_last_pass_and_first_fail():
    g = layout_goodput("tp4-r2", _points("tp4-r2", [(2, 500, 30), (4, 900, 40), (6, 1500, 60)]), **SLO)
    # TPOT crosses 50 ms halfway between 4 rps (40 ms) and 6 rps (60 ms); TTFT never crosses.
    assert g.goodput_rps == pytest.approx(5.0)
    assert g.limited_by == "tpot" and not g.lower_bound
    assert [p.passes for p in g.points] == [True, True, False]


def test_the_tighter_metric_limits():
    g = layout_goodput("tp4-r2", _points("tp4-r2", [(2, 500, 30), (4, 1000, 40), (6, 3000, 60)]), **SLO)
    # TTFT crosses at 4 + 2 * (1000/2000) = 5.0, TPOT at 5.0 as well; make TTFT tighter:
    g = layout_goodput("tp4-r2", _points("tp4-r2", [(2, 500, 30), (4, 1000, 40), (6, 5000, 60)]), **SLO)
    assert g.goodput_rps == pytest.approx(4 + 2 * 1000 / 4000)
    assert g.limited_by == "ttft"


def test_non_monotonic_spike_is_smoothed_not_fatal():
    # A warm-up spike at 2 rps (TTFT 2300 ms > SLO) contradicted by 3 and 4 rps.
    rows = [(1, 400, 20), (2, 2300, 25), (3, 800, 30), (4, 900, 35), (5, 3000, 55)]
    g = layout_goodput("tp8-r1", _points("tp8-r1", rows), **SLO)
    fitted = [p.ttft_fit_ms for p in g.points]
    assert fitted == pytest.approx([400, 4000 / 3, 4000 / 3, 4000 / 3, 3000])
    assert g.points[1].passes  # the spike alone does not end the sweep
    assert g.goodput_rps > 4
    assert any("non-monotonic" in n and n.startswith("2 rps") for n in g.notes)


def test_pass_above_a_real_failure_is_not_credited():
    rows = [(1, 400, 20), (2, 600, 30), (3, 900, 70), (4, 800, 45)]  # 4 rps "passes" after 3 failed
    g = layout_goodput("tp8-r1", _points("tp8-r1", rows), **SLO)
    assert g.goodput_rps < 3
    assert not g.points[-1].passes


def test_repeated_rates_use_the_median():
    rows = [(1, 400, 20), (2, 600, 30), (2, 650, 60), (2, 700, 35), (3, 900, 70)]
    g = layout_goodput("tp8-r1", _points("tp8-r1", rows), **SLO)
    assert [p.request_rate_rps for p in g.points] == [1, 2, 3]
    assert g.points[1].tpot_p90_ms == 35  # median of 30, 60, 35
    assert g.points[1].completed == 1200
    assert g.goodput_rps == pytest.approx(2 + (50 - 35) / (70 - 35))


def test_failed_requests_cap_goodput():
    rows = [(1, 400, 20), (2, 600, 25), (3, 700, 30)]
    points = _points("tp4-r2", rows[:2]) + _points("tp4-r2", rows[2:], failed=40)
    g = layout_goodput("tp4-r2", points, **SLO)
    assert g.goodput_rps == 2  # last rate below the first one that drops >1% of requests
    assert g.limited_by == "errors"
    assert "40 of 400 requests failed" in g.points[-1].why
    assert layout_goodput("tp4-r2", points, max_failed_fraction=0.2, **SLO).lower_bound


def test_a_few_failures_at_one_low_rate_do_not_zero_goodput():
    """4 of 300 requests failed at 1 rps (1.3% > 1%), none at 2-5 rps: a blip the higher rates do
    not repeat. Failures are fitted non-decreasing in rate like latency, so the layout keeps the
    goodput its TPOT allows (crossing 50 ms halfway between 4 and 5 rps)."""
    rows = [(2, 500, 25), (3, 600, 30), (4, 700, 40), (5, 900, 60)]
    points = _points("tp4-r2", [(1, 400, 20)], num_prompts=300, failed=4) + _points("tp4-r2", rows, num_prompts=300)
    g = layout_goodput("tp4-r2", points, **SLO)
    assert g.goodput_rps == pytest.approx(4.5)
    assert g.limited_by == "tpot"
    assert g.points[0].passes


def test_failures_that_persist_at_higher_rates_still_cap_goodput():
    rows = [(1, 400, 20, 4), (2, 500, 25, 0), (3, 600, 30, 6), (4, 700, 40, 9)]
    points = [p for rate, ttft, tpot, failed in rows for p in _points("tp4-r2", [(rate, ttft, tpot)], num_prompts=300, failed=failed)]
    g = layout_goodput("tp4-r2", points, **SLO)
    assert g.limited_by == "errors" and g.goodput_rps == 2


def test_never_meets_the_slo():
    g = layout_goodput("tp2-r4", _points("tp2-r4", [(1, 2600, 44), (2, 3900, 52)]), **SLO)
    assert g.goodput_rps == 0
    c = compare_layouts(_points("tp2-r4", [(1, 2600, 44)]), **SLO)
    assert c.winner is None
    assert c.layouts[0].reason.startswith("never meets the SLO")
    assert "2600 ms > 2000 ms" in c.layouts[0].reason


def test_all_passing_is_a_lower_bound():
    g = layout_goodput("tp4-r2", _points("tp4-r2", [(1, 400, 20), (2, 500, 25)]), **SLO)
    assert g.goodput_rps == 2 and g.lower_bound and g.limited_by is None


def test_missing_fields_are_skipped_with_a_note():
    points = _points("tp4-r2", [(1, 400, 20), (2, 500, None), (3, 900, 60)])
    points.append(parse_result(vllm_result("tp4-r2", "inf", 5000, 80), source="burst.json"))
    g = layout_goodput("tp4-r2", points, **SLO)
    assert [p.request_rate_rps for p in g.points] == [1, 3]
    assert g.goodput_rps == pytest.approx(1 + 2 * (50 - 20) / (60 - 20))
    assert any("missing p90_tpot_ms" in n for n in g.notes)
    assert "burst.json: skipped, request_rate inf (saturation run) has no rate to compare" in g.notes


def test_few_requests_are_flagged():
    g = layout_goodput("tp4-r2", _points("tp4-r2", [(1, 400, 20)], num_prompts=40), **SLO)
    assert any("only 40 requests" in n for n in g.notes)


def test_staging_fixtures_pick_the_winner_and_explain_the_losers():
    c = compare_layouts(load_results([FIXTURES]), **SLO)
    assert c.winner == "tp4-ep-r2"
    assert [g.name for g in c.layouts] == ["tp4-ep-r2", "tp8-ep-r1", "tp2-r4"]
    win, second, never = c.layouts
    # TTFT (fit: 1700 ms at 5 rps after merging 1650/1750, 5200 at 6) crosses 2000 ms first.
    assert win.goodput_rps == pytest.approx(5 + 300 / 3500)
    assert win.limited_by == "ttft"
    assert second.goodput_rps == pytest.approx(4 + 1 / 8)
    assert "below tp4-ep-r2" in second.reason and "p90 TPOT crosses 50 ms" in second.reason
    assert never.goodput_rps == 0 and "never meets" in never.reason
    payload = c.to_json()
    assert payload["winner"] == "tp4-ep-r2"
    assert set(payload["layouts"][0]) >= {"name", "goodput_rps", "points", "reason"}


def test_lower_bound_loser_is_told_to_extend_its_sweep():
    points = _points("tp4-r2", [(2, 500, 30), (4, 900, 40), (6, 1500, 60)]) + _points("tp8-r1", [(1, 300, 20), (2, 400, 25)])
    c = compare_layouts(points, **SLO)
    assert c.winner == "tp4-r2"
    assert "extend its sweep" in c.layout("tp8-r1").reason


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e5, allow_nan=False), min_size=1, max_size=30))
def test_monotone_fit_is_monotone_and_preserves_the_mean(values):
    fitted = monotone_fit(values)
    assert all(a <= b + 1e-6 for a, b in zip(fitted, fitted[1:], strict=False))
    assert sum(fitted) == pytest.approx(sum(values), rel=1e-9, abs=1e-6)
    if values == sorted(values):
        assert fitted == pytest.approx(values)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.5, 50), st.floats(50, 10000), st.floats(5, 200)), min_size=1, max_size=12
    )
)
def test_goodput_stays_within_the_measured_range(rows):
    g = layout_goodput("tp1-r8", _points("tp1-r8", rows), **SLO)
    assert 0 <= g.goodput_rps <= max(r for r, _, _ in rows) + 1e-9
    if g.goodput_rps > 0 and not g.lower_bound:
        assert g.limited_by in {"ttft", "tpot", "errors"}
