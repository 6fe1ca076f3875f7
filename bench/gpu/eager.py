#!/usr/bin/env python3
"""conveyor's GPT or Llama as a plain PyTorch nn.Module, trained eagerly on one GPU.

The yardstick of scripts/gpu-run: the step `conveyor train --pp 1` runs, written the way a
PyTorch user would write it, on the same GPU, in the same precision and with the same
attention kernel, so that tokens/s compare like for like.

  gpt     conveyor/nn/gpt.cc: byte vocabulary (256), token + position embedding, pre-norm
          blocks (LayerNorm; one qkv linear with bias, causal
          torch.nn.functional.scaled_dot_product_attention, output projection, residual;
          LayerNorm, 4x MLP with exact GELU, residual), final LayerNorm, LM head without
          bias. Initial values as conveyor draws them in distribution (normal 0.02, the
          projections 0.02 / sqrt(2 layers), positions 0.01), not bit for bit.
  llama   conveyor/nn/llama.cc: byte vocabulary, pre-norm blocks (RMSNorm in fp32; q, k, v
          projections without bias, rotate-half rotary embeddings, key-value heads repeated
          per group, causal SDPA, output projection; RMSNorm, SwiGLU MLP), final RMSNorm,
          untied LM head. Weights N(0, 0.02), norms 1.
  hf-llama  the same Llama as Hugging Face transformers' LlamaForCausalLM (its SDPA
          attention, no key-value cache), where transformers is installed: a yardstick
          nobody wrote for this comparison.
  step    the batch cut into --microbatches micro-batches run one after another, each
          loss summed over its tokens and divided by the batch's tokens, backward after
          each; then the global gradient norm clipped to 1.0 and AdamW (betas 0.9/0.95, eps
          1e-8, weight decay 0.1 on tensors of 2+ dimensions). bf16 / fp16: forward under
          torch.autocast, fp32 weights and gradients (fp16 without loss scaling: this
          script measures speed). AdamW and the norm run PyTorch's foreach kernels unless
          --no-foreach (one kernel per tensor, as conveyor's AdamW does).
  data    uniform random bytes (the speed does not depend on them).

Timing: torch.cuda.synchronize() around each step; the first --warmup steps are left out;
the median of the rest is reported, and of its parts (forward and backward of all
micro-batches, the norm and clip, the optimizer), each ended by a synchronisation. Peak
memory: torch.cuda.max_memory_allocated over the timed steps.

Usage: eager.py [--model llama --kv-heads 8 --intermediate 8192] --layers 24 --hidden 2048 --heads 16 --seq-len 2048 --batch-size 8
       --microbatches 8 --steps 8 --dtype bf16 --out eager.json
"""

import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 256


class Block(nn.Module):
    def __init__(self, c, heads, layers):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.fc2 = nn.Linear(4 * c, c)
        proj_std = 0.02 / math.sqrt(2.0 * layers)
        for lin, std in ((self.qkv, 0.02), (self.proj, proj_std), (self.fc, 0.02),
                         (self.fc2, proj_std)):
            nn.init.normal_(lin.weight, 0.0, std)
            nn.init.zeros_(lin.bias)

    def forward(self, x):  # (n, T, C) -> (n, T, C)
        n, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)  # each (n, T, C)
        q, k, v = (z.view(n, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (n, H, T, d)
        x = x + self.proj(y.transpose(1, 2).reshape(n, t, c))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, layers, c, heads, seq_len):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, c)
        self.wpe = nn.Parameter(torch.empty(seq_len, c))
        nn.init.normal_(self.wte.weight, 0.0, 0.02)
        nn.init.normal_(self.wpe, 0.0, 0.01)
        self.blocks = nn.ModuleList(Block(c, heads, layers) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)
        self.head = nn.Linear(c, VOCAB, bias=False)
        nn.init.normal_(self.head.weight, 0.0, 0.02)

    def forward(self, ids):  # (n, T) -> logits (n, T, V)
        x = self.wte(ids) + self.wpe[: ids.size(1)].unsqueeze(0)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def rms_norm(x, weight, eps=1e-5):  # (..., C) -> (..., C), computed in fp32
    x32 = x.float()
    return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


class LlamaBlock(nn.Module):
    def __init__(self, c, heads, kv_heads, intermediate, theta):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, c // heads
        self.input_norm = nn.Parameter(torch.ones(c))
        self.q = nn.Linear(c, c, bias=False)
        self.k = nn.Linear(c, kv_heads * self.d, bias=False)
        self.v = nn.Linear(c, kv_heads * self.d, bias=False)
        self.o = nn.Linear(c, c, bias=False)
        self.mlp_norm = nn.Parameter(torch.ones(c))
        self.gate = nn.Linear(c, intermediate, bias=False)
        self.up = nn.Linear(c, intermediate, bias=False)
        self.down = nn.Linear(intermediate, c, bias=False)
        for lin in (self.q, self.k, self.v, self.o, self.gate, self.up, self.down):
            nn.init.normal_(lin.weight, 0.0, 0.02)
        self.inv_freq = 1.0 / theta ** (torch.arange(0, self.d, 2).float() / self.d)

    def rotate(self, x):  # (n, heads, T, d): the pair (j, j + d/2) turns by t theta^(-2j/d)
        t = x.size(2)
        angles = torch.arange(t, device=x.device).float()[:, None] * \
            self.inv_freq.to(x.device)[None, :]
        angles = torch.cat([angles, angles], dim=-1)  # (T, d)
        first, second = x[..., : self.d // 2], x[..., self.d // 2:]
        return (x * angles.cos() + torch.cat([-second, first], dim=-1) * angles.sin()).to(x.dtype)

    def forward(self, x):  # (n, T, C) -> (n, T, C)
        n, t, c = x.shape
        h = rms_norm(x, self.input_norm)
        q = self.rotate(self.q(h).view(n, t, self.heads, self.d).transpose(1, 2))
        k = self.rotate(self.k(h).view(n, t, self.kv_heads, self.d).transpose(1, 2))
        v = self.v(h).view(n, t, self.kv_heads, self.d).transpose(1, 2)
        group = self.heads // self.kv_heads
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (n, H, T, d)
        x = x + self.o(y.transpose(1, 2).reshape(n, t, c))
        h = rms_norm(x, self.mlp_norm)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, layers, c, heads, kv_heads, intermediate, theta):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, c)
        nn.init.normal_(self.embed.weight, 0.0, 0.02)
        self.blocks = nn.ModuleList(LlamaBlock(c, heads, kv_heads, intermediate, theta)
                                    for _ in range(layers))
        self.norm = nn.Parameter(torch.ones(c))
        self.head = nn.Linear(c, VOCAB, bias=False)
        nn.init.normal_(self.head.weight, 0.0, 0.02)

    def forward(self, ids):  # (n, T) -> logits (n, T, V)
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(rms_norm(x, self.norm))


class HfLlama(nn.Module):
    """transformers.LlamaForCausalLM of the same shape; forward returns its logits."""

    def __init__(self, layers, c, heads, kv_heads, intermediate, theta, seq_len):
        super().__init__()
        import transformers
        shape = dict(vocab_size=VOCAB, hidden_size=c, intermediate_size=intermediate,
                     num_hidden_layers=layers, num_attention_heads=heads,
                     num_key_value_heads=kv_heads, max_position_embeddings=seq_len,
                     rms_norm_eps=1e-5, tie_word_embeddings=False, use_cache=False)
        try:  # transformers 5 keeps the rotary base in rope_parameters, 4 in rope_theta
            config = transformers.LlamaConfig(
                rope_parameters={"rope_type": "default", "rope_theta": theta}, **shape)
        except TypeError:
            config = transformers.LlamaConfig(rope_theta=theta, **shape)
        config._attn_implementation = "sdpa"
        self.model = transformers.LlamaForCausalLM(config)
        self.version = transformers.__version__

    def forward(self, ids):  # (n, T) -> logits (n, T, V)
        return self.model(input_ids=ids).logits


def main(argv):
    p = argparse.ArgumentParser(prog="eager.py", description=__doc__.split("\n")[0])
    p.add_argument("--model", default="gpt", choices=["gpt", "llama", "hf-llama"])
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=0, help="llama (0 = heads)")
    p.add_argument("--intermediate", type=int, default=0,
                   help="llama: MLP units (0 = 8/3 x hidden, rounded up to a multiple of 8)")
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--steps", type=int, default=8, help="timed steps after the warm-up")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--dtype", default="bf16", choices=["fp32", "bf16", "fp16"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--no-foreach", action="store_true",
                   help="AdamW and the norm one tensor at a time")
    p.add_argument("--out", default="")
    a = p.parse_args(argv)
    if a.hidden % a.heads or a.batch_size % a.microbatches:
        p.error("--heads must divide --hidden and --microbatches --batch-size")
    kv_heads = a.kv_heads or a.heads
    if a.heads % kv_heads:
        p.error("--kv-heads must divide --heads")
    intermediate = a.intermediate or (8 * a.hidden // 3 + 7) // 8 * 8

    device = torch.device(a.device)
    torch.manual_seed(1234)
    if a.model == "gpt":
        model = Gpt(a.layers, a.hidden, a.heads, a.seq_len).to(device)
    elif a.model == "llama":
        model = Llama(a.layers, a.hidden, a.heads, kv_heads, intermediate, a.rope_theta).to(device)
    else:
        model = HfLlama(a.layers, a.hidden, a.heads, kv_heads, intermediate, a.rope_theta,
                        a.seq_len).to(device)
    decay = [q for q in model.parameters() if q.dim() >= 2]
    no_decay = [q for q in model.parameters() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8, foreach=not a.no_foreach)
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.dtype)
    mb = a.batch_size // a.microbatches
    tokens = a.batch_size * a.seq_len
    params = sum(q.numel() for q in model.parameters())

    def now():  # seconds, after the device has finished what was queued
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter()

    def step():  # -> (loss, seconds of forward-backward, norm and clip, optimizer)
        t0 = now()
        data = torch.randint(0, VOCAB, (a.batch_size, a.seq_len + 1), device=device)
        loss_total = torch.zeros((), device=device)
        for m in range(a.microbatches):
            chunk = data[m * mb:(m + 1) * mb]
            with torch.autocast(device.type, dtype=autocast_dtype or torch.float32,
                                enabled=autocast_dtype is not None):
                logits = model(chunk[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), chunk[:, 1:].reshape(-1),
                                   reduction="sum") / tokens
            loss.backward()
            loss_total += loss.detach()
        t1 = now()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=not a.no_foreach)
        t2 = now()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss_total.item(), (t1 - t0, t2 - t1, now() - t2)

    times, parts, losses = [], [], []
    for i in range(a.warmup + a.steps):
        if i == a.warmup and device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        start = now()
        loss, part = step()
        losses.append(loss)
        if i >= a.warmup:
            times.append(now() - start)
            parts.append(part)
    step_s = statistics.median(times)
    part_s = {name: statistics.median(p[j] for p in parts)
              for j, name in enumerate(("forward_backward", "norm_clip", "optimizer"))}
    result = {
        "what": "pytorch eager", "model": a.model, "foreach": not a.no_foreach,
        "torch": torch.__version__, "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else "",
        "layers": a.layers, "hidden": a.hidden, "heads": a.heads, "seq_len": a.seq_len,
        "kv_heads": kv_heads if a.model != "gpt" else a.heads,
        "intermediate": intermediate if a.model != "gpt" else 4 * a.hidden,
        "transformers": getattr(model, "version", ""),
        "batch_size": a.batch_size, "microbatches": a.microbatches, "dtype": a.dtype,
        "params": params, "step_s": step_s, "step_times_s": times, "part_s": part_s,
        "tokens_per_s": tokens / step_s, "losses": losses,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(device)
        if device.type == "cuda" else 0,
    }
    print(f"eager {a.model}: {params / 1e6:.0f}M parameters, {a.dtype}, step {step_s * 1e3:.1f} ms "
          f"(median of {len(times)}), {tokens / step_s:.0f} tokens/s, peak "
          f"{result['peak_allocated_bytes'] / 2**30:.2f} GiB; forward-backward "
          f"{part_s['forward_backward'] * 1e3:.1f} ms, norm and clip {part_s['norm_clip'] * 1e3:.1f}"
          f" ms, optimizer {part_s['optimizer'] * 1e3:.1f} ms")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
