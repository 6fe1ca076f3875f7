#!/usr/bin/env python3
"""Reference Llama forward pass in plain PyTorch, for conveyor's tests.

    python3 testdata/reference/llama.py DIR

DIR holds config.json (Hugging Face LlamaConfig fields), the weights under Hugging Face's
names (model.safetensors, or the shards model.safetensors.index.json names) and
ids.safetensors (one int64 tensor "ids", (n, T)). Writes DIR/logits.safetensors: "logits",
float32 (n, T, V).

Written from the published Llama architecture and Hugging Face's conventions (rotate-half
rotary embeddings, RMSNorm in fp32, SwiGLU, grouped-query attention with key-value heads
repeated per group, causal attention); it shares no code with conveyor. The safetensors
format is read and written here by hand (the Debian torch has no safetensors package).
"""
import json
import math
import os
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32}


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    base = 8 + length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        t = torch.frombuffer(raw, dtype=DTYPES[entry["dtype"]]) if raw else torch.empty(0)
        tensors[name] = t.reshape(entry["shape"]).clone()
    return tensors


def save(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def rms_norm(x, weight, eps):
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(x.dtype)


def rotate(x, theta):
    # x (n, heads, T, d); the pair (j, j + d/2) turns by position * theta^(-2j/d)
    t, d = x.shape[2], x.shape[3]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    angles = torch.arange(t).float()[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    first, second = x[..., : d // 2], x[..., d // 2:]
    return x * angles.cos() + torch.cat([-second, first], dim=-1) * angles.sin()


def forward(config, w, ids):
    c = config["hidden_size"]
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    d = c // heads
    eps = config["rms_norm_eps"]
    theta = config.get("rope_theta", 10000.0)
    n, t = ids.shape
    x = w["model.embed_tokens.weight"][ids]
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(n, t, heads, d).transpose(1, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(n, t, kv_heads, d).transpose(1, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(n, t, kv_heads, d).transpose(1, 2)
        q, k = rotate(q, theta), rotate(k, theta)
        group = heads // kv_heads
        k = k[:, :, None].expand(n, kv_heads, group, t, d).reshape(n, heads, t, d)
        v = v[:, :, None].expand(n, kv_heads, group, t, d).reshape(n, heads, t, d)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        scores = scores.masked_fill(~causal, float("-inf"))
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(n, t, heads * d)
        x = x + y @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T)
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if config.get("tie_word_embeddings") else w["lm_head.weight"]
    return x @ head.T


def read_inputs(folder):
    """config.json, the weights (widened to float32) and ids, as (config, weights, ids)."""
    with open(folder + "/config.json") as f:
        config = json.load(f)
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):  # shards: every file the index names
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    weights = {}
    for name in files:
        weights.update({k: v.float() for k, v in load(os.path.join(folder, name)).items()})
    ids = load(folder + "/ids.safetensors")["ids"].long()
    return config, weights, ids


def run(model_forward):
    """The command line: the folder argv[1] through model_forward(config, weights, ids)."""
    folder = sys.argv[1]
    config, weights, ids = read_inputs(folder)
    with torch.no_grad():
        logits = model_forward(config, weights, ids)
    save(folder + "/logits.safetensors", {"logits": logits.float()})


if __name__ == "__main__":
    run(forward)
