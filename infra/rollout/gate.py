"""The SLO gate of a layout rollout: promote, hold or roll back, from per-variant numbers.

Both variants serve the same model to the same clients at the same time, so the comparison that
matters is relative: is the candidate spending its SLO error budget faster than the current
layout does right now? The error budget is the p90 SLO's (10 % of requests may exceed a limit,
infra/render/slo_rules.py); a burn rate of 1 spends it exactly. The numbers come from the
per-variant recording rules (infra/render/rollout_rules.py); the alert LayoutCanaryWorse uses
the same thresholds, so `infra rollout status` and the alert never disagree on "worse".

Roll back when, with enough candidate traffic to mean it, in both the short and the long window:
  - the candidate burns budget faster than WORSE_BURN_FACTOR × the current variant's rate and
    faster than the budget allows (burn > 1), or
  - the candidate's unserved ratio (errors and aborts) exceeds the current's by more than
    WORSE_ERROR_POINTS.
Promote when the candidate has enough traffic, meets both p90 limits, burns at most
max(1, PROMOTE_BURN_FACTOR × current) and is not worse on errors. Otherwise hold (and say why).
Goodput per GPU is reported for the decision's reader (what the new layout buys), not gated on:
at partial load it measures the traffic as much as the layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

WORSE_BURN_FACTOR = 2.0
PROMOTE_BURN_FACTOR = 1.1
WORSE_ERROR_POINTS = 1.0  # percentage points of unserved requests
MIN_CANDIDATE_REQUESTS = 100  # over the long window; fewer: one slow client is "100 % bad"

PROMOTE, HOLD, ROLL_BACK = "promote", "hold", "roll back"


@dataclass(frozen=True)
class VariantNumbers:
    """One variant's SLO figures (None: no series, e.g. no traffic yet).

    burn_short / burn_long: max over TTFT and TPOT of (share of requests over the p90 limit) /
    0.10, over 5 m and 1 h. error_ratio: unserved / finished requests (5 m). requests_long:
    finished requests in the long window.
    """

    ttft_p90_s: float | None = None
    tpot_p90_s: float | None = None
    error_ratio: float | None = None
    burn_short: float | None = None
    burn_long: float | None = None
    goodput_rps_per_gpu: float | None = None
    requests_per_s: float | None = None
    requests_long: float | None = None


@dataclass(frozen=True)
class GateDecision:
    verdict: str
    reasons: tuple[str, ...]
    current: VariantNumbers
    candidate: VariantNumbers
    ttft_limit_s: float
    tpot_limit_s: float
    checks: dict[str, bool] = field(default_factory=dict)


def _known(*values: float | None) -> bool:
    return all(v is not None and not math.isnan(v) for v in values)


def _worse_burn(cand: float | None, cur: float | None) -> bool:
    if not _known(cand):
        return False
    return cand > 1.0 and cand > WORSE_BURN_FACTOR * (cur if _known(cur) else 0.0)


def decide(
    current: VariantNumbers, candidate: VariantNumbers, *, ttft_limit_s: float, tpot_limit_s: float,
    min_requests: float = MIN_CANDIDATE_REQUESTS,
) -> GateDecision:
    """The verdict with its reasons, each naming the numbers it rests on."""
    reasons: list[str] = []
    enough = _known(candidate.requests_long) and candidate.requests_long >= min_requests

    def done(verdict: str, **checks: bool) -> GateDecision:
        return GateDecision(verdict, tuple(reasons), current, candidate, ttft_limit_s, tpot_limit_s, checks)

    if not enough:
        seen = 0 if not _known(candidate.requests_long) else candidate.requests_long
        reasons.append(f"candidate served {seen:.0f} requests in the long window; the gate needs {min_requests:.0f}")
        return done(HOLD, enough_traffic=False)
    burn_worse = _worse_burn(candidate.burn_short, current.burn_short) and _worse_burn(candidate.burn_long, current.burn_long)
    if burn_worse:
        reasons.append(
            f"candidate burns its SLO budget at {candidate.burn_long:.2f}× (1 h) / {candidate.burn_short:.2f}× (5 m), "
            f"current at {_fmt(current.burn_long)}× / {_fmt(current.burn_short)}× (worse: > 1 and > {WORSE_BURN_FACTOR:g}× current)"
        )
    errors_worse = _known(candidate.error_ratio) and (
        candidate.error_ratio - (current.error_ratio if _known(current.error_ratio) else 0.0)
    ) * 100 > WORSE_ERROR_POINTS
    if errors_worse:
        reasons.append(
            f"candidate leaves {candidate.error_ratio:.1%} of requests unserved, current {_pct(current.error_ratio)} "
            f"(worse: more than {WORSE_ERROR_POINTS:g} points)"
        )
    if burn_worse or errors_worse:
        return done(ROLL_BACK, enough_traffic=True, burn_worse=burn_worse, errors_worse=errors_worse)
    within = (
        _known(candidate.ttft_p90_s, candidate.tpot_p90_s)
        and candidate.ttft_p90_s <= ttft_limit_s
        and candidate.tpot_p90_s <= tpot_limit_s
    )
    if not within:
        reasons.append(
            f"candidate p90 TTFT {_ms(candidate.ttft_p90_s)} (limit {ttft_limit_s * 1000:.0f} ms), p90 TPOT "
            f"{_ms(candidate.tpot_p90_s)} (limit {tpot_limit_s * 1000:.0f} ms): not within the SLO"
        )
    cur_burn = current.burn_long if _known(current.burn_long) else 0.0
    burn_ok = _known(candidate.burn_long) and candidate.burn_long <= max(1.0, PROMOTE_BURN_FACTOR * cur_burn)
    if not burn_ok:
        reasons.append(
            f"candidate burn {_fmt(candidate.burn_long)}× (1 h) is above max(1, {PROMOTE_BURN_FACTOR:g} × current "
            f"{_fmt(current.burn_long)}×)"
        )
    if within and burn_ok:
        reasons.append(
            f"candidate within the SLO (p90 TTFT {_ms(candidate.ttft_p90_s)}, TPOT {_ms(candidate.tpot_p90_s)}), burn "
            f"{_fmt(candidate.burn_long)}× vs current {_fmt(current.burn_long)}×, unserved {_pct(candidate.error_ratio)} "
            f"vs {_pct(current.error_ratio)}, over {candidate.requests_long:.0f} requests"
        )
        return done(PROMOTE, enough_traffic=True, within_slo=True, burn_ok=True)
    return done(HOLD, enough_traffic=True, within_slo=within, burn_ok=burn_ok)


def _fmt(v: float | None) -> str:
    return "n/a" if not _known(v) else f"{v:.2f}"


def _ms(v: float | None) -> str:
    return "n/a" if not _known(v) else f"{v * 1000:.0f} ms"


def _pct(v: float | None) -> str:
    return "n/a" if not _known(v) else f"{v:.1%}"
