"""The shapes the planner, the config and the renderers share: a serving layout, a workload, SLOs.

A layout says how one vLLM replica uses a node's GPUs and how many such replicas share a node.
Its canonical name `tp<N>[-ep][-dp<M>]-r<K>` (e.g. `tp4-ep-r2`) is what the planner's JSON,
`infra bench --layouts` and `vllm bench --metadata layout=` all use, so measurements and
predictions can be joined on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

_NAME = re.compile(r"^tp(?P<tp>[1-9][0-9]*)(?P<ep>-ep)?(?:-dp(?P<dp>[1-9][0-9]*))?-r(?P<r>[1-9][0-9]*)$")


@dataclass(frozen=True)
class Layout:
    """How a model is laid out on one node.

    tp: tensor-parallel size of one engine (vLLM --tensor-parallel-size).
    ep: experts sharded across the replica's GPUs instead of tensor-sliced (--enable-expert-parallel).
    dp: data-parallel attention ranks inside one replica (--data-parallel-size); the replica then
        uses tp × dp GPUs and, with ep, its experts are spread over all of them.
    replicas_per_node: independent vLLM engines per node, each with its own weights and KV cache.
    """

    tp: int = 1
    ep: bool = False
    dp: int = 1
    replicas_per_node: int = 1
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    gpu_memory_utilization: float = 0.90
    kv_cache_dtype: str = "auto"  # "auto" (the model dtype) or "fp8"
    max_model_len: int | None = None  # None: the workload's input + output, rounded up

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.dp

    @property
    def gpus_per_node_used(self) -> int:
        return self.gpus_per_replica * self.replicas_per_node

    @property
    def name(self) -> str:
        return layout_name(self.tp, self.ep, self.dp, self.replicas_per_node)

    def with_(self, **changes) -> Layout:
        return replace(self, **changes)


def layout_name(tp: int, ep: bool, dp: int, replicas_per_node: int) -> str:
    """Canonical layout name, e.g. `tp4-ep-r2` or `tp1-ep-dp8-r1`."""
    return f"tp{tp}{'-ep' if ep else ''}{f'-dp{dp}' if dp > 1 else ''}-r{replicas_per_node}"


def parse_layout_name(name: str) -> dict:
    """`tp4-ep-r2` → {"tp": 4, "ep": True, "dp": 1, "replicas_per_node": 2}; ValueError if malformed."""
    m = _NAME.match(name.strip())
    if not m:
        raise ValueError(f"{name!r} is not a layout name; expected tp<N>[-ep][-dp<M>]-r<K>, e.g. tp4-ep-r2")
    return {
        "tp": int(m["tp"]),
        "ep": bool(m["ep"]),
        "dp": int(m["dp"] or 1),
        "replicas_per_node": int(m["r"]),
    }


@dataclass(frozen=True)
class Workload:
    """What the traffic looks like: mean prompt and completion lengths, and the peak request rate."""

    input_tokens: int
    output_tokens: int
    peak_rps: float | None = None
    prefix_cache_hit_rate: float = 0.0  # share of prompt tokens served from the prefix cache


@dataclass(frozen=True)
class Slo:
    """Latency limits at the 90th percentile."""

    ttft_p90_ms: float
    tpot_p90_ms: float
