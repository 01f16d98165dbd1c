"""A layout's goodput as measured in the cluster, read from the `provenance:` block of its layout.

`infra tune ingest --write` records the measured winner with the goodput it reached (requests/s
per node: the benchmark runs all of the layout's replicas on one node). A measurement beats a
prediction — the performance model is only as good as its efficiency factors — so whenever a
layout carries one, the pool is sized from it, and a measurement far below the prediction is the
signal that the factors for this GPU family need re-fitting (`infra tune calibrate`).
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
    if problems:
        return None, problems
    return (
        MeasuredGoodput(
            goodput_rps_per_node=float(value),
            measured_at=_text(provenance.get("measured_at")),
            vllm_version=_text(provenance.get("vllm_version")),
            image=_text(provenance.get("image")),
            predicted_at_measurement_rps=None if predicted is None else float(predicted),
        ),
        [],
    )


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
