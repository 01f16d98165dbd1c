"""`models[].kv_offload` — a KV-cache tier in host memory — and the checks of a model's sessions.

Multi-turn chat re-sends its history every turn; the GPU prefix cache serves it only while it
holds it. An offload tier keeps evicted blocks in the node's RAM and reloads them over PCIe
instead of re-prefilling (vLLM `--kv-offloading-backend` / `--kv-offloading-size`). Its size is
checked against host memory in the plan (infra/session_plan.py), once the layout is known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from infra.catalog.lmcache import SERVER_MIN_VERSION, lmcache_in_image
from infra.config.base import StrictModel
from infra.config.layout import PdLayoutConfig
from infra.domain import KvOffload, session_shape
from infra.errors import Problem

if TYPE_CHECKING:
    from infra.config.model_keys import ModelKeys
    from infra.config.models import ModelConfig, WorkloadConfig

_SERVER_MIN = ".".join(map(str, SERVER_MIN_VERSION))


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


def engine_image(model: ModelConfig, vendor: str) -> str:
    """The image a model's engines run: its own, else the pinned vLLM image of its GPU vendor."""
    from infra.catalog import versions

    if model.image:
        return model.image
    return versions.VLLM_IMAGE_ROCM if vendor == "amd" else versions.VLLM_IMAGE_CUDA


def lmcache_image_problems(model: ModelConfig, keys: ModelKeys, vendor: str) -> list[Problem]:
    """kind lmcache runs `lmcache server` in the engine container: an image known to carry no
    LMCache is refused (infra/catalog/lmcache.py knows which do); the model's own image left to
    the pinned one is refused at kv_offload.kind, which asks for it."""
    if model.kv_offload.kind != "lmcache":
        return []
    image = engine_image(model, vendor)
    carries, why = lmcache_in_image(image)
    if carries is not False:
        return []
    example = ("a vLLM ROCm image built with LMCache installed" if vendor == "amd"
               else "vllm/vllm-openai v0.14.0 or later, or lmcache/vllm-openai")
    if model.image is None:
        return [Problem(
            keys("kv_offload.kind"),
            f"lmcache needs {keys.short('image')} set to an image with LMCache {_SERVER_MIN} or later "
            f"(`lmcache server`): the pinned {image} carries none ({why}); e.g. {example}",
        )]
    return [Problem(
        keys("image"),
        f"{image!r} carries no LMCache ({why}), and kv_offload.kind lmcache starts `lmcache server` in the engine "
        f"container: give an image with LMCache {_SERVER_MIN} or later (e.g. {example}), or kv_offload kind cpu",
    )]


def kv_offload_problems(model: ModelConfig, keys: ModelKeys) -> list[Problem]:
    """A tier needs its size (cpu, lmcache) and no other connector; the session model and a fixed
    hit rate are two answers to one question (lmcache's image: `lmcache_image_problems`, which
    needs the pool)."""
    off, w, problems = model.kv_offload, model.workload, []
    if off.kind in ("cpu", "lmcache") and off.size_gib is None:
        problems.append(Problem(keys("kv_offload.size_gib"), f"required with kind {off.kind}: GiB of host memory per engine"))
    if off.kind in ("none", "auto") and off.size_gib is not None:
        problems.append(Problem(keys("kv_offload.size_gib"), f"not used with kind {off.kind} (cpu or lmcache take a size)"))
    if off.kind != "none" and isinstance(model.layout, PdLayoutConfig):
        problems.append(Problem(
            keys("kv_offload"),
            "not with a prefill/decode layout: its engines' --kv-transfer-config carries the P/D connector, which vLLM's "
            "offloading switch would replace (composing both through MultiConnector is not supported here)",
        ))
    if off.kind == "lmcache" and getattr(model.layout, "nodes_per_replica", 1) > 1:
        problems.append(Problem(
            keys("kv_offload"),
            "lmcache runs its server in the engine container of a single-node replica; a replica over nodes can use kind cpu",
        ))
    if off.kind == "auto" and w.turns_per_session == 1:
        problems.append(Problem(keys("kv_offload"), "auto needs workload.turns_per_session above 1: the planner decides from the sessions"))
    if w.turns_per_session > 1 and w.prefix_cache_hit_rate > 0:
        problems.append(Problem(
            keys("workload.prefix_cache_hit_rate"),
            "set prefix_cache_hit_rate or turns_per_session, not both: with sessions the planner predicts the hit rate",
        ))
    if w.turns_per_session == 1 and w.new_tokens_per_turn is not None:
        problems.append(Problem(keys("workload.new_tokens_per_turn"), "only with turns_per_session above 1"))
    problems += session_problems(w, keys)
    return problems


def session_problems(w: WorkloadConfig, keys: ModelKeys) -> list[Problem]:
    """The session model's own consistency (infra/domain.py `session_shape`)."""
    try:
        session_shape(w.to_workload())
    except ValueError as err:
        key = "workload.new_tokens_per_turn" if w.new_tokens_per_turn is not None else "workload.turns_per_session"
        return [Problem(keys(key), str(err))]
    return []
