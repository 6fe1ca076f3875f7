"""Decoder layers in plain PyTorch, for mixtral.py, qwen2.py, qwen2_moe.py, qwen3_moe.py and
olmoe.py.

Written from the published architectures (Mixtral of Experts, Jiang et al. 2024; Qwen3's
model card; OLMoE, Muennighoff et al. 2024) and Hugging Face's conventions: the router's softmax in float32, the top-k
experts of each token, their gates renormalised or not, SwiGLU experts, outputs summed by
gate. Shares no code with conveyor.
"""
import math

import torch

from llama import rms_norm, rotate


def attention(config, w, p, h, q_norm):
    """Causal grouped-query attention of layer prefix p on h (n, t, c); q_norm: None, "head"
    (Qwen3: RMSNorm of each head's queries and keys) or "projection" (OLMoE: of the whole query
    and key projections, before they are cut into heads); the projections' biases where the
    weights hold them (Qwen2)."""
    n, t, c = h.shape
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    d = c // heads
    eps = config["rms_norm_eps"]
    theta = config.get("rope_theta", 1e6)
    def project(name):
        y = h @ w[p + f"self_attn.{name}.weight"].T
        bias = w.get(p + f"self_attn.{name}.bias")
        return y if bias is None else y + bias

    q, k = project("q_proj"), project("k_proj")
    if q_norm == "projection":
        q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
        k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
    q, k = q.view(n, t, heads, d), k.view(n, t, kv_heads, d)
    v = project("v_proj").view(n, t, kv_heads, d).transpose(1, 2)
    if q_norm == "head":
        q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
        k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
    q, k = rotate(q.transpose(1, 2), theta), rotate(k.transpose(1, 2), theta)
    group = heads // kv_heads
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    scores = scores.masked_fill(~causal, float("-inf"))
    y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(n, t, heads * d)
    return y @ w[p + "self_attn.o_proj.weight"].T


def swiglu(x, gate, up, down):
    return (torch.nn.functional.silu(x @ gate.T) * (x @ up.T)) @ down.T


def sparse_block(h, w, prefix, experts, top_k, renormalise, names):
    """The MoE block under prefix on h (n, t, c); names: (gate, up, down) of an expert."""
    n, t, c = h.shape
    x = h.reshape(n * t, c)
    probs = torch.softmax((x @ w[prefix + "gate.weight"].T).float(), dim=-1)
    gates, chosen = torch.topk(probs, top_k, dim=-1)
    if renormalise:
        gates = gates / gates.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    for e in range(experts):
        rows, slot = torch.where(chosen == e)
        if rows.numel() == 0:
            continue
        q = prefix + f"experts.{e}."
        y = swiglu(x[rows], w[q + names[0] + ".weight"], w[q + names[1] + ".weight"],
                   w[q + names[2] + ".weight"])
        out.index_add_(0, rows, y * gates[rows, slot, None].to(y.dtype))
    return out.reshape(n, t, c)


def qwen_mlp(config, w, shared=False):
    """Qwen-MoE's layer MLPs, mlp(i, p, h): layer i sparse (mlp.gate, num_experts experts of
    mlp.experts.N.*, num_experts_per_tok of them a token, the gates renormalised when
    norm_topk_prob) unless i is in mlp_only_layers or (i + 1) does not divide by
    decoder_sparse_step, when it is a dense SwiGLU (mlp.gate_proj / up_proj / down_proj); with
    `shared`, Qwen2-MoE's shared expert (mlp.shared_expert.*) scaled by
    sigmoid(mlp.shared_expert_gate x) added to every sparse layer's output."""
    dense = set(config.get("mlp_only_layers", []))
    step = config.get("decoder_sparse_step", 1)

    def mlp(i, p, h):
        if i in dense or (i + 1) % step != 0:
            return swiglu(h, w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"],
                          w[p + "mlp.down_proj.weight"])
        out = sparse_block(h, w, p + "mlp.", config["num_experts"], config["num_experts_per_tok"],
                           config.get("norm_topk_prob", False), ("gate_proj", "up_proj", "down_proj"))
        if shared:
            q = p + "mlp.shared_expert."
            expert = swiglu(h, w[q + "gate_proj.weight"], w[q + "up_proj.weight"],
                            w[q + "down_proj.weight"])
            out = out + torch.sigmoid(h @ w[p + "mlp.shared_expert_gate.weight"].T) * expert
        return out
    return mlp


def forward(config, w, ids, mlp, q_norm):
    """The decoder: mlp(i, p, h) is layer i's MLP on the normalised h."""
    eps = config["rms_norm_eps"]
    x = w["model.embed_tokens.weight"][ids]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        x = x + attention(config, w, p, rms_norm(x, w[p + "input_layernorm.weight"], eps), q_norm)
        x = x + mlp(i, p, rms_norm(x, w[p + "post_attention_layernorm.weight"], eps))
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if config.get("tie_word_embeddings") else w["lm_head.weight"]
    return x @ head.T
