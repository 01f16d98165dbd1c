"""How `layout: auto` chooses among layouts nobody has measured: rank on the band's low end, and
hold back the layouts whose fit the memory model cannot vouch for.

A prediction is a point inside a measured band (`efficiency.Band`: measured ÷ predicted where each
source was left out of the fit). Until a layout is benched, the pool is sized on the band's low end,
so that is also what the ranking compares: a layout whose band is wider (a replica over nodes) has
to lead by more than one with a calibrated band.

Two layouts can be predicted fast and still be a bad bet: one whose KV cache holds only a handful
of sequences (the published failure: Qwen3-235B FP8 as `tp1-r8` on MI325X, 236 GB of weights on
each GPU and ~12 sequences of KV room — a misestimate of a few GB in activations or runtime buffers
leaves none, and a burst preempts), and one whose memory headroom is a sliver of the budget. Such
a layout stays in the ranking, marked `held_back` with the `infra bench` command that would justify
it, and is not chosen while a layout with room meets the SLO. The rules (`ChoiceRules`) are stated
in the plan JSON (`ModelPlan.to_json()["choice_rules"]`) and in docs/planner.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from infra.domain import Slo, Workload
from infra.planner.candidates import Candidate
from infra.planner.performance import INF

# Goodputs per node within 0.5% count as equal: the planner is not that precise. Cost per million
# output tokens is the pool's node price / goodput per node, the same price for every candidate,
# so within a tie it differs by < 0.5% too and counts as equal; the tie goes to fewer GPUs per
# replica (more, smaller replicas: a failure takes out less), then the smaller token budget.
GOODPUT_TIE = 0.005
# The chosen layout leads the runner-up by less than this: the reason says the order rests on the
# efficiency priors, not on a margin the performance model can vouch for.
NEAR_TIE = 0.05
MIN_KV_SEQUENCES = 32  # sequences of the workload's context a replica's KV cache must hold at least
# Share of the per-GPU memory budget (gpu_memory_utilization × HBM) that must be left for KV cache:
# below it the fit rests on the memory model's estimate of activations, runtime and communicator
# buffers and the image's kernels, none of it measured.
MIN_KV_SHARE = 0.05


@dataclass(frozen=True)
class ChoiceRules:
    """What an unmeasured layout must have to be chosen (see the module docstring)."""

    min_kv_sequences: int = MIN_KV_SEQUENCES
    min_kv_share: float = MIN_KV_SHARE

    def to_json(self) -> dict:
        return {
            "ranked_on": "goodput_band_rps_per_node[0] (the band's low end: what sizes the pool until measured)",
            "min_kv_sequences": self.min_kv_sequences,
            "kv_sequences_needed": (
                "max(min_kv_sequences, ceil(low-end goodput per replica × (p90 TTFT SLO + (output tokens − 1) × "
                "p90 TPOT SLO))): the sequences in flight when the replica carries its sized load and requests take "
                "as long as the SLO allows"
            ),
            "min_kv_share_of_memory_budget": self.min_kv_share,
        }


DEFAULT_RULES = ChoiceRules()


def kv_sequences_needed(c: Candidate, workload: Workload, slo: Slo, rules: ChoiceRules = DEFAULT_RULES) -> int:
    """Sequences one replica (one P/D decode engine) must hold: Little's law at the band's low end
    and the SLO's latencies, and at least `min_kv_sequences`."""
    per_replica = c.goodput_rps_per_replica * min(1.0, c.band.low)
    decode_engines = getattr(c.layout, "decode_instances", 1)
    seconds = (slo.ttft_p90_ms + max(0, workload.output_tokens - 1) * slo.tpot_p90_ms) / 1e3
    return max(rules.min_kv_sequences, math.ceil(per_replica / decode_engines * seconds - 1e-9))


def held_back_reason(c: Candidate, workload: Workload, slo: Slo, rules: ChoiceRules = DEFAULT_RULES) -> str:
    """Why `c` may not be chosen unmeasured ("" when it may): too few sequences of KV room, or too
    thin a memory margin."""
    if not c.fits or c.goodput_rps_per_node <= 0:
        return ""
    mem = c.memory
    problems = []
    need = kv_sequences_needed(c, workload, slo, rules)
    if mem.max_concurrency_per_replica < need:
        problems.append(
            f"its KV cache holds {mem.max_concurrency_per_replica} sequences of {mem.context_tokens} tokens per "
            f"{'decode engine' if getattr(c.layout, 'disaggregated', False) else 'replica'}, under the {need} needed"
        )
    prefill = getattr(getattr(c, "prediction", None), "prefill_memory", None)  # a P/D unit's other side
    for side, m in (("", mem), ("its prefill engines ", prefill)):
        share = m.kv_cache_gb / m.budget_gb if m is not None and m.budget_gb > 0 else 1.0
        if share < rules.min_kv_share:
            problems.append(
                f"{side or 'it '}leave{'' if side else 's'} {m.kv_cache_gb:.1f} GB of the {m.budget_gb:.0f} GB budget per GPU "
                f"for KV cache ({share:.0%}, under the {rules.min_kv_share:.0%} memory margin)"
            )
    return ", and ".join(problems)


def assess(candidates: list[Candidate], workload: Workload, slo: Slo, rules: ChoiceRules = DEFAULT_RULES) -> list[Candidate]:
    """The candidates with `kv_sequences_needed` and `held_back` filled in."""
    return [
        replace(c, kv_sequences_needed=kv_sequences_needed(c, workload, slo, rules), held_back=held_back_reason(c, workload, slo, rules))
        if c.fits
        else c
        for c in candidates
    ]


def tier(c: Candidate) -> int:
    """0: may be chosen; 1: meets the SLO but held back; 2: meets no load within the SLO; 3: does not run."""
    if not c.fits:
        return 3
    if c.goodput_rps_per_node <= 0:
        return 2
    return 1 if c.held_back else 0


def rank_key(c: Candidate):
    """The total order of a search: tier, goodput at the band's low end, cost, fewer GPUs per
    replica, smaller token budget, name."""
    return (
        tier(c),
        -c.goodput_low_rps_per_node,
        c.usd_per_million_output_tokens if c.usd_per_million_output_tokens is not None else INF,
        c.layout.gpus_per_replica,
        c.layout.max_num_batched_tokens,
        c.name,
    )


def break_ties(ranked: list[Candidate]) -> list[Candidate]:
    """Apply GOODPUT_TIE to the top of the exact ranking: of the candidates of the first tier within
    0.5% of the best low-end goodput (and so within 0.5% of its cost per million tokens), the one with
    fewer GPUs per replica, then the smaller token budget, then the name goes first. Only the first
    place moves: a tolerance is not transitive, so it cannot define a whole order."""
    top = ranked[0] if ranked else None
    if top is None or tier(top) > 1:
        return ranked
    tied = [
        c for c in ranked
        if tier(c) == tier(top) and c.goodput_low_rps_per_node >= top.goodput_low_rps_per_node * (1 - GOODPUT_TIE)
    ]
    first = min(tied, key=lambda c: (c.layout.gpus_per_replica, c.layout.max_num_batched_tokens, c.name))
    return [first, *(c for c in ranked if c is not first)]


def with_bench_commands(ranked: list[Candidate], bench_prefix: str) -> list[Candidate]:
    """Each held-back candidate that would out-carry the chosen one gets the bench run that would
    justify it: both layouts, so the measurement compares them."""
    chosen = ranked[0] if ranked else None
    if chosen is None or tier(chosen) != 0:
        return ranked
    return [
        replace(c, bench_command=f"{bench_prefix} --layouts {c.name},{chosen.name}") if tier(c) == 1 else c
        for c in ranked
    ]


def given_up(ranked: list[Candidate]) -> str:
    """What the choice gives up: the held-back layouts predicted to carry more than the chosen one
    (at the band's low end), the best of them named with its figures and why it was held back."""
    chosen = ranked[0] if ranked else None
    if chosen is None or tier(chosen) > 1:
        return ""
    if tier(chosen) == 1:
        return (
            f"; every layout that meets the SLO is held back ({chosen.held_back}): measure it with `infra bench` "
            "before relying on it"
        )
    better = [c for c in ranked if tier(c) == 1 and c.goodput_low_rps_per_node > chosen.goodput_low_rps_per_node]
    if not better:
        return ""
    best = better[0]
    more = f" ({len(better) - 1} more held back likewise)" if len(better) > 1 else ""
    return (
        f"; it gives up {best.name}, predicted at {best.goodput_rps_per_node:.2f} req/s per node "
        f"({best.goodput_low_rps_per_node / chosen.goodput_low_rps_per_node:.2f}× this layout at the band's low end) "
        f"but held back unmeasured: {best.held_back}; `{best.bench_command}` would justify it{more}"
    )
