#!/usr/bin/env python3
"""Reference GPT-2 forward pass in plain PyTorch, for conveyor's tests.

    python3 testdata/reference/gpt2.py DIR

DIR holds config.json (Hugging Face GPT2Config fields: n_embd, n_head, n_layer, n_positions,
layer_norm_epsilon, activation_function, tie_word_embeddings), the weights under Hugging
Face's GPT-2 names (model.safetensors, or the shards model.safetensors.index.json names),
with or without the "transformer." prefix, and ids.safetensors (one int64 tensor "ids",
(n, T)). Writes DIR/logits.safetensors: "logits", float32 (n, T, V).

Written from the published GPT-2 architecture and Hugging Face's conventions: learned
position embeddings, pre-LayerNorm blocks, Conv1D linear layers (y = x @ W + b, W stored
(in, out)), one fused c_attn projection split into q, k, v in that order, causal attention,
a GELU MLP ("gelu_new" / "gelu_pytorch_tanh": the tanh approximation, "gelu": exact erf),
a final LayerNorm and a head that is wte unless tie_word_embeddings is false (then
lm_head.weight, (V, C)). The attention buffers h.{i}.attn.bias / masked_bias some files hold
are ignored. Everything runs in float32. It shares no code with conveyor; the safetensors
files are read and written by llama.py's hand-written helpers.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama import run  # noqa: E402


def layer_norm(x, weight, bias, eps):
    # x (..., C), normalized over C with the biased variance
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def gelu(x, kind):
    if kind in ("gelu_new", "gelu_pytorch_tanh"):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))
    if kind == "gelu":
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    raise ValueError(f"unsupported activation_function {kind!r}")


def conv1d(x, w, name):
    # Hugging Face's Conv1D: weight (in, out), bias (out)
    return x @ w[name + ".weight"] + w[name + ".bias"]


def attention(h, w, p, heads):
    # h (n, T, C) -> (n, T, C)
    n, t, c = h.shape
    d = c // heads
    qkv = conv1d(h, w, p + "attn.c_attn")  # (n, T, 3C)
    q, k, v = (part.view(n, t, heads, d).transpose(1, 2) for part in qkv.split(c, dim=-1))
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)  # (n, heads, T, T)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(n, t, c)  # (n, T, C)
    return conv1d(y, w, p + "attn.c_proj")


def mlp(h, w, p, kind):
    # h (n, T, C) -> (n, T, 4C) -> (n, T, C)
    return conv1d(gelu(conv1d(h, w, p + "mlp.c_fc"), kind), w, p + "mlp.c_proj")


def forward(config, w, ids):
    heads = config["n_head"]
    eps = config.get("layer_norm_epsilon", 1e-5)
    kind = config.get("activation_function", "gelu_new")
    root = "transformer." if "transformer.wte.weight" in w else ""
    n, t = ids.shape
    if t > config["n_positions"]:
        raise ValueError(f"{t} tokens exceed n_positions {config['n_positions']}")
    x = w[root + "wte.weight"][ids] + w[root + "wpe.weight"][:t]  # (n, T, C)
    for i in range(config["n_layer"]):
        p = f"{root}h.{i}."
        x = x + attention(layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps), w, p, heads)
        x = x + mlp(layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps), w, p, kind)
    x = layer_norm(x, w[root + "ln_f.weight"], w[root + "ln_f.bias"], eps)
    tied = config.get("tie_word_embeddings", True)
    head = w[root + "wte.weight"] if tied else w["lm_head.weight"]  # (V, C)
    return x @ head.T  # (n, T, V)


if __name__ == "__main__":
    run(forward)
