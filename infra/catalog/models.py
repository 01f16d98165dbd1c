"""Model architectures the planner knows, matched by Hugging Face id, or read from a local config.json.

The planner needs a model's shape, not its weights: layer count, hidden size, attention heads and
KV heads (or the MLA latent), MLP and expert sizes, vocabulary, weight dtype and maximum context.
From these it derives parameter counts, weight bytes (FP8 linear layers keep BF16 embeddings) and
KV-cache bytes per token.

One catalog entry covers a model family's base/instruct/thinking/dated variants and their `-FP8`
twins: `Qwen/Qwen3-235B-A22B`, `Qwen/Qwen3-235B-A22B-Instruct-2507-FP8` and
`Qwen/Qwen3-235B-A22B-Thinking-2507` all resolve to the same architecture, the dtype taken from
the id. Figures are the published `config.json` values of each model on Hugging Face.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from infra.errors import UserError

# Bytes per stored weight element. MXFP4/INT4 carry a shared scale per 32-element block (4.25 bits).
DTYPE_BYTES: dict[str, float] = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp32": 4.0,
    "fp8": 1.0,
    "mxfp4": 4.25 / 8,
    "nvfp4": 4.5 / 8,  # 4-bit elements with an FP8 scale per 16
    "int4": 4.25 / 8,
}


@dataclass(frozen=True)
class ModelArch:
    """The shape of a transformer, as far as memory and speed are concerned.

    Dense models have num_experts == 0. MoE layers hold `num_experts` routed experts of
    `moe_intermediate_size` each (SwiGLU: 3 matrices) plus `num_shared_experts` always-on experts;
    the first `first_k_dense_layers` layers use a dense MLP of `intermediate_size` instead, and of
    the layers after them every `moe_layer_step`-th is MoE (the last of each group, as Llama 4's
    `interleave_moe_layer_step` and Qwen2-MoE's `decoder_sparse_step` count), the others dense.
    Attention is "gqa" (K and V heads of `head_dim`) or "mla" (DeepSeek's compressed latent of
    `kv_lora_rank` + `qk_rope_head_dim` per token and layer).
    """

    id: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_context: int
    weight_dtype: str = "bf16"  # dtype of the linear layers (experts for mxfp4 models)
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int = 0
    first_k_dense_layers: int = 0
    moe_layer_step: int = 1  # after first_k_dense_layers, every Nth layer is MoE (1: all of them)
    attention: str = "gqa"  # "gqa" | "mla"
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    tie_word_embeddings: bool = False
    sliding_window: int = 0  # tokens kept by sliding-window layers (0: none)
    sliding_window_layers: int = 0  # how many of num_layers use the sliding window

    # --- shape facts -------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def num_moe_layers(self) -> int:
        if not self.is_moe:
            return 0
        return (self.num_layers - self.first_k_dense_layers) // max(1, self.moe_layer_step)

    @property
    def num_dense_mlp_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    # --- parameter counts (elements) ---------------------------------------------------------
    @cached_property
    def attention_params_per_layer(self) -> int:
        h = self.hidden_size
        if self.attention == "mla":
            heads = self.num_attention_heads
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = h * self.q_lora_rank + self.q_lora_rank * heads * qk if self.q_lora_rank else h * heads * qk
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank * heads * (
                self.qk_nope_head_dim + self.v_head_dim
            )
            return q + kv + heads * self.v_head_dim * h
        q_out = self.num_attention_heads * self.head_dim
        kv_out = 2 * self.num_kv_heads * self.head_dim
        return h * q_out + h * kv_out + q_out * h

    @property
    def kv_projection_params_per_layer(self) -> int:
        """K and V projection weights (GQA): replicated on TP ranks once tp exceeds the KV heads."""
        return 0 if self.attention == "mla" else 2 * self.hidden_size * self.num_kv_heads * self.head_dim

    @property
    def dense_mlp_params_per_layer(self) -> int:
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def expert_params(self) -> int:
        """One routed expert of one layer."""
        return 3 * self.hidden_size * self.moe_intermediate_size

    @property
    def shared_expert_params_per_layer(self) -> int:
        width = self.shared_expert_intermediate_size or self.moe_intermediate_size
        return self.num_shared_experts * 3 * self.hidden_size * width

    @property
    def router_params_per_layer(self) -> int:
        return self.hidden_size * self.num_experts

    @property
    def embedding_params(self) -> int:
        """Input embedding plus the LM head (unless tied)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    @cached_property
    def dense_params(self) -> int:
        """Everything that every token uses in every layer, except embeddings: attention, dense MLPs,
        shared experts, routers."""
        return (
            self.num_layers * self.attention_params_per_layer
            + self.num_dense_mlp_layers * self.dense_mlp_params_per_layer
            + self.num_moe_layers * (self.shared_expert_params_per_layer + self.router_params_per_layer)
        )

    @cached_property
    def routed_expert_params(self) -> int:
        return self.num_moe_layers * self.num_experts * self.expert_params

    @property
    def params_total(self) -> int:
        return self.dense_params + self.routed_expert_params + self.embedding_params

    @property
    def params_active(self) -> int:
        """Parameters one token uses (linear layers plus embeddings), as model cards count them."""
        active_experts = self.num_moe_layers * self.num_experts_per_tok * self.expert_params
        return self.dense_params + active_experts + self.embedding_params

    @property
    def params_total_b(self) -> float:
        return round(self.params_total / 1e9, 2)

    @property
    def params_active_b(self) -> float:
        return round(self.params_active / 1e9, 2)

    # --- bytes --------------------------------------------------------------------------------
    @property
    def expert_bytes_per_param(self) -> float:
        return DTYPE_BYTES[self.weight_dtype]

    @property
    def dense_bytes_per_param(self) -> float:
        """Attention and dense MLPs: 4-bit schemes in our catalog (gpt-oss MXFP4) keep them in BF16."""
        return 2.0 if self.weight_dtype in ("mxfp4",) else DTYPE_BYTES[self.weight_dtype]

    @property
    def compute_dtype(self) -> str:
        """The GEMM precision vLLM runs: FP8 weights use FP8 tensor cores (w8a8); 4-bit dequantises to BF16."""
        return "fp8" if self.weight_dtype == "fp8" else "bf16"

    @property
    def dense_weight_bytes(self) -> float:
        return self.dense_params * self.dense_bytes_per_param

    @property
    def routed_expert_weight_bytes(self) -> float:
        return self.routed_expert_params * self.expert_bytes_per_param

    @property
    def embedding_weight_bytes(self) -> float:
        return self.embedding_params * 2.0  # embeddings and LM head stay BF16 in FP8 checkpoints

    @property
    def weight_bytes_total(self) -> float:
        return self.dense_weight_bytes + self.routed_expert_weight_bytes + self.embedding_weight_bytes

    @property
    def weight_gb(self) -> float:
        return self.weight_bytes_total / 1e9

    # --- KV cache -----------------------------------------------------------------------------
    def kv_elements_per_token_per_layer(self, tp: int = 1) -> int:
        """K+V (or MLA latent) elements one token stores in one layer on one GPU of a TP group.

        GQA KV heads are split over TP ranks, but a rank always holds at least one head: when tp
        exceeds num_kv_heads the heads are replicated. The MLA latent is not split at all.
        """
        if self.attention == "mla":
            return self.kv_lora_rank + self.qk_rope_head_dim
        heads_per_rank = max(1, -(-self.num_kv_heads // tp))
        return 2 * heads_per_rank * self.head_dim

    def kv_layers_effective(self, context_tokens: int) -> float:
        """Layers' worth of KV a sequence of this length occupies (sliding layers keep only a window)."""
        full = self.num_layers - self.sliding_window_layers
        if not self.sliding_window_layers or context_tokens <= 0:
            return float(full + self.sliding_window_layers)
        return full + self.sliding_window_layers * min(1.0, self.sliding_window / context_tokens)

    def kv_bytes_per_token(self, kv_dtype: str = "auto", *, tp: int = 1, context_tokens: int = 0) -> float:
        """KV-cache bytes per token on one GPU of a tp-way group (tp=1: the whole model's figure)."""
        elem = 1.0 if kv_dtype == "fp8" else 2.0
        return self.kv_elements_per_token_per_layer(tp) * self.kv_layers_effective(context_tokens) * elem

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "is_moe": self.is_moe,
            "attention": self.attention,
            "weight_dtype": self.weight_dtype,
            "num_layers": self.num_layers,
            "params_total_b": self.params_total_b,
            "params_active_b": self.params_active_b,
            "weight_gb": round(self.weight_gb, 1),
            "kv_bytes_per_token": int(self.kv_bytes_per_token()),
            "max_context": self.max_context,
        }


@dataclass(frozen=True)
class CatalogEntry:
    """An architecture plus the Hugging Face name patterns it covers."""

    arch: ModelArch
    patterns: tuple[str, ...]  # regexes searched in the lower-cased model name (after the org)
    exclude: tuple[str, ...] = ()
    long_context_markers: tuple[tuple[str, int], ...] = ()  # (substring, max_context) overrides
    # The Hugging Face organisation whose repos of this family are gated (licence or contact form
    # to accept before a download), e.g. "meta-llama". Community re-uploads under other orgs are not.
    gated_org: str | None = None


def _qwen3_dense(id_, layers, hidden, heads, kv, inter) -> ModelArch:
    return ModelArch(id_, layers, hidden, heads, kv, 128, inter, 151936, 40960)


_N = r"(?![0-9])"  # a size like "8b" must not continue into "80b"

CATALOG: tuple[CatalogEntry, ...] = (
    CatalogEntry(
        ModelArch(
            "Qwen/Qwen3-235B-A22B",
            94,
            4096,
            64,
            4,
            128,
            12288,
            151936,
            40960,
            num_experts=128,
            num_experts_per_tok=8,
            moe_intermediate_size=1536,
        ),
        (r"qwen3-235b-a22b",),
        long_context_markers=(("2507", 262144),),
    ),
    CatalogEntry(
        ModelArch(
            "Qwen/Qwen3-30B-A3B",
            48,
            2048,
            32,
            4,
            128,
            6144,
            151936,
            40960,
            num_experts=128,
            num_experts_per_tok=8,
            moe_intermediate_size=768,
        ),
        (r"qwen3-30b-a3b",),
        exclude=(r"coder",),
        long_context_markers=(("2507", 262144),),
    ),
    CatalogEntry(_qwen3_dense("Qwen/Qwen3-32B", 64, 5120, 64, 8, 25600), (rf"qwen3-32b{_N}",)),
    CatalogEntry(_qwen3_dense("Qwen/Qwen3-8B", 36, 4096, 32, 8, 12288), (rf"qwen3-8b{_N}",)),
    # Qwen/Qwen3-14B's config.json as vendored in
    #   inference-sim/inference-sim@f90a1e3a6787da17c2cd463dab6fb2660b1b1760 model_configs/qwen3-14b/config.json
    # (14.8 B total / 13.2 B without embeddings on the model card).
    CatalogEntry(_qwen3_dense("Qwen/Qwen3-14B", 40, 5120, 40, 8, 17408), (rf"qwen3-14b{_N}",)),
    CatalogEntry(
        ModelArch("meta-llama/Llama-3.1-8B", 32, 4096, 32, 8, 128, 14336, 128256, 131072),
        (rf"llama-3\.1-8b{_N}", rf"llama-3-8b{_N}", rf"llama3\.1-8b{_N}"),
        gated_org="meta-llama",
    ),
    CatalogEntry(
        ModelArch("meta-llama/Llama-3.1-70B", 80, 8192, 64, 8, 128, 28672, 128256, 131072),
        (rf"llama-3\.[13]-70b{_N}", rf"llama-3-70b{_N}", rf"llama3\.[13]-70b{_N}"),
        gated_org="meta-llama",
    ),
    CatalogEntry(
        ModelArch("meta-llama/Llama-3.1-405B", 126, 16384, 128, 8, 128, 53248, 128256, 131072),
        (rf"llama-3\.1-405b{_N}", rf"llama3\.1-405b{_N}"),
        gated_org="meta-llama",
    ),
    CatalogEntry(
        ModelArch("meta-llama/Llama-2-70b-hf", 80, 8192, 64, 8, 128, 28672, 32000, 4096),
        (rf"llama-2-70b{_N}", rf"llama2-70b{_N}"),
        gated_org="meta-llama",
    ),
    # Llama 4 (text part of Llama4ForConditionalGeneration): every MoE layer has one always-on shared
    # expert plus top-1 of the routed experts, all `intermediate_size` (8192) wide; dense layers use
    # `intermediate_size_mlp` (16384). Chunked local attention (8192-token chunks on the RoPE layers)
    # and the NoPE layers are not modelled: every layer is counted as keeping full-context KV, which
    # overstates long-context KV, never understates it. FP8 checkpoints (RedHatAI -FP8-dynamic) keep
    # attention in BF16; counting it at 1 byte understates weights by ~3 GB.
    # text_config of
    #   ai-dynamo/aiconfigurator@095f58a51c4ca8e61b66ec108d86f223f8d559ce
    #   aic-core/src/aiconfigurator_core/model_configs/meta-llama--Llama-4-Scout-17B-16E-Instruct_config.json
    # and the same figures in
    #   inference-sim/inference-sim@f90a1e3a6787da17c2cd463dab6fb2660b1b1760
    #   model_configs/llama-4-scout-17b-16e-instruct-fp8-dynamic/config.json (RedHatAI's FP8 twin).
    # The Instruct config's context (10485760) stands for the family; the base checkpoint says less.
    CatalogEntry(
        ModelArch(
            "meta-llama/Llama-4-Scout-17B-16E",
            48,
            5120,
            40,
            8,
            128,
            16384,
            202048,
            10485760,
            num_experts=16,
            num_experts_per_tok=1,
            moe_intermediate_size=8192,
            num_shared_experts=1,
        ),
        (r"llama-4-scout",),
    ),
    # text_config of
    #   ai-dynamo/aiconfigurator@095f58a51c4ca8e61b66ec108d86f223f8d559ce
    #   aic-core/src/aiconfigurator_core/model_configs/meta-llama--Llama-4-Maverick-17B-128E-Instruct_config.json:
    # interleave_moe_layer_step 2, so layers 1, 3, ..., 47 are MoE and the other 24 dense.
    CatalogEntry(
        ModelArch(
            "meta-llama/Llama-4-Maverick-17B-128E",
            48,
            5120,
            40,
            8,
            128,
            16384,
            202048,
            1048576,
            num_experts=128,
            num_experts_per_tok=1,
            moe_intermediate_size=8192,
            num_shared_experts=1,
            moe_layer_step=2,
        ),
        (r"llama-4-maverick",),
    ),
    CatalogEntry(
        ModelArch(
            "deepseek-ai/DeepSeek-V3",
            61,
            7168,
            128,
            128,
            128,
            18432,
            129280,
            163840,
            "fp8",
            num_experts=256,
            num_experts_per_tok=8,
            moe_intermediate_size=2048,
            num_shared_experts=1,
            first_k_dense_layers=3,
            attention="mla",
            q_lora_rank=1536,
            kv_lora_rank=512,
            qk_rope_head_dim=64,
            qk_nope_head_dim=128,
            v_head_dim=128,
        ),
        # DeepSeek-V3.1 has this shape too (the same fields; only its FP8 scale format, ue8m0, differs):
        #   ai-dynamo/aiconfigurator@39033e8cd1f8aa03770a7820bce974ea9238eff9
        #   src/aiconfigurator/model_configs/deepseek-ai--DeepSeek-V3.1_config.json
        (r"deepseek-v3", r"deepseek-r1"),
        # Distills are Qwen/Llama models; V3.2 adds sparse attention this model does not describe.
        exclude=(r"distill", r"v3\.2"),
    ),
    # Kimi K2: the DeepSeek-V3 architecture (model_type kimi_k2) with 384 routed experts, 64 heads,
    # one dense layer and block-FP8 weights:
    #   ai-dynamo/aiconfigurator@095f58a51c4ca8e61b66ec108d86f223f8d559ce
    #   aic-core/src/aiconfigurator_core/model_configs/moonshotai--Kimi-K2-Instruct_config.json
    # K2.5 and later (multimodal) are other configs. Kimi-K2-Thinking has this shape (262144 context)
    # but the copy of its config read here carries no quantization block, so its weight format is
    # unconfirmed: it is not matched (give its config.json with hf_config).
    CatalogEntry(
        ModelArch(
            "moonshotai/Kimi-K2-Instruct",
            61,
            7168,
            64,
            64,
            128,
            18432,
            163840,
            131072,
            "fp8",
            num_experts=384,
            num_experts_per_tok=8,
            moe_intermediate_size=2048,
            num_shared_experts=1,
            first_k_dense_layers=1,
            attention="mla",
            q_lora_rank=1536,
            kv_lora_rank=512,
            qk_rope_head_dim=64,
            qk_nope_head_dim=128,
            v_head_dim=128,
        ),
        (r"kimi-k2(?![.0-9])",),
        exclude=(r"thinking",),
    ),
    CatalogEntry(
        ModelArch(
            "openai/gpt-oss-120b",
            36,
            2880,
            64,
            8,
            64,
            2880,
            201088,
            131072,
            "mxfp4",
            num_experts=128,
            num_experts_per_tok=4,
            moe_intermediate_size=2880,
            sliding_window=128,
            sliding_window_layers=18,
        ),
        (rf"gpt-oss-120b{_N}",),
    ),
    # 24 layers alternating 128-token sliding and full attention, 32 MXFP4 experts (top-4):
    #   ai-dynamo/aiconfigurator@095f58a51c4ca8e61b66ec108d86f223f8d559ce
    #   aic-core/src/aiconfigurator_core/model_configs/openai--gpt-oss-20b_config.json
    CatalogEntry(
        ModelArch(
            "openai/gpt-oss-20b",
            24,
            2880,
            64,
            8,
            64,
            2880,
            201088,
            131072,
            "mxfp4",
            num_experts=32,
            num_experts_per_tok=4,
            moe_intermediate_size=2880,
            sliding_window=128,
            sliding_window_layers=12,
        ),
        (rf"gpt-oss-20b{_N}",),
    ),
    # GLM-4.5-Air (Glm4MoeForCausalLM): 46 layers, the first dense, 128 experts + 1 shared. The
    # store holds zai-org's own config page without readable contents; these figures are from
    # https://huggingface.co/PrimeIntellect/INTELLECT-3-Base/blob/main/config.json, a continued
    # pre-training of GLM-4.5-Air-Base that republishes its architecture fields unchanged (46 layers
    # are what llama.cpp's glm4-moe loader calls "GLM-4.5-Air, 106B-A12B"). The MTP layer
    # (num_nextn_predict_layers 1) is not in num_hidden_layers and not counted here.
    CatalogEntry(
        ModelArch(
            "zai-org/GLM-4.5-Air",
            46,
            4096,
            96,
            8,
            128,
            10944,
            151552,
            131072,
            num_experts=128,
            num_experts_per_tok=8,
            moe_intermediate_size=1408,
            num_shared_experts=1,
            first_k_dense_layers=1,
        ),
        (r"glm-4\.5-air",),
    ),
    # GLM-4.6: 92 layers, the first three dense, 160 experts + 1 shared, 200k context. From
    # https://huggingface.co/RedHatAI/GLM-4.6-NVFP4/blob/main/config.json and
    # https://huggingface.co/inference-optimization/GLM-4.6-FP8-dynamic/blob/main/config.json
    # (re-quantisations of zai-org/GLM-4.6 with its architecture fields unchanged; zai-org/GLM-4.7's
    # config has the same shape). GLM-4.5 is this shape with a 128k context per its card, but no
    # config.json of it was read, so it is not matched; GLM-4.6V (vision) is a different model.
    CatalogEntry(
        ModelArch(
            "zai-org/GLM-4.6",
            92,
            5120,
            96,
            8,
            128,
            12288,
            151552,
            202752,
            num_experts=160,
            num_experts_per_tok=8,
            moe_intermediate_size=1536,
            num_shared_experts=1,
            first_k_dense_layers=3,
        ),
        (r"glm-4\.6(?![0-9v])",),
    ),
    CatalogEntry(
        ModelArch(
            "mistralai/Mixtral-8x7B-v0.1",
            32,
            4096,
            32,
            8,
            128,
            14336,
            32000,
            32768,
            num_experts=8,
            num_experts_per_tok=2,
            moe_intermediate_size=14336,
        ),
        (r"mixtral-8x7b",),
        gated_org="mistralai",
    ),
)

# Markers in a model id that say how its weights are stored (checked in this order).
_DTYPE_MARKERS: tuple[tuple[str, str], ...] = (
    (r"mxfp4", "mxfp4"),
    (r"(?:^|[-_.])(?:nvfp4|fp4)(?:$|[-_.])", "nvfp4"),
    (r"(?:^|[-_.])(?:fp8|w8a8-fp8|f8)(?:$|[-_.])", "fp8"),
    (r"(?:^|[-_.])(?:awq|gptq|int4|w4a16)(?:$|[-_.])", "int4"),
    (r"(?:^|[-_.])(?:bf16|fp16)(?:$|[-_.])", "bf16"),
)


def _model_name(source: str) -> str:
    return source.strip().rstrip("/").split("/")[-1].lower()


def _catalog_entry(source: str) -> CatalogEntry | None:
    name = _model_name(source)
    for entry in CATALOG:
        if any(re.search(p, name) for p in entry.exclude):
            continue
        if any(re.search(p, name) for p in entry.patterns):
            return entry
    return None


# Organisations every model repo of which is gated: Meta's Llama repos need the licence accepted on
# the model page before a download (https://huggingface.co/meta-llama). A download without a token
# of an account that accepted it fails with 401/403.
GATED_ORGS = ("meta-llama",)


def is_gated(source: str) -> bool:
    """Whether downloading `source` from Hugging Face needs a token of an account that accepted the
    repo's terms (https://huggingface.co/docs/hub/models-gated): every repo of GATED_ORGS, and the
    catalog families whose own organisation gates them (mistralai's Mixtral asks for contact details
    before a download). Unknown models are taken as not gated; the prefetch then says so if they are."""
    org = source.strip().split("/")[0].lower() if "/" in source else ""
    if org in GATED_ORGS:
        return True
    entry = _catalog_entry(source)
    return entry is not None and entry.gated_org is not None and entry.gated_org.lower() == org


def match_catalog(source: str) -> ModelArch | None:
    """The catalog architecture for a Hugging Face id (any org, any variant suffix), or None."""
    name = _model_name(source)
    entry = _catalog_entry(source)
    if entry is not None:
        arch = entry.arch
        changes: dict = {"id": source.strip()}
        for marker, dtype in _DTYPE_MARKERS:
            if re.search(marker, name):
                # A BF16 checkpoint of a natively FP8/MXFP4 model is still named without a marker; only
                # an explicit marker changes the dtype.
                changes["weight_dtype"] = dtype
                break
        for marker, context in entry.long_context_markers:
            if marker in name:
                changes["max_context"] = context
        return replace(arch, **changes)
    return None


def _quant_dtype(quant: dict | None, torch_dtype: str) -> str:
    """The weight dtype from a Hugging Face `quantization_config` (or the checkpoint dtype)."""
    if not quant:
        return {"float16": "fp16", "bfloat16": "bf16", "float32": "bf16"}.get(torch_dtype, "bf16")
    method = str(quant.get("quant_method", "")).lower()
    if method in ("fp8", "fbgemm_fp8", "ptpc_fp8"):
        return "fp8"
    if method == "mxfp4":
        return "mxfp4"
    if method in ("awq", "gptq", "bitsandbytes", "awq_marlin", "gptq_marlin"):
        return "int4"
    if method in ("compressed-tensors", "quark"):
        text = json.dumps(quant).lower()
        if '"num_bits": 4' in text or "int4" in text or "fp4" in text:
            return "int4"
        if "float" in text or "fp8" in text or '"num_bits": 8' in text:
            return "fp8"
    raise UserError(
        f"quantization_config.quant_method {method!r} is not understood; expected fp8, mxfp4, awq or gptq"
    )


def arch_from_hf_config(config: dict, model_id: str) -> ModelArch:
    """A ModelArch from a Hugging Face `config.json` dict (text part of multimodal configs too)."""
    cfg = dict(config.get("text_config") or {})
    for key, value in config.items():
        cfg.setdefault(key, value)
    try:
        hidden = int(cfg["hidden_size"])
        heads = int(cfg["num_attention_heads"])
        layers = int(cfg["num_hidden_layers"])
        vocab = int(cfg["vocab_size"])
    except (KeyError, TypeError, ValueError) as err:
        raise UserError(f"config.json for {model_id} lacks a usable {err} field") from None
    experts = int(cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts") or 0)
    kv_lora = int(cfg.get("kv_lora_rank") or 0)
    layer_types = cfg.get("layer_types") or []
    sliding_layers = sum(1 for t in layer_types if t == "sliding_attention")
    torch_dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    return ModelArch(
        id=model_id,
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or hidden // heads),
        # Llama 4 names its dense-layer width `intermediate_size_mlp`; its `intermediate_size` is the
        # expert width (read below as the MoE width when there is no `moe_intermediate_size`).
        intermediate_size=int(cfg.get("intermediate_size_mlp") or cfg.get("intermediate_size") or 4 * hidden),
        vocab_size=vocab,
        max_context=int(cfg.get("max_position_embeddings") or 4096),
        weight_dtype=_quant_dtype(cfg.get("quantization_config"), torch_dtype),
        num_experts=experts,
        num_experts_per_tok=int(cfg.get("num_experts_per_tok") or cfg.get("experts_per_token") or 0)
        if experts
        else 0,
        moe_intermediate_size=int(cfg.get("moe_intermediate_size") or cfg.get("intermediate_size") or 0)
        if experts
        else 0,
        num_shared_experts=_shared_experts(cfg) if experts else 0,
        shared_expert_intermediate_size=int(cfg.get("shared_expert_intermediate_size") or 0),
        first_k_dense_layers=int(cfg.get("first_k_dense_replace") or 0) if experts else 0,
        moe_layer_step=max(
            1, int(cfg.get("interleave_moe_layer_step") or cfg.get("decoder_sparse_step") or 1)
        ),
        attention="mla" if kv_lora else "gqa",
        q_lora_rank=int(cfg.get("q_lora_rank") or 0),
        kv_lora_rank=kv_lora,
        qk_rope_head_dim=int(cfg.get("qk_rope_head_dim") or 0),
        qk_nope_head_dim=int(cfg.get("qk_nope_head_dim") or 0),
        v_head_dim=int(cfg.get("v_head_dim") or 0),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        sliding_window=int(cfg.get("sliding_window") or 0) if sliding_layers else 0,
        sliding_window_layers=sliding_layers,
    )


def _shared_experts(cfg: dict) -> int:
    """Always-on experts per MoE layer. DeepSeek-style configs count them (`n_shared_experts`, each
    `moe_intermediate_size` wide); Qwen2-MoE-style configs have no count but one shared expert of
    `shared_expert_intermediate_size` (Qwen2-57B-A14B: 20480 wide, ~6 B of its 14 B active).
    Llama 4 configs say nothing, but every Llama 4 MoE layer has one shared expert as wide as a
    routed one (transformers `Llama4TextMoe.shared_expert`)."""
    count = int(cfg.get("n_shared_experts") or 0)
    if count == 0 and int(cfg.get("shared_expert_intermediate_size") or 0) > 0:
        return 1
    if count == 0 and str(cfg.get("model_type") or "").startswith("llama4"):
        return 1
    return count


def load_hf_config(path: str | Path, model_id: str | None = None) -> ModelArch:
    """Read a local Hugging Face config.json (a file, or a directory holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        config = json.loads(p.read_text())
    except FileNotFoundError:
        raise UserError(f"{p}: no such config.json") from None
    except json.JSONDecodeError as err:
        raise UserError(f"{p}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(config, dict):
        raise UserError(f"{p}: expected a JSON object")
    return arch_from_hf_config(config, model_id or config.get("_name_or_path") or p.parent.name or str(p))


def resolve_model(source: str, hf_config_path: str | None = None) -> ModelArch | None:
    """The architecture for a model: from a local config.json when given, else from the catalog.

    `source` may itself be a path to a config.json (or its directory). Returns None when the id is
    not in the catalog and no config was given, so the caller can say which key needs a config.
    """
    if hf_config_path:
        return load_hf_config(hf_config_path, model_id=source)
    path = Path(source)
    if source.endswith(".json") or (("/" in source or source.startswith(".")) and path.exists()):
        if path.exists():
            return load_hf_config(path)
        raise UserError(f"{source}: no such config.json")
    return match_catalog(source)
