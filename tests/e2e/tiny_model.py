"""Build a tiny random-weight Hugging Face checkpoint that vLLM can serve on a CPU.

Run with the ENGINE venv's Python (it needs torch, safetensors and tokenizers, which the project
venv does not have):

    <engine-python> tests/e2e/tiny_model.py OUT_DIR --arch llama|mixtral [--seed N]

Nothing is downloaded. The tokenizer is a byte-level BPE trained here on a generated corpus (so
any text, including the random prompts of `vllm bench serve`, round-trips), with BOS/EOS tokens
and a chat template; the weights are random (seeded) float32. The model is deliberately tiny —
2 layers, hidden 128, 4 query heads / 2 KV heads (head_dim 32: vLLM's CPU attention needs
head_dim >= 32) — so a cold `vllm serve` is dominated by engine start-up, not by the model.

  llama    LlamaForCausalLM, dense.
  mixtral  MixtralForCausalLM, 4 experts, top-2: exercises the MoE code path (fused MoE on CPU).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

HIDDEN = 128
INTERMEDIATE = 256
LAYERS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = HIDDEN // HEADS
MAX_POSITIONS = 4096
EXPERTS = 4
EXPERTS_PER_TOKEN = 2
VOCAB_TARGET = 2048

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

_WORDS = (
    "the a an of to in and is are was were be been for on with as by at from this that these those "
    "model request token cache prefix router engine replica latency throughput goodput layout "
    "tensor parallel expert batch queue prompt output input decode prefill kernel memory node "
    "cluster service metric alert budget error rate second minute hour user system assistant "
    "hello world what how why when where who which can could would should will may might must "
    "one two three four five six seven eight nine ten zero hundred thousand million"
).split()


def _corpus(seed: int) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(4000):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(3, 20))]
        lines.append(" ".join(words).capitalize() + rng.choice([".", "?", "!", ",", ";", ":"]))
    # Digits, punctuation and mixed case, so byte-level merges cover more than the word list.
    lines += ["".join(rng.choice("0123456789 .,;:-+=/()[]{}'\"ABCDEFabcdef") for _ in range(40)) for _ in range(500)]
    return lines


def build_tokenizer(out: Path, seed: int) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "pad_token": "</s>",
                "add_bos_token": False,
                "clean_up_tokenization_spaces": False,
                "model_max_length": MAX_POSITIONS,
                "chat_template": CHAT_TEMPLATE,
            },
            indent=2,
        )
    )
    (out / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "</s>"}, indent=2)
    )
    return tok.get_vocab_size()


def _config(arch: str, vocab: int) -> dict:
    config = {
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "bos_token_id": SPECIAL_TOKENS.index("<s>"),
        "eos_token_id": SPECIAL_TOKENS.index("</s>"),
        "torch_dtype": "float32",
    }
    if arch == "llama":
        config.update({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False, "mlp_bias": False})
    elif arch == "mixtral":
        config.update(
            {
                "architectures": ["MixtralForCausalLM"],
                "model_type": "mixtral",
                "num_local_experts": EXPERTS,
                "num_experts_per_tok": EXPERTS_PER_TOKEN,
                "router_aux_loss_coef": 0.0,
                "sliding_window": None,
            }
        )
    else:
        raise SystemExit(f"unknown arch {arch!r}")
    return config


def _weights(arch: str, vocab: int, seed: int) -> dict:
    import torch

    gen = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return (torch.randn(*shape, generator=gen) * 0.02).contiguous()

    kv = KV_HEADS * HEAD_DIM
    w = {"model.embed_tokens.weight": rand(vocab, HIDDEN), "model.norm.weight": torch.ones(HIDDEN), "lm_head.weight": rand(vocab, HIDDEN)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = torch.ones(HIDDEN)
        w[p + "post_attention_layernorm.weight"] = torch.ones(HIDDEN)
        w[p + "self_attn.q_proj.weight"] = rand(HEADS * HEAD_DIM, HIDDEN)
        w[p + "self_attn.k_proj.weight"] = rand(kv, HIDDEN)
        w[p + "self_attn.v_proj.weight"] = rand(kv, HIDDEN)
        w[p + "self_attn.o_proj.weight"] = rand(HIDDEN, HEADS * HEAD_DIM)
        if arch == "llama":
            w[p + "mlp.gate_proj.weight"] = rand(INTERMEDIATE, HIDDEN)
            w[p + "mlp.up_proj.weight"] = rand(INTERMEDIATE, HIDDEN)
            w[p + "mlp.down_proj.weight"] = rand(HIDDEN, INTERMEDIATE)
        else:
            w[p + "block_sparse_moe.gate.weight"] = rand(EXPERTS, HIDDEN)
            for e in range(EXPERTS):
                q = f"{p}block_sparse_moe.experts.{e}."
                w[q + "w1.weight"] = rand(INTERMEDIATE, HIDDEN)  # gate
                w[q + "w3.weight"] = rand(INTERMEDIATE, HIDDEN)  # up
                w[q + "w2.weight"] = rand(HIDDEN, INTERMEDIATE)  # down
    return w


def build(out: Path, arch: str, seed: int = 0) -> dict:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    vocab = build_tokenizer(out, seed)
    vocab_padded = (vocab + 63) // 64 * 64  # the embedding may be larger than the tokenizer, as in real checkpoints
    config = _config(arch, vocab_padded)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}, indent=2)
    )
    save_file(_weights(arch, vocab_padded, seed), str(out / "model.safetensors"), metadata={"format": "pt"})
    return {"path": str(out), "arch": arch, "vocab_size": vocab_padded, "tokenizer_vocab": vocab}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--arch", choices=("llama", "mixtral"), default="llama")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(build(args.out, args.arch, args.seed)))


if __name__ == "__main__":
    main()
