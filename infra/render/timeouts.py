"""How long a request may take before the front door gives up on it, from the model's SLO.

One rule for every front door (the vLLM router's `--request-timeout-secs`, the gateway's
per-route `timeouts.request`): twice the time a completion four times the typical length takes
when both SLO limits are just met (first token at the TTFT limit, every further token at the TPOT
limit), rounded up to 10 s. The factor 2 leaves room for queueing under load; the tail of 4
covers long answers the typical length hides. A dead request is not held for the router's
default half hour.
"""

from __future__ import annotations

import math

TIMEOUT_OUTPUT_TAIL = 4
TIMEOUT_FACTOR = 2


def request_timeout_seconds(ttft_p90_ms: float, tpot_p90_ms: float, output_tokens: int) -> int:
    """One model's request timeout in seconds (unclamped; callers apply their own bounds)."""
    at_slo = ttft_p90_ms / 1000 + TIMEOUT_OUTPUT_TAIL * output_tokens * tpot_p90_ms / 1000
    return 10 * math.ceil(TIMEOUT_FACTOR * at_slo / 10)
