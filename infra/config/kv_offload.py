"""`models[].kv_offload` — a KV-cache tier in host memory.

Multi-turn chat re-sends its history every turn; the GPU prefix cache serves it only while it
holds it. An offload tier keeps evicted blocks in the node's RAM and reloads them over PCIe
instead of re-prefilling (vLLM `--kv-offloading-backend` / `--kv-offloading-size`). Its size is
checked against host memory in the plan (infra/session_plan.py), once the layout is known; its
keys against the model's (and the checks of a model's sessions) in infra/config/model_checks.py;
lmcache's image against the pool's GPU vendor in infra/config/cross_checks.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from infra.config.base import StrictModel
from infra.domain import KvOffload


class KvOffloadConfig(StrictModel):
    """A second KV-cache tier in host memory for every engine of the model (docs/planner.md)."""

    kind: Literal["none", "auto", "cpu", "lmcache"] = Field(
        "none",
        description="none; auto: the planner turns a CPU tier on where it raises goodput by 5 % or more (needs workload.turns_per_session); cpu: vLLM's native OffloadingConnector; lmcache: LMCache's multi-process server (`lmcache server`, LMCache 0.4.3 or later) in the engine container, reached by vLLM's LMCacheMPConnector; needs an image with LMCache: vLLM's ROCm images carry none (set models[].image), its CUDA images from v0.14.0 do (infra/catalog/lmcache.py).",
    )
    size_gib: float | None = Field(
        None, gt=0, le=65536, allow_inf_nan=False,
        description="cpu / lmcache (required): host memory of the tier (cpu: per engine, vLLM's --kv-offloading-size, shared by its TP ranks, and a replica with dp ranks pins it dp times; lmcache: the L1 buffer of the one LMCache server in the engine container, shared by its dp ranks); must fit the engine pod's share of the node's RAM beside the engine itself.",
    )

    def to_offload(self) -> KvOffload | None:
        return KvOffload(self.kind, float(self.size_gib)) if self.kind in ("cpu", "lmcache") and self.size_gib else None
