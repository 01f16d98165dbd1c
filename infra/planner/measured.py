"""A layout's goodput as measured in the cluster, read from the `provenance:` block of its layout.

`infra tune ingest --write` records the measured winner with the goodput it reached (requests/s
per node: the benchmark runs all of the layout's replicas on one node). A measurement beats a
prediction — the performance model is only as good as its efficiency factors — so whenever a
layout carries one, the pool is sized from it, and a measurement far below the prediction is the
signal that the factors for this GPU family need re-fitting (`infra tune calibrate`).

A goodput holds only for the conditions it was measured under: the SLO it is a rate within, the
prompt/answer lengths and the GPU size. Provenance written since these were recorded carries
`slo`, `workload` and `gpu`; when the stack's current values differ the plan says so (the figure
still sizes the pool until it is re-measured). Older provenance without them is accepted as is.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from typing import Any

# Measured below this share of the prediction: the factors are off enough to mislead the search.
CALIBRATE_BELOW = 0.7


@dataclass(frozen=True)
class MeasuredGoodput:
    """What the benchmark measured for a layout, and what the planner predicted back then."""

    goodput_rps_per_node: float
    measured_at: str | None
    vllm_version: str | None
    image: str | None
    predicted_at_measurement_rps: float | None
    slo: tuple[float, float] | None = None  # (ttft_p90_ms, tpot_p90_ms) it was measured within
    workload: tuple[int, int] | None = None  # (input_tokens, output_tokens)
    gpu: str | None = None  # GPU size slug

    def changed_conditions(self, slo: tuple[float, float], workload: tuple[int, int], gpu: str) -> list[str]:
        """What differs between the measurement's recorded conditions and the stack's current
        ones, as "what measured → now" phrases; nothing for conditions not recorded."""
        changes = []
        if self.slo is not None and tuple(map(float, self.slo)) != tuple(map(float, slo)):
            changes.append(f"SLO p90 TTFT/TPOT {self.slo[0]:g}/{self.slo[1]:g} ms → {slo[0]:g}/{slo[1]:g} ms")
        if self.workload is not None and tuple(self.workload) != tuple(workload):
            changes.append(f"tokens in/out {self.workload[0]}/{self.workload[1]} → {workload[0]}/{workload[1]}")
        if self.gpu is not None and self.gpu != gpu:
            changes.append(f"GPU {self.gpu} → {gpu}")
        return changes

    @property
    def date(self) -> str | None:
        """The day of the measurement (the time of day adds nothing to a plan line)."""
        return self.measured_at[:10] if self.measured_at else None

    def label(self) -> str:
        """`bench 2026-12-02, vLLM 0.33.0`: enough to find the results again."""
        parts = [f"bench {self.date}" if self.date else "bench date not recorded"]
        if self.vllm_version:
            parts.append(f"vLLM {self.vllm_version}")
        return ", ".join(parts)


def measured_goodput(provenance: dict[str, Any] | None) -> tuple[MeasuredGoodput | None, list[tuple[str, str]]]:
    """The measurement in a layout's provenance, and (key, message) problems with its values.

    No provenance, or one without `measured_goodput_rps`, is no measurement: the layout was
    written by hand and the prediction sizes the pool as before.
    """
    if not provenance:
        return None, []
    problems: list[tuple[str, str]] = []
    value = provenance.get("measured_goodput_rps")
    if value is None:
        return None, []
    if not _positive(value):
        problems.append(
            ("measured_goodput_rps", f"{value!r} is not allowed; give the measured requests/s per node, a number > 0")
        )
    predicted = provenance.get("predicted_goodput_rps")
    if predicted is not None and not _positive(predicted):
        problems.append(
            ("predicted_goodput_rps", f"{predicted!r} is not allowed; give requests/s per node (a number > 0) or null")
        )
    slo = _pair(provenance.get("slo"), ("ttft_p90_ms", "tpot_p90_ms"), _positive, problems, "slo")
    workload = _pair(provenance.get("workload"), ("input_tokens", "output_tokens"), _positive_int, problems, "workload")
    gpu = provenance.get("gpu")
    if gpu is not None and not isinstance(gpu, str):
        problems.append(("gpu", f"{gpu!r} is not allowed; give the GPU size slug (a string) or null"))
    if problems:
        return None, problems
    return (
        MeasuredGoodput(
            goodput_rps_per_node=float(value),
            measured_at=_text(provenance.get("measured_at")),
            vllm_version=_text(provenance.get("vllm_version")),
            image=_text(provenance.get("image")),
            predicted_at_measurement_rps=None if predicted is None else float(predicted),
            slo=None if slo is None else (float(slo[0]), float(slo[1])),
            workload=None if workload is None else (int(workload[0]), int(workload[1])),
            gpu=gpu,
        ),
        [],
    )


def _pair(value: Any, keys: tuple[str, str], valid, problems: list[tuple[str, str]], name: str):
    """The two values of a `{a: x, b: y}` provenance mapping, or None (absent/null: not recorded)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not all(valid(value.get(k)) for k in keys):
        problems.append((name, f"{value!r} is not allowed; give {{{keys[0]}: n, {keys[1]}: n}} (numbers > 0) or null"))
        return None
    return value[keys[0]], value[keys[1]]


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _positive(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _text(value: Any) -> str | None:
    """Strings as written; an unquoted YAML timestamp arrives as a datetime and is printed back."""
    if value is None:
        return None
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    return str(value)
