#!/usr/bin/env python3
"""Reference OLMoE forward pass in plain PyTorch, for conveyor's tests.

    python3 testdata/reference/olmoe.py DIR

As llama.py (the folder's layout, ids.safetensors in, logits.safetensors out), for a
Hugging Face OLMoE config.json: RMSNorm of the whole query and key projections (q_norm of
hidden_size, k_norm of num_key_value_heads x head size) before they are cut into heads and
rotated; every layer's MLP sparse (mlp.gate, num_experts experts of intermediate_size units,
num_experts_per_tok of them a token, the gates renormalised only when norm_topk_prob).
"""
from llama import run
from moe_layers import forward, sparse_block


def olmoe(config, w, ids):
    def mlp(i, p, h):
        return sparse_block(h, w, p + "mlp.", config["num_experts"], config["num_experts_per_tok"],
                            config.get("norm_topk_prob", False), ("gate_proj", "up_proj", "down_proj"))
    return forward(config, w, ids, mlp, q_norm="projection")


if __name__ == "__main__":
    run(olmoe)
