#!/usr/bin/env python3
"""Reference Qwen2-MoE forward pass in plain PyTorch, for conveyor's tests.

    python3 testdata/reference/qwen2_moe.py DIR

As llama.py (the folder's layout, ids.safetensors in, logits.safetensors out), for a
Hugging Face Qwen2-MoE config.json: query, key and value projections with biases; layer i's
MLP sparse (as Qwen3-MoE's: mlp.gate, num_experts experts of moe_intermediate_size units,
num_experts_per_tok of them a token, the gates renormalised when norm_topk_prob) plus a shared
expert of shared_expert_intermediate_size units every token passes through, scaled by
sigmoid(shared_expert_gate x); dense (intermediate_size) where mlp_only_layers or
decoder_sparse_step say.
"""
import torch

from llama import run
from moe_layers import forward, sparse_block, swiglu


def qwen2_moe(config, w, ids):
    dense = set(config.get("mlp_only_layers", []))
    step = config.get("decoder_sparse_step", 1)

    def mlp(i, p, h):
        if i in dense or (i + 1) % step != 0:
            return swiglu(h, w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"],
                          w[p + "mlp.down_proj.weight"])
        routed = sparse_block(h, w, p + "mlp.", config["num_experts"],
                              config["num_experts_per_tok"], config.get("norm_topk_prob", False),
                              ("gate_proj", "up_proj", "down_proj"))
        q = p + "mlp.shared_expert."
        shared = swiglu(h, w[q + "gate_proj.weight"], w[q + "up_proj.weight"],
                        w[q + "down_proj.weight"])
        return routed + torch.sigmoid(h @ w[p + "mlp.shared_expert_gate.weight"].T) * shared
    return forward(config, w, ids, mlp, q_norm=None)


if __name__ == "__main__":
    run(qwen2_moe)
