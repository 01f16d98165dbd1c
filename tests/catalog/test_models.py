"""The model catalog: HF-id matching, hand-checked parameter and KV arithmetic, config.json loading."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from infra.catalog.models import CATALOG, load_hf_config, match_catalog, resolve_model
from infra.errors import UserError


@pytest.mark.parametrize(
    ("source", "catalog_id", "dtype"),
    [
        ("Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B", "bf16"),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen/Qwen3-235B-A22B", "fp8"),
        ("Qwen/Qwen3-235B-A22B-Thinking-2507", "Qwen/Qwen3-235B-A22B", "bf16"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen/Qwen3-30B-A3B", "bf16"),
        ("Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-32B", "fp8"),
        ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B", "bf16"),
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B", "bf16"),
        ("meta-llama/Llama-3.3-70B-Instruct", "meta-llama/Llama-3.1-70B", "bf16"),
        ("RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8", "meta-llama/Llama-3.1-70B", "fp8"),
        ("meta-llama/Llama-3.1-405B-Instruct-FP8", "meta-llama/Llama-3.1-405B", "fp8"),
        ("amd/Llama-3.1-405B-Instruct-FP8-KV", "meta-llama/Llama-3.1-405B", "fp8"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-V3", "fp8"),
        ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3", "fp8"),
        ("openai/gpt-oss-120b", "openai/gpt-oss-120b", "mxfp4"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mistralai/Mixtral-8x7B-v0.1", "bf16"),
        ("deepseek-ai/DeepSeek-V3.1", "deepseek-ai/DeepSeek-V3", "fp8"),
        ("Qwen/Qwen3-14B", "Qwen/Qwen3-14B", "bf16"),
        ("Qwen/Qwen3-14B-FP8", "Qwen/Qwen3-14B", "fp8"),
        ("meta-llama/Llama-4-Scout-17B-16E", "meta-llama/Llama-4-Scout-17B-16E", "bf16"),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "meta-llama/Llama-4-Scout-17B-16E", "bf16"),
        ("RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic", "meta-llama/Llama-4-Scout-17B-16E", "fp8"),
        ("meta-llama/Llama-4-Maverick-17B-128E", "meta-llama/Llama-4-Maverick-17B-128E", "bf16"),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "meta-llama/Llama-4-Maverick-17B-128E", "bf16"),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8", "meta-llama/Llama-4-Maverick-17B-128E", "fp8"),
        ("zai-org/GLM-4.5-Air", "zai-org/GLM-4.5-Air", "bf16"),
        ("zai-org/GLM-4.5-Air-FP8", "zai-org/GLM-4.5-Air", "fp8"),
        ("zai-org/GLM-4.6", "zai-org/GLM-4.6", "bf16"),
        ("zai-org/GLM-4.6-FP8", "zai-org/GLM-4.6", "fp8"),
        ("openai/gpt-oss-20b", "openai/gpt-oss-20b", "mxfp4"),
        ("moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2-Instruct", "fp8"),
        ("moonshotai/Kimi-K2-Base", "moonshotai/Kimi-K2-Instruct", "fp8"),
        ("moonshotai/Kimi-K2-Instruct-0905", "moonshotai/Kimi-K2-Instruct", "fp8"),
    ],
)
def test_hugging_face_ids_resolve_to_their_family_and_dtype(source, catalog_id, dtype):
    arch = resolve_model(source)
    entry = next(e for e in CATALOG if e.arch.id == catalog_id)
    assert arch is not None
    assert arch.id == source
    assert (arch.num_layers, arch.hidden_size, arch.num_experts) == (
        entry.arch.num_layers,
        entry.arch.hidden_size,
        entry.arch.num_experts,
    )
    assert arch.weight_dtype == dtype


@pytest.mark.parametrize(
    "source",
    [
        "deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
        "deepseek-ai/DeepSeek-V3.2-Exp",
        "Qwen/Qwen3-80B",
        "acme/unknown-7b",
        # other architectures that share a name prefix with a catalog family
        "moonshotai/Kimi-K2.5",
        "moonshotai/Kimi-K2-Thinking",
        "zai-org/GLM-4.5",
        "zai-org/GLM-4.5V",
        "zai-org/GLM-4.6V",
        "zai-org/GLM-4.6V-Flash",
        "zai-org/GLM-4.7-Flash",
        "meta-llama/Llama-4-Behemoth",
    ],
)
def test_ids_outside_the_catalog_are_none(source):
    assert resolve_model(source) is None


def test_sizes_do_not_bleed_into_each_other():
    assert resolve_model("meta-llama/Llama-3.1-8B").hidden_size == 4096
    assert resolve_model("meta-llama/Llama-3.1-70B").hidden_size == 8192
    assert resolve_model("Qwen/Qwen3-8B").num_layers == 36
    assert resolve_model("Qwen/Qwen3-14B").num_layers == 40
    assert resolve_model("meta-llama/Llama-4-Scout-17B-16E-Instruct").num_experts == 16
    assert resolve_model("meta-llama/Llama-4-Maverick-17B-128E-Instruct").num_experts == 128
    assert resolve_model("zai-org/GLM-4.5-Air").num_layers == 46
    assert resolve_model("zai-org/GLM-4.6").num_layers == 92
    assert resolve_model("openai/gpt-oss-20b").num_layers == 24
    assert resolve_model("openai/gpt-oss-120b").num_layers == 36


def test_long_context_variants_get_their_context():
    assert resolve_model("Qwen/Qwen3-235B-A22B").max_context == 40960
    assert resolve_model("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8").max_context == 262144


@pytest.mark.parametrize(
    ("source", "total_b", "active_b"),
    [
        # published totals: Qwen3-235B-A22B 235B/22B, Qwen3-30B-A3B 30.5B/3.3B, DeepSeek-V3 671B/37B
        # (without the MTP layer), Llama-3.1-70B 70.6B, 405B 405.9B, Mixtral 46.7B/12.9B, gpt-oss 116.8B
        ("Qwen/Qwen3-235B-A22B", 235.1, 22.2),
        ("Qwen/Qwen3-30B-A3B", 30.5, 3.35),
        ("deepseek-ai/DeepSeek-V3", 671.0, 37.5),
        ("meta-llama/Llama-3.1-70B", 70.6, 70.6),
        ("meta-llama/Llama-3.1-405B", 405.9, 405.9),
        ("mistralai/Mixtral-8x7B-v0.1", 46.7, 12.9),
        ("openai/gpt-oss-120b", 116.8, 5.7),
    ],
)
def test_parameter_counts_match_the_model_cards(source, total_b, active_b):
    arch = resolve_model(source)
    assert arch.params_total_b == pytest.approx(total_b, rel=0.01)
    assert arch.params_active_b == pytest.approx(active_b, rel=0.02)


@pytest.mark.parametrize(
    ("source", "total_b", "active_b", "active_excludes"),
    [
        # Model cards count "active" differently; `active_excludes` says what each one leaves out.
        # Llama 4 cards: Scout 109B / 17B and Maverick 400B / 17B for the whole multimodal model (the
        # ~0.9 B vision tower is not described here, hence the text-only total sits ~1 % low).
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", 109.0, 17.0, "nothing"),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", 400.0, 17.0, "nothing"),
        # GLM cards: GLM-4.5-Air 106B / 12B, GLM-4.6 355B / 32B, active without embedding and LM head.
        ("zai-org/GLM-4.5-Air", 106.0, 12.0, "embeddings"),
        ("zai-org/GLM-4.6", 355.0, 32.0, "embeddings"),
        # gpt-oss card: 20.9B total / 3.6B active, the input embedding not counted as active.
        ("openai/gpt-oss-20b", 20.9, 3.6, "input embedding"),
        # Qwen3-14B card: 14.8B, 13.2B of them outside the embeddings.
        ("Qwen/Qwen3-14B", 14.8, 14.8, "nothing"),
        # Kimi K2 card: 1T total / 32B activated.
        ("moonshotai/Kimi-K2-Instruct", 1000.0, 32.0, "nothing"),
    ],
)
def test_new_families_match_their_model_cards(source, total_b, active_b, active_excludes):
    arch = resolve_model(source)
    not_active = {
        "nothing": 0,
        "input embedding": arch.vocab_size * arch.hidden_size,
        "embeddings": arch.embedding_params,
    }[active_excludes]
    assert arch.params_total / 1e9 == pytest.approx(total_b, rel=0.03)
    assert (arch.params_active - not_active) / 1e9 == pytest.approx(active_b, rel=0.03)


def test_qwen3_14b_non_embedding_parameters_match_the_card():
    arch = resolve_model("Qwen/Qwen3-14B")
    assert (arch.params_total - arch.embedding_params) / 1e9 == pytest.approx(13.2, rel=0.01)


def test_interleaved_moe_layers_count_only_every_nth_layer():
    """Maverick's interleave_moe_layer_step 2: 24 MoE layers of 128 experts + 1 shared expert (8192
    wide), 24 dense layers of a 16384-wide MLP. Scout has experts on all 48 layers."""
    maverick = resolve_model("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    assert (maverick.num_moe_layers, maverick.num_dense_mlp_layers) == (24, 24)
    assert maverick.routed_expert_params == 24 * 128 * 3 * 5120 * 8192
    attention = 5120 * (40 * 128) * 2 + 5120 * 2 * 8 * 128
    dense = (
        48 * attention
        + 24 * 3 * 5120 * 16384  # dense MLP layers
        + 24 * (3 * 5120 * 8192 + 5120 * 128)  # shared expert and router of each MoE layer
    )
    assert maverick.dense_params == dense
    assert maverick.params_total == dense + maverick.routed_expert_params + 2 * 202048 * 5120
    scout = resolve_model("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert (scout.num_moe_layers, scout.num_dense_mlp_layers) == (48, 0)
    # FP8 Maverick: linear layers at 1 byte, embeddings and LM head at 2
    fp8 = resolve_model("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8")
    assert fp8.weight_bytes_total == pytest.approx(
        (fp8.params_total - fp8.embedding_params) * 1.0 + fp8.embedding_params * 2.0
    )


def test_moe_layer_step_counts_after_the_leading_dense_layers():
    arch = replace(resolve_model("zai-org/GLM-4.6"), moe_layer_step=2)
    assert arch.num_moe_layers == (92 - 3) // 2
    assert arch.num_dense_mlp_layers == 92 - (92 - 3) // 2


def test_fp8_weights_keep_bf16_embeddings():
    fp8 = resolve_model("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8")
    # 232.6 B linear params at 1 byte + 2 × 151936 × 4096 embedding/LM-head params at 2 bytes
    assert fp8.weight_bytes_total / 1e9 == pytest.approx(236.3, abs=0.2)
    bf16 = resolve_model("Qwen/Qwen3-235B-A22B")
    assert bf16.weight_bytes_total / 1e9 == pytest.approx(470.2, abs=0.3)


def test_kv_bytes_per_token_hand_checked():
    qwen = resolve_model("Qwen/Qwen3-235B-A22B")
    llama = resolve_model("meta-llama/Llama-3.1-70B")
    # 2 (K,V) × layers × KV heads × head_dim × 2 bytes
    assert qwen.kv_bytes_per_token() == 2 * 94 * 4 * 128 * 2 == 192_512
    assert llama.kv_bytes_per_token() == 2 * 80 * 8 * 128 * 2 == 327_680
    assert llama.kv_bytes_per_token("fp8") == 163_840
    # TP8 > 4 KV heads: each rank still holds one head, so per-GPU bytes stop shrinking at TP4
    assert qwen.kv_bytes_per_token(tp=4) == qwen.kv_bytes_per_token(tp=8) == 2 * 94 * 1 * 128 * 2
    deepseek = resolve_model("deepseek-ai/DeepSeek-V3")
    # MLA: (512 latent + 64 rope) per layer, the same on every TP rank
    assert deepseek.kv_bytes_per_token() == 61 * 576 * 2
    assert deepseek.kv_bytes_per_token(tp=8) == deepseek.kv_bytes_per_token()


def test_kv_bytes_of_the_new_families_hand_checked():
    # GQA, 8 KV heads of 128: 2 (K,V) × layers × 8 × 128 × 2 bytes
    assert resolve_model("zai-org/GLM-4.6").kv_bytes_per_token() == 2 * 92 * 8 * 128 * 2
    assert resolve_model("zai-org/GLM-4.5-Air").kv_bytes_per_token() == 2 * 46 * 8 * 128 * 2
    assert resolve_model("meta-llama/Llama-4-Maverick-17B-128E").kv_bytes_per_token() == 2 * 48 * 8 * 128 * 2
    assert resolve_model("Qwen/Qwen3-14B").kv_bytes_per_token() == 2 * 40 * 8 * 128 * 2
    # Kimi K2: MLA latent (512 + 64) per layer, like DeepSeek-V3
    assert resolve_model("moonshotai/Kimi-K2-Instruct").kv_bytes_per_token() == 61 * 576 * 2
    # gpt-oss-20b: 12 full and 12 sliding (128-token) layers of 8 KV heads × 64
    oss = resolve_model("openai/gpt-oss-20b")
    assert oss.kv_bytes_per_token(context_tokens=8192) == pytest.approx(
        2 * 8 * 64 * 2 * (12 + 12 * 128 / 8192)
    )


def test_sliding_window_layers_hold_only_their_window():
    oss = resolve_model("openai/gpt-oss-120b")
    short = oss.kv_bytes_per_token(context_tokens=128)
    long = oss.kv_bytes_per_token(context_tokens=8192)
    assert short == 2 * 8 * 64 * 2 * 36
    assert long == pytest.approx(2 * 8 * 64 * 2 * (18 + 18 * 128 / 8192))


def _write(tmp_path, config: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_hf_config_with_fp8_quantization_config(tmp_path):
    path = _write(
        tmp_path,
        {
            "architectures": ["Qwen3MoeForCausalLM"],
            "hidden_size": 2048,
            "num_hidden_layers": 48,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "intermediate_size": 6144,
            "moe_intermediate_size": 768,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "vocab_size": 151936,
            "max_position_embeddings": 40960,
            "torch_dtype": "bfloat16",
            "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
        },
    )
    arch = resolve_model("acme/my-moe", str(path))
    catalog = resolve_model("Qwen/Qwen3-30B-A3B-FP8")
    assert arch.id == "acme/my-moe"
    assert arch.weight_dtype == "fp8" and arch.is_moe
    assert arch.weight_bytes_total == pytest.approx(catalog.weight_bytes_total)
    assert arch.kv_bytes_per_token() == catalog.kv_bytes_per_token()


def test_hf_config_qwen2_moe_counts_its_shared_expert(tmp_path):
    """Qwen2-MoE configs give the shared expert's width (`shared_expert_intermediate_size`) but no
    `n_shared_experts`; the one shared expert is ~6 B of Qwen2-57B-A14B's 14 B active parameters.
    Numbers from Qwen/Qwen2-57B-A14B's config.json; the totals are its published 57.4 B / 14.2 B."""
    arch = load_hf_config(
        _write(
            tmp_path,
            {
                "architectures": ["Qwen2MoeForCausalLM"],
                "hidden_size": 3584,
                "num_hidden_layers": 28,
                "num_attention_heads": 28,
                "num_key_value_heads": 4,
                "intermediate_size": 18944,
                "moe_intermediate_size": 2560,
                "shared_expert_intermediate_size": 20480,
                "num_experts": 64,
                "num_experts_per_tok": 8,
                "decoder_sparse_step": 1,
                "vocab_size": 151936,
                "max_position_embeddings": 32768,
                "tie_word_embeddings": False,
                "torch_dtype": "bfloat16",
            },
        ),
        "Qwen/Qwen2-57B-A14B",
    )
    assert arch.num_shared_experts == 1
    assert arch.params_total / 1e9 == pytest.approx(57.4, rel=0.03)
    assert arch.params_active / 1e9 == pytest.approx(14.2, rel=0.03)


def test_hf_config_mla_and_mxfp4_and_text_config(tmp_path):
    mla = load_hf_config(
        _write(
            tmp_path,
            {
                "hidden_size": 7168,
                "num_hidden_layers": 61,
                "num_attention_heads": 128,
                "num_key_value_heads": 128,
                "intermediate_size": 18432,
                "moe_intermediate_size": 2048,
                "n_routed_experts": 256,
                "n_shared_experts": 1,
                "num_experts_per_tok": 8,
                "first_k_dense_replace": 3,
                "kv_lora_rank": 512,
                "q_lora_rank": 1536,
                "qk_rope_head_dim": 64,
                "qk_nope_head_dim": 128,
                "v_head_dim": 128,
                "vocab_size": 129280,
                "max_position_embeddings": 163840,
                "quantization_config": {"quant_method": "fp8"},
            },
        ),
        model_id="x/ds",
    )
    assert mla.attention == "mla"
    assert mla.params_total_b == pytest.approx(
        resolve_model("deepseek-ai/DeepSeek-V3").params_total_b, rel=1e-6
    )
    wrapped = load_hf_config(
        _write(
            tmp_path,
            {
                "text_config": {
                    "hidden_size": 4096,
                    "num_hidden_layers": 32,
                    "num_attention_heads": 32,
                    "num_key_value_heads": 8,
                    "intermediate_size": 14336,
                    "vocab_size": 128256,
                },
                "architectures": ["X"],
            },
        )
    )
    assert wrapped.num_kv_heads == 8 and wrapped.head_dim == 128 and not wrapped.is_moe
    oss = load_hf_config(
        _write(
            tmp_path,
            {
                "hidden_size": 2880,
                "num_hidden_layers": 4,
                "num_attention_heads": 64,
                "num_key_value_heads": 8,
                "head_dim": 64,
                "intermediate_size": 2880,
                "num_local_experts": 128,
                "experts_per_token": 4,
                "vocab_size": 201088,
                "sliding_window": 128,
                "layer_types": ["sliding_attention", "full_attention"] * 2,
                "quantization_config": {"quant_method": "mxfp4"},
            },
        )
    )
    assert oss.weight_dtype == "mxfp4" and oss.sliding_window_layers == 2 and oss.num_experts_per_tok == 4


def test_hf_config_llama4_interleaved_moe_and_shared_expert(tmp_path):
    """The text_config of meta-llama/Llama-4-Maverick-17B-128E-Instruct (the fields the planner
    reads): `intermediate_size_mlp` is the dense width, `intermediate_size` the expert width, every
    second layer is MoE, and each MoE layer has one shared expert the config does not mention."""
    text_config = {
        "model_type": "llama4_text",
        "hidden_size": 5120,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "interleave_moe_layer_step": 2,
        "num_local_experts": 128,
        "num_experts_per_tok": 1,
        "vocab_size": 202048,
        "max_position_embeddings": 1048576,
        "torch_dtype": "bfloat16",
    }
    path = _write(
        tmp_path, {"model_type": "llama4", "text_config": text_config, "tie_word_embeddings": False}
    )
    arch = load_hf_config(path, "meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    catalog = resolve_model("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    assert (arch.moe_layer_step, arch.num_shared_experts, arch.intermediate_size) == (2, 1, 16384)
    assert arch.params_total == catalog.params_total
    assert arch.params_active == catalog.params_active
    scout = load_hf_config(
        _write(
            tmp_path,
            {"text_config": {**text_config, "interleave_moe_layer_step": 1, "num_local_experts": 16}},
        ),
        "scout",
    )
    assert scout.params_total == resolve_model("meta-llama/Llama-4-Scout-17B-16E").params_total


def test_source_may_be_a_config_path(tmp_path):
    path = _write(
        tmp_path, {"hidden_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 1000}
    )
    arch = resolve_model(str(path))
    assert arch.num_layers == 2 and arch.num_kv_heads == 8


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps({"hidden_size": 1}),
        json.dumps(
            {
                "hidden_size": 8,
                "num_hidden_layers": 1,
                "num_attention_heads": 1,
                "vocab_size": 10,
                "quantization_config": {"quant_method": "weird"},
            }
        ),
    ],
)
def test_broken_configs_are_user_errors(tmp_path, content):
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(UserError):
        resolve_model("acme/x", str(path))


def test_missing_config_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such"):
        resolve_model("acme/x", str(tmp_path / "nope.json"))


def test_match_catalog_is_what_resolve_uses_without_a_config():
    assert match_catalog("Qwen/Qwen3-8B") == resolve_model("Qwen/Qwen3-8B")
