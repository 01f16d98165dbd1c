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

The file is read through a schema (pydantic, below): every factor present and a number in its
range — efficiencies are fractions in (0, 1], a percent (85) is refused with the fraction it
means, never clamped —, families the catalog knows and, for a plan, families of the stack's own
GPU pools; a wrong type (a list where an object belongs) is one line naming the file and the
field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, create_model

from infra.catalog.gpus import GPU_SIZES
from infra.errors import Problem, UserError, json_kind
from infra.json_comments import top_level_comments, without_comments
from infra.planner.efficiency import FRACTIONS, EfficiencyFactors, EfficiencyTable, load_efficiency

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
    comments: dict = field(default_factory=dict)  # the file's top-level `_` keys, written back as they were

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
        if not p:
            return (f"planner factors for {', '.join(sorted(self.families))}: stacks/{where} (no provenance: not written by "
                    "`infra tune calibrate --prometheus URL --write`), not the catalog's")
        return (
            f"planner factors for {', '.join(sorted(self.families))}: stacks/{where} (from telemetry of cluster "
            f"{p.get('cluster', '?')}, {window.get('from', '?')} to {window.get('to', '?')}, {images}; "
            f"{len(self.observations)} steady window(s)), not the catalog's"
        )

    def to_json(self) -> dict:
        from dataclasses import asdict

        return {
            **self.comments,
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


def load_stack_factors(root: Path | None, stack: str, families: set[str] | frozenset[str] | None = None) -> StackFactors | None:
    """The stack's factors file, or None when it has none (or the config was not loaded from a
    project directory). A file that exists but cannot be read is an error, never ignored.
    `families`: the GPU families of the stack's pools; a family of the file that is none of them
    is refused (its factors would change nothing while the plan's note says they are used)."""
    if root is None:
        return None
    path = factors_path(root, stack)
    if not path.is_file():
        return None
    where = f"stacks/{path.name}"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{where}: cannot be read as JSON ({err}); fix it or delete it to plan with the catalog's factors") from None
    factors = stack_factors_from_json(doc, stack, where, path)
    if families is not None:
        stray = sorted(set(factors.families) - set(families))
        if stray:
            raise UserError([Problem(f"families.{f}", (
                f"this stack's GPU pools are {', '.join(sorted(families)) or 'none'}, not {f}: factors of another GPU family "
                f"would apply to none of its models; remove the family (or the file), or re-fit with `infra tune calibrate "
                f"--prometheus URL --stack {stack} --write`")) for f in stray], source=where)
    return factors


# --- the file's schema ------------------------------------------------------------------------


def _fraction(value: float) -> float:
    """An efficiency is a share of a datasheet peak, in (0, 1]; 85 is a percent written as such."""
    if not 0 < value <= 1:
        hint = f"; {value:g} looks like a percent: write {value / 100:g}" if 1 < value <= 100 else ""
        raise ValueError(f"{value!r} is out of range: an efficiency is a fraction of the datasheet peak, greater than 0 and at most 1{hint}")
    return value


def _at_least(bound: float, what: str):
    def check(value: float) -> float:
        if value < bound:
            raise ValueError(f"{value!r} is out of range: {what} is at least {bound:g}")
        return value
    return check


def _factor_field(name: str) -> tuple[Any, Any]:
    if name in FRACTIONS:
        return Annotated[float, AfterValidator(_fraction)], ...
    if name == "tpot_p90_factor":
        return Annotated[float, AfterValidator(_at_least(1.0, "a p90 over mean factor"))], ...
    return Annotated[float, AfterValidator(_at_least(0.0, "an overhead or a size"))], ...


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, populate_by_name=True)


FactorsSchema = create_model(
    "FactorsSchema", __base__=_Schema, **{f.name: _factor_field(f.name) for f in fields(EfficiencyFactors)}
)


class FamilySchema(_Schema):
    engine: Literal["vllm"] = "vllm"
    factors: FactorsSchema  # type: ignore[valid-type]


class WindowSchema(_Schema):
    start: str = Field(alias="from")
    end: str = Field(alias="to")


class ProvenanceSchema(BaseModel):
    model_config = ConfigDict(extra="allow")  # what calibrate recorded; more is kept, not read
    prometheus: str | None = None
    cluster: str | None = None
    window: WindowSchema | None = None
    images: list[str] = []
    fitted_at: str | None = None
    runs: int | None = Field(None, ge=0)


class MeasuredSchema(_Schema):
    served_rps_per_node: float = Field(ge=0)
    within_slo: bool
    start: str = Field(alias="from")
    end: str = Field(alias="to")
    windows: int = Field(ge=1)


class FileSchema(_Schema):
    format: Literal[1]
    stack: str
    source: Literal["telemetry"] = "telemetry"
    families: dict[str, FamilySchema]
    provenance: ProvenanceSchema = ProvenanceSchema()
    observations: list[dict[str, Any]] = []
    measured: dict[str, MeasuredSchema] = {}


_KINDS = {"dict_type": "an object", "model_type": "an object", "list_type": "a list", "float_type": "a number",
          "float_parsing": "a number", "string_type": "a string", "bool_type": "true or false", "int_type": "an integer",
          "int_parsing": "an integer", "bool_parsing": "true or false"}


def _problem(err: dict) -> Problem:
    path = ".".join(str(p) for p in err["loc"])
    kind, value = err["type"], err.get("input")
    if kind == "missing":
        return Problem(path, "required; the file is written by `infra tune calibrate --prometheus URL --stack STACK --write`")
    if kind == "extra_forbidden":
        return Problem(path, "unknown field")
    if kind in _KINDS:
        return Problem(path, f"{json_kind(value)} where {_KINDS[kind]} belongs")
    if kind == "value_error":
        return Problem(path, str(err["msg"]).removeprefix("Value error, "))
    if kind == "literal_error":
        return Problem(path, f"{json_kind(value) if not isinstance(value, str | int) else repr(value)} is not allowed; "
                             f"allowed: {err.get('ctx', {}).get('expected', '')}")
    if kind == "finite_number":
        return Problem(path, "not a finite number")
    return Problem(path, str(err["msg"]))


def _problems(errors: list[dict]) -> list[Problem]:
    """One problem per field; the factors missing from one family as one problem naming them all."""
    missing: dict[str, list[str]] = {}
    out: list[Problem] = []
    for err in errors:
        loc = [str(p) for p in err["loc"]]
        if err["type"] == "missing" and len(loc) >= 4 and loc[0] == "families" and loc[2] == "factors":
            at = ".".join(loc[:3])
            if at not in missing:
                missing[at] = []
                out.append(Problem(at, ""))  # its place among the problems
            missing[at].append(loc[3])
            continue
        out.append(_problem(err))
    return [Problem(p.path, f"misses {len(missing[p.path])} factor(s): {', '.join(missing[p.path])}; every factor is required "
                            "(`infra tune calibrate --prometheus URL --stack STACK --write` writes them all)")
            if p.path in missing and not p.message else p for p in out]


def stack_factors_from_json(doc: object, stack: str, where: str, path: Path | None = None) -> StackFactors:
    """The file read through its schema: every field's type and range, the families the catalog
    knows; each problem names the file and the field (never a traceback). Keys that start with `_`
    are comments, at any depth (infra/json_comments.py); the top-level ones are kept for a rewrite."""
    comments = top_level_comments(doc)
    doc = without_comments(doc)
    if not isinstance(doc, dict):
        raise UserError(f"{where}: {json_kind(doc)} where an object belongs (written by `infra tune calibrate --prometheus --write`)")
    if doc.get("format") != FORMAT_VERSION:
        raise UserError(f"{where}: format {doc.get('format')!r} is not supported; expected {FORMAT_VERSION} (written by `infra tune calibrate --prometheus --write`)")
    try:
        parsed = FileSchema.model_validate(doc)
    except ValidationError as err:
        raise UserError(_problems(err.errors(include_url=False)), source=where) from None
    if parsed.stack != stack:
        raise UserError([Problem("stack", f"written for stack {parsed.stack!r}, not {stack!r}")], source=where)
    known = sorted({g.accelerator.family for g in GPU_SIZES.values()})
    unknown = [Problem(f"families.{f}", f"not a GPU family of the catalog; families: {', '.join(known)}") for f in parsed.families if f not in known]
    if unknown:
        raise UserError(unknown, source=where)
    families = {name: EfficiencyFactors(**e.factors.model_dump()) for name, e in parsed.families.items()}
    engines = {name: e.engine for name, e in parsed.families.items()}
    measured = {name: MeasuredModel(m.served_rps_per_node, m.within_slo, m.start, m.end, m.windows) for name, m in parsed.measured.items()}
    provenance = dict(doc.get("provenance") or {})
    return StackFactors(stack, families, engines, provenance, tuple(parsed.observations), measured, path, comments)


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
