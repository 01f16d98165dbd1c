"""How much of a multi-turn chat's prompt the prefix cache serves, from cache capacity and sessions.

A conversation of T turns sends prompts that grow by each answer: turn k carries the whole history
(the earlier turns' prompts and answers) plus the user's new tokens. That history is in some
replica's KV cache when the turn arrives only if (a) the turn reaches the replica (and, inside a
replica with data-parallel ranks, the DP engine) that served the previous one, and (b) the
session's blocks survived the think time in between. vLLM evicts least-recently-used blocks: a
block survives while fewer than C other tokens' blocks were touched since its last use, C being
the cache's capacity in tokens. An engine touches every prompt and answer token it serves, at
R = requests/s × (input + output) tokens/s, so a block is evicted about C / R seconds after its
last use (its eviction horizon). With exponentially distributed think times of mean θ, the chance
the history is still cached when the next turn arrives is

    p(C) = 1 − exp(−C / (R · θ)),

which grows with C: more cache never predicts a lower hit rate (tests/planner property test).

An offload tier (vLLM's OffloadingConnector or LMCache's CPU tier) stores every computed block in
host memory as well, so it is inclusive of the GPU tier: the tiers together hold max(C_gpu,
C_offload) tokens. A hit in the offload tier is not free: its blocks cross the GPU's host link
(catalog/host_links.py) before the turn can prefill its new tokens. It pays when that reload is
faster than recomputing the history; `effective` counts an offload hit as the share of the
prefill it saves (1 − reload time / recompute time per token), which is what the performance
model's `prefix_cache_hit_rate` means (prompt tokens it need not prefill).

What this leaves out (and so what the band around a prediction must absorb): think times that
are not exponential, sessions of different lengths, blocks shared between sessions (a system
prompt: more hits than predicted), the asynchronous GPU→host stores competing with reloads for
the link, and LMCache's chunking (256-token chunks: a partial last chunk is recomputed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.domain import SessionShape


def survival(capacity_tokens: float, touch_tokens_per_s: float, think_time_s: float) -> float:
    """Chance a session's blocks are still cached after an exponential think time of mean θ."""
    if capacity_tokens <= 0:
        return 0.0
    if touch_tokens_per_s <= 0 or think_time_s <= 0:
        return 1.0
    return 1.0 - math.exp(-capacity_tokens / (touch_tokens_per_s * think_time_s))


def tokens_for_survival(target: float, touch_tokens_per_s: float, think_time_s: float) -> float:
    """Capacity in tokens at which `survival` reaches `target` (< 1): the working set worth caching."""
    return -math.log(1.0 - target) * touch_tokens_per_s * think_time_s


@dataclass(frozen=True)
class PrefixHit:
    """Predicted prefix-cache hits of one model's engines, as shares of all prompt tokens.

    gpu: served from the GPU's own cache; offload: from the host-memory tier (reloaded over the
    host link); total = gpu + offload; effective: the prefill work saved, an offload hit counted
    by the share of its recompute that the reload saves. reload_ms: mean host-link time a turn
    that hits the offload tier spends loading its history (part of its TTFT).
    """

    gpu: float
    offload: float
    effective: float
    reload_ms: float
    affinity: float  # chance a turn reaches the engine that served the previous one

    @property
    def total(self) -> float:
        return self.gpu + self.offload

    def to_json(self) -> dict:
        return {
            "gpu": round(self.gpu, 4),
            "offload": round(self.offload, 4),
            "total": round(self.total, 4),
            "effective": round(self.effective, 4),
            "reload_ms": round(self.reload_ms, 1),
            "affinity": round(self.affinity, 4),
        }


def prefix_hit(
    shape: SessionShape,
    *,
    input_tokens: int,
    output_tokens: int,
    gpu_tokens: float,
    offload_tokens: float,
    rps_per_engine: float,
    affinity: float,
    reload_s_per_token: float,
    prefill_s_per_token: float,
    offload_affinity: float | None = None,
) -> PrefixHit:
    """Hit rates of one engine's cache (a DP rank of a replica: its own KV cache and scheduler).

    gpu_tokens / offload_tokens: the engine's GPU KV capacity and its share of the offload tier, in
    tokens; rps_per_engine: the requests/s it serves; affinity: chance the next turn comes back to
    it (1 with session-sticky routing to a replica of one engine). offload_affinity: chance the next
    turn comes back to an engine that reads the same tier (default: `affinity`, a tier of its own).
    A tier the replica's data-parallel engines share (LMCache's one server per pod) serves a turn
    that lands on another rank of the same replica too, from the tier alone: its share of the tier
    over its share of the touches is the whole tier over the whole replica's, so the survival is the
    same.
    """
    touch = rps_per_engine * (input_tokens + output_tokens)
    p_gpu = survival(gpu_tokens, touch, shape.think_time_s)
    p_any = survival(max(gpu_tokens, offload_tokens), touch, shape.think_time_s)
    p_tier = survival(offload_tokens, touch, shape.think_time_s)
    elsewhere = max(0.0, (affinity if offload_affinity is None else offload_affinity) - affinity)
    reuse = shape.reusable_share * affinity
    gpu = reuse * p_gpu
    offload = reuse * (p_any - p_gpu) + shape.reusable_share * elsewhere * p_tier
    credit = max(0.0, 1.0 - reload_s_per_token / prefill_s_per_token) if prefill_s_per_token > 0 else 0.0
    # a turn that hits carries the history of k − 1 earlier turns; over k = 2..T that is T/2 turns
    history_tokens = shape.turns / 2.0 * (shape.new_tokens_per_turn + output_tokens)
    return PrefixHit(
        gpu=gpu,
        offload=offload,
        effective=gpu + offload * credit,
        reload_ms=history_tokens * reload_s_per_token * 1e3 if offload > 0 else 0.0,
        affinity=affinity,
    )
