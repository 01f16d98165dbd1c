"""Re-fit the planner's efficiency factors for one GPU family from measured goodput.

What is compared: per layout, the goodput `infra tune ingest` measured (requests/s per node
within both p90 SLOs) against the planner's `goodput_rps_per_node` for the *same* layout (its
engine limits taken from the benchmark metadata) on the same GPU, model, workload and SLOs.
Layouts that never met the SLO (goodput 0) or met it at every measured rate (a lower bound)
carry no exact number and are left out of the fit, and listed; so are layouts the planner says do
not fit. A layout the planner predicts at goodput 0 (fits, never meets the SLO) but that measured
> 0 stays in: it is the planner's worst miss, a 100% error in the report and a large fixed penalty
in the loss.

How: the factors that move goodput (bandwidth efficiencies, collective and per-step/per-sequence
overheads, compute efficiency) are fitted with the planner's own routine
(`infra.planner.fit.fit_family`: scipy least squares on the log errors, robust loss, a prior
holding each factor to its current value): a handful of layouts cannot pin down nine factors,
and the prior keeps factors the data says nothing about where they were. The planner clamps every
fraction to (0, 1], so a fit can never push a prediction above the roofline.

Error is reported before and after as the mean absolute percentage error over the fitted
layouts and, with three or more, as leave-one-out error (each layout predicted by a fit that did
not see it) — the honest figure for layouts not yet measured. The factors are per GPU family and
shared by every model on it: `--save` changes predictions for other models too (docs/tuning.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path

from infra.errors import Problem, UserError
from infra.tuning.goodput import Comparison
from infra.tuning.results import SweepPoint, layout_fields

# Factors the fit may move, if the planner's EfficiencyFactors has them.
FIT_FACTORS = (
    "hbm_efficiency",
    "moe_hbm_efficiency",
    "kv_hbm_efficiency",
    "compute_efficiency",
    "collective_latency_us",
    "collective_latency_per_peer_us",
    "step_overhead_ms",
    "rank_overhead_us",
    "seq_overhead_us",
)
# How far the fit may move a factor from its current value (log/logit units, a prior's sigma).
PRIOR_SIGMA = 2.0
# Log error charged for a layout predicted at goodput 0 that measured > 0 (|log| of a 150× miss).
ZERO_PREDICTION_LOG_ERROR = 5.0


class PlannerUnavailable(UserError):
    """The planner or the stack config this needs cannot be used in this checkout."""


@dataclass(frozen=True)
class ModelContext:
    """Everything the planner needs to predict one model's layouts on one stack's pool."""

    stack: str
    model: str
    arch: object
    gpu: object  # GpuSize
    workload: object
    slo: object
    usd_per_hour: float | None

    @property
    def family(self) -> str:
        return self.gpu.accelerator.family


@dataclass(frozen=True)
class StackModel:
    """One model of a stack's validated config and the GPU pool that serves it."""

    stack: str
    entry: object  # infra.config.ModelConfig
    pool: object  # infra.config.GpuPoolConfig
    root: Path  # project root the stack file was loaded from
    config: object  # infra.config.StackConfig

    @property
    def slo(self) -> tuple[float, float]:
        """(ttft_p90_ms, tpot_p90_ms)"""
        return self.entry.slo.ttft_p90_ms, self.entry.slo.tpot_p90_ms

    @property
    def workload(self) -> tuple[int, int]:
        """(input_tokens, output_tokens)"""
        return self.entry.workload.input_tokens, self.entry.workload.output_tokens

    @property
    def gpu(self) -> str:
        """The pool's GPU Droplet size slug."""
        return self.pool.size


def load_stack_model(stack: str | None, model: str | None, *, stacks_dir: Path | None = None) -> StackModel:
    """Load the stack's validated config and pick out `model` and its pool (a UserError if either
    is unknown)."""
    if not (stack and model):
        raise PlannerUnavailable("needs --stack and --model")
    try:
        from infra.layout_fit import load_plannable_stack_file as load_stack_file
    except ImportError as err:  # pragma: no cover - only while the toolkit is half-built
        raise PlannerUnavailable(f"the planner is not available: {err}") from None
    from infra.project import project_root

    root = stacks_dir.parent if stacks_dir is not None else project_root()
    cfg = load_stack_file(stack, root)
    entry = next((m for m in cfg.models if m.name == model), None)
    if entry is None:
        raise UserError([Problem("--model", f"stack {stack} has no model {model!r}; models: {[m.name for m in cfg.models]}")])
    return StackModel(stack, entry, cfg.pool(entry.pool), root, cfg)


def model_context(stack_model: StackModel) -> ModelContext:
    """Resolve the model's architecture: what the planner needs to predict its layouts.

    Raises PlannerUnavailable (a UserError) when the planner cannot be used; callers that can do
    without a prediction (ingest's provenance) catch it.
    """
    try:
        from infra.catalog.models import resolve_model
    except ImportError as err:  # pragma: no cover - only while the toolkit is half-built
        raise PlannerUnavailable(f"the planner is not available: {err}") from None
    entry, pool = stack_model.entry, stack_model.pool
    hf_path = stack_model.config.hf_config_path(entry)
    arch = resolve_model(entry.source, str(hf_path) if hf_path else None)
    if arch is None:
        raise PlannerUnavailable(f"model {entry.name}: architecture unknown to the planner (set hf_config)")
    return ModelContext(
        stack_model.stack, entry.name, arch, pool.gpu, entry.workload.to_workload(), entry.slo.to_slo(), pool.node_usd_per_hour
    )


def stack_model_context(stack: str | None, model: str | None, *, stacks_dir: Path | None = None) -> ModelContext:
    """`load_stack_model` then `model_context`."""
    return model_context(load_stack_model(stack, model, stacks_dir=stacks_dir))


def layout_from_fields(layout_fields_: dict):
    from infra.domain import Layout

    known = {f.name for f in fields(Layout)}
    return Layout(**{k: v for k, v in layout_fields_.items() if k in known})


def predict_layout(context: ModelContext, layout_fields_: dict, efficiency=None) -> tuple[bool, float]:
    """(fits, goodput per node) the planner predicts for this exact layout.

    Kept apart because "fits but goodput 0" (the planner says it never meets the SLO) is a
    prediction like any other — a 100% miss when the layout measured > 0 — while "does not fit"
    has nothing to compare. Folding both into None dropped exactly the worst-predicted layouts.
    """
    from infra.planner import evaluate_layout

    cand = evaluate_layout(
        context.arch, context.gpu, context.workload, context.slo, layout_from_fields(layout_fields_),
        usd_per_hour=context.usd_per_hour, efficiency=efficiency,
    )
    return cand.fits, (cand.goodput_rps_per_node if cand.fits else 0.0)


def predict_goodput_rps(context: ModelContext, layout_fields_: dict, efficiency=None) -> float | None:
    """The planner's goodput per node for this exact layout: 0.0 when it fits but never meets the
    SLO, None only when it does not fit."""
    fits, goodput = predict_layout(context, layout_fields_, efficiency)
    return goodput if fits else None


@dataclass(frozen=True)
class LayoutError:
    name: str
    measured_rps: float
    before_rps: float | None
    after_rps: float | None
    held_out_rps: float | None = None  # leave-one-out prediction

    @staticmethod
    def pct(predicted: float | None, measured: float) -> float | None:
        return None if predicted is None else 100.0 * (predicted - measured) / measured

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "measured_goodput_rps": round(self.measured_rps, 3),
            "predicted_before_rps": _r(self.before_rps),
            "predicted_after_rps": _r(self.after_rps),
            "predicted_held_out_rps": _r(self.held_out_rps),
            "error_before_pct": _r(self.pct(self.before_rps, self.measured_rps), 1),
            "error_after_pct": _r(self.pct(self.after_rps, self.measured_rps), 1),
            "error_held_out_pct": _r(self.pct(self.held_out_rps, self.measured_rps), 1),
        }


@dataclass(frozen=True)
class CalibrationReport:
    family: str
    before: object  # EfficiencyFactors
    after: object
    table_after: object  # EfficiencyTable with the family replaced
    layouts: tuple[LayoutError, ...]
    excluded: tuple[str, ...]

    @property
    def mape_before(self) -> float:
        return _mape([(e.before_rps, e.measured_rps) for e in self.layouts])

    @property
    def mape_after(self) -> float:
        return _mape([(e.after_rps, e.measured_rps) for e in self.layouts])

    @property
    def mape_held_out(self) -> float | None:
        pairs = [(e.held_out_rps, e.measured_rps) for e in self.layouts]
        return _mape(pairs) if len(self.layouts) >= 3 else None

    def changed_factors(self) -> dict[str, tuple[float, float]]:
        return {
            f.name: (getattr(self.before, f.name), getattr(self.after, f.name))
            for f in fields(self.before)
            if not math.isclose(getattr(self.before, f.name), getattr(self.after, f.name), rel_tol=1e-6)
        }

    def to_json(self) -> dict:
        return {
            "family": self.family,
            "mean_abs_error_pct": {"before": _r(self.mape_before, 1), "after": _r(self.mape_after, 1), "held_out": _r(self.mape_held_out, 1)},
            "layouts": [e.to_json() for e in self.layouts],
            "excluded": list(self.excluded),
            "factors": {k: {"before": round(b, 4), "after": round(a, 4)} for k, (b, a) in self.changed_factors().items()},
        }


def calibrate(context: ModelContext, comparison: Comparison, points: list[SweepPoint], table=None) -> CalibrationReport:
    """Fit the family's factors to the measured goodput of `comparison`'s layouts."""
    from infra.planner import load_efficiency

    table = table or load_efficiency()
    # start from what the planner uses for this model (its vLLM cell, where the calibration has one);
    # the result replaces the family and its cells (`EfficiencyTable.with_family`)
    base = table.for_family(context.family, moe=context.arch.is_moe)
    samples: list[tuple[str, dict, float]] = []
    excluded: list[str] = []
    for g in comparison.layouts:
        if g.goodput_rps <= 0:
            excluded.append(f"{g.name}: never met the SLO in the measured range (no goodput to compare)")
            continue
        if g.lower_bound:
            excluded.append(f"{g.name}: met the SLO at every measured rate (goodput {g.goodput_rps:.2f} is only a lower bound)")
            continue
        lf, _missing = layout_fields(points, g.name)
        fits, _ = predict_layout(context, lf, table)
        if not fits:
            excluded.append(f"{g.name}: the planner says this layout does not fit")
            continue
        samples.append((g.name, lf, g.goodput_rps))
    if not samples:
        raise UserError("no layout has a measured goodput to calibrate against (each never met the SLO or is a lower bound)")

    fitted = _fit(context, table, base, samples)
    table_after = table.with_family(context.family, fitted)
    held_out: dict[str, float | None] = {}
    if len(samples) >= 3:
        for i, (name, lf, _) in enumerate(samples):
            others = samples[:i] + samples[i + 1 :]
            factors = _fit(context, table, base, others)
            held_out[name] = predict_goodput_rps(context, lf, table.with_family(context.family, factors))
    errors = tuple(
        LayoutError(
            name,
            measured,
            predict_goodput_rps(context, lf, table),
            predict_goodput_rps(context, lf, table_after),
            held_out.get(name),
        )
        for name, lf, measured in samples
    )
    return CalibrationReport(context.family, base, table_after.for_family(context.family), table_after, errors, tuple(excluded))


def save_factors(report: CalibrationReport, path: Path | None = None) -> Path:
    from infra.planner import save_efficiency
    from infra.planner.efficiency import DEFAULT_PATH

    target = path or DEFAULT_PATH
    save_efficiency(target, report.table_after)
    return target


# --- the fit -----------------------------------------------------------------------------------


def _fit(context: ModelContext, table, base, samples: list[tuple[str, dict, float]]):
    from infra.planner.fit import fit_family
    from infra.planner.search import evaluate_layouts

    layouts = [layout_from_fields(lf) for _, lf, _ in samples]

    def residuals(factors):
        trial = table.with_family(context.family, factors)
        out = []
        cands = evaluate_layouts(
            context.arch, context.gpu, context.workload, context.slo, layouts,
            usd_per_hour=context.usd_per_hour, efficiency=trial,
        )
        for (_, _, measured), cand in zip(samples, cands, strict=True):
            if cand.fits and cand.goodput_rps_per_node > 0:
                out.append(math.log(cand.goodput_rps_per_node / measured))
                continue
            # A zero prediction (fits, never meets the SLO) stays in at a large penalty that still
            # shrinks as the lowest-load p90s approach the SLO, so the fit can find its way out:
            # log(0) has no value, and leaving it out would hide the worst misses.
            miss = 1.0
            if cand.tpot_p90_ms and cand.ttft_p90_ms:
                miss = max(cand.tpot_p90_ms / context.slo.tpot_p90_ms, cand.ttft_p90_ms / context.slo.ttft_p90_ms, 1.0)
            out.append(ZERO_PREDICTION_LOG_ERROR * 0.5 + math.log(miss) * 4.0)
        return out

    return fit_family(base, FIT_FACTORS, residuals, sigma=PRIOR_SIGMA, robust=False)


def _mape(pairs: list[tuple[float | None, float]]) -> float:
    """Mean absolute % error; a prediction of 0 (or none) for a measured layout is a 100% miss."""
    errors = [abs(p - m) / m * 100 if p is not None else 100.0 for p, m in pairs]
    return sum(errors) / len(errors) if errors else 0.0


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def error_cell(predicted: float | None, measured: float) -> str:
    """`4.10 (+12%)`: a prediction and its error against the measurement."""
    if predicted is None:
        return "no fit"
    return f"{predicted:.2f} ({LayoutError.pct(predicted, measured):+.0f}%)"
