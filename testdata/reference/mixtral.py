#!/usr/bin/env python3
"""Reference Mixtral forward pass in plain PyTorch, for conveyor's tests.

    python3 testdata/reference/mixtral.py DIR

As llama.py (the folder's layout, ids.safetensors in, logits.safetensors out), for a
Hugging Face Mixtral config.json: every layer's MLP is block_sparse_moe, num_local_experts
experts of intermediate_size units (w1 gate, w3 up, w2 down), num_experts_per_tok of them a
token, the gates renormalised.
"""
from llama import run
from moe_layers import forward, sparse_block


def mixtral(config, w, ids):
    def mlp(i, p, h):
        return sparse_block(h, w, p + "block_sparse_moe.", config["num_local_experts"],
                            config["num_experts_per_tok"], True, ("w1", "w3", "w2"))
    return forward(config, w, ids, mlp, q_norm=None)


if __name__ == "__main__":
    run(mixtral)
