"""The model catalog: HF-id matching, hand-checked parameter and KV arithmetic, config.json loading."""

from __future__ import annotations

import json

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
    ],
)
def test_ids_outside_the_catalog_are_none(source):
    assert resolve_model(source) is None


def test_sizes_do_not_bleed_into_each_other():
    assert resolve_model("meta-llama/Llama-3.1-8B").hidden_size == 4096
    assert resolve_model("meta-llama/Llama-3.1-70B").hidden_size == 8192
    assert resolve_model("Qwen/Qwen3-8B").num_layers == 36


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
