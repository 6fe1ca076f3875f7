#!/usr/bin/env python3
"""conveyor's GPT as a plain PyTorch nn.Module, trained eagerly on one GPU.

The yardstick of scripts/gpu-run: the step `conveyor train --pp 1` runs, written the way a
PyTorch user would write it, on the same GPU, in the same precision and with the same
attention kernel, so that tokens/s compare like for like.

  model   conveyor/nn/gpt.cc: byte vocabulary (256), token + position embedding, pre-norm
          blocks (LayerNorm; one qkv linear with bias, causal
          torch.nn.functional.scaled_dot_product_attention, output projection, residual;
          LayerNorm, 4x MLP with exact GELU, residual), final LayerNorm, LM head without
          bias. Initial values as conveyor draws them in distribution (normal 0.02, the
          projections 0.02 / sqrt(2 layers), positions 0.01), not bit for bit.
  step    the batch cut into --microbatches micro-batches run one after another, each
          loss summed over its tokens and divided by the batch's tokens, backward after
          each; then the global gradient norm clipped to 1.0 and AdamW (betas 0.9/0.95, eps
          1e-8, weight decay 0.1 on tensors of 2+ dimensions). bf16 / fp16: forward under
          torch.autocast, fp32 weights and gradients (fp16 without loss scaling: this
          script measures speed).
  data    uniform random bytes (the speed does not depend on them).

Timing: torch.cuda.synchronize() around each step; the first --warmup steps are left out;
the median of the rest is reported. Peak memory: torch.cuda.max_memory_allocated over the
timed steps.

Usage: eager_gpt.py --layers 24 --hidden 2048 --heads 16 --seq-len 2048 --batch-size 8
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


def main(argv):
    p = argparse.ArgumentParser(prog="eager_gpt.py", description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--steps", type=int, default=8, help="timed steps after the warm-up")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--dtype", default="bf16", choices=["fp32", "bf16", "fp16"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", default="")
    a = p.parse_args(argv)
    if a.hidden % a.heads or a.batch_size % a.microbatches:
        p.error("--heads must divide --hidden and --microbatches --batch-size")

    device = torch.device(a.device)
    torch.manual_seed(1234)
    model = Gpt(a.layers, a.hidden, a.heads, a.seq_len).to(device)
    decay = [q for q in model.parameters() if q.dim() >= 2]
    no_decay = [q for q in model.parameters() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.dtype)
    mb = a.batch_size // a.microbatches
    tokens = a.batch_size * a.seq_len
    params = sum(q.numel() for q in model.parameters())

    def step():
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
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss_total.item()

    times, losses = [], []
    for i in range(a.warmup + a.steps):
        if i == a.warmup and device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        losses.append(step())
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= a.warmup:
            times.append(time.perf_counter() - start)
    step_s = statistics.median(times)
    result = {
        "what": "pytorch eager", "torch": torch.__version__, "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else "",
        "layers": a.layers, "hidden": a.hidden, "heads": a.heads, "seq_len": a.seq_len,
        "batch_size": a.batch_size, "microbatches": a.microbatches, "dtype": a.dtype,
        "params": params, "step_s": step_s, "step_times_s": times,
        "tokens_per_s": tokens / step_s, "losses": losses,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(device)
        if device.type == "cuda" else 0,
    }
    print(f"eager_gpt: {params / 1e6:.0f}M parameters, {a.dtype}, step {step_s * 1e3:.1f} ms "
          f"(median of {len(times)}), {tokens / step_s:.0f} tokens/s, peak "
          f"{result['peak_allocated_bytes'] / 2**30:.2f} GiB")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
