"""Calibrated efficiency factors: how far real serving falls below the hardware's datasheet.

The performance model is a roofline plus explicit overheads; these factors say what fraction of
peak bandwidth and compute a real engine reaches, and how large the fixed costs are (per step,
per sequence, per layer, per collective). They are fitted per GPU family (`Accelerator.family`)
by `benchmarks/calibrate.py` against published measurements and written to one JSON file,
`infra/catalog/efficiency.json`; `infra tune calibrate` can re-fit them from in-cluster
benchmarks and write the same format. Every fraction is clamped to (0, 1] so that no factor can
push a prediction above the physical roofline.

File format (docs/planner.md has the full description):

    {"format": 1, "fitted_by": "...", "fitted_at": "...", "families": {
        "default": {<every factor>}, "cdna3": {<overrides>}, "hopper": {<overrides>}}}
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache
from pathlib import Path

from infra.errors import UserError

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "catalog" / "efficiency.json"
FORMAT_VERSION = 1

# Factors that are fractions of a datasheet peak; they may never exceed 1.
_FRACTIONS = (
    "hbm_efficiency",
    "moe_hbm_efficiency",
    "compute_efficiency",
    "moe_compute_efficiency",
    "link_efficiency",
)


@dataclass(frozen=True)
class EfficiencyFactors:
    """One GPU family's factors (units in the names)."""

    hbm_efficiency: float = 0.70  # share of HBM bandwidth reached streaming dense weights and KV
    # Routed-expert weights (grouped GEMM kernels): a prior, not fitted (the published data has no
    # MoE decode on current ROCm software). Production saw MoE decode on ROCm run about 2x below a
    # textbook roofline (80% of HBM bandwidth, no overheads); with this value and the explicit
    # overheads, Qwen3-235B-FP8 TP4-EP decode at 64 sequences on MI325X comes out 1.95x below it.
    moe_hbm_efficiency: float = 0.70
    compute_efficiency: float = 0.45  # share of dense peak TFLOPS reached by large GEMMs (prefill)
    moe_compute_efficiency: float = 0.25  # same, for routed-expert grouped GEMMs (small, ragged)
    link_efficiency: float = 0.60  # share of GPU-link bandwidth reached by collectives
    collective_latency_us: float = 3.0  # fixed part of one collective (launch)
    collective_latency_per_peer_us: float = 5.0  # one synchronisation hop per peer: n GPUs cost n-1 hops
    layer_overhead_us: float = 6.0  # per layer per step: kernel launches, norms, sync bubbles
    step_overhead_ms: float = 3.0  # per engine step: scheduler, sampling, input prep (one per engine)
    seq_overhead_us: float = 10.0  # per running sequence per step and per scheduler
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
class EfficiencyTable:
    """Factors per GPU family, with a default for families never calibrated."""

    families: dict[str, EfficiencyFactors]
    fitted_by: str = ""
    fitted_at: str = ""

    def for_family(self, family: str) -> EfficiencyFactors:
        return self.families.get(family) or self.families.get("default") or EfficiencyFactors()

    def with_family(self, family: str, factors: EfficiencyFactors) -> EfficiencyTable:
        families = dict(self.families)
        families[family] = factors.clamped()
        return replace(self, families=families)

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
        return out


def _round(values: dict) -> dict:
    return {k: round(float(v), 4) for k, v in values.items()}


def _factors_from(data: dict, base: EfficiencyFactors, where: str) -> EfficiencyFactors:
    known = {f.name for f in fields(EfficiencyFactors)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UserError(
            f"{where}: unknown efficiency factor(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    try:
        return replace(base, **{k: float(v) for k, v in data.items()}).clamped()
    except (TypeError, ValueError) as err:
        raise UserError(f"{where}: every factor must be a number ({err})") from None


def table_from_json(doc: dict, where: str = "efficiency.json") -> EfficiencyTable:
    if doc.get("format") != FORMAT_VERSION:
        raise UserError(f"{where}: format {doc.get('format')!r} is not supported; expected {FORMAT_VERSION}")
    fams = doc.get("families") or {}
    default = _factors_from(fams.get("default", {}), EfficiencyFactors(), f"{where} families.default")
    families = {"default": default}
    for name, data in sorted(fams.items()):
        if name != "default":
            families[name] = _factors_from(data, default, f"{where} families.{name}")
    return EfficiencyTable(families, str(doc.get("fitted_by", "")), str(doc.get("fitted_at", "")))


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
