"""Calibrated efficiency factors: how far real serving falls below the hardware's datasheet, and how
sure the planner is.

The performance model is a roofline plus explicit overheads; these factors say what fraction of
peak bandwidth and compute a real engine reaches, and how large the fixed costs are (per step, per
sequence, per layer, per collective). They are fitted per GPU family (`Accelerator.family`), with
two scales per engine (vLLM is the reference, 1.0; SGLang, TensorRT-LLM and AMD's ATOM are
evidence measured on other engines), by `benchmarks/calibrate.py` against published measurements,
and written to one JSON file, `infra/catalog/efficiency.json`; `infra tune calibrate` re-fits them
from in-cluster benchmarks with the same routine (`infra.planner.fit`). Every fraction is clamped
to (0, 1], so no factor can push a prediction above the physical roofline.

The file also holds the planner's measured error: for each GPU family × model class (dense/MoE),
the spread of measured ÷ predicted output throughput when each source was left out of the fit.
Every prediction carries that band; pools are sized on its low end until the layout is measured.

    {"format": 2, "fitted_by": "...", "fitted_at": "...",
     "families": {"default": {<every factor>}, "cdna3": {<overrides>}, ...},
     "engines": {"vllm": {"overhead_scale": 1, "kernel_scale": 1}, "sglang": {...}, ...},
     "cells": {"cdna3/moe/vllm": {<overrides of the family's factors>}, ...},
     "uncertainty": {"cdna3/moe/vllm": {...}, "cdna3/moe": {"low": 0.78, "high": 1.12, "rows": 120, "sources": 4}, ...}}

A family × model class × engine cell with enough measurements (`fit.MIN_CELL_ROWS`) gets factors of
its own (`cells`), so vLLM on ROCm with MoE models stops borrowing from SGLang/ATOM rows through
the engine scales; a cell without them borrows as before.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from functools import lru_cache
from pathlib import Path

from infra.errors import UserError, json_kind
from infra.json_comments import without_comments

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "catalog" / "efficiency.json"
FORMAT_VERSION = 2
REFERENCE_ENGINE = "vllm"

# Factors that are fractions of a datasheet peak; they may never exceed 1.
FRACTIONS = _FRACTIONS = (
    "hbm_efficiency",
    "moe_hbm_efficiency",
    "kv_hbm_efficiency",
    "compute_efficiency",
    "attention_compute_efficiency",
    "moe_compute_efficiency",
    "link_efficiency",
)


@dataclass(frozen=True)
class EfficiencyFactors:
    """One GPU family's factors (units in the names); the defaults are the priors of the fit."""

    hbm_efficiency: float = 0.70  # share of HBM bandwidth reached streaming dense weights
    moe_hbm_efficiency: float = 0.55  # the same for routed-expert weights (grouped-GEMM kernels)
    kv_hbm_efficiency: float = 0.45  # the same for attention reading the paged KV cache
    compute_efficiency: float = 0.45  # share of dense peak TFLOPS reached by large GEMMs (prefill)
    attention_compute_efficiency: float = 0.35  # share of BF16 peak reached by attention kernels
    moe_compute_efficiency: float = 0.35  # same, for routed-expert grouped GEMMs with many tokens per expert
    moe_tokens_half: float = 8.0  # tokens per expert at which a grouped GEMM reaches half that efficiency
    link_efficiency: float = 0.60  # share of GPU-link bandwidth reached by collectives
    collective_latency_us: float = 6.0  # fixed part of one collective (launch, first hop)
    collective_latency_per_peer_us: float = 2.0  # one synchronisation hop per further peer
    layer_overhead_us: float = 4.0  # per layer per step: kernel launches, norms, sync bubbles
    step_overhead_ms: float = 2.0  # per engine step: scheduler, sampling, input prep (one per engine)
    rank_overhead_us: float = 100.0  # per step and per further TP rank: batch broadcast, token gather
    seq_overhead_us: float = 15.0  # per running sequence per step and per scheduler
    slice_half_width: float = 128.0  # GEMM output columns per GPU at which bandwidth use halves
    tpot_p90_factor: float = 1.15  # p90 over mean of per-request TPOT (batch composition varies)

    def clamped(self) -> EfficiencyFactors:
        changes = {name: min(1.0, max(1e-3, getattr(self, name))) for name in _FRACTIONS}
        for f in fields(self):
            if f.name not in _FRACTIONS:
                changes[f.name] = max(0.0, getattr(self, f.name))
        changes["tpot_p90_factor"] = max(1.0, self.tpot_p90_factor)
        return replace(self, **changes)


@dataclass(frozen=True)
class EngineFactors:
    """How another engine differs from vLLM on the same GPUs: its per-step and per-sequence CPU
    work (scale on the overheads) and its kernels (scale on every efficiency, still clamped ≤ 1)."""

    overhead_scale: float = 1.0
    kernel_scale: float = 1.0


@dataclass(frozen=True)
class Band:
    """Measured ÷ predicted output throughput where each source was left out of the fit: the 10th
    and 90th percentiles over `rows` measurements from `sources` independent sources."""

    low: float
    high: float
    rows: int = 0
    sources: int = 0

    def to_json(self) -> dict:
        return {"low": round(self.low, 3), "high": round(self.high, 3), "rows": self.rows, "sources": self.sources}


def cell_key(family: str, moe: bool, engine: str = REFERENCE_ENGINE) -> str:
    """`cdna3/moe/vllm`: the family × model class × engine cell a measurement or a plan belongs to."""
    return f"{family}/{'moe' if moe else 'dense'}/{engine}"


# Without a measured band (no evaluation for this family and class): wide on purpose.
UNMEASURED_BAND = Band(0.5, 1.3)


@dataclass(frozen=True)
class EfficiencyTable:
    """Factors per GPU family and engine, with a default for families never calibrated."""

    families: dict[str, EfficiencyFactors]
    engines: dict[str, EngineFactors] = field(default_factory=dict)
    uncertainty: dict[str, Band] = field(default_factory=dict)
    fitted_by: str = ""
    fitted_at: str = ""
    # family × model class × engine cells with enough measurements for factors of their own
    # ("cdna3/moe/vllm"); a cell without an entry borrows through the engine scales
    cells: dict[str, EfficiencyFactors] = field(default_factory=dict)

    def for_family(self, family: str, engine: str = REFERENCE_ENGINE, moe: bool | None = None) -> EfficiencyFactors:
        """The factors of a GPU family as `engine` runs it (default: vLLM, what the platform deploys);
        with the model class (`moe`), the cell's own factors where the calibration fitted them."""
        if moe is not None:
            cell = self.cells.get(cell_key(family, moe, engine))
            if cell is not None:
                return cell
        base = self.families.get(family) or self.families.get("default") or EfficiencyFactors()
        scales = self.engines.get(engine)
        if scales is None or engine == REFERENCE_ENGINE:
            return base
        changes = {name: getattr(base, name) * scales.kernel_scale for name in _FRACTIONS if name != "link_efficiency"}
        changes["step_overhead_ms"] = base.step_overhead_ms * scales.overhead_scale
        changes["seq_overhead_us"] = base.seq_overhead_us * scales.overhead_scale
        return replace(base, **changes).clamped()

    def band(self, family: str, moe: bool, engine: str = REFERENCE_ENGINE) -> Band:
        """The planner's measured error for this GPU family, model class and engine (measured ÷
        predicted): the cell's band, else the family × class band, else the class's across families."""
        cls = "moe" if moe else "dense"
        return (
            self.uncertainty.get(cell_key(family, moe, engine))
            or self.uncertainty.get(f"{family}/{cls}")
            or self.uncertainty.get(f"all/{cls}")
            or UNMEASURED_BAND
        )

    def with_family(self, family: str, factors: EfficiencyFactors) -> EfficiencyTable:
        """The table with a family's factors replaced (`infra tune calibrate`: measured in-cluster).
        The family's cells go with it: what the platform measured supersedes published rows."""
        families = dict(self.families)
        families[family] = factors.clamped()
        cells = {key: value for key, value in self.cells.items() if not key.startswith(f"{family}/")}
        return replace(self, families=families, cells=cells)

    def to_json(self) -> dict:
        default = self.families.get("default", EfficiencyFactors())
        out: dict = {"format": FORMAT_VERSION, "fitted_by": self.fitted_by, "fitted_at": self.fitted_at}
        fams: dict = {"default": _round(asdict(default))}
        for name in sorted(self.families):
            if name == "default":
                continue
            values = _round(asdict(self.families[name]))
            fams[name] = {k: v for k, v in values.items() if v != fams["default"][k]}
        out["families"] = fams
        out["engines"] = {name: _round(asdict(self.engines[name])) for name in sorted(self.engines)}
        if self.cells:
            cells = {}
            for key in sorted(self.cells):
                family = fams.get(key.split("/")[0], {})
                base = {**fams["default"], **family}
                cells[key] = {k: v for k, v in _round(asdict(self.cells[key])).items() if v != base[k]}
            out["cells"] = cells
        out["uncertainty"] = {key: self.uncertainty[key].to_json() for key in sorted(self.uncertainty)}
        return out


def _round(values: dict) -> dict:
    return {k: round(float(v), 4) for k, v in values.items()}


def _from(cls, data: dict, base, where: str):
    known = {f.name for f in fields(cls)}
    if not isinstance(data, dict):
        raise UserError(f"{where}: {json_kind(data)} where an object of factors belongs")
    unknown = sorted(set(data) - known)
    if unknown:
        raise UserError(f"{where}: unknown factor(s) {', '.join(unknown)}; known: {', '.join(sorted(known))} "
                        "(a key that starts with `_` is a comment)")
    try:
        value = replace(base, **{k: float(v) for k, v in data.items()})
    except (TypeError, ValueError) as err:
        raise UserError(f"{where}: every factor must be a number ({err})") from None
    return value.clamped() if hasattr(value, "clamped") else value


# The keys of an efficiency table file; keys that start with `_` are comments (infra/json_comments.py).
TABLE_KEYS = ("format", "fitted_by", "fitted_at", "families", "engines", "cells", "uncertainty")


def table_from_json(doc: dict, where: str = "efficiency.json") -> EfficiencyTable:
    doc = without_comments(doc)
    if not isinstance(doc, dict):
        raise UserError(f"{where}: {json_kind(doc)} where an object belongs")
    unknown = sorted(set(doc) - set(TABLE_KEYS))
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(TABLE_KEYS)} "
                        "(a key that starts with `_` is a comment)")
    if doc.get("format") != FORMAT_VERSION:
        raise UserError(f"{where}: format {doc.get('format')!r} is not supported; expected {FORMAT_VERSION}")
    fams = doc.get("families") or {}
    default = _from(EfficiencyFactors, fams.get("default", {}), EfficiencyFactors(), f"{where} families.default")
    families = {"default": default}
    for name, data in sorted(fams.items()):
        if name != "default":
            families[name] = _from(EfficiencyFactors, data, default, f"{where} families.{name}")
    engines = {
        name: _from(EngineFactors, data, EngineFactors(), f"{where} engines.{name}")
        for name, data in sorted((doc.get("engines") or {}).items())
    }
    cells = {
        key: _from(EfficiencyFactors, data, families.get(key.split("/")[0], default), f"{where} cells.{key}")
        for key, data in sorted((doc.get("cells") or {}).items())
    }
    uncertainty = {}
    for key, data in sorted((doc.get("uncertainty") or {}).items()):
        try:
            uncertainty[key] = Band(float(data["low"]), float(data["high"]), int(data.get("rows", 0)), int(data.get("sources", 0)))
        except (KeyError, TypeError, ValueError) as err:
            raise UserError(f"{where} uncertainty.{key}: needs numbers low and high ({err})") from None
    return EfficiencyTable(
        families, engines, uncertainty, str(doc.get("fitted_by", "")), str(doc.get("fitted_at", "")), cells
    )


@lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int) -> EfficiencyTable:
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except json.JSONDecodeError as err:
        raise UserError(f"{p}: not valid JSON ({err.msg} at line {err.lineno})") from None
    return table_from_json(doc, str(p))


def load_efficiency(path: str | Path | None = None) -> EfficiencyTable:
    """The efficiency table from `path` (default: the catalog's efficiency.json); cached per file version."""
    p = Path(path) if path else DEFAULT_PATH
    if not p.exists():
        if path:
            raise UserError(f"{p}: no such efficiency file")
        return EfficiencyTable({"default": EfficiencyFactors()})
    return _load_cached(str(p), p.stat().st_mtime_ns)


def save_efficiency(path: str | Path, table: EfficiencyTable) -> None:
    """Write a table in the planner's format (stable key order, so diffs show only changed factors)."""
    Path(path).write_text(json.dumps(table.to_json(), indent=2, sort_keys=False) + "\n")
