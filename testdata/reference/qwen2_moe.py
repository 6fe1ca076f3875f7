#!/usr/bin/env python3
"""Reference Qwen2-MoE forward pass in plain PyTorch, for conveyor's tests.

    python3 testdata/reference/qwen2_moe.py DIR

As llama.py (the folder's layout, ids.safetensors in, logits.safetensors out), for a
Hugging Face Qwen2-MoE config.json: query, key and value projections with biases; layer i's
MLP sparse or dense as Qwen3-MoE's (moe_layers.qwen_mlp), a sparse one with a shared expert of
shared_expert_intermediate_size units every token passes through, scaled by
sigmoid(shared_expert_gate x).
"""
from llama import run
from moe_layers import forward, qwen_mlp


def qwen2_moe(config, w, ids):
    return forward(config, w, ids, qwen_mlp(config, w, shared=True), q_norm=None)


if __name__ == "__main__":
    run(qwen2_moe)
