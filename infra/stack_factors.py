"""A stack's own planner factors, fitted from its cluster's telemetry: `stacks/factors.<stack>.json`.

`infra tune calibrate --prometheus URL --stack S --write` writes it (infra/tuning/telemetry_fit.py);
`infra plan S` reads it: the families it holds replace the catalog's factors (infra/catalog/
efficiency.json) for that stack only, every other family and the uncertainty bands stay the
catalog's, and the plan says which file it used and what was measured. Other stacks — and the
shipped catalog — are untouched, so one cluster's engine build cannot move another's sizing.

    {"format": 1, "stack": "prod", "source": "telemetry",
     "families": {"cdna3": {"engine": "vllm", "factors": {<every factor>}}},
     "provenance": {"prometheus": "...", "cluster": "...", "window": {"from": ISO, "to": ISO},
                    "images": [...], "fitted_at": ISO, "runs": 2},
     "observations": [{"model": ..., "start": unix, "end": unix, ...}, ...],
     "measured": {"<model>": {"served_rps_per_node": 4.2, "within_slo": true, "from": ISO, "to": ISO, "windows": 6}}}

Observations are kept so that the next run re-fits on all of them and knows which windows it has
already seen: a run that finds no new steady window changes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from infra.errors import UserError
from infra.planner.efficiency import EfficiencyFactors, EfficiencyTable, load_efficiency

FORMAT_VERSION = 1


def factors_path(root: Path, stack: str) -> Path:
    return root / "stacks" / f"factors.{stack}.json"


@dataclass(frozen=True)
class MeasuredModel:
    """The best steady window of one model: served requests/s per node, and whether both p90s held."""

    served_rps_per_node: float
    within_slo: bool
    start: str
    end: str
    windows: int

    def to_json(self) -> dict:
        return {
            "served_rps_per_node": round(self.served_rps_per_node, 3),
            "within_slo": self.within_slo,
            "from": self.start,
            "to": self.end,
            "windows": self.windows,
        }


@dataclass(frozen=True)
class StackFactors:
    stack: str
    families: dict[str, EfficiencyFactors]
    engines: dict[str, str] = field(default_factory=dict)  # family -> engine the factors are for
    provenance: dict = field(default_factory=dict)
    observations: tuple[dict, ...] = ()
    measured: dict[str, MeasuredModel] = field(default_factory=dict)
    path: Path | None = None

    def table(self, base: EfficiencyTable | None = None) -> EfficiencyTable:
        """The catalog's table with this stack's families replaced."""
        table = base if base is not None else load_efficiency()
        for family, factors in self.families.items():
            table = table.with_family(family, factors)
        return table

    def describe(self) -> str:
        """One line for the plan: which file, fitted from what."""
        p = self.provenance
        window = p.get("window") or {}
        images = ", ".join(p.get("images") or []) or "image not recorded"
        where = self.path.name if self.path is not None else f"factors.{self.stack}.json"
        return (
            f"planner factors for {', '.join(sorted(self.families))}: stacks/{where} (from telemetry of cluster "
            f"{p.get('cluster', '?')}, {window.get('from', '?')} to {window.get('to', '?')}, {images}; "
            f"{len(self.observations)} steady window(s)), not the catalog's"
        )

    def to_json(self) -> dict:
        from dataclasses import asdict

        return {
            "format": FORMAT_VERSION,
            "stack": self.stack,
            "source": "telemetry",
            "families": {
                name: {"engine": self.engines.get(name, "vllm"), "factors": {k: round(float(v), 6) for k, v in asdict(f).items()}}
                for name, f in sorted(self.families.items())
            },
            "provenance": self.provenance,
            "observations": list(self.observations),
            "measured": {name: m.to_json() for name, m in sorted(self.measured.items())},
        }


def load_stack_factors(root: Path | None, stack: str) -> StackFactors | None:
    """The stack's factors file, or None when it has none (or the config was not loaded from a
    project directory). A file that exists but cannot be read is an error, never ignored."""
    if root is None:
        return None
    path = factors_path(root, stack)
    if not path.is_file():
        return None
    where = f"stacks/{path.name}"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise UserError(f"{where}: cannot be read as JSON ({err}); fix it or delete it to plan with the catalog's factors") from None
    return stack_factors_from_json(doc, stack, where, path)


def stack_factors_from_json(doc: object, stack: str, where: str, path: Path | None = None) -> StackFactors:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_VERSION:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise UserError(f"{where}: format {got!r} is not supported; expected {FORMAT_VERSION} (written by `infra tune calibrate --prometheus --write`)")
    if doc.get("stack") != stack:
        raise UserError(f"{where}: was written for stack {doc.get('stack')!r}, not {stack!r}")
    known = set(EfficiencyFactors.__dataclass_fields__)
    families: dict[str, EfficiencyFactors] = {}
    engines: dict[str, str] = {}
    for name, entry in (doc.get("families") or {}).items():
        values = (entry or {}).get("factors") if isinstance(entry, dict) else None
        if not isinstance(values, dict) or set(values) - known:
            raise UserError(f"{where} families.{name}.factors: needs the factor names of the planner ({', '.join(sorted(known))})")
        try:
            families[name] = EfficiencyFactors(**{k: float(v) for k, v in values.items()}).clamped()
        except (TypeError, ValueError):
            raise UserError(f"{where} families.{name}.factors: every factor must be a number") from None
        engines[name] = str(entry.get("engine", "vllm"))
    measured = {}
    for name, m in (doc.get("measured") or {}).items():
        try:
            measured[name] = MeasuredModel(float(m["served_rps_per_node"]), bool(m["within_slo"]), str(m["from"]), str(m["to"]), int(m["windows"]))
        except (KeyError, TypeError, ValueError):
            raise UserError(f"{where} measured.{name}: needs served_rps_per_node, within_slo, from, to, windows") from None
    observations = doc.get("observations") or []
    if not isinstance(observations, list) or not all(isinstance(o, dict) for o in observations):
        raise UserError(f"{where} observations: must be a list of objects")
    return StackFactors(stack, families, engines, dict(doc.get("provenance") or {}), tuple(observations), measured, path)


def save_stack_factors(path: Path, factors: StackFactors) -> None:
    """Write atomically (a temporary file renamed over the old one): a crash never leaves half a file."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(factors.to_json(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def measured_notes(facts, telemetry: StackFactors) -> list[str]:
    """What the cluster measured for a model, next to the plan's prediction (`facts`: the plan's
    ModelFacts); nothing when the factors file holds no steady window of it."""
    measured = telemetry.measured.get(facts.config.name)
    chosen = facts.plan.chosen
    if measured is None or not chosen.fits:
        return []
    slo = "at p90 within SLO" if measured.within_slo else "with a p90 over the SLO"
    return [
        f"model {facts.config.name}: measured {measured.served_rps_per_node:.2f} req/s/node {slo} over "
        f"{measured.start} to {measured.end} ({measured.windows} steady window(s)); predicted "
        f"{chosen.goodput_rps_per_node:.2f} req/s/node (band {chosen.goodput_low_rps_per_node:.2f}-"
        f"{chosen.goodput_high_rps_per_node:.2f}) with the stack's factors"
    ]
