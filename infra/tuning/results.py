"""Read the result JSON that `vllm bench serve --save-result` writes, one sweep point per run.

The format (vllm/benchmarks/serve.py, pinned release `VLLM_VERSION`): one JSON object per run with
top-level keys `date` ("%Y%m%d-%H%M%S", the client's local time — UTC in our Jobs), `backend`,
`label`, `model_id`, `num_prompts`, `request_rate` (a number, or the string "inf" for an
all-at-once burst), `burstiness`, `max_concurrency`, `duration`, `completed`, `failed`,
`request_throughput`, `request_goodput` (null unless `--goodput` was given), `output_throughput`,
`total_token_throughput`, and per selected metric `mean_/median_/std_<m>_ms` plus
`p<q>_<m>_ms` for every `--metric-percentiles` value (`p90_ttft_ms`, `p90_tpot_ms`, ...).
`--metadata k=v ...` lands as extra top-level *string* keys (so `layout=tp4-ep-r2` becomes
`"layout": "tp4-ep-r2"`). `--append-result` appends further objects to the same file, separated by
newlines. Next to each result vLLM also writes `<name>.pytorch.json` (a list of records in
PyTorch's benchmark format) — those are not results and are skipped.

Parsing is lenient where a benchmark run can legitimately lack a value (a point without p90 can
still be listed, just not used for goodput) and strict where the input is unusable (not JSON, no
layout): those become `UserError`s naming the file, all problems at once. A value goodput needs
that is present but wrong (`"p90_ttft_ms": "fast"`, NaN, a negative count) is not "missing": the
point keeps a reason naming the value (`skip_reasons`), and so does a saturation run
(`--request-rate inf`), which measured a closed loop, not a rate.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from infra.domain import LAYOUT_LIMIT_KEYS, layout_name, parse_layout_name
from infra.errors import Problem, UserError

# Metadata keys `infra bench` passes with `--metadata` (all values arrive as strings).
META_LAYOUT = "layout"
META_LAYOUT_FIELD_PREFIX = "layout_"  # layout_max_num_seqs=256, ...
PROVENANCE_META_KEYS = (
    "stack", "model", "gpu", "image", "vllm_version", "run_id", "input_tokens", "output_tokens",
    "weights_source", "ready_seconds",  # time-to-ready (infra/tuning/readiness.py)
)  # fmt: skip

# Files vLLM writes next to each result that are not results.
_SKIPPED_SUFFIXES = (".pytorch.json",)


@dataclass(frozen=True)
class SweepPoint:
    """One `vllm bench serve` run: one layout at one offered request rate."""

    layout: str  # canonical layout name, e.g. "tp4-ep-r2"
    request_rate_rps: float | None  # offered Poisson rate; None for "inf" (burst) or missing
    completed: int | None
    failed: int | None
    ttft_p90_ms: float | None
    tpot_p90_ms: float | None
    request_throughput_rps: float | None
    output_throughput_tok_s: float | None
    request_goodput_rps: float | None  # vLLM's own per-request goodput (needs --goodput)
    measured_at: datetime | None
    model_id: str | None
    source: str  # file path, with "#<n>" for the n-th object of an appended file
    metadata: dict[str, str] = field(default_factory=dict)
    # Why a field goodput needs has no usable value although the result has one: field → reason
    # ("invalid value p90_ttft_ms=\"fast\" (expected ...)", "request_rate inf (saturation run) ...").
    unusable: dict[str, str] = field(default_factory=dict)

    @property
    def failed_fraction(self) -> float | None:
        if self.completed is None:
            return None
        total = self.completed + (self.failed or 0)
        return (self.failed or 0) / total if total else 1.0

    def missing(self) -> list[str]:
        """Result fields goodput needs that have no usable value here (absent, null or unusable)."""
        names = []
        if self.request_rate_rps is None:
            names.append("request_rate")
        if self.completed is None:
            names.append("completed")
        if self.ttft_p90_ms is None:
            names.append("p90_ttft_ms")
        if self.tpot_p90_ms is None:
            names.append("p90_tpot_ms")
        if "failed" in self.unusable:
            names.append("failed")
        return names

    def skip_reasons(self) -> list[str]:
        """Why goodput cannot use this point, one phrase per cause; empty when it can.

        Values present but wrong are named with the value; fields that are simply absent are
        listed together as "missing ...".
        """
        missing = self.missing()
        reasons = [self.unusable[name] for name in missing if name in self.unusable]
        absent = [name for name in missing if name not in self.unusable]
        if absent:
            reasons.append(f"missing {', '.join(absent)}")
        return reasons

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "request_rate_rps": self.request_rate_rps,
            "completed": self.completed,
            "failed": self.failed,
            "ttft_p90_ms": self.ttft_p90_ms,
            "tpot_p90_ms": self.tpot_p90_ms,
            "request_throughput_rps": self.request_throughput_rps,
            "output_throughput_tok_s": self.output_throughput_tok_s,
            "request_goodput_rps": self.request_goodput_rps,
            "measured_at": self.measured_at.isoformat() if self.measured_at else None,
        }


def collect_result_files(paths: list[str | Path]) -> list[Path]:
    """Expand directories (recursively, `*.json`) and drop vLLM's `.pytorch.json` side files.

    Sorted for deterministic output. A named path that does not exist is a user error.
    """
    files: list[Path] = []
    missing: list[Problem] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(p for p in sorted(path.rglob("*.json")) if p.is_file())
        elif path.is_file():
            files.append(path)
        else:
            missing.append(Problem(str(path), "no such file or directory"))
    if missing:
        raise UserError(missing)
    return sorted({p for p in files if not p.name.endswith(_SKIPPED_SUFFIXES)})


def load_results(paths: list[str | Path], *, layout_override: str | None = None) -> list[SweepPoint]:
    """Parse every result object in the given files/directories into sweep points.

    `layout_override` assigns a layout to results that carry no `layout` metadata (runs made by
    hand without `--metadata layout=...`). Raises one `UserError` listing every unusable file.
    """
    points: list[SweepPoint] = []
    problems: list[Problem] = []
    for path in collect_result_files(paths):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            problems.append(Problem(str(path), f"cannot read: {err}"))
            continue
        try:
            objects = _json_objects(text)
        except ValueError as err:
            problems.append(Problem(str(path), f"not vLLM benchmark JSON: {err}"))
            continue
        for index, obj in enumerate(objects):
            source = str(path) if len(objects) == 1 else f"{path}#{index + 1}"
            try:
                points.append(parse_result(obj, source=source, layout_override=layout_override))
            except UserError as err:
                problems.extend(err.problems)
    if problems:
        raise UserError(problems)
    if not points:
        raise UserError("no vLLM benchmark results found in " + ", ".join(str(p) for p in paths))
    return points


def parse_result(obj: object, *, source: str, layout_override: str | None = None) -> SweepPoint:
    """One result object → SweepPoint. Unknown keys are ignored; missing numbers become None."""
    if not isinstance(obj, dict):
        raise UserError([Problem(source, "expected a JSON object as written by `vllm bench serve --save-result`")])
    raw_layout = obj.get(META_LAYOUT, layout_override)
    if not isinstance(raw_layout, str) or not raw_layout.strip():
        raise UserError(
            [
                Problem(
                    source,
                    "no `layout` in the result; run the benchmark with `--metadata layout=<name>` "
                    "or pass --layout to say which layout these results measured",
                )
            ]
        )
    try:
        parts = parse_layout_name(raw_layout)
    except ValueError as err:
        raise UserError([Problem(source, str(err))]) from None
    metadata = {k: v for k, v in obj.items() if isinstance(v, str) and _is_metadata_key(k)}
    unusable: dict[str, str] = {}
    return SweepPoint(
        layout=layout_name(**parts),
        request_rate_rps=_checked_rate(obj, unusable),
        completed=_checked_count(obj, "completed", unusable),
        failed=_checked_count(obj, "failed", unusable),
        ttft_p90_ms=_checked_latency(obj, "p90_ttft_ms", unusable),
        tpot_p90_ms=_checked_latency(obj, "p90_tpot_ms", unusable),
        request_throughput_rps=_number(obj.get("request_throughput")),
        output_throughput_tok_s=_number(obj.get("output_throughput")),
        request_goodput_rps=_number(obj.get("request_goodput")),
        measured_at=_date(obj.get("date")),
        model_id=obj.get("model_id") if isinstance(obj.get("model_id"), str) else None,
        source=source,
        metadata=metadata,
        unusable=unusable,
    )


def layout_fields(points: list[SweepPoint], name: str) -> tuple[dict, list[str]]:
    """The explicit layout mapping for `name`: tp/ep/dp/replicas from the name, the engine limits
    from `--metadata layout_<field>=...` when the benchmark recorded them.

    Returns (fields, missing field names). Values disagreeing between points of one layout are a
    user error: they would be different layouts under one name.
    """
    # nodes_per_replica is written only for a replica that spans nodes (1 is the default).
    fields: dict = {k: v for k, v in parse_layout_name(name).items() if not (k == "nodes_per_replica" and v == 1)}
    missing = []
    for key in LAYOUT_LIMIT_KEYS:
        values = {p.metadata[META_LAYOUT_FIELD_PREFIX + key] for p in points if p.layout == name and META_LAYOUT_FIELD_PREFIX + key in p.metadata}
        if not values:
            missing.append(key)
            continue
        if len(values) > 1:
            raise UserError(
                [Problem(name, f"results disagree on {key}: {sorted(values)}; benchmark one configuration per layout name")]
            )
        fields[key] = _typed_layout_value(key, values.pop())
    return fields, missing


def _typed_layout_value(key: str, text: str):
    if key == "kv_cache_dtype":
        return text
    if key == "gpu_memory_utilization":
        return float(text)
    if key == "max_model_len" and text in ("", "none", "None"):
        return None
    return int(text)


_RESULT_STRING_KEYS = {"date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "request_rate", "ramp_up_strategy"}


def _is_metadata_key(key: str) -> bool:
    return key not in _RESULT_STRING_KEYS


def _json_objects(text: str) -> list:
    """A file holds one JSON value, or several separated by whitespace (`--append-result`)."""
    decoder = json.JSONDecoder()
    objects = []
    index = 0
    text = text.strip()
    if not text:
        raise ValueError("empty file")
    while index < len(text):
        value, end = decoder.raw_decode(text, index)
        objects.append(value)
        index = end
        while index < len(text) and text[index].isspace():
            index += 1
    return objects


def _number(value: object) -> float | None:
    """A finite float, or None for missing/null/NaN/non-numeric. Lenient: for the values goodput
    needs, `_checked_*` tell a missing value from an invalid one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _shown(value: object) -> str:
    """A result value as it reads in the JSON (`"fast"`, `NaN`, `-3`), shortened."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _invalid(key: str, value: object, expected: str) -> str:
    return f"invalid value {key}={_shown(value)} ({expected})"


SATURATION_REASON = "request_rate inf (saturation run) has no rate to compare"


def _checked_rate(obj: dict, unusable: dict[str, str]) -> float | None:
    """The offered rate; "inf" (vLLM's `--request-rate inf`) and bad values get a reason."""
    value = obj.get("request_rate")
    if value is None:
        return None
    number = value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    if isinstance(number, float) and math.isinf(number) and number > 0:
        unusable["request_rate"] = SATURATION_REASON
        return None
    rate = _number(number)
    if rate is None or rate <= 0:
        unusable["request_rate"] = _invalid("request_rate", value, "expected requests per second > 0")
        return None
    return rate


def _checked_count(obj: dict, key: str, unusable: dict[str, str]) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    number = _number(value)
    if number is None or number < 0 or not number.is_integer():
        unusable[key] = _invalid(key, value, "expected a whole number of requests ≥ 0")
        return None
    return int(number)


def _checked_latency(obj: dict, key: str, unusable: dict[str, str]) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    number = _number(value)
    if number is None or number < 0:
        unusable[key] = _invalid(key, value, "expected a number of milliseconds ≥ 0")
        return None
    return number


def _date(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    for fmt in ("%Y%m%d-%H%M%S", "%Y-%m-%dT%H:%M:%S"):
        try:
            return datetime.strptime(value, fmt)
        except ValueError:
            continue
    return None
