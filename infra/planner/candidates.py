"""What the planner says about one layout (`Candidate`), a P/D unit (`PdCandidate`) and a model
(`ModelPlan`), and the two formulas every sizing shares (nodes for a peak, $ per million tokens).

Plain values with their JSON: the search (`search.py`), the P/D model (`disaggregation.py`) and the
choice rules (`choice.py`) build and rank them; nothing here evaluates a layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from infra.domain import Layout
from infra.planner.efficiency import Band
from infra.planner.memory import MemoryBreakdown
from infra.planner.performance import INF

HEADROOM = 1.2  # nodes are sized for peak_rps × 1.2, so the p90 SLO holds through bursts


@dataclass(frozen=True)
class ClosedLoop:
    """Prediction at a fixed number of concurrent clients per node (benchmark comparison mode)."""

    concurrency: int
    total_tokens_per_s_per_node: float
    output_tokens_per_s_per_node: float
    ttft_mean_ms: float
    tpot_mean_ms: float
    ttft_p90_ms: float
    tpot_p90_ms: float


@dataclass(frozen=True)
class Candidate:
    """One layout with its memory breakdown, predictions at goodput, cost and reason."""

    layout: Layout
    fits: bool
    memory: MemoryBreakdown
    gpus_per_node: int
    goodput_rps_per_replica: float
    goodput_rps_per_node: float
    output_tokens_per_s_per_gpu: float
    running_per_replica: float
    step_ms: float | None
    ttft_p90_ms: float | None
    tpot_p90_ms: float | None
    nodes_needed: int | None
    usd_per_hour: float | None
    usd_per_million_output_tokens: float | None
    limit: str  # memory | layout | ttft | tpot | capacity | throughput | slo
    bottleneck: str  # weights | kv | compute | comm | overhead | "" when it does not fit
    reason: str
    problems: tuple[str, ...] = ()
    closed_loop: ClosedLoop | None = None
    # measured ÷ predicted goodput where the planner was tested on sources it was not fitted to
    band: Band = Band(1.0, 1.0)
    # the choice rules (`choice.py`): sequences of KV room this layout needs, why it is not chosen
    # unmeasured ("" when it may be), and the bench run that would justify it
    kv_sequences_needed: int | None = None
    held_back: str = ""
    bench_command: str = ""

    @property
    def name(self) -> str:
        return self.layout.name

    @property
    def goodput_low_rps_per_node(self) -> float:
        """The conservative end of the band: what sizes a pool until the layout is measured."""
        return self.goodput_rps_per_node * min(1.0, self.band.low)

    @property
    def goodput_high_rps_per_node(self) -> float:
        return self.goodput_rps_per_node * max(1.0, self.band.high)

    @property
    def short_reason(self) -> str:
        """A few words for tables: what limits this candidate."""
        if not self.fits:
            return "does not fit in memory" if self.limit == "memory" else "invalid layout"
        if self.goodput_rps_per_node <= 0:
            return f"misses the SLO at any load ({self.bottleneck})"
        limit = {
            "ttft": "TTFT-bound",
            "tpot": "TPOT-bound",
            "capacity": "KV/seq cap",
            "throughput": "saturated",
        }
        text = f"{limit.get(self.limit, self.limit)}, step mostly {self.bottleneck}"
        if self.layout.multi_node:
            text += f", {self.layout.nodes_per_replica} nodes over RDMA"
        if self.held_back:
            text += ", held back: thin memory (bench it)"
        return text

    def to_json(self) -> dict:
        lay = self.layout
        out = {
            "name": lay.name,
            **lay.fields(),
            "fits": self.fits,
            "goodput_rps_per_node": _r(self.goodput_rps_per_node, 3),
            "goodput_band_rps_per_node": [_r(self.goodput_low_rps_per_node, 3), _r(self.goodput_high_rps_per_node, 3)],
            "output_tokens_per_s_per_gpu": _r(self.output_tokens_per_s_per_gpu, 1),
            "ttft_p90_ms": _r(self.ttft_p90_ms, 1),
            "tpot_p90_ms": _r(self.tpot_p90_ms, 2),
            "nodes_needed": self.nodes_needed,
            "usd_per_hour": _r(self.usd_per_hour, 2),
            "usd_per_million_output_tokens": _r(self.usd_per_million_output_tokens, 3),
            "limit": self.limit,
            "bottleneck": self.bottleneck,
            "reason": self.reason,
            "memory_gb_per_gpu": self.memory.to_json(),
            "kv_tokens_per_replica": self.memory.kv_tokens_per_replica,
            "max_concurrency_per_replica": self.memory.max_concurrency_per_replica,
            "running_per_replica": _r(self.running_per_replica, 1),
        }
        if self.kv_sequences_needed is not None:
            out["kv_sequences_needed"] = self.kv_sequences_needed
        if self.held_back:
            out["held_back"] = self.held_back
        if self.bench_command:
            out["bench_command"] = self.bench_command
        if self.problems:
            out["problems"] = list(self.problems)
        if self.closed_loop:
            cl = self.closed_loop
            out.update(
                {
                    "concurrency": cl.concurrency,
                    "total_tokens_per_s_per_node": _r(cl.total_tokens_per_s_per_node, 1),
                    "output_tokens_per_s_per_node": _r(cl.output_tokens_per_s_per_node, 1),
                    "ttft_mean_ms": _r(cl.ttft_mean_ms, 1),
                    "tpot_mean_ms": _r(cl.tpot_mean_ms, 2),
                    "ttft_p90_ms": _r(cl.ttft_p90_ms, 1),
                    "tpot_p90_ms": _r(cl.tpot_p90_ms, 2),
                }
            )
        return out


@dataclass(frozen=True)
class PdCandidate(Candidate):
    """A prefill/decode-disaggregated candidate (`layout` is a `PdLayout`; one unit = one replica).
    Built by `disaggregation.pd_candidates`; it carries the P/D prediction for JSON and reasons."""

    prediction: object = None  # disaggregation.PdPrediction

    @property
    def short_reason(self) -> str:
        p = self.prediction
        if not self.fits or p is None or self.goodput_rps_per_node <= 0:
            return super().short_reason
        return f"P/D, {p.binding} side binds, KV {p.transfer.seconds * 1e3:.0f} ms over {p.transfer.link}"

    def to_json(self) -> dict:
        out = super().to_json()
        p = self.prediction
        if p is not None and p.transfer is not None:
            out["disaggregation"] = {
                "binding": p.binding,
                "prefill_rps_per_instance": _r(p.prefill_rps_per_instance, 3),
                "decode_rps_per_instance": _r(p.decode_rps_per_instance, 3),
                "kv_transfer_ms": _r(p.transfer.seconds * 1e3, 2),
                "kv_transfer_link": p.transfer.link,
                "kv_bytes_per_request": int(p.transfer.bytes_total),
            }
        return out


@dataclass(frozen=True)
class ModelPlan:
    """The chosen layout, every candidate (best first) and why."""

    model_id: str
    gpu_slug: str
    chosen: Candidate
    candidates: list[Candidate] = field(default_factory=list)
    reason: str = ""
    choice_rules: dict = field(default_factory=dict)  # `choice.ChoiceRules.to_json()` of a search

    def to_json(self) -> dict:
        out = {
            "model": self.model_id,
            "gpu": self.gpu_slug,
            "chosen": self.chosen.to_json(),
            "reason": self.reason,
            "candidates": [c.to_json() for c in self.candidates],
        }
        if self.choice_rules:
            out["choice_rules"] = self.choice_rules
        return out


def _r(value: float | None, digits: int) -> float | None:
    if value is None or value == INF or value != value:
        return None
    return round(float(value), digits)


def nodes_for_peak(peak_rps: float | None, goodput_rps_per_node: float) -> int | None:
    """Nodes that carry `peak_rps` with HEADROOM at this goodput per node; None without a peak or
    a goodput. One formula for predicted and measured goodput, so the two sizings compare."""
    if peak_rps is None or goodput_rps_per_node <= 0:
        return None
    return max(1, math.ceil(peak_rps * HEADROOM / goodput_rps_per_node - 1e-9))


def whole_replicas(nodes: int | None, nodes_per_replica: int) -> int | None:
    """Nodes rounded up to whole replicas of a layout that spans nodes_per_replica nodes."""
    return None if nodes is None else -(-nodes // nodes_per_replica) * nodes_per_replica


def usd_per_million_output_tokens(
    usd_per_node_hour: float | None, goodput_rps_per_node: float, output_tokens: int
) -> float | None:
    """What a node costs per million output tokens at this goodput; None without a price or a goodput.
    One formula for predicted and measured goodput, like `nodes_for_peak`."""
    if usd_per_node_hour is None or goodput_rps_per_node <= 0:
        return None
    return usd_per_node_hour / (goodput_rps_per_node * output_tokens * 3600.0) * 1e6
