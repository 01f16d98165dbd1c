"""Argument types for numeric command-line flags, shared by every `infra` command.

argparse names the flag in its error ("argument --top: must be at least 1, got 0") and exits 2,
so a value out of range is refused where it is typed instead of being read loosely (`--top 0`
once showed everything, `--top -1` silently dropped the last row).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _number(parse: Callable[[str], float], accept: Callable[[float], bool], allowed: str):
    def convert(text: str):
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text}")
        return value

    return convert


positive_int = _number(int, lambda v: v >= 1, "a whole number at least 1")
non_negative_int = _number(int, lambda v: v >= 0, "a whole number at least 0")
# `math.isfinite` also refuses nan, which compares false with everything.
positive_float = _number(float, lambda v: math.isfinite(v) and v > 0, "a number greater than 0")
fraction = _number(float, lambda v: 0.0 <= v < 1.0, "a number in [0, 1)")


def int_in(low: int, high: int):
    """A whole number in [low, high] (the config's limits for the same quantity)."""
    return _number(int, lambda v: low <= v <= high, f"a whole number from {low:,} to {high:,}")


def float_in(high: float):
    """A finite number in (0, high]."""
    return _number(float, lambda v: math.isfinite(v) and 0 < v <= high, f"a number greater than 0 and at most {high:,g}")
