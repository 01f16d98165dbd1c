"""Re-fit a stack's planner factors from its cluster's steady windows (`infra tune calibrate --prometheus`).

What is fitted: per GPU family of the stack's observed models, the factors `infra tune calibrate`
fits from sweeps (`calibrate.FIT_FACTORS`, with the planner's own routine `infra.planner.fit.
fit_family`: least squares on log errors, a prior holding each factor to where it was), so the
planner's closed-loop prediction — output tokens/s per node at the measured requests in flight
and the measured prompt/answer lengths, for the layout the stack runs — matches each steady window.

Bounded: one run moves a factor at most MAX_STEP_RATIO× from where the previous run (or the
catalog) left it, so a window that was steady by every test and still wrong (a noisy neighbour, a
benchmark someone forgot running) cannot swing the sizing of a whole stack at once.
Idempotent: observations are stored with the factors and keyed by (model, window start); a run
that finds no window it has not seen changes nothing and writes nothing. A run with new windows
re-fits on all stored and new ones, from the previous factors.
Honest: before/after error on every observation, and a leave-one-window-out error (each new
window predicted by a fit that did not see it) — the figure for load not yet seen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from infra.errors import UserError
from infra.tuning.calibrate import FIT_FACTORS, PRIOR_SIGMA
from infra.tuning.telemetry import Observation

MAX_STEP_RATIO = 4.0
MAX_HELD_OUT = 12  # leave-one-out fits per run (each is a whole fit): the newest windows


@dataclass(frozen=True)
class ModelSubject:
    """What predicts one model's windows: its architecture, pool GPU and the layout it runs."""

    name: str
    arch: object
    gpu: object  # GpuSize
    layout: object  # Layout

    @property
    def family(self) -> str:
        return self.gpu.accelerator.family


@dataclass(frozen=True)
class ObservationError:
    observation: Observation
    before: float | None
    after: float | None
    held_out: float | None
    new: bool

    @staticmethod
    def pct(predicted: float | None, measured: float) -> float | None:
        return None if predicted is None else 100.0 * (predicted - measured) / measured


@dataclass(frozen=True)
class FamilyFit:
    family: str
    before: object  # EfficiencyFactors
    after: object
    errors: tuple[ObservationError, ...]
    bounded: tuple[str, ...]  # factors the per-run bound held back

    def mape(self, which: str, new_only: bool = False) -> float | None:
        rows = [e for e in self.errors if e.new or not new_only]
        pairs = [(getattr(e, which), e.observation.output_tokens_per_s_per_node) for e in rows]
        if which == "held_out":
            pairs = [(p, m) for (p, m), e in zip(pairs, rows, strict=True) if e.new and p is not None]
        if not pairs:
            return None
        return sum(abs(p - m) / m * 100 if p is not None else 100.0 for p, m in pairs) / len(pairs)

    def changed(self) -> dict[str, tuple[float, float]]:
        return {
            f.name: (getattr(self.before, f.name), getattr(self.after, f.name))
            for f in fields(self.before)
            if not math.isclose(getattr(self.before, f.name), getattr(self.after, f.name), rel_tol=1e-6)
        }


def predict_output_tokens(subject: ModelSubject, obs: Observation, table) -> float | None:
    """The planner's output tokens/s per node for this window (closed loop at its in-flight count)."""
    from infra.domain import Workload
    from infra.planner.search import predict_closed_loop

    workload = Workload(input_tokens=max(1, round(obs.prompt_tokens)), output_tokens=max(1, round(obs.output_tokens)))
    closed = predict_closed_loop(subject.arch, subject.gpu, subject.layout, workload, obs.in_flight_per_node, table)
    if closed is None or closed.output_tokens_per_s_per_node <= 0:
        return None
    return closed.output_tokens_per_s_per_node


def _fit(subjects: dict[str, ModelSubject], family: str, table, base, observations: list[Observation]):
    from infra.planner.fit import fit_family

    def residuals(factors):
        trial = table.with_family(family, factors)
        out = []
        for obs in observations:
            predicted = predict_output_tokens(subjects[obs.model], obs, trial)
            # A window the model cannot predict (does not fit) pulls hard but finitely.
            out.append(math.log(predicted / obs.output_tokens_per_s_per_node) if predicted else 5.0)
        return out

    return fit_family(base, FIT_FACTORS, residuals, sigma=PRIOR_SIGMA, robust=False)


def bounded(before, after, ratio: float = MAX_STEP_RATIO):
    """`after` with every factor held within ×/÷ `ratio` of `before`; and the names held back."""
    changes, held = {}, []
    for f in fields(before):
        b, a = getattr(before, f.name), getattr(after, f.name)
        if b > 0 and a > 0:
            lo, hi = b / ratio, b * ratio
            if not lo <= a <= hi:
                changes[f.name] = min(hi, max(lo, a))
                held.append(f.name)
    return replace(after, **changes).clamped(), tuple(held)


def fit_family_from_windows(
    subjects: dict[str, ModelSubject], family: str, table, base, stored: list[Observation], new: list[Observation]
) -> FamilyFit:
    """Fit `family` on stored + new windows, starting from `base` (the previous run's factors)."""
    everything = stored + new
    if not new:
        raise UserError(f"no new steady window for GPU family {family}")
    raw = _fit(subjects, family, table, base, everything)
    after, held = bounded(base, raw)
    table_before = table.with_family(family, base)
    table_after = table.with_family(family, after)
    held_out: dict[tuple[str, int], float | None] = {}
    if len(everything) >= 3:
        for obs in sorted(new, key=lambda o: o.start)[-MAX_HELD_OUT:]:
            others = [o for o in everything if o.key != obs.key]
            factors, _ = bounded(base, _fit(subjects, family, table, base, others))
            held_out[obs.key] = predict_output_tokens(subjects[obs.model], obs, table.with_family(family, factors))
    new_keys = {o.key for o in new}
    errors = tuple(
        ObservationError(
            obs,
            predict_output_tokens(subjects[obs.model], obs, table_before),
            predict_output_tokens(subjects[obs.model], obs, table_after),
            held_out.get(obs.key),
            obs.key in new_keys,
        )
        for obs in everything
    )
    return FamilyFit(family, base, after, errors, held)
