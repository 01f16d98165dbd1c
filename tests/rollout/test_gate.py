"""The SLO gate: promote / hold / roll back from both variants' numbers, with the reasons."""

from __future__ import annotations

from infra.rollout.gate import HOLD, PROMOTE, ROLL_BACK, VariantNumbers, decide

LIMITS = {"ttft_limit_s": 2.5, "tpot_limit_s": 0.05}
HEALTHY = VariantNumbers(ttft_p90_s=0.8, tpot_p90_s=0.03, error_ratio=0.0, burn_short=0.2, burn_long=0.3,
                         goodput_rps_per_gpu=0.5, requests_per_s=1.0, requests_long=3000)


def test_a_candidate_as_good_as_the_current_is_promoted():
    d = decide(HEALTHY, HEALTHY, **LIMITS)
    assert d.verdict == PROMOTE and "within the SLO" in d.reasons[0] and "over 3000 requests" in d.reasons[0]


def test_too_little_candidate_traffic_holds():
    d = decide(HEALTHY, VariantNumbers(ttft_p90_s=0.5, tpot_p90_s=0.02, requests_long=40), **LIMITS)
    assert d.verdict == HOLD and "40 requests" in d.reasons[0]


def test_a_candidate_burning_twice_as_fast_is_rolled_back_with_the_numbers():
    slow = VariantNumbers(ttft_p90_s=4.0, tpot_p90_s=0.03, error_ratio=0.0, burn_short=6.0, burn_long=5.0, requests_long=500)
    d = decide(HEALTHY, slow, **LIMITS)
    assert d.verdict == ROLL_BACK and "5.00× (1 h)" in d.reasons[0] and "0.30×" in d.reasons[0]


def test_one_window_over_is_not_enough_to_roll_back():
    blip = VariantNumbers(ttft_p90_s=0.9, tpot_p90_s=0.03, error_ratio=0.0, burn_short=6.0, burn_long=0.5, requests_long=500)
    assert decide(HEALTHY, blip, **LIMITS).verdict != ROLL_BACK


def test_when_both_variants_burn_the_candidate_is_not_blamed():
    busy = VariantNumbers(ttft_p90_s=3.0, tpot_p90_s=0.03, error_ratio=0.0, burn_short=4.0, burn_long=4.0, requests_long=3000)
    cand = VariantNumbers(ttft_p90_s=3.1, tpot_p90_s=0.03, error_ratio=0.0, burn_short=4.5, burn_long=4.4, requests_long=500)
    d = decide(busy, cand, **LIMITS)
    assert d.verdict == HOLD  # over the SLO, but no worse than the current layout under the same load


def test_more_unserved_requests_roll_back():
    failing = VariantNumbers(ttft_p90_s=0.5, tpot_p90_s=0.02, error_ratio=0.05, burn_short=0.1, burn_long=0.1, requests_long=500)
    d = decide(HEALTHY, failing, **LIMITS)
    assert d.verdict == ROLL_BACK and "5.0% of requests unserved" in d.reasons[0]


def test_missing_current_series_still_judges_the_candidate():
    slow = VariantNumbers(ttft_p90_s=4.0, tpot_p90_s=0.03, burn_short=6.0, burn_long=5.0, requests_long=500)
    assert decide(VariantNumbers(), slow, **LIMITS).verdict == ROLL_BACK
