"""Goodput of a layout: the highest request rate at which p90 TTFT and p90 TPOT stay within SLO.

A sweep measures a handful of offered rates; goodput lies between the last rate that meets both
SLOs and the first that does not. Real sweeps are noisy (a p90 from a few hundred requests moves
by several percent run to run, a warm-up spike can make a low rate look worse than a higher one),
so the rules below are explicit and deterministic:

1. Unusable points are set aside, each with a note saying why: a field missing (no `completed`,
   no `p90_ttft_ms` or `p90_tpot_ms` when the run lacked `--metric-percentiles ...90...`), a
   value present but invalid (named with the value: a string, NaN, a negative number), or
   `request_rate` "inf" — a saturation run (`--request-rate inf`) measures a closed loop, which
   has no place on the rate axis.
2. Repeated runs at the same rate are merged: the median of each p90, summed request counts.
3. A point *fails on errors* when none of its requests completed, or when the failed fraction,
   fitted non-decreasing in rate (pool-adjacent-violators weighted by request count, as in rule
   4), exceeds `max_failed_fraction`: failures that later rates do not repeat (4 of 300 at 1 rps,
   none at 2-5 rps) are noise, failures that persist are the limit. Its latency is not trusted
   (it covers only the survivors), so it takes no part in the latency fit; instead goodput is
   capped at the highest measured rate below the lowest such point.
4. Latency can only grow with load, so each metric is fitted with the closest non-decreasing
   curve (pool-adjacent-violators, weighted by repeats). A low-rate spike that later rates
   contradict is averaged away rather than ending the sweep early; a point that passes *above*
   a real failure is not credited. Points whose raw value disagrees with the fit are noted.
5. Per metric, the SLO crossing is interpolated linearly between the last fitted value within
   the SLO and the first above it. If the lowest measured rate already fails, that metric's
   crossing is 0 (we do not extrapolate towards rate 0: sweep lower instead). If no rate fails,
   the crossing is the highest measured rate and goodput is a *lower bound*.
6. Goodput = min(TTFT crossing, TPOT crossing, error cap); `limited_by` names which one.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

from infra.tuning.results import SweepPoint

DEFAULT_MAX_FAILED_FRACTION = 0.01
MIN_COMPLETED_FOR_STABLE_P90 = 100  # fewer requests than this: p90 rests on < 10 samples above it


@dataclass(frozen=True)
class RatePoint:
    """One offered rate of one layout after merging repeats, with the verdict against the SLO."""

    request_rate_rps: float
    ttft_p90_ms: float
    tpot_p90_ms: float
    ttft_fit_ms: float | None  # None for points that fail on errors (not in the fit)
    tpot_fit_ms: float | None
    completed: int
    failed: int
    output_throughput_tok_s: float | None
    passes: bool
    why: str  # "within SLO" or what broke it
    sources: tuple[str, ...]

    def to_json(self) -> dict:
        return {
            "request_rate_rps": self.request_rate_rps,
            "ttft_p90_ms": self.ttft_p90_ms,
            "tpot_p90_ms": self.tpot_p90_ms,
            "ttft_fit_ms": self.ttft_fit_ms,
            "tpot_fit_ms": self.tpot_fit_ms,
            "completed": self.completed,
            "failed": self.failed,
            "output_throughput_tok_s": self.output_throughput_tok_s,
            "passes": self.passes,
            "why": self.why,
            "sources": list(self.sources),
        }


@dataclass(frozen=True)
class LayoutGoodput:
    """What one layout sustained within the SLO, and how that was decided."""

    name: str
    goodput_rps: float
    lower_bound: bool  # passed at every measured rate: the real goodput is at least this
    limited_by: str | None  # "ttft" | "tpot" | "errors" | None (lower bound)
    max_measured_rps: float | None
    output_throughput_tok_s: float | None  # interpolated at the goodput rate
    points: tuple[RatePoint, ...]
    notes: tuple[str, ...] = field(default=())
    reason: str = ""

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "goodput_rps": round(self.goodput_rps, 3),
            "lower_bound": self.lower_bound,
            "limited_by": self.limited_by,
            "max_measured_rps": self.max_measured_rps,
            "output_throughput_tok_s": None
            if self.output_throughput_tok_s is None
            else round(self.output_throughput_tok_s, 1),
            "reason": self.reason,
            "notes": list(self.notes),
            "points": [p.to_json() for p in self.points],
        }


@dataclass(frozen=True)
class Comparison:
    """All layouts ranked best first; `winner` is None when no layout met the SLO anywhere."""

    winner: str | None
    layouts: tuple[LayoutGoodput, ...]
    ttft_p90_ms: float
    tpot_p90_ms: float

    def layout(self, name: str) -> LayoutGoodput:
        return next(g for g in self.layouts if g.name == name)

    def to_json(self) -> dict:
        return {
            "winner": self.winner,
            "slo": {"ttft_p90_ms": self.ttft_p90_ms, "tpot_p90_ms": self.tpot_p90_ms},
            "layouts": [g.to_json() for g in self.layouts],
        }


def monotone_fit(values: list[float], weights: list[float] | None = None) -> list[float]:
    """Closest non-decreasing sequence in weighted least squares (pool adjacent violators)."""
    weights = weights or [1.0] * len(values)
    blocks: list[list[float]] = []  # [mean, weight, count]
    for value, weight in zip(values, weights, strict=True):
        blocks.append([value, weight, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean2, w2, n2 = blocks.pop()
            mean1, w1, n1 = blocks.pop()
            blocks.append([(mean1 * w1 + mean2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    fitted: list[float] = []
    for mean, _, count in blocks:
        fitted.extend([mean] * count)
    return fitted


def layout_goodput(
    name: str,
    points: list[SweepPoint],
    *,
    ttft_p90_ms: float,
    tpot_p90_ms: float,
    max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION,
) -> LayoutGoodput:
    """Goodput of one layout from its sweep points (see the module docstring for the rules)."""
    usable, notes = _usable_points(points)
    merged = _merge_repeats(usable)
    notes += _merge_notes(merged)
    rates = [rate for rate, _ in merged]
    ttft = [statistics.median(p.ttft_p90_ms for p in g) for _, g in merged]
    tpot = [statistics.median(p.tpot_p90_ms for p in g) for _, g in merged]
    completed = [sum(p.completed or 0 for p in g) for _, g in merged]
    failed = [sum(p.failed or 0 for p in g) for _, g in merged]
    throughput = [_median_or_none([p.output_throughput_tok_s for p in g]) for _, g in merged]
    errors = _error_verdicts(completed, failed, max_failed_fraction)

    # Latency fit over the points whose latency we trust.
    fit_index = [i for i, bad in enumerate(errors) if not bad]
    weights = [float(len(merged[i][1])) for i in fit_index]
    ttft_fit_values = monotone_fit([ttft[i] for i in fit_index], weights)
    tpot_fit_values = monotone_fit([tpot[i] for i in fit_index], weights)
    ttft_fit: list[float | None] = [None] * len(rates)
    tpot_fit: list[float | None] = [None] * len(rates)
    for k, i in enumerate(fit_index):
        ttft_fit[i] = ttft_fit_values[k]
        tpot_fit[i] = tpot_fit_values[k]

    fit_rates = [rates[i] for i in fit_index]
    crossings = _crossings(
        fit_rates, {"ttft": (ttft_fit_values, ttft_p90_ms), "tpot": (tpot_fit_values, tpot_p90_ms)},
        [rates[i] for i, bad in enumerate(errors) if bad],
    )

    verdicts = []
    for i, rate in enumerate(rates):
        why = _why(
            errors[i], completed[i], failed[i], ttft_fit[i], tpot_fit[i], ttft[i], tpot[i], ttft_p90_ms, tpot_p90_ms
        )
        verdicts.append(
            RatePoint(
                request_rate_rps=rate,
                ttft_p90_ms=ttft[i],
                tpot_p90_ms=tpot[i],
                ttft_fit_ms=ttft_fit[i],
                tpot_fit_ms=tpot_fit[i],
                completed=completed[i],
                failed=failed[i],
                output_throughput_tok_s=throughput[i],
                passes=why == "within SLO",
                why=why,
                sources=tuple(p.source for p in merged[i][1]),
            )
        )
        notes += _fit_notes(rate, ttft[i], tpot[i], ttft_fit[i], tpot_fit[i])

    if not rates:
        return LayoutGoodput(name, 0.0, False, None, None, None, (), tuple(notes), "no usable sweep points")
    return _goodput(name, rates, fit_rates, crossings, throughput, verdicts, notes)


def _usable_points(points: list[SweepPoint]) -> tuple[list[SweepPoint], list[str]]:
    """Rule 1: (the usable points, a note for each point set aside saying why)."""
    notes: list[str] = []
    usable: list[SweepPoint] = []
    for point in points:
        reasons = point.skip_reasons()
        if reasons:
            notes.append(f"{point.source}: skipped, {'; '.join(reasons)}")
        else:
            usable.append(point)
    return usable, notes


def _merge_notes(merged: list[tuple[float, list[SweepPoint]]]) -> list[str]:
    """Rule 2's notes: rates with too few requests for a stable p90, and repeated runs merged."""
    notes = []
    for rate, group in merged:
        completed = sum(p.completed or 0 for p in group)
        if 0 < completed < MIN_COMPLETED_FOR_STABLE_P90:
            notes.append(f"{rate:g} rps: only {completed} requests completed; its p90 is unstable (use more --num-prompts)")
        if len(group) > 1:
            notes.append(f"{rate:g} rps: {len(group)} repeated runs merged (median p90)")
    return notes


def _crossings(
    fit_rates: list[float], fits: dict[str, tuple[list[float], float]], error_rates: list[float]
) -> dict[str, float]:
    """Rules 5 and 3: each metric's SLO crossing ({metric: (fitted values, SLO)}) and the error cap,
    only the limits actually hit."""
    crossings: dict[str, float] = {}
    for key, (fitted, slo) in fits.items():
        crossing = _crossing(fit_rates, fitted, slo)
        if crossing is not None:
            crossings[key] = crossing
    if error_rates:
        below = [r for r in fit_rates if r < error_rates[0]]
        crossings["errors"] = max(below) if below else 0.0
    return crossings


def _fit_notes(rate: float, ttft: float, tpot: float, ttft_fit: float | None, tpot_fit: float | None) -> list[str]:
    """Rule 4's note for a rate whose measured p90 disagrees with the monotone fit."""
    if ttft_fit is not None and (_differs(ttft, ttft_fit) or _differs(tpot, tpot_fit)):
        return [
            f"{rate:g} rps: non-monotonic p90 (TTFT {ttft:.0f} ms, TPOT {tpot:.1f} ms measured; "
            f"{ttft_fit:.0f} ms / {tpot_fit:.1f} ms after the monotone fit)"
        ]
    return []


def _goodput(
    name: str, rates: list[float], fit_rates: list[float], crossings: dict[str, float],
    throughput: list[float | None], verdicts: list[RatePoint], notes: list[str],
) -> LayoutGoodput:
    """Rule 6: goodput is the lowest limit hit; none hit makes the highest fitted rate a lower bound."""
    if crossings:
        limited_by, goodput = min(crossings.items(), key=lambda item: item[1])
    else:
        limited_by, goodput = None, (fit_rates[-1] if fit_rates else 0.0)
    lower_bound = not crossings and bool(fit_rates)
    return LayoutGoodput(
        name=name,
        goodput_rps=goodput,
        lower_bound=lower_bound,
        limited_by=limited_by,
        max_measured_rps=max(rates),
        output_throughput_tok_s=_interpolate(rates, throughput, goodput) if goodput > 0 else None,
        points=tuple(verdicts),
        notes=tuple(notes),
    )


def compare_layouts(
    points: list[SweepPoint],
    *,
    ttft_p90_ms: float,
    tpot_p90_ms: float,
    max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION,
) -> Comparison:
    """Goodput for every layout in `points`, ranked best first, with a reason for each.

    Ranking: goodput (higher wins), then output tokens/s at that rate, then name (stable).
    """
    names = sorted({p.layout for p in points})
    results = [
        layout_goodput(
            name,
            [p for p in points if p.layout == name],
            ttft_p90_ms=ttft_p90_ms,
            tpot_p90_ms=tpot_p90_ms,
            max_failed_fraction=max_failed_fraction,
        )
        for name in names
    ]
    ranked = sorted(results, key=lambda g: (-g.goodput_rps, -(g.output_throughput_tok_s or 0.0), g.name))
    winner = ranked[0] if ranked and ranked[0].goodput_rps > 0 else None
    explained = tuple(
        _with_reason(g, winner, ttft_p90_ms=ttft_p90_ms, tpot_p90_ms=tpot_p90_ms) for g in ranked
    )
    return Comparison(winner.name if winner else None, explained, ttft_p90_ms, tpot_p90_ms)


# --- helpers -----------------------------------------------------------------------------------


def _merge_repeats(points: list[SweepPoint]) -> list[tuple[float, list[SweepPoint]]]:
    groups: dict[float, list[SweepPoint]] = {}
    for point in points:
        groups.setdefault(round(point.request_rate_rps, 9), []).append(point)
    return sorted(groups.items())


def _error_verdicts(completed: list[int], failed: list[int], max_failed_fraction: float) -> list[bool]:
    """Which rates fail on errors (rule 3): the failed fraction fitted non-decreasing in rate.

    Failures, like latency, only grow with load; a few failed requests at a low rate that the
    higher rates do not repeat are noise (a warm-up hiccup), not the layout's limit. Weighting by
    request count, a lone blip is averaged with the clean rates above it; failures that persist
    at higher rates keep the fitted fraction high. A rate with no completed request fails outright.
    """
    counted = [i for i, (c, f) in enumerate(zip(completed, failed, strict=True)) if c + f > 0]
    fitted = monotone_fit(
        [failed[i] / (completed[i] + failed[i]) for i in counted],
        [float(completed[i] + failed[i]) for i in counted],
    )
    fraction = dict(zip(counted, fitted, strict=True))
    return [c == 0 or fraction[i] > max_failed_fraction for i, c in enumerate(completed)]


def _crossing(rates: list[float], fitted: list[float], slo: float) -> float | None:
    """Rate at which a non-decreasing fitted curve crosses `slo` (rule 5); None if it never does."""
    for i, value in enumerate(fitted):
        if value > slo:
            if i == 0:
                return 0.0
            r0, v0, r1, v1 = rates[i - 1], fitted[i - 1], rates[i], value
            return r0 + (slo - v0) * (r1 - r0) / (v1 - v0)
    return None


def _interpolate(rates: list[float], values: list[float | None], at: float) -> float | None:
    known = [(r, v) for r, v in zip(rates, values, strict=True) if v is not None]
    if not known:
        return None
    if at <= known[0][0]:
        return known[0][1] * at / known[0][0] if known[0][0] else None
    for (r0, v0), (r1, v1) in zip(known, known[1:], strict=False):
        if r0 <= at <= r1:
            return v0 + (v1 - v0) * (at - r0) / (r1 - r0)
    return known[-1][1]


def _median_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _differs(measured: float, fitted: float | None) -> bool:
    return fitted is not None and abs(measured - fitted) > 1e-9 * max(1.0, abs(measured))


def _why(error, completed, failed, ttft_fit, tpot_fit, ttft, tpot, ttft_slo, tpot_slo) -> str:
    if error:
        if completed == 0:
            return "no request completed"
        return f"{failed} of {completed + failed} requests failed ({100 * failed / (completed + failed):.1f}%)"
    broken = []
    if ttft_fit > ttft_slo:
        broken.append(f"p90 TTFT {ttft_fit:.0f} ms > {ttft_slo:g} ms")
    if tpot_fit > tpot_slo:
        broken.append(f"p90 TPOT {tpot_fit:.1f} ms > {tpot_slo:g} ms")
    return "; ".join(broken) if broken else "within SLO"


def _limit_phrase(g: LayoutGoodput, ttft_slo: float, tpot_slo: float) -> str:
    first_fail = next((p for p in g.points if not p.passes), None)
    if g.limited_by == "ttft":
        return f"p90 TTFT crosses {ttft_slo:g} ms at {g.goodput_rps:.2f} rps"
    if g.limited_by == "tpot":
        return f"p90 TPOT crosses {tpot_slo:g} ms at {g.goodput_rps:.2f} rps"
    if g.limited_by == "errors" and first_fail is not None:
        return f"requests fail at {first_fail.request_rate_rps:g} rps ({first_fail.why})"
    return ""


def _with_reason(g: LayoutGoodput, winner: LayoutGoodput | None, *, ttft_p90_ms: float, tpot_p90_ms: float) -> LayoutGoodput:
    if not g.points:
        return replace(g, reason="no usable sweep points: " + "; ".join(g.notes))
    if g.goodput_rps <= 0:
        lowest = g.points[0]
        reason = (
            f"never meets the SLO: already at the lowest measured rate {lowest.request_rate_rps:g} rps, {lowest.why}"
            if not lowest.passes
            else "never meets the SLO"
        )
        return replace(g, reason=reason)
    limit = _limit_phrase(g, ttft_p90_ms, tpot_p90_ms)
    if winner is not None and g.name == winner.name:
        if g.lower_bound:
            reason = (
                f"highest goodput: within SLO at every measured rate up to {g.goodput_rps:.2f} rps "
                "(a lower bound; sweep higher rates to find its limit)"
            )
        else:
            reason = f"highest goodput {g.goodput_rps:.2f} rps; {limit}"
        return replace(g, reason=reason)
    assert winner is not None
    gap = 100.0 * (winner.goodput_rps - g.goodput_rps) / winner.goodput_rps
    reason = f"{g.goodput_rps:.2f} rps, {gap:.0f}% below {winner.name} ({winner.goodput_rps:.2f} rps)"
    if g.lower_bound:
        reason += (
            f"; only measured up to {g.max_measured_rps:g} rps, all within SLO — its real goodput may be "
            "higher: extend its sweep"
        )
    elif limit:
        reason += f": {limit}"
    if gap == 0:
        reason = f"ties {winner.name} at {g.goodput_rps:.2f} rps; ranked lower on output tokens/s"
    return replace(g, reason=reason)
