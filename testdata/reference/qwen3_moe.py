#!/usr/bin/env python3
"""Reference Qwen3-MoE forward pass in plain PyTorch, for conveyor's tests.

    python3 testdata/reference/qwen3_moe.py DIR

As llama.py (the folder's layout, ids.safetensors in, logits.safetensors out), for a
Hugging Face Qwen3-MoE config.json: per-head RMSNorm of queries and keys before the
rotation; layer i's MLP is sparse (mlp.gate, num_experts experts of moe_intermediate_size
units, num_experts_per_tok of them a token, the gates renormalised when norm_topk_prob)
unless i is in mlp_only_layers or (i + 1) does not divide by decoder_sparse_step, when it is
a dense SwiGLU of intermediate_size units.
"""
from llama import run
from moe_layers import forward, qwen_mlp


def qwen3_moe(config, w, ids):
    return forward(config, w, ids, qwen_mlp(config, w), q_norm="head")


if __name__ == "__main__":
    run(qwen3_moe)
