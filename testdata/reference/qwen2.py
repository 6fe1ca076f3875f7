#!/usr/bin/env python3
"""Reference Qwen2 forward pass in plain PyTorch, for conveyor's tests.

    python3 testdata/reference/qwen2.py DIR

As llama.py (the folder's layout, ids.safetensors in, logits.safetensors out), for a
Hugging Face Qwen2 config.json: a Llama whose query, key and value projections have biases.
"""
from llama import run
from moe_layers import forward, swiglu


def qwen2(config, w, ids):
    def mlp(i, p, h):
        return swiglu(h, w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"],
                      w[p + "mlp.down_proj.weight"])
    return forward(config, w, ids, mlp, q_norm=None)


if __name__ == "__main__":
    run(qwen2)
