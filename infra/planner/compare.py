"""Which GPU to buy: one model's best layouts on several GPU sizes, ranked by cost per token.

The question a platform team asks before it signs a contract: for this model, workload and SLO,
which size serves a million output tokens cheapest within the SLO, and how sure is that? Each
size is planned as `layout: auto` would plan it (`plan_model`), its best candidates kept, and all
of them ranked by the predicted $ per million output tokens. The cost range comes from the
candidate's uncertainty band (its GPU family and model class, leave-one-source-out): the high
end is the price at the band's low goodput, which is also what sizes a pool until it is measured.
Sizes without a price (contract capacity, none given) rank after the priced ones, by goodput.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from infra.catalog.gpus import GpuSize
from infra.catalog.models import ModelArch
from infra.domain import Slo, Workload
from infra.planner.efficiency import EfficiencyTable
from infra.planner.search import Candidate, plan_model, sizes_that_fit, usd_per_million_output_tokens


@dataclass(frozen=True)
class GpuOption:
    """One layout of the model on one GPU size, with its cost range."""

    gpu: GpuSize
    candidate: Candidate
    output_tokens: int

    @property
    def usd_per_million_range(self) -> tuple[float, float] | None:
        """(at the band's high goodput, at its low goodput); None without a price or goodput."""
        c = self.candidate
        if c.usd_per_hour is None or c.goodput_rps_per_node <= 0:
            return None
        out = self.output_tokens
        return (
            usd_per_million_output_tokens(c.usd_per_hour, c.goodput_high_rps_per_node, out),
            usd_per_million_output_tokens(c.usd_per_hour, c.goodput_low_rps_per_node, out),
        )

    def to_json(self) -> dict:
        cost = self.usd_per_million_range
        return {
            "gpu": self.gpu.slug,
            **self.candidate.to_json(),
            "usd_per_million_output_tokens_band": None if cost is None else [round(cost[0], 3), round(cost[1], 3)],
        }


def _rank_key(o: GpuOption):
    c = o.candidate
    serves = c.fits and c.goodput_rps_per_node > 0
    cost = c.usd_per_million_output_tokens
    return (not serves, cost is None, cost if cost is not None else 0.0, -c.goodput_rps_per_node, o.gpu.slug, c.name)


def compare_gpus(
    arch: ModelArch,
    sizes: Iterable[GpuSize],
    workload: Workload,
    slo: Slo,
    *,
    per_gpu: int = 1,
    efficiency: EfficiencyTable | None = None,
    **restrict,
) -> list[GpuOption]:
    """The best `per_gpu` candidates of every size the model fits on, cheapest per token first.

    `restrict` passes tp/ep/dp/replicas_per_node through to the search. Sizes the model's weights
    cannot fit on at all are left out (they have no layout to compare)."""
    options = []
    for gpu in sizes_that_fit(arch, workload, list(sizes)):
        plan = plan_model(arch, gpu, workload, slo, efficiency=efficiency, **restrict)
        fitting = [c for c in plan.candidates if c.fits] or plan.candidates[:1]
        options += [GpuOption(gpu, c, workload.output_tokens) for c in fitting[:per_gpu]]
    return sorted(options, key=_rank_key)


def cheapest(options: list[GpuOption]) -> GpuOption | None:
    priced = [o for o in options if o.candidate.usd_per_million_output_tokens is not None and o.candidate.goodput_rps_per_node > 0]
    return priced[0] if priced else None


def summary(options: list[GpuOption]) -> str:
    """One sentence: the cheapest size and by how much it leads, and whether the bands overlap."""
    best = cheapest(options)
    if best is None:
        return "no size has both a price and a layout that meets the SLO"
    rest = [o for o in options if o is not best and o.gpu.slug != best.gpu.slug and o.usd_per_million_range]
    text = (
        f"cheapest within the SLO: {best.gpu.slug} as {best.candidate.name} at "
        f"${best.candidate.usd_per_million_output_tokens:.3f}/M output tokens"
    )
    if rest:
        nxt = rest[0]
        ratio = nxt.candidate.usd_per_million_output_tokens / best.candidate.usd_per_million_output_tokens
        lo_best = best.usd_per_million_range
        lo_next = nxt.usd_per_million_range
        overlap = lo_best is not None and lo_next is not None and lo_next[0] <= lo_best[1]
        text += f"; next {nxt.gpu.slug} ({nxt.candidate.name}) costs {ratio:.2f}×"
        text += (
            " — the uncertainty bands overlap, so measure both (`infra bench`) before committing"
            if overlap
            else " — outside each other's uncertainty bands"
        )
    return text
