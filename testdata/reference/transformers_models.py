#!/usr/bin/env python3
"""Small models of Hugging Face transformers' own classes, for conveyor's tests.

Run with the reference environment's python (scripts/reference-env), on the CPU, offline:

    transformers_models.py make ARCH DIR [SEED]
        Makes a tiny model (6 layers, hidden 32, vocabulary 256) of ARCH (llama:
        LlamaForCausalLM, 4 heads sharing 2 key-value heads; gpt2: GPT2LMHeadModel, 48
        positions, tied head; mixtral: MixtralForCausalLM, 4 experts, top 2; qwen3_moe:
        Qwen3MoeForCausalLM, per-head query and key norms, 4 experts, top 2 not renormalised,
        layers 1 and 5 sparse: decoder_sparse_step 2, layer 3 in mlp_only_layers;
        qwen2_moe: Qwen2MoeForCausalLM, biases on the query, key and value projections, 4
        experts, top 2, a gated shared expert, every layer sparse) from its
        config with weights drawn from SEED (default 1), large enough that the logits are far
        from uniform, and writes it with save_pretrained (safetensors, float32) into DIR.

    transformers_models.py logits DIR IDS OUT [ADAPTER]
        Loads DIR with from_pretrained(dtype=torch.float32) and runs it on the int64 tensor
        "ids" (n, L) of the safetensors file IDS. Writes the safetensors file OUT: "logits"
        (n, L, V) float32 and "loss" (a scalar, float64): transformers' own mean next-token
        loss of the rows (labels=ids: n (L - 1) predictions). With ADAPTER, a LoRA adapter
        folder (adapter_config.json, adapter_model.safetensors), the model runs with it:
        peft's PeftModel.from_pretrained(model, ADAPTER).

    transformers_models.py generate DIR IDS TOKENS OUT
        Greedy generation: generate(do_sample=False, max_new_tokens=TOKENS) from the prompt
        "ids" (1, L) of IDS, loaded as above. Writes OUT: "tokens", the TOKENS new ids (int64).

Several commands, separated by a "+" word, run one after the other in one process (Python
and transformers start once). Prints one line for each thing written. Nothing is downloaded
(HF_HUB_OFFLINE).
"""
import math
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

torch.set_num_threads(1)
transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()

# Sizes every architecture shares: small enough for a test's seconds.
COMMON = dict(vocab_size=256, bos_token_id=None, eos_token_id=None, pad_token_id=None)


def llama_like(**extra):
    sizes = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4,
                 num_key_value_heads=2, num_hidden_layers=6, max_position_embeddings=64,
                 rms_norm_eps=1e-5, tie_word_embeddings=False, **COMMON)
    sizes.update(extra)
    return sizes


def make_model(arch, seed):
    torch.manual_seed(seed)
    if arch == "llama":
        config = transformers.LlamaConfig(**llama_like(rope_parameters={
            "rope_type": "default", "rope_theta": 10000.0}))
        model = transformers.LlamaForCausalLM(config)
    elif arch == "gpt2":
        config = transformers.GPT2Config(n_embd=32, n_head=4, n_layer=6, n_positions=48,
                                         activation_function="gelu_new", resid_pdrop=0.0,
                                         embd_pdrop=0.0, attn_pdrop=0.0, **COMMON)
        model = transformers.GPT2LMHeadModel(config)
    elif arch == "mixtral":
        config = transformers.MixtralConfig(**llama_like(
            intermediate_size=40, num_local_experts=4, num_experts_per_tok=2,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6}))
        model = transformers.MixtralForCausalLM(config)
    elif arch == "qwen3_moe":
        # Sparse: every other layer (1, 3, 5) but layer 3, dense by mlp_only_layers.
        config = transformers.Qwen3MoeConfig(**llama_like(
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24,
            norm_topk_prob=False, decoder_sparse_step=2, mlp_only_layers=[3],
            head_dim=8, rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}))
        model = transformers.Qwen3MoeForCausalLM(config)
    elif arch == "qwen2_moe":
        config = transformers.Qwen2MoeConfig(**llama_like(
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24,
            shared_expert_intermediate_size=16, norm_topk_prob=False, rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}))
        model = transformers.Qwen2MoeForCausalLM(config)
    else:
        sys.exit(f"transformers_models.py: unknown architecture {arch!r} "
                 "(llama, gpt2, mixtral, qwen3_moe, qwen2_moe)")
    # Redraw every weight: matrices with a standard deviation of 2 / sqrt(fan-in) (the
    # embeddings 1), norms' gains near 1, biases small. The logits come out far from uniform
    # (transformers' own initialisation leaves them nearly so), the routers' scores too.
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=p.dtype)
            if "norm" in name or ".ln_" in name:
                p.copy_(1 + 0.2 * noise if name.endswith("weight") else 0.1 * noise)
            elif p.dim() == 1:
                p.copy_(0.1 * noise)
            elif "wte" in name or "wpe" in name or "embed_tokens" in name:
                p.copy_(noise)
            else:
                # Linear (out, in), GPT-2's Conv1D (in, out), fused experts (E, out, in).
                fan_in = p.shape[0] if ".c_" in name else p.shape[-1]
                p.copy_(noise * (2 / math.sqrt(fan_in)))
    return model


def load(folder):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return model.eval()


def run(command):
    """Runs one command (its words, without the script's name); False when it is unknown."""
    if len(command) in (3, 4) and command[0] == "make":
        model = make_model(command[1], int(command[3]) if len(command) > 3 else 1)
        model.save_pretrained(command[2], safe_serialization=True)
        print(f"wrote {command[1]} into {command[2]}")
    elif len(command) in (4, 5) and command[0] == "logits":
        model = load(command[1])
        if len(command) == 5:
            import peft  # only this command needs it
            model = peft.PeftModel.from_pretrained(model, command[4]).eval()
        ids = load_file(command[2])["ids"].long()
        with torch.no_grad():
            out = model(input_ids=ids, labels=ids)
        save_file({"logits": out.logits.float().contiguous(),
                   "loss": out.loss.double().reshape(())}, command[3])
        print(f"wrote {command[3]}: logits {tuple(out.logits.shape)}, loss {out.loss.item():.6f}")
    elif len(command) == 5 and command[0] == "generate":
        model = load(command[1])
        ids = load_file(command[2])["ids"].long()
        tokens = int(command[3])
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 do_sample=False, max_new_tokens=tokens, min_new_tokens=tokens,
                                 pad_token_id=0)
        new = out[0, ids.shape[1]:].contiguous()
        save_file({"tokens": new}, command[4])
        print(f"wrote {command[4]}: {new.tolist()}")
    else:
        return False
    return True


def main(argv):
    # Several commands, separated by "+", share one start of Python and transformers.
    commands, current = [], []
    for word in argv[1:]:
        if word == "+":
            commands.append(current)
            current = []
        else:
            current.append(word)
    commands.append(current)
    for command in commands:
        if not run(command):
            sys.exit(f"transformers_models.py: cannot run {command}\n{__doc__}")


if __name__ == "__main__":
    main(sys.argv)
