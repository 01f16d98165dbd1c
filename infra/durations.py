"""One duration grammar: Prometheus durations (`15d`, `720h`, `1w3d`, `90s`, `500ms`).

Prometheus retention, alert `for:` clauses and rule windows all use it, so the config validates
`observability.retention` with the same parser the renderers rely on.
"""

from __future__ import annotations

import re

_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
# Units largest first, each at most once (Prometheus' own order rule).
_GRAMMAR = re.compile(r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$")
_ORDER = ("y", "w", "d", "h", "m", "s", "ms")


def duration_seconds(text: str) -> float:
    """Seconds in a Prometheus duration; ValueError for anything else (`15 days`, `1.5d`, `0d`, ``)."""
    match = _GRAMMAR.match(text) if isinstance(text, str) else None
    if not text or match is None:
        raise ValueError(f"{text!r} is not a Prometheus duration; use e.g. 15d, 720h, 8w or 1w3d")
    seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in zip(match.groups(), _ORDER, strict=True) if n is not None)
    if seconds <= 0:
        raise ValueError(f"{text!r} is zero; give a positive duration such as 15d")
    return seconds


def duration_days(text: str) -> float:
    return duration_seconds(text) / 86400
