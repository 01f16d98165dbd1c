"""Fit the planner's efficiency factors to measurements: one routine for every calibration.

`benchmarks/calibrate.py` fits it to the published tables and `infra tune calibrate` to the
platform's own benchmark results; both hand this module prepared observations
(`infra.planner.evidence.prepare`) and get back an `EfficiencyTable`.

The fit is a regularised, robust least-squares problem (scipy.optimize.least_squares, trust-region
reflective, soft-L1 loss): residuals are log(predicted / measured) of output tokens/s, mean TPOT
and mean TTFT (weighted 1, 0.5, 0.1: throughput is what sizes pools; TTFT is the noisiest), plus
prior terms. The factors are hierarchical — a global value each GPU family deviates from, with a
penalty on the deviation — so a family with few measurements borrows strength from the others
instead of fitting noise, and a family with none falls back to the global value. Other engines
than vLLM get two scales each (overheads, kernel efficiency), vLLM being the reference. No
measurement gets a factor of its own.

Fractions (efficiencies) are fitted in logit space so they stay in (0, 1); positive quantities
(overheads, latencies) in log space.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
from scipy.optimize import least_squares
from scipy.sparse import lil_matrix

from infra.planner.efficiency import (
    _FRACTIONS,
    REFERENCE_ENGINE,
    EfficiencyFactors,
    EfficiencyTable,
    EngineFactors,
    cell_key,
)
from infra.planner.evidence import Prepared, predict_prepared

# What a family may set for itself (shrunk towards the global value), and what only the data as a
# whole can pin (one value for every family).
FAMILY_FACTORS = (
    "hbm_efficiency",
    "moe_hbm_efficiency",
    "kv_hbm_efficiency",
    "compute_efficiency",
    "attention_compute_efficiency",
    "moe_compute_efficiency",
    "step_overhead_ms",
    "rank_overhead_us",
    "seq_overhead_us",
    "collective_latency_per_peer_us",
)
GLOBAL_FACTORS = ("moe_tokens_half", "layer_overhead_us", "collective_latency_us")
ENGINE_FACTORS = ("overhead_scale", "kernel_scale")
# What vLLM on one vendor's GPUs for one model class (`amd/moe/vllm`) sets for itself where enough
# rows allow, shrunk towards each family's value and stored per family × class × engine cell
# (`cdna3/moe/vllm`, `cdna4/moe/vllm`): what the engine's software does differently on that stack —
# kernel efficiencies (vLLM's ROCm MoE kernels are not SGLang's AITER path or ATOM's), per-step and
# per-sequence scheduler work, and what grows with TP and depth (collective latency, per-layer
# launches and syncs). Without a cell, vLLM rows use the family factors, other engines their scales.
CELL_FACTORS = (
    "hbm_efficiency",
    "moe_hbm_efficiency",
    "kv_hbm_efficiency",
    "compute_efficiency",
    "moe_compute_efficiency",
    "step_overhead_ms",
    "rank_overhead_us",
    "seq_overhead_us",
    "collective_latency_per_peer_us",
    "collective_latency_us",
    "layer_overhead_us",
)
# Training rows and independent sources a cell needs for factors of its own (fewer borrow through
# the family): with two sources or more, leaving one out can still fit the cell, so its factors are
# tested on a source they were not fitted to.
MIN_CELL_ROWS = 20
MIN_CELL_SOURCES = 2
WEIGHTS = {"output": 1.0, "tpot": 0.5, "ttft": 0.1}

MISSING_PENALTY = 3.0  # residual for a prediction that cannot be made (does not fit, unstable)


@dataclass(frozen=True)
class FitSpec:
    """Which factors move and how strongly they are held to their priors (log/logit units)."""

    family_factors: tuple[str, ...] = FAMILY_FACTORS
    global_factors: tuple[str, ...] = GLOBAL_FACTORS
    sigma_global: float = 1.0  # global values around the priors (EfficiencyFactors defaults)
    sigma_family: float = 0.2  # a family's deviation from the global value
    sigma_engine: float = 0.3  # an engine's scales around 1
    sigma_cell: float = 0.35  # a cell's deviation from its family
    cell_factors: tuple[str, ...] = CELL_FACTORS
    min_cell_rows: int = MIN_CELL_ROWS
    min_cell_sources: int = MIN_CELL_SOURCES
    max_nfev: int = 40


@dataclass(frozen=True)
class FitResult:
    table: EfficiencyTable
    cost: float
    evaluations: int
    rows: int


def _fwd(name: str, value: float) -> float:
    value = min(max(value, 1e-4), 1 - 1e-4) if name in _FRACTIONS else max(value, 1e-6)
    return math.log(value / (1 - value)) if name in _FRACTIONS else math.log(value)


def _inv(name: str, z):
    return 1.0 / (1.0 + np.exp(-z)) if name in _FRACTIONS else np.exp(z)


class _Problem:
    def __init__(self, prep: Prepared, start: EfficiencyTable, spec: FitSpec):
        self.prep, self.spec = prep, spec
        obs = prep.observations
        self.families = sorted({o.family for o in obs})
        self.engines = sorted({o.engine_key for o in obs if o.engine_key != REFERENCE_ENGINE})
        self.fam_idx = np.asarray([self.families.index(o.family) for o in obs])
        self.eng_idx = np.asarray([self.engines.index(o.engine_key) if o.engine_key in self.engines else -1 for o in obs])
        # A deviation is fitted per vendor × class × engine (`amd/moe/vllm`): what an engine does
        # differently is its software on that vendor's stack (ROCm kernels, scheduler), shared by the
        # vendor's GPU families, whose own factors already carry the hardware.
        self.vendor_of = {o.family: o.accelerator.vendor for o in obs}
        # Only the engine the platform deploys gets cells: other engines are evidence through their
        # scales, and a cell of theirs would only drain their rows from the family factors.
        keys = [f"{o.accelerator.vendor}/{o.model_class}/{o.engine_key}" if o.engine_key == REFERENCE_ENGINE else "" for o in obs]
        moving = set(spec.family_factors) | set(spec.global_factors)
        self.cell_factors = tuple(k for k in spec.cell_factors if k in moving)
        sources: dict[str, set[str]] = {}
        for k, o in zip(keys, obs, strict=True):
            sources.setdefault(k, set()).add(o.source)
        self.cells = sorted(
            k for k in sources if k and keys.count(k) >= spec.min_cell_rows and len(sources[k]) >= spec.min_cell_sources
        ) if self.cell_factors else []
        self.cell_idx = np.asarray([self.cells.index(k) if k in self.cells else -1 for k in keys])
        self.default = start.families.get("default", EfficiencyFactors())
        self.start = start
        names = list(spec.family_factors) + list(spec.global_factors)
        self.global_names = names
        x0 = [_fwd(k, getattr(self.default, k)) for k in names]
        # families start at the table's own values (a warm start), expressed as deviations
        for f in self.families:
            fam = start.families.get(f, self.default)
            x0 += [_fwd(k, getattr(fam, k)) - _fwd(k, getattr(self.default, k)) for k in spec.family_factors]
        for e in self.engines:
            eng = start.engines.get(e, EngineFactors())
            x0 += [math.log(max(getattr(eng, k), 1e-6)) for k in ENGINE_FACTORS]
        for c in self.cells:  # a group starts at the table's cell of one of its families, as a deviation
            vendor, cls, engine = c.split("/")
            mine = [f for f in self.families if self.vendor_of[f] == vendor and f"{f}/{cls}/{engine}" in start.cells]
            fam = start.families.get(mine[0], self.default) if mine else self.default
            cell = start.cells[f"{mine[0]}/{cls}/{engine}"] if mine else fam
            x0 += [_fwd(k, getattr(cell, k)) - _fwd(k, getattr(fam, k)) for k in self.cell_factors]
        self.x0 = np.asarray(x0)
        self.prior = np.asarray([_fwd(k, getattr(EfficiencyFactors(), k)) for k in names])
        self.n_global = len(names)
        self.n_family = len(spec.family_factors)
        meas = lambda attr: np.asarray([getattr(o, attr) or np.nan for o in obs], dtype=float)  # noqa: E731
        self.measured = {"output": meas("output_tok_s"), "tpot": meas("tpot_ms"), "ttft": meas("ttft_ms")}

    # --- parameters → factors -------------------------------------------------------------------
    def split(self, x):
        g = x[: self.n_global]
        off = self.n_global
        fam = x[off : off + len(self.families) * self.n_family].reshape(len(self.families), self.n_family)
        off += len(self.families) * self.n_family
        n_eng = len(self.engines) * len(ENGINE_FACTORS)
        eng = x[off : off + n_eng].reshape(len(self.engines), len(ENGINE_FACTORS))
        off += n_eng
        cell = x[off:].reshape(len(self.cells), len(self.cell_factors))
        return g, fam, eng, cell

    def family_values(self, x) -> dict[str, dict[str, float]]:
        g, fam, _, _ = self.split(x)
        out = {}
        for fi, f in enumerate(self.families):
            values = {k: float(_inv(k, g[i] + fam[fi, i])) for i, k in enumerate(self.spec.family_factors)}
            values.update({k: float(_inv(k, g[self.n_family + j])) for j, k in enumerate(self.spec.global_factors)})
            out[f] = values
        return out

    def _base_z(self, g, fam, k: str):
        """A factor's transformed value per row before any cell: global + family deviation, or global."""
        if k in self.spec.family_factors:
            i = self.spec.family_factors.index(k)
            return g[i] + fam[self.fam_idx, i]
        return np.full(len(self.fam_idx), g[self.n_family + self.spec.global_factors.index(k)])

    def row_factors(self, x) -> dict[str, np.ndarray]:
        g, fam, eng, cell = self.split(x)
        n = len(self.fam_idx)
        arrays: dict[str, np.ndarray] = {}
        base = asdict(self.default)
        for k, v in base.items():
            arrays[k] = np.full(n, float(v))
        for i, k in enumerate(self.spec.family_factors):
            arrays[k] = _inv(k, g[i] + fam[self.fam_idx, i])
        for j, k in enumerate(self.spec.global_factors):
            arrays[k] = np.full(n, float(_inv(k, g[self.n_family + j])))
        in_cell = self.cell_idx >= 0
        if self.cells:
            for j, k in enumerate(self.cell_factors):
                own = _inv(k, self._base_z(g, fam, k) + cell[np.maximum(self.cell_idx, 0), j])
                arrays[k] = np.where(in_cell, own, arrays[k])
        if self.engines:
            has = (self.eng_idx >= 0) & ~in_cell  # a cell with its own factors borrows nothing
            overhead = np.where(has, np.exp(eng[np.maximum(self.eng_idx, 0), 0]), 1.0)
            kernel = np.where(has, np.exp(eng[np.maximum(self.eng_idx, 0), 1]), 1.0)
            for k in _FRACTIONS:
                if k != "link_efficiency":
                    arrays[k] = np.minimum(1.0, arrays[k] * kernel)
            arrays["step_overhead_ms"] = arrays["step_overhead_ms"] * overhead
            arrays["seq_overhead_us"] = arrays["seq_overhead_us"] * overhead
        return arrays

    # --- residuals ------------------------------------------------------------------------------------
    def data_residuals(self, x) -> np.ndarray:
        pred = predict_prepared(self.prep, self.row_factors(x))
        parts = []
        for key, predicted in (("output", pred.output_tok_s), ("tpot", pred.tpot_ms), ("ttft", pred.ttft_ms)):
            meas = self.measured[key]
            has = np.isfinite(meas) & (meas > 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.log(predicted / meas)
            r = np.where(has, np.where(np.isfinite(r), r, MISSING_PENALTY), 0.0)
            parts.append(WEIGHTS[key] * r)
        return np.concatenate(parts)

    def residuals(self, x) -> np.ndarray:
        g, fam, eng, cell = self.split(x)
        prior = [(g - self.prior) / self.spec.sigma_global, fam.ravel() / self.spec.sigma_family]
        if self.engines:
            prior.append(eng.ravel() / self.spec.sigma_engine)
        if self.cells:
            prior.append(cell.ravel() / self.spec.sigma_cell)
        return np.concatenate([self.data_residuals(x), *prior])

    def sparsity(self):
        n_obs = len(self.fam_idx)
        n_data = 3 * n_obs
        n_params = len(self.x0)
        m = lil_matrix((n_data + n_params, n_params), dtype=int)
        rows = np.arange(n_data)
        obs_of_row = rows % n_obs
        for p in range(self.n_global):
            m[rows, p] = 1
        off = self.n_global
        for fi in range(len(self.families)):
            mine = rows[self.fam_idx[obs_of_row] == fi]
            for i in range(self.n_family):
                m[mine, off + fi * self.n_family + i] = 1
        off += len(self.families) * self.n_family
        for ei in range(len(self.engines)):
            mine = rows[self.eng_idx[obs_of_row] == ei]
            for j in range(len(ENGINE_FACTORS)):
                m[mine, off + ei * len(ENGINE_FACTORS) + j] = 1
        off += len(self.engines) * len(ENGINE_FACTORS)
        for ci in range(len(self.cells)):
            mine = rows[self.cell_idx[obs_of_row] == ci]
            for j in range(len(self.cell_factors)):
                m[mine, off + ci * len(self.cell_factors) + j] = 1
        for p in range(n_params):
            m[n_data + p, p] = 1
        return m

    def table(self, x, fitted_by: str, fitted_at: str) -> EfficiencyTable:
        g, _, eng, cell = self.split(x)
        default = replace(
            self.default, **{k: float(_inv(k, g[i])) for i, k in enumerate(self.global_names)}
        ).clamped()
        families = dict(self.start.families)
        families["default"] = default
        for f, values in self.family_values(x).items():
            families[f] = replace(default, **values).clamped()
        engines = dict(self.start.engines)
        engines[REFERENCE_ENGINE] = EngineFactors()
        for ei, e in enumerate(self.engines):
            engines[e] = EngineFactors(*(float(math.exp(eng[ei, j])) for j in range(len(ENGINE_FACTORS))))
        cells = {}
        for ci, c in enumerate(self.cells):
            vendor, cls, engine = c.split("/")
            for f in self.families:
                if self.vendor_of[f] != vendor:
                    continue
                fam = families[f]
                cells[cell_key(f, cls == "moe", engine)] = replace(
                    fam, **{k: float(_inv(k, _fwd(k, getattr(fam, k)) + cell[ci, j])) for j, k in enumerate(self.cell_factors)}
                ).clamped()
        return replace(self.start, families=families, engines=engines, cells=cells, fitted_by=fitted_by, fitted_at=fitted_at)


def fit_table(
    prep: Prepared,
    start: EfficiencyTable,
    spec: FitSpec = FitSpec(),
    *,
    fitted_by: str = "",
    fitted_at: str = "",
) -> FitResult:
    """Fit the factors to the prepared observations, starting from `start` (which also supplies
    every factor the spec does not move)."""
    problem = _Problem(prep, start, spec)
    result = least_squares(
        problem.residuals,
        problem.x0,
        jac_sparsity=problem.sparsity(),
        method="trf",
        loss="soft_l1",
        f_scale=0.25,
        max_nfev=spec.max_nfev,
        x_scale="jac",
    )
    return FitResult(problem.table(result.x, fitted_by, fitted_at), float(result.cost), int(result.nfev), len(prep.observations))


def fit_family(
    base: EfficiencyFactors,
    names: Sequence[str],
    residuals: Callable[[EfficiencyFactors], np.ndarray],
    *,
    sigma: float = 0.35,
    max_nfev: int = 100,
    robust: bool = True,
) -> EfficiencyFactors:
    """Fit some factors of one family to residuals the caller computes (log errors of its own
    measurements), held to `base` with a prior of `sigma` (log/logit units): the routine
    `infra tune calibrate` uses on the platform's benchmark results, with the same transforms,
    priors and (unless `robust` is off: a handful of the platform's own measurements has no
    outliers to discount) robust loss as `fit_table`."""
    names = [n for n in names if hasattr(base, n)]
    x0 = np.asarray([_fwd(n, getattr(base, n)) for n in names])

    def factors(x) -> EfficiencyFactors:
        return replace(base, **{n: float(_inv(n, v)) for n, v in zip(names, x, strict=True)}).clamped()

    def all_residuals(x):
        return np.concatenate([np.asarray(residuals(factors(x)), dtype=float), (x - x0) / sigma])

    # Goodput comes from a bisection with a relative tolerance of 1e-3: finite differences need a
    # step well above that to see a slope.
    result = least_squares(
        all_residuals, x0, method="trf", loss="soft_l1" if robust else "linear", f_scale=1.0, max_nfev=max_nfev,
        diff_step=0.02,
    )
    return factors(result.x)


def subset(prep: Prepared, mask: Sequence[bool] | np.ndarray) -> Prepared:
    """The prepared observations where `mask` holds (scenarios kept, nothing rebuilt)."""
    mask = np.asarray(mask, dtype=bool)
    return Prepared(
        observations=tuple(o for o, keep in zip(prep.observations, mask, strict=True) if keep),
        scenarios=prep.scenarios.take(mask),
        n_max=prep.n_max[mask],
        replicas=prep.replicas[mask],
        concurrency=prep.concurrency[mask],
        rate=prep.rate[mask],
        load=prep.load[mask],
        output_lengths=prep.output_lengths[mask],
    )


def factors_for(prep: Prepared, table: EfficiencyTable) -> dict[str, np.ndarray]:
    """Per-observation factor arrays from a table (family and engine of each row)."""
    rows = [asdict(table.for_family(o.family, o.engine_key, o.moe)) for o in prep.observations]
    return {k: np.asarray([r[k] for r in rows], dtype=float) for k in rows[0]} if rows else {}
