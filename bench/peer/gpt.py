#!/usr/bin/env python3
"""conveyor's GPT or Llama trained with torch.distributed.pipelining, one process per rank.

The PyTorch side of the conveyor-vs-PyTorch comparison (bench/peer/compare). It runs inside
the Debian 13 root that bench/peer/setup builds (python3-torch 2.6), or on the host with pip's
current release (the reference environment's python), and rebuilds, in PyTorch's own
pipelining library, the job `conveyor train` runs:

  model   conveyor/nn/gpt.cc: byte vocabulary (256), token + position embedding, pre-norm
          blocks (LayerNorm, causal self-attention from one qkv linear, scores q k^T /
          sqrt(d) masked with -1e9, softmax, @ v, output projection, residual; LayerNorm,
          4x MLP with exact GELU, residual), final LayerNorm, LM head without bias. The
          initial weights are drawn like conveyor's (one CPU generator per layer, seeded
          with SplitMix64 of (seed, layer), the same normal draws in the same order).
          --model llama: conveyor/nn/llama.cc (RMSNorm in fp32, q/k/v/o without bias,
          rotate-half rotary embeddings, key-value heads repeated per group, causal
          scaled_dot_product_attention, SwiGLU MLP, untied head), each weight drawn N(0,
          0.02) from its own generator seeded by SplitMix64 over (seed, its Hugging Face
          name), as conveyor's TensorInitGenerator does; norms 1.
  loss    cross-entropy summed over a micro-batch, divided by the tokens of the whole batch,
          so the micro-batch losses add up to the batch's mean (conveyor's loss_denominator).
  data    conveyor/data: the fortune files' documents (--data; regular files that are not
          *.dat or *.u8, by name), cut into 4096-byte pieces, 5% held out by hash, the rest
          joined with "\\n%\\n"; batch `step` = batch_size windows of seq_len + 1 bytes
          whose starts are hashes of (seed, step, row): the same bytes conveyor trains on at
          that step, given the same corpus. (Trixie's fortunes package differs from
          bookworm's by two fortunes; bench/peer/compare binds the host's folder into the
          root and passes it with --data.)
  split   the embedding, the blocks and the head are `layers + 2` entries cut into
          contiguous stages with conveyor's partition (default: by parameter count, the
          lightest maximum, earliest cut on ties; or --partition even).
  optim   conveyor/optim/optimizer.cc: AdamW (betas 0.9/0.95, eps 1e-8, decoupled weight
          decay 0.1 on tensors of 2+ dimensions only), linear warm-up over 20 steps then
          cosine to 10% of lr at --steps, the global gradient norm (all ranks) clipped to 1.0
          with factor clip / (norm + 1e-6).

Schedules (PyTorch classes): gpipe = ScheduleGPipe and 1f1b = Schedule1F1B (one stage
per rank); interleaved-1f1b = ScheduleInterleaved1F1B, looped-bfs = ScheduleLoopedBFS,
interleaved-zb = ScheduleInterleavedZeroBubble (two stages per rank, rank r holding r and
r + pp); zb-v = ScheduleZBVZeroBubble and dualpipe-v = ScheduleDualPipeV (two stages per
rank in V placement: r and 2 pp - 1 - r; DualPipeV needs at least 2 pp micro-batches).
Every PipelineStage gets input_args / output_args (meta tensors of one micro-batch), so no
shape inference runs (--shape-inference runtime: none given).

The same script runs on Debian 13's python3-torch 2.6 (in the root) and on pip's current
release (the reference environment of scripts/reference-env, on the host). Where the two
differ it asks the installed library, not its version number:
  - a schedule whose class the installed torch lacks (dualpipe-v in 2.6) is refused before
    the process group starts: every rank prints "gpt.py: ... not in torch X", the launcher
    writes status "unsupported" into --out and exits 3;
  - scale_grads: newer schedules divide every gradient by the number of micro-batches unless
    given scale_grads=False (the default is True where the argument exists). The loss here is
    already summed over a micro-batch and divided by the tokens of the whole batch (conveyor's
    loss_denominator), so it is passed scale_grads=False wherever the constructor takes it
    (AdamW is nearly blind to a common gradient scale, but the gradient norm is not:
    bench/peer/compare checks the per-step norms against conveyor's);
  - stage_index_to_group_rank: 2.6's ScheduleZBVZeroBubble takes the V placement as an
    argument; newer V schedules compute it themselves. It is passed where the constructor
    takes it, and the placement the schedule ends up with is checked against this script's
    (a mismatch fails the run);
  - the example tensors of a PipelineStage: newer stages (those taking output_grads) read
    from input_args / output_args whether an activation carries a gradient, so there the
    floating-point examples are made with requires_grad=True (without it the first
    backward fails: "A GradientEdge root requires a gradient but got NoneType"); 2.6 gets
    the examples it always got.

--p2p-fix: PyTorch 2.6's schedules._batch_p2p returns `dist.batch_isend_irecv(ops).pop()`,
the last of the Works. NCCL coalesces a batch into one Work, but Gloo returns one Work per
send or receive, so the others are never waited for (PyTorch issue 132644, fixed upstream by
pull request 152938, which makes _batch_p2p return every Work and waits on all of them).
With --p2p-fix this script replaces the module attribute
torch.distributed.pipelining.schedules._batch_p2p, in this process only, with a function
that returns None for no ops and otherwise one object holding every Work that
batch_isend_irecv returned, whose wait() waits on each of them in order. In 2.6 every user
of _batch_p2p (including _sorted_batch_p2p, which looks it up in the module at call time)
only tests the result for truth and calls .wait() on it, so this is the upstream fix
without changing the callers. The packaged file stays untouched.
The fix is upstream in later releases: there _batch_p2p returns a list of every Work and the
schedules wait on each through schedules._wait_batch_p2p (pip's 2.15 also issues a batch of
only sends or only receives one by one). Where that function exists this script refuses
--p2p-fix (exit 3, status "unsupported": the bug it fixes is gone, and the replacement would
break the list-taking callers); the library as installed is then the run to compare.

Usage (inside the root, or with the reference environment's python on the host):
  python3 gpt.py --schedule 1f1b --pp 4 --steps 12 --out result.json [--p2p-fix]

The launcher (this script without RANK in its environment) starts --pp copies of itself with
RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT (a free
port), OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1 and MKL_NUM_THREADS=1 (pip's torch does
its CPU matrix products with MKL); each rank calls
torch.set_num_threads(1) and init_process_group("gloo"). Exit status: 0 on success, 1 when
a rank failed (each failure printed with its rank and traceback, and put into --out),
124 when no step finished for --timeout seconds (a hang: every rank's Python stack is
dumped into --out first), 2 for bad arguments, 3 when the installed torch cannot run what
was asked (a schedule it lacks, --p2p-fix where the fix is upstream).
"""

import argparse
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

SCHEDULES = {
    # conveyor name: (PyTorch 2.6 class name, stages per rank, placement)
    "gpipe": ("ScheduleGPipe", 1, "loop"),
    "1f1b": ("Schedule1F1B", 1, "loop"),
    "interleaved-1f1b": ("ScheduleInterleaved1F1B", 2, "loop"),
    "looped-bfs": ("ScheduleLoopedBFS", 2, "loop"),
    "interleaved-zb": ("ScheduleInterleavedZeroBubble", 2, "loop"),
    "zb-v": ("ScheduleZBVZeroBubble", 2, "v"),
    # Not in 2.6 (refused there: exit 3, status "unsupported").
    "dualpipe-v": ("ScheduleDualPipeV", 2, "v"),
}
UNSUPPORTED_EXIT = 3

FORTUNES_DIR = "/usr/share/games/fortunes"
VOCAB = 256
MASK64 = (1 << 64) - 1


# ---------------------------------------------------------------------------------------
# Arguments


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="gpt.py",
        description="conveyor's GPT under torch.distributed.pipelining (Gloo, CPU, one "
        "process per rank)",
    )
    p.add_argument("--schedule", default="1f1b", choices=sorted(SCHEDULES))
    p.add_argument("--pp", type=int, default=4, help="ranks (processes)")
    p.add_argument("--model", default="gpt", choices=["gpt", "llama"])
    p.add_argument("--kv-heads", type=int, default=0, help="llama: key-value heads (0 = heads)")
    p.add_argument("--intermediate", type=int, default=0,
                   help="llama: MLP units (0 = 8/3 hidden rounded up to a multiple of 8)")
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--layers", type=int, default=4, help="transformer blocks")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0, help="global grad-norm clip; 0 = off")
    p.add_argument("--partition", default="params", choices=["params", "even"],
                   help="how layers are cut into stages (conveyor's default: params)")
    p.add_argument("--data", default=FORTUNES_DIR, help="fortune directory")
    p.add_argument("--p2p-fix", action="store_true",
                   help="wait on every Work of a batched P2P (the fix of PyTorch PR 152938)")
    p.add_argument("--out", default="", help="JSON result file (written by the launcher)")
    p.add_argument("--timeout", type=float, default=0,
                   help="seconds without a finished step (counted from the start for the "
                   "first) before the launcher stops the ranks as hung; 0 = never")
    p.add_argument("--comm-timeout", type=float, default=1800,
                   help="Gloo's own timeout for any wait, seconds")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    p.add_argument("--shape-inference", default="static", choices=["static", "runtime"],
                   help="static: give every PipelineStage input_args / output_args (meta "
                   "tensors of one micro-batch); runtime: give none, PyTorch infers the shapes "
                   "in the first step")
    a = p.parse_args(argv)
    problems = []
    if a.pp < 1:
        problems.append(f"--pp must be at least 1, got {a.pp}")
    if a.layers < 1 or a.hidden < 1 or a.heads < 1 or a.seq_len < 1:
        problems.append("--layers, --hidden, --heads and --seq-len must be at least 1")
    elif a.hidden % a.heads:
        problems.append(f"--hidden ({a.hidden}) must be a multiple of --heads ({a.heads})")
    a.kv_heads = a.kv_heads or a.heads
    a.intermediate = a.intermediate or (8 * a.hidden // 3 + 7) // 8 * 8
    if a.heads % a.kv_heads:
        problems.append(f"--kv-heads ({a.kv_heads}) must divide --heads ({a.heads})")
    if a.microbatches < 1 or a.batch_size < a.microbatches:
        problems.append(f"--batch-size ({a.batch_size}) must be at least --microbatches "
                        f"({a.microbatches}) >= 1")
    elif a.batch_size % a.microbatches and a.shape_inference == "static":
        problems.append(f"--batch-size ({a.batch_size}) must be a multiple of --microbatches "
                        f"({a.microbatches}): stages get one fixed micro-batch shape")
    if a.steps < 1:
        problems.append(f"--steps must be at least 1, got {a.steps}")
    stages = a.pp * SCHEDULES[a.schedule][1]
    if stages > a.layers + 2:
        problems.append(f"cannot split {a.layers + 2} layers (embedding, {a.layers} blocks, "
                        f"head) into {stages} stages ({a.schedule} at pp {a.pp}): every stage "
                        f"needs at least one layer")
    if problems:
        p.error("; ".join(problems))
    return a


# ---------------------------------------------------------------------------------------
# conveyor's counter-based randomness (conveyor/data/stateless_random.cc, nn/layer.cc)


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def hash_of(values):
    h = 0x636F6E7665796F72  # "conveyor"
    for v in values:
        h = splitmix64(h ^ splitmix64(v & MASK64))
    return h


def uniform_index(h, n):
    return (h * n) >> 64


def layer_seed(seed, layer_index):
    """The seed conveyor's LayerInitGenerator gives the CPU generator of a layer."""
    z = (seed * 0x9E3779B97F4A7C15 + layer_index + 1) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


# ---------------------------------------------------------------------------------------
# Data: conveyor/data/corpus.cc and lm_stream.cc


def _is_blank(text):
    return not text.strip(b" \t\r\n\f\v")


def split_fortunes(content):
    """The fortunes of one file: text between lines that are exactly '%'."""
    fortunes, current = [], []

    def flush():
        text = b"".join(current)
        if text.endswith(b"\n"):
            text = text[:-1]
        if not _is_blank(text):
            fortunes.append(text)
        current.clear()

    lines = content.split(b"\n")
    if content.endswith(b"\n"):
        lines.pop()  # the text after the last newline is empty: no line
    for line in lines:
        if line == b"%":
            flush()
        else:
            current.append(line + b"\n")
    flush()
    return fortunes


def load_fortunes(directory):
    """Documents in corpus order: regular files (not symlinks, not *.dat / *.u8) sorted by
    name, each file's fortunes in file order."""
    if not os.path.isdir(directory):
        raise RuntimeError(f"fortune directory {directory} does not exist "
                           "(apt-get install fortunes fortunes-min)")
    names = []
    for entry in os.scandir(os.fsencode(directory)):
        if entry.is_symlink() or not entry.is_file(follow_symlinks=False):
            continue
        if os.path.splitext(entry.name)[1] in (b".dat", b".u8"):
            continue
        names.append(entry.name)
    documents = []
    for name in sorted(names):
        with open(os.path.join(os.fsencode(directory), name), "rb") as f:
            documents.extend(split_fortunes(f.read()))
    if not documents:
        raise RuntimeError(f"no fortunes in {directory}")
    return documents


class LmStream:
    PIECE_BYTES = 4096
    SPLIT_SALT = 0x6C6D2D73706C6974  # "lm-split"
    SAMPLE_SALT = 0x6C6D2D73616D706C  # "lm-sampl"

    def __init__(self, documents, seq_len, batch_size, seed, held_out_fraction=0.05,
                 separator=b"\n%\n"):
        self.seq_len, self.batch_size, self.seed = seq_len, batch_size, seed
        pieces = []  # (document, part, bytes)
        for d, text in enumerate(documents):
            for part, begin in enumerate(range(0, len(text), self.PIECE_BYTES)):
                pieces.append((d, part, text[begin:begin + self.PIECE_BYTES]))
        ranks = [hash_of((seed, self.SPLIT_SALT, d, part)) for d, part, _ in pieces]
        total = sum(len(t) for _, _, t in pieces)
        order = sorted(range(len(pieces)), key=lambda i: (ranks[i], i))
        held = [False] * len(pieces)
        held_bytes = 0
        k = 0
        while k + 1 < len(order) and held_bytes < held_out_fraction * total:
            held[order[k]] = True
            held_bytes += len(pieces[order[k]][2])
            k += 1
        sides = {False: [], True: []}
        last = {False: None, True: None}
        for i, (d, part, text) in enumerate(pieces):
            side, previous = sides[held[i]], last[held[i]]
            continues = previous is not None and previous[0] == d and previous[1] + 1 == part
            if previous is not None and not continues:
                side.append(separator)
            side.append(text)
            last[held[i]] = (d, part)
        self.train = b"".join(sides[False])
        self.held_out_bytes = sum(len(t) for t in sides[True])  # separators included
        if len(self.train) <= seq_len:
            raise RuntimeError(f"the train text has {len(self.train)} bytes, fewer than "
                               f"seq_len + 1 = {seq_len + 1}")

    def get(self, step):
        """(inputs, targets), each (batch_size, seq_len) int64."""
        import torch

        t = self.seq_len
        starts = len(self.train) - t
        rows = bytearray()
        for i in range(self.batch_size):
            s = uniform_index(hash_of((self.seed, self.SAMPLE_SALT, step, i)), starts)
            rows += self.train[s:s + t + 1]
        windows = torch.frombuffer(rows, dtype=torch.uint8).view(self.batch_size, t + 1)
        windows = windows.to(torch.int64)
        return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()


# ---------------------------------------------------------------------------------------
# Partition: conveyor/partition/partition.cc


def partition(costs, stages):
    """Contiguous slices [(begin, end)] of `costs` into `stages` non-empty parts whose
    heaviest part is as light as possible; the earliest cut wins ties."""
    n = len(costs)
    prefix = [0.0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(stages + 1)]
    cut = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for j in range(1, stages + 1):
        for i in range(j, n - (stages - j) + 1):
            for t in range(j - 1, i):
                load = max(best[j - 1][t], prefix[i] - prefix[t])
                if load < best[j][i]:
                    best[j][i], cut[j][i] = load, t
    ranges, end = [None] * stages, n
    for j in range(stages, 0, -1):
        ranges[j - 1] = (cut[j][end], end)
        end = cut[j][end]
    return ranges


def partition_evenly(n, stages):
    ranges, begin = [], 0
    for s in range(stages):
        size = n // stages + (1 if s < n % stages else 0)
        ranges.append((begin, begin + size))
        begin += size
    return ranges


def tensor_seed(seed, name):
    """The seed conveyor's TensorInitGenerator gives the CPU generator of tensor `name`."""
    def mix(x):
        z = x & MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)
    state = mix(seed * 0x9E3779B97F4A7C15 + 1)
    for byte in name.encode():
        state = mix(state * 0x9E3779B97F4A7C15 + byte + 1)
    return state


def layer_params(a):
    """Parameters of each entry: embedding, blocks, head."""
    c = a.hidden
    if a.model == "llama":
        kv = a.kv_heads * (c // a.heads)
        block = 2 * c + 2 * c * c + 2 * c * kv + 3 * c * a.intermediate
        return [VOCAB * c] + [block] * a.layers + [c + VOCAB * c]
    embedding = VOCAB * c + a.seq_len * c
    block = 12 * c * c + 13 * c
    head = 2 * c + VOCAB * c
    return [embedding] + [block] * a.layers + [head]


def stage_layout(a):
    """(number of stages, ranges per stage, {stage: rank})."""
    per_rank = SCHEDULES[a.schedule][1]
    num_stages = a.pp * per_rank
    costs = layer_params(a)
    if a.partition == "params":
        ranges = partition([float(x) for x in costs], num_stages)
    else:
        ranges = partition_evenly(len(costs), num_stages)
    if SCHEDULES[a.schedule][2] == "v":
        owner = {s: (s if s < a.pp else 2 * a.pp - 1 - s) for s in range(num_stages)}
    else:
        owner = {s: s % a.pp for s in range(num_stages)}
    return num_stages, ranges, owner


# ---------------------------------------------------------------------------------------
# Model: conveyor/nn/gpt.cc and transformer.cc


def build_layer_classes():
    import torch
    import torch.nn.functional as F
    from torch import nn

    def normal(gen, shape, std):
        return nn.Parameter(torch.normal(0.0, std, size=shape, generator=gen))

    def generator(seed, index):
        g = torch.Generator()
        g.manual_seed(layer_seed(seed, index))
        return g

    class Embedding(nn.Module):
        def __init__(self, a):
            super().__init__()
            gen = generator(a.seed, 0)
            self.wte = normal(gen, (VOCAB, a.hidden), 0.02)
            self.wpe = normal(gen, (a.seq_len, a.hidden), 0.01)

        def forward(self, ids):
            return F.embedding(ids, self.wte) + self.wpe[: ids.shape[1]].unsqueeze(0)

    class Block(nn.Module):
        def __init__(self, a, index):
            super().__init__()
            gen = generator(a.seed, index + 1)
            h = a.hidden
            proj_std = 0.02 / math.sqrt(2.0 * a.layers)
            self.heads = a.heads
            self.ln1_w = nn.Parameter(torch.ones(h))
            self.ln1_b = nn.Parameter(torch.zeros(h))
            self.qkv_w = normal(gen, (3 * h, h), 0.02)
            self.qkv_b = nn.Parameter(torch.zeros(3 * h))
            self.proj_w = normal(gen, (h, h), proj_std)
            self.proj_b = nn.Parameter(torch.zeros(h))
            self.ln2_w = nn.Parameter(torch.ones(h))
            self.ln2_b = nn.Parameter(torch.zeros(h))
            self.fc_w = normal(gen, (4 * h, h), 0.02)
            self.fc_b = nn.Parameter(torch.zeros(4 * h))
            self.fc2_w = normal(gen, (h, 4 * h), proj_std)
            self.fc2_b = nn.Parameter(torch.zeros(h))

        def attention(self, x):
            n, t, c = x.shape
            d = c // self.heads
            qkv = F.linear(x, self.qkv_w, self.qkv_b)
            q, k, v = (qkv[..., i * c:(i + 1) * c].reshape(n, t, self.heads, d).transpose(1, 2)
                       for i in range(3))
            scores = q.matmul(k.transpose(-2, -1)) / math.sqrt(d)
            allowed = torch.ones(t, t, dtype=torch.bool).tril().view(1, 1, t, t)
            scores = scores.masked_fill(allowed.logical_not(), -1e9)
            y = scores.softmax(-1).matmul(v).transpose(1, 2).reshape(n, t, c)
            return F.linear(y, self.proj_w, self.proj_b)

        def forward(self, x):
            c = x.shape[-1]
            out = x + self.attention(F.layer_norm(x, (c,), self.ln1_w, self.ln1_b))
            hidden = F.gelu(F.linear(F.layer_norm(out, (c,), self.ln2_w, self.ln2_b),
                                     self.fc_w, self.fc_b))
            return out + F.linear(hidden, self.fc2_w, self.fc2_b)

    class Head(nn.Module):
        def __init__(self, a):
            super().__init__()
            gen = generator(a.seed, a.layers + 1)
            self.ln_w = nn.Parameter(torch.ones(a.hidden))
            self.ln_b = nn.Parameter(torch.zeros(a.hidden))
            self.lm_w = normal(gen, (VOCAB, a.hidden), 0.02)

        def forward(self, x):
            return F.linear(F.layer_norm(x, (x.shape[-1],), self.ln_w, self.ln_b), self.lm_w)

    def drawn(seed, name, shape):
        g = torch.Generator()
        g.manual_seed(tensor_seed(seed, name))
        return normal(g, shape, 0.02)

    def rms_norm(x, weight):  # (..., C), in fp32
        x32 = x.float()
        return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype)

    class LlamaEmbedding(nn.Module):
        def __init__(self, a):
            super().__init__()
            self.weight = drawn(a.seed, "model.embed_tokens.weight", (VOCAB, a.hidden))

        def forward(self, ids):  # (n, T) -> (n, T, C)
            return F.embedding(ids, self.weight)

    class LlamaLayer(nn.Module):
        def __init__(self, a, i):
            super().__init__()
            c, d = a.hidden, a.hidden // a.heads
            self.heads, self.kv_heads, self.d, self.theta = a.heads, a.kv_heads, d, a.rope_theta
            p = f"model.layers.{i}."
            self.input_norm = nn.Parameter(torch.ones(c))
            self.q = drawn(a.seed, p + "self_attn.q_proj.weight", (c, c))
            self.k = drawn(a.seed, p + "self_attn.k_proj.weight", (a.kv_heads * d, c))
            self.v = drawn(a.seed, p + "self_attn.v_proj.weight", (a.kv_heads * d, c))
            self.o = drawn(a.seed, p + "self_attn.o_proj.weight", (c, c))
            self.mlp_norm = nn.Parameter(torch.ones(c))
            self.gate = drawn(a.seed, p + "mlp.gate_proj.weight", (a.intermediate, c))
            self.up = drawn(a.seed, p + "mlp.up_proj.weight", (a.intermediate, c))
            self.down = drawn(a.seed, p + "mlp.down_proj.weight", (c, a.intermediate))

        def rotate(self, x):  # (n, heads, T, d): pair (j, j + d/2) turned by t theta^(-2j/d)
            t, d = x.shape[2], self.d
            inv_freq = 1.0 / self.theta ** (torch.arange(0, d, 2).float() / d)
            angles = torch.outer(torch.arange(t).float(), inv_freq)
            angles = torch.cat([angles, angles], dim=-1)  # (T, d)
            rotated = torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1)
            return x * angles.cos() + rotated * angles.sin()

        def forward(self, x):  # (n, T, C) -> (n, T, C)
            n, t, c = x.shape
            h = rms_norm(x, self.input_norm)
            q = self.rotate(F.linear(h, self.q).view(n, t, self.heads, self.d).transpose(1, 2))
            k = self.rotate(F.linear(h, self.k).view(n, t, self.kv_heads, self.d).transpose(1, 2))
            v = F.linear(h, self.v).view(n, t, self.kv_heads, self.d).transpose(1, 2)
            group = self.heads // self.kv_heads
            k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (n, H, T, d)
            out = x + F.linear(y.transpose(1, 2).reshape(n, t, c), self.o)
            h = rms_norm(out, self.mlp_norm)
            return out + F.linear(F.silu(F.linear(h, self.gate)) * F.linear(h, self.up), self.down)

    class LlamaHead(nn.Module):
        def __init__(self, a):
            super().__init__()
            self.norm = nn.Parameter(torch.ones(a.hidden))
            self.weight = drawn(a.seed, "lm_head.weight", (VOCAB, a.hidden))

        def forward(self, x):  # (n, T, C) -> (n, T, V)
            return F.linear(rms_norm(x, self.norm), self.weight)

    class StageModule(nn.Module):
        """Layers [begin, end) of the model, applied in order."""

        def __init__(self, a, begin, end):
            super().__init__()
            first, block, last = ((LlamaEmbedding, LlamaLayer, LlamaHead) if a.model == "llama"
                                  else (Embedding, Block, Head))
            layers = []
            for index in range(begin, end):
                if index == 0:
                    layers.append(first(a))
                elif index == a.layers + 1:
                    layers.append(last(a))
                else:
                    layers.append(block(a, index - 1))
            self.layers = nn.ModuleList(layers)

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    return StageModule


# ---------------------------------------------------------------------------------------
# The P2P fix


class _EveryWork:
    """Every Work of one batch_isend_irecv call; wait() waits on each of them."""

    def __init__(self, works):
        self.works = list(works)

    def wait(self, *args, **kwargs):
        for work in self.works:
            work.wait(*args, **kwargs)
        return True

    def __bool__(self):
        return True


class Unsupported(Exception):
    """The installed torch cannot run what was asked (exit 3, status "unsupported")."""


def check_supported(a):
    """Raises Unsupported when the schedule's class is missing or --p2p-fix does not apply."""
    import torch
    from torch.distributed.pipelining import schedules

    name = SCHEDULES[a.schedule][0]
    if not hasattr(schedules, name):
        raise Unsupported(f"{a.schedule}: {name} is not in torch {torch.__version__}")
    if a.p2p_fix and hasattr(schedules, "_wait_batch_p2p"):
        raise Unsupported(
            f"--p2p-fix: torch {torch.__version__} already waits on every Work of a batched "
            "P2P (schedules._wait_batch_p2p, the fix of PR 152938): nothing to fix; run it "
            "as installed")


def schedule_kwargs(a, cls, owner):
    """scale_grads=False, and a V schedule's placement, where the constructor takes them."""
    import inspect

    params = inspect.signature(cls.__init__).parameters
    kwargs = {}
    if "scale_grads" in params:
        kwargs["scale_grads"] = False  # loss_fn already divides by the batch's tokens
    if SCHEDULES[a.schedule][2] == "v" and "stage_index_to_group_rank" in params:
        kwargs["stage_index_to_group_rank"] = owner
    return kwargs


def apply_p2p_fix():
    import torch.distributed as dist
    from torch.distributed.pipelining import schedules

    def batch_p2p_every_work(p2p_ops, desc=None):
        if len(p2p_ops) == 0:
            return None
        return _EveryWork(dist.batch_isend_irecv(p2p_ops))

    batch_p2p_every_work.__doc__ = "bench/peer/gpt.py --p2p-fix: waits on every Work"
    schedules._batch_p2p = batch_p2p_every_work


# ---------------------------------------------------------------------------------------
# One rank


def lr_at(a, step):
    if a.warmup_steps > 0 and step <= a.warmup_steps:
        return a.lr * step / a.warmup_steps
    span = max(1, a.steps - a.warmup_steps)
    progress = min(1.0, (step - a.warmup_steps) / span)
    floor = a.lr * a.min_lr_ratio
    return floor + 0.5 * (a.lr - floor) * (1 + math.cos(math.pi * progress))


def run_rank(a, rank, world, result_path, progress_path):
    import datetime
    import inspect

    import torch
    import torch.distributed as dist
    from torch.distributed import pipelining

    check_supported(a)  # before the process group: every rank refuses alike
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=a.comm_timeout))
    if a.p2p_fix:
        apply_p2p_fix()

    num_stages, ranges, owner = stage_layout(a)
    mine = [s for s in range(num_stages) if owner[s] == rank]
    if SCHEDULES[a.schedule][2] == "v":
        mine = sorted(mine)  # [r, 2p - 1 - r]
    StageModule = build_layer_classes()
    mb = a.batch_size // a.microbatches
    meta = torch.device("meta")

    # Newer PipelineStages (those taking output_grads) read from the example tensors whether
    # an activation carries a gradient: an output whose example has requires_grad=False gets
    # no gradient receive, and its backward fails ("A GradientEdge root requires a gradient
    # but got NoneType"). 2.6 sets that itself and gets the examples it always got.
    marks_grad = "output_grads" in inspect.signature(pipelining.PipelineStage.__init__).parameters

    def boundary(s):  # the tensor entering stage s, one micro-batch
        if s == 0:
            return torch.empty(mb, a.seq_len, dtype=torch.int64, device=meta)
        return torch.empty(mb, a.seq_len, a.hidden, device=meta, requires_grad=marks_grad)

    def output(s):
        if s == num_stages - 1:
            return torch.empty(mb, a.seq_len, VOCAB, device=meta, requires_grad=marks_grad)
        return torch.empty(mb, a.seq_len, a.hidden, device=meta, requires_grad=marks_grad)

    modules, stages = [], []
    for s in mine:
        module = StageModule(a, *ranges[s])
        modules.append(module)
        if a.shape_inference == "static":
            stages.append(pipelining.PipelineStage(
                module, s, num_stages, torch.device("cpu"),
                input_args=(boundary(s),), output_args=(output(s),)))
        else:
            stages.append(pipelining.PipelineStage(module, s, num_stages, torch.device("cpu")))

    tokens = a.batch_size * a.seq_len  # every target counts (no padding in train batches)

    def loss_fn(logits, targets):
        return torch.nn.functional.cross_entropy(
            logits.reshape(-1, VOCAB), targets.reshape(-1), reduction="sum",
            ignore_index=-1) / tokens

    cls = getattr(pipelining.schedules, SCHEDULES[a.schedule][0])
    extra = schedule_kwargs(a, cls, owner)
    schedule = cls(stages[0] if SCHEDULES[a.schedule][1] == 1 else stages,
                   n_microbatches=a.microbatches, loss_fn=loss_fn, **extra)
    stage_ranks = getattr(schedule, "stage_index_to_group_rank", None)
    if stage_ranks is not None and len(stage_ranks) == num_stages and [
            stage_ranks[s] for s in range(num_stages)] != [
            owner[s] for s in range(num_stages)]:
        raise RuntimeError(f"{SCHEDULES[a.schedule][0]} places the stages on ranks "
                           f"{[stage_ranks[s] for s in range(num_stages)]}, this script on "
                           f"{[owner[s] for s in range(num_stages)]}")

    params = [p for m in modules for p in m.parameters()]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": a.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=a.lr, betas=(0.9, 0.95), eps=1e-8, foreach=False, fused=False)

    documents = load_fortunes(a.data)
    stream = LmStream(documents, a.seq_len, a.batch_size, a.seed)
    has_first = 0 in mine
    has_last = num_stages - 1 in mine

    local_params = torch.tensor([float(sum(p.numel() for p in params))], dtype=torch.float64)
    dist.all_reduce(local_params)
    pids = torch.zeros(world, dtype=torch.int64)
    pids[rank] = os.getpid()
    dist.all_reduce(pids)
    if rank == 0:
        parts = " | ".join(str(e - b) for b, e in ranges)
        print(f"gpt.py: {a.model}: {a.layers} blocks, hidden {a.hidden}, {a.heads} heads, "
              f"{int(local_params.item())} parameters; corpus {a.data}: {len(documents)} "
              f"documents, {sum(map(len, documents))} bytes ({len(stream.train)} train / "
              f"{stream.held_out_bytes} held out); torch {torch.__version__}", file=sys.stderr)
        print(f"gpt.py: pipeline: {a.schedule} ({SCHEDULES[a.schedule][0]}), {a.pp} ranks, "
              f"{num_stages} stages, {a.microbatches} micro-batches; layers per stage {parts}"
              f" (by {a.partition}); p2p fix {'on' if a.p2p_fix else 'off'}; "
              f"{', '.join(f'{k}={v}' for k, v in extra.items() if k == 'scale_grads') or 'no scale_grads'}",
              file=sys.stderr)

    rows = []
    for step in range(a.steps):
        dist.barrier()
        start = time.perf_counter()
        # Like conveyor's Trainer::Step: zero the gradients, build the batch, run the
        # pipeline, then norm, clip, AdamW and the loss all-reduce.
        optimizer.zero_grad(set_to_none=True)
        inputs, targets = stream.get(step)
        losses = [] if has_last else None
        args = (inputs,) if has_first else ()
        if has_last:
            schedule.step(*args, target=targets, losses=losses)
        else:
            schedule.step(*args)
        # Global gradient norm over every rank's parameters, then clip (conveyor's order).
        with torch.no_grad():
            sq = torch.zeros(1, dtype=torch.float64)
            for p in params:
                if p.grad is not None:
                    sq += p.grad.to(torch.float64).pow(2).sum()
            dist.all_reduce(sq)
            norm = math.sqrt(sq.item())
            if a.clip > 0 and norm > a.clip:
                factor = a.clip / (norm + 1e-6)
                for p in params:
                    if p.grad is not None:
                        p.grad.mul_(factor)
        lr = lr_at(a, step + 1)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.step()
        loss = torch.tensor([sum(float(x) for x in losses) if has_last else 0.0],
                            dtype=torch.float64)
        dist.all_reduce(loss)
        seconds = time.perf_counter() - start
        rows.append({"step": step + 1, "loss": loss.item(), "lr": lr, "grad_norm": norm,
                     "seconds": seconds})
        if rank == 0:
            print(f"gpt.py: step {step + 1}/{a.steps} loss {loss.item():.4f} "
                  f"{seconds:.3f} s", file=sys.stderr, flush=True)
            with open(progress_path, "w") as f:  # the launcher's hang watch
                f.write(str(step + 1))

    dist.barrier()
    if rank == 0:
        result = {
            "system": "pytorch",
            "torch_version": torch.__version__,
            "schedule": a.schedule,
            "schedule_class": SCHEDULES[a.schedule][0],
            "pp": a.pp,
            "stages": num_stages,
            "stage_ranks": [owner[s] for s in range(num_stages)],
            "layers_per_stage": [e - b for b, e in ranges],
            "partition": a.partition,
            "p2p_fix": a.p2p_fix,
            "scale_grads": extra.get("scale_grads"),  # None: the constructor has no such flag
            "parameters": int(local_params.item()),
            "corpus": {"path": a.data, "documents": len(documents),
                       "bytes": sum(map(len, documents)), "train_bytes": len(stream.train),
                       "held_out_bytes": stream.held_out_bytes},
            "config": {k: getattr(a, k) for k in (
                "layers", "hidden", "heads", "seq_len", "batch_size", "microbatches", "steps",
                "seed", "lr", "warmup_steps", "min_lr_ratio", "weight_decay", "clip",
                "threads")},
            "pids": [int(x) for x in pids.tolist()],
            "steps": rows,
        }
        with open(result_path, "w") as f:
            json.dump(result, f, indent=1)
    dist.destroy_process_group()


def rank_main(a):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    work = os.environ["CONVEYOR_PEER_WORKDIR"]
    import faulthandler

    stacks = open(os.path.join(work, f"stack-{rank}.txt"), "w")
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    try:
        run_rank(a, rank, world, os.path.join(work, "result.json"),
                 os.path.join(work, "progress"))
    except Unsupported as e:
        with open(os.path.join(work, f"error-{rank}.json"), "w") as f:
            json.dump({"rank": rank, "error": str(e), "unsupported": True,
                       "time": time.time()}, f)
        if rank == 0:
            print(f"gpt.py: {e}", file=sys.stderr, flush=True)
        os._exit(UNSUPPORTED_EXIT)
    except BaseException as e:  # noqa: BLE001 - every failure is reported with its rank
        text = traceback.format_exc()
        with open(os.path.join(work, f"error-{rank}.json"), "w") as f:
            json.dump({"rank": rank, "error": f"{type(e).__name__}: {e}", "traceback": text,
                       "time": time.time()}, f)
        print(f"gpt.py: rank {rank} failed: {type(e).__name__}: {e}\n{text}", file=sys.stderr,
              flush=True)
        os._exit(1)  # skip the process group's destructor: a peer may be gone
    return 0


# ---------------------------------------------------------------------------------------
# Launcher


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(a, argv):
    work = tempfile.mkdtemp(prefix="conveyor-peer-")
    port = free_port()
    base = {k: v for k, v in os.environ.items()
            if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
    base.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                 "WORLD_SIZE": str(a.pp), "LOCAL_WORLD_SIZE": str(a.pp),
                 "OMP_NUM_THREADS": str(a.threads), "OPENBLAS_NUM_THREADS": str(a.threads),
                 "MKL_NUM_THREADS": str(a.threads),
                 "CONVEYOR_PEER_WORKDIR": work, "PYTHONUNBUFFERED": "1",
                 # Debian's torch is built without libuv: the TCPStore must not ask for it
                 "USE_LIBUV": "0",
                 # the ranks talk over 127.0.0.1 only
                 "GLOO_SOCKET_IFNAME": "lo"})
    procs = []
    progress = os.path.join(work, "progress")
    stopping = {"signal": None}

    def on_signal(signum, frame):
        stopping["signal"] = signum

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    start = time.monotonic()
    for r in range(a.pp):
        env = dict(base, RANK=str(r), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv,
                                      env=env))
    status, first_failure = "ok", None
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            break
        failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
        if failed and first_failure is None:
            first_failure = time.monotonic()
        if first_failure is not None and time.monotonic() - first_failure > 10:
            status = "failed"
            break  # the survivors wait for a peer that is gone
        if stopping["signal"] is not None:
            status = "interrupted"
            break
        if a.timeout > 0 and time.monotonic() - start > a.timeout:
            # Stalled: no step finished for --timeout seconds (rank 0 writes `progress`).
            try:
                stalled = time.time() - os.path.getmtime(progress) > a.timeout
            except OSError:
                stalled = True
            if stalled:
                status = "hang"
                break
        time.sleep(0.05)
    alive = [p for p in procs if p.poll() is None]
    if status == "hang":
        for p in alive:
            p.send_signal(signal.SIGUSR1)  # faulthandler: each rank's Python stack
        time.sleep(1.0)
    for p in alive:
        p.terminate()
    deadline = time.monotonic() + 5
    for p in alive:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    codes = [p.returncode for p in procs]
    errors = []
    for r in range(a.pp):
        path = os.path.join(work, f"error-{r}.json")
        if os.path.exists(path):
            with open(path) as f:
                errors.append(json.load(f))
    errors.sort(key=lambda e: e.get("time", 0))  # the first failure first
    stacks = {}
    if status == "hang":
        for r in range(a.pp):
            path = os.path.join(work, f"stack-{r}.txt")
            if os.path.exists(path) and os.path.getsize(path) > 0:
                with open(path) as f:
                    stacks[str(r)] = f.read()
    result_path = os.path.join(work, "result.json")
    result = {}
    if os.path.exists(result_path):
        with open(result_path) as f:
            result = json.load(f)
    if status == "ok" and (any(codes) or not result):
        status = "failed"
    if errors and all(e.get("unsupported") for e in errors) and len(errors) == a.pp:
        status = "unsupported"
    result.update({"status": status, "exit_codes": codes, "errors": errors,
                   "launcher_seconds": time.monotonic() - start})
    if stacks:
        result["stacks"] = stacks
    if "schedule" not in result:
        result.update({"system": "pytorch", "schedule": a.schedule,
                       "schedule_class": SCHEDULES[a.schedule][0], "pp": a.pp,
                       "p2p_fix": a.p2p_fix})
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    for name in os.listdir(work):
        os.unlink(os.path.join(work, name))
    os.rmdir(work)
    if status == "hang":
        print(f"gpt.py: {a.schedule} pp {a.pp}: no step finished in {a.timeout:.0f} s (a "
              "hang); stopped the ranks", file=sys.stderr)
        for r, text in sorted(stacks.items()):
            where = [line for line in text.splitlines() if line.strip().startswith("File")]
            if where:
                print(f"gpt.py: rank {r} was at: {where[0].strip()}", file=sys.stderr)
        return 124
    if status == "interrupted":
        print("gpt.py: interrupted; stopped the ranks", file=sys.stderr)
        return 130
    if status == "unsupported":
        return UNSUPPORTED_EXIT  # rank 0 printed why
    if status != "ok":
        for i, e in enumerate(errors):
            first = " (first to fail)" if i == 0 and len(errors) > 1 else ""
            print(f"gpt.py: rank {e['rank']}{first}: {e['error']}", file=sys.stderr)
        if not errors:
            print(f"gpt.py: ranks exited with {codes}", file=sys.stderr)
        return 1
    return 0


def main():
    argv = sys.argv[1:]
    a = parse_args(argv)
    if os.environ.get("CONVEYOR_PEER_WORKDIR") and "RANK" in os.environ:
        return rank_main(a)
    return launch(a, argv)


if __name__ == "__main__":
    sys.exit(main())
