"""`models[].layout:` — an explicit colocated layout or a prefill/decode-disaggregated one.

Whether a layout fits its model and node is a planning question: infra/layout_fit.py, asked by
plan_stack. Here only the shape of the mapping is checked."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Discriminator, Field, Tag

from infra.config.base import StrictModel
from infra.domain import Layout, PdLayout, Provenance, is_pd_layout_name, parse_pd_layout_name


def auto_or_layout(value: Any) -> Any:
    """`layout:` as written, before its model: `auto` is None, a P/D name its mapping; any other
    string, and nodes_per_replica on a P/D layout, are refused with what to write instead."""
    if value == "auto" or value is None:
        return None
    if isinstance(value, str) and is_pd_layout_name(value):
        return {"disaggregated": value}
    if isinstance(value, str):
        raise ValueError(f"{value!r} is not a layout; use 'auto', a P/D layout name such as p1tp4-d1tp4, or a mapping such as {{tp: 4, ep: true, replicas_per_node: 2}}")
    if isinstance(value, dict) and "disaggregated" in value and "nodes_per_replica" in value:
        raise ValueError(
            f"nodes_per_replica {value['nodes_per_replica']!r} is for colocated layouts; a P/D layout such as "
            f"{value['disaggregated']!r} spans nodes by its own size (nodes_per_unit = its GPUs over the GPUs per node, on a "
            "fabric pool): remove nodes_per_replica"
        )
    return value


class LayoutConfig(StrictModel):
    """An explicit serving layout (instead of `auto`). Checked against the model and the node."""

    tp: int = Field(ge=1, le=64, description="Tensor-parallel size of one vLLM replica.")
    ep: bool = Field(False, description="Expert parallelism (MoE models only).")
    dp: int = Field(1, ge=1, le=64, description="Data-parallel attention ranks inside one replica.")
    replicas_per_node: int = Field(1, ge=1, le=64, description="Independent vLLM replicas per node.")
    nodes_per_replica: int = Field(
        1, ge=1, le=64,
        description="Whole nodes one replica spans (fabric pools only; rendered as a LeaderWorkerSet): with ep, tp × dp = nodes_per_replica × GPUs per node with the dp ranks spread over the nodes; without ep, tp = nodes_per_replica × GPUs per node. replicas_per_node must then be 1.",
    )
    max_num_seqs: int | None = Field(None, ge=1, le=4096, description="vLLM --max-num-seqs; unset: the planner's choice.")
    max_num_batched_tokens: int | None = Field(None, ge=256, le=262144, description="vLLM --max-num-batched-tokens; unset: the planner's choice.")
    gpu_memory_utilization: float = Field(0.90, gt=0.3, le=0.98, description="vLLM --gpu-memory-utilization.")
    kv_cache_dtype: Literal["auto", "fp8"] = Field("auto", description="vLLM --kv-cache-dtype.")
    max_model_len: int | None = Field(None, ge=256, le=1048576, description="vLLM --max-model-len; unset: twice input+output tokens rounded up to a power of two, at least 4096, at most the model's context.")
    provenance: Provenance | None = Field(None, description="Where a measured layout came from (written by `infra tune ingest --write`); its `measured_goodput_rps` sizes the pool.")

    def to_layout(self, gpus_per_node: int | None = None) -> Layout:
        """The planner's Layout (`gpus_per_node` is for P/D layouts; a colocated one needs none)."""
        base = Layout()
        return Layout(
            tp=self.tp,
            ep=self.ep,
            dp=self.dp,
            replicas_per_node=self.replicas_per_node,
            nodes_per_replica=self.nodes_per_replica,
            max_num_seqs=self.max_num_seqs or base.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens or base.max_num_batched_tokens,
            gpu_memory_utilization=self.gpu_memory_utilization,
            kv_cache_dtype=self.kv_cache_dtype,
            max_model_len=self.max_model_len,
        )


def _pd_name(value: str) -> str:
    parse_pd_layout_name(value)  # ValueError names the grammar
    return value


class PdLayoutConfig(StrictModel):
    """A prefill/decode-disaggregated layout: `layout: p1tp4-d1tp4`, or this mapping for its limits.

    N prefill engines of TP A and M decode engines of TP B per unit, joined by the GPU vendor's KV
    connector (MoRI-IO on AMD, NIXL on NVIDIA) behind a per-model P/D router (docs/serving.md).
    """

    disaggregated: Annotated[str, AfterValidator(_pd_name)] = Field(
        description="P/D layout name p<N>tp<A>[-ep]-d<M>tp<B>[-ep], e.g. p1tp4-d1tp4 (1 prefill engine of TP4, 1 decode engine of TP4)."
    )
    decode_max_num_seqs: int | None = Field(None, ge=1, le=4096, description="vLLM --max-num-seqs of each decode engine; unset: the planner's choice.")
    prefill_max_num_batched_tokens: int | None = Field(None, ge=256, le=262144, description="vLLM --max-num-batched-tokens of each prefill engine; unset: 8192.")
    gpu_memory_utilization: float = Field(0.90, gt=0.3, le=0.98, description="vLLM --gpu-memory-utilization of every engine.")
    kv_cache_dtype: Literal["auto", "fp8"] = Field("auto", description="vLLM --kv-cache-dtype of every engine (and the KV moved between them).")
    max_model_len: int | None = Field(None, ge=256, le=1048576, description="vLLM --max-model-len; unset: as for colocated layouts.")
    provenance: Provenance | None = Field(None, description="Where a measured P/D layout came from; its `measured_goodput_rps` sizes the pool.")

    def to_layout(self, gpus_per_node: int | None = None) -> PdLayout:
        base = PdLayout()
        return PdLayout(
            **parse_pd_layout_name(self.disaggregated),
            gpus_per_node=gpus_per_node or base.gpus_per_node,
            prefill_max_num_batched_tokens=self.prefill_max_num_batched_tokens or base.prefill_max_num_batched_tokens,
            decode_max_num_seqs=self.decode_max_num_seqs or base.decode_max_num_seqs,
            gpu_memory_utilization=self.gpu_memory_utilization,
            kv_cache_dtype=self.kv_cache_dtype,
            max_model_len=self.max_model_len,
        )


def _layout_kind(value: Any) -> str:
    """Which mapping a `layout:` is: a P/D one names `disaggregated`, any other is colocated (so a
    typo in a colocated mapping gets the colocated errors only, not both forms')."""
    if isinstance(value, PdLayoutConfig) or (isinstance(value, dict) and "disaggregated" in value):
        return PD_TAG
    return COLOCATED_TAG


PD_TAG, COLOCATED_TAG = "disaggregated-layout", "colocated-layout"
LAYOUT_TAGS = (PD_TAG, COLOCATED_TAG)
AnyLayout = Annotated[
    Annotated[LayoutConfig, Tag(COLOCATED_TAG)] | Annotated[PdLayoutConfig, Tag(PD_TAG)], Discriminator(_layout_kind)
]

