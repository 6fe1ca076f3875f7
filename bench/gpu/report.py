#!/usr/bin/env python3
"""The tables of docs/BENCHMARKS.md "On an H100" from what scripts/gpu-run wrote.

Usage: report.py RESULTS...   (results folders of scripts/gpu-run, env.txt in or beside
each; where several hold a file, the last one's is used: a rerun's over the first run's)

Reads peak.json (the card's measured bf16 rate); for the GPT model.json (layers, hidden,
heads, seq_len, batch_size, microbatches), eager.json and eager-no-foreach.json
(bench/gpu/eager.py), bench.json (`conveyor bench train` rows), train-pp4.json and
train-pp1.json (`conveyor train --metrics`) with trace-pp1/rank-0.json (its phases); for the
Llama llama-model.json, eager-llama.json (eager-llama-2.json: a second run, and
eager-hf-llama.json: transformers' model) and bench-llama.json; bench-cached.json (the GPT
with --cache-weight-casts), train-pp1-foreach.json and train-pp1-loop.json with their
traces (AdamW's other kernels); moe-model.json and bench-moe.json (a Mixture-of-Experts
Llama); bf16.json and fp16.json. Whatever is missing is left out of the tables. Model FLOPs
per token: 6 N + 12 L C T (N parameters, of a Mixture-of-Experts model those a token passes
through, L blocks, C hidden, T sequence; the attention's products counted whole, as
Megatron's and PaLM's MFU do); MFU = achieved / measured peak.
"""

import json
import os
import sys

VOCAB = 256


def find(folders, name):
    """The path of `name` in the last of `folders` that holds it (or beside it), or None."""
    for folder in reversed(folders):
        for path in (os.path.join(folder, name),
                     os.path.join(os.path.dirname(os.path.abspath(folder)), name)):
            if os.path.exists(path):
                return path
    return None


def load(folders, name):
    path = find(folders, name)
    if path is None or not name.endswith(".json"):
        return None
    with open(path) as f:
        return json.load(f)


def gpt_params(layers, c, seq_len):
    block = 12 * c * c + 13 * c
    return layers * block + VOCAB * c + seq_len * c + 2 * c + VOCAB * c


def llama_params(layers, c, heads, kv_heads, intermediate):
    kv = c // heads * kv_heads
    intermediate = intermediate or (8 * c // 3 + 7) // 8 * 8
    block = 2 * c * c + 2 * c * kv + 3 * c * intermediate + 2 * c
    return layers * block + 2 * VOCAB * c + c


def moe_params(shape):
    """(all, active a token) parameters of the Mixture-of-Experts Llama of moe-model.json:
    every block's MLP is `experts` SwiGLU experts of `expert_units`, `top_k` a token, and a
    router."""
    c, layers = shape["hidden"], shape["layers"]
    kv = c // shape["heads"] * shape["kv_heads"]
    attention = 2 * c * c + 2 * c * kv + 2 * c + c * shape["experts"]
    expert = 3 * c * shape["expert_units"]
    rest = 2 * VOCAB * c + c
    return (layers * (attention + shape["experts"] * expert) + rest,
            layers * (attention + shape["top_k"] * expert) + rest)


def model_table(lines, name, shape, n, eager, bench, peak_tflops, targets=None):
    """Appends `name`'s description, its table (eager and conveyor's rows) and the checks of
    its targets; n is its parameter count (a token's, for a Mixture-of-Experts model).
    targets: {"eager": least pp 1 / eager tokens/s, "mfu": least pp 1 MFU, "pp": least pp 4 /
    pp 1 tokens/s}, each checked where given."""
    targets = targets or {}
    layers, hidden, seq_len = shape["layers"], shape["hidden"], shape["seq_len"]
    flops_per_token = 6 * n + 12 * layers * hidden * seq_len
    heads = f"{shape['heads']} heads"
    if shape.get("kv_heads", shape["heads"]) != shape["heads"]:
        heads += f" sharing {shape['kv_heads']} key-value heads"
    lines.append(f"Model: {name}, {layers} blocks x hidden {hidden}, {heads}, "
                 f"sequence {seq_len}, {n / 1e9:.2f} B parameters; batch {shape['batch_size']} "
                 f"sequences in {shape['microbatches']} micro-batches; bf16 autocast, fp32 "
                 f"master weights; {flops_per_token / 1e9:.1f} GFLOP per token.\n")

    def rate_cells(tokens_per_s):
        tflops = tokens_per_s * flops_per_token / 1e12
        mfu = f"{100 * tflops / peak_tflops:.1f}%" if peak_tflops else ""
        return [f"{tflops:.0f}", mfu]

    def peak_gib(row):
        ranks = row.get("ranks") or []
        peaks = [r.get("device_peak_allocated_bytes", 0) for r in ranks]
        return f"{max(peaks) / 2**30:.1f}" if peaks and max(peaks) > 0 else ""

    header = ["run", "step ms", "tokens/s", "TFLOP/s", "MFU", "peak GiB", "bubble",
              "predicted", "vs eager"]
    rows = []
    eager_tps = eager["tokens_per_s"] if eager else None
    if eager:
        rows.append([targets.get("eager_name", "PyTorch eager") + " (one process)",
                     f"{1e3 * eager['step_s']:.0f}",
                     f"{eager_tps:.0f}"] + rate_cells(eager_tps) +
                    [f"{eager['peak_allocated_bytes'] / 2**30:.1f}", "", "", "1.00x"])
    single = None
    for row in bench:
        if "skipped" in row:
            rows.append([row["schedule"], "skipped: " + row["skipped"]] + [""] * 7)
            continue
        tps = row["tokens_per_s"]
        if row["schedule"] == "single process":
            single = row
            label = "conveyor pp 1 (one process)"
            bubble = ["", ""]
        else:
            label = f"conveyor pp {row['pp']} {row['schedule']} (rank threads)"
            bubble = [f"{100 * row['measured_bubble_fraction']:.1f}%",
                      f"{100 * row['predicted_bubble_fraction']:.1f}%"]
        rows.append([label, f"{1e3 * row['step_s']:.0f}", f"{tps:.0f}"] + rate_cells(tps) +
                    [peak_gib(row)] + bubble +
                    [f"{tps / eager_tps:.2f}x" if eager_tps else ""])
    append_table(lines, "", header, rows)
    checks = []

    def check(what, value, least, unit="x"):
        checks.append(f"{what}: {value:.2f}{unit} (target >= {least:.2f}{unit}): "
                      + ("met" if value >= least else "NOT met"))

    if single and eager_tps and "eager" in targets:
        check(f"conveyor pp 1 / {targets.get('eager_name', 'PyTorch eager')} tokens/s",
              single["tokens_per_s"] / eager_tps, targets["eager"])
    if single and peak_tflops and "mfu" in targets:
        mfu = single["tokens_per_s"] * flops_per_token / 1e12 / peak_tflops
        check("conveyor pp 1 MFU", 100 * mfu, 100 * targets["mfu"], "%")
    if single and "pp" in targets:
        best = max((row for row in bench if row.get("pp", 1) > 1 and "tokens_per_s" in row),
                   key=lambda row: row["tokens_per_s"], default=None)
        if best:
            check(f"pp {best['pp']} {best['schedule']} (the best schedule) / pp 1 tokens/s",
                  best["tokens_per_s"] / single["tokens_per_s"], targets["pp"])
    lines += ["- " + c for c in checks]
    if checks:
        lines.append("")


def append_table(lines, intro, header, rows):
    """Appends `intro` (where not empty), then a Markdown table of `header` and `rows`, where
    there are rows."""
    if not rows:
        return
    if intro:
        lines.append(intro + "\n")
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines.append("")


def trace_phases(path):
    """Seconds per phase name ("optimizer", "grad norm", ...) in a Chrome trace of one rank."""
    with open(path) as f:
        events = json.load(f)
    events = events.get("traceEvents", events) if isinstance(events, dict) else events
    phases = {}
    for e in events:
        if e.get("cat") == "phase" and e.get("ph") == "X":
            phases[e["name"]] = phases.get(e["name"], 0.0) + e["dur"] / 1e6
    return phases


def step_parts(lines, folder):
    """Where one step's time goes: eager's parts (with and without foreach) against conveyor's
    pp 1 (the schedule's compute, then each phase after it) under each AdamW kernel."""
    rows = []
    for name, label in (("eager.json", "PyTorch eager, foreach"),
                        ("eager-no-foreach.json", "PyTorch eager, one kernel per tensor")):
        e = load(folder, name)
        if e and "part_s" in e:
            p = e["part_s"]
            rows.append([label, f"{1e3 * e['step_s']:.0f}", f"{1e3 * p['forward_backward']:.0f}",
                         f"{1e3 * p['norm_clip']:.0f}", f"{1e3 * p['optimizer']:.0f}"])
    for suffix in ("", "-foreach", "-loop"):
        trained = load(folder, f"train-pp1{suffix}.json")
        trace = find(folder, f"trace-pp1{suffix}/rank-0.json")
        if not (trained and trace):
            continue
        r = trained["ranks"][0]
        phases = trace_phases(trace)
        # Runs before the metrics named the kernel had only the per-tensor loop.
        label = f"conveyor pp 1, AdamW {trained.get('adamw_kernel', 'loop')}"
        rows.append([label + " (last step)",
                     f"{1e3 * (r['step_s'] + sum(phases.values())):.0f}",
                     f"{1e3 * r['compute_s']:.0f} (schedule {1e3 * r['step_s']:.0f})",
                     f"{1e3 * phases.get('grad norm', 0):.1f}",
                     f"{1e3 * phases.get('optimizer', 0):.1f}"])
    append_table(lines, "Where a GPT step goes (ms; eager: medians, each part ended by a "
                 "synchronisation):", ["run", "step", "forward + backward", "norm (and clip)",
                                       "optimizer"], rows)


def startup_table(lines, folder):
    """Each `conveyor train` run's start-up, phase by phase (rank 0's, and the slowest
    rank's total), from the ranks' "startup" in its metrics."""
    rows = []
    phases = ["process_s", "rendezvous_s", "device_s", "data_s", "model_s", "first_step_s"]
    for name, label in (("train-pp1.json", "GPT pp 1"), ("train-pp4.json", "GPT pp 4, rank threads"),
                        ("train-pp1-foreach.json", "GPT pp 1, AdamW foreach"),
                        ("train-pp1-loop.json", "GPT pp 1, AdamW loop")):
        m = load(folder, name)
        if not m or not m.get("ranks") or "startup" not in m["ranks"][0]:
            continue
        first = m["ranks"][0]
        slowest = max(r["startup"]["total_s"] for r in m["ranks"])
        rows.append([label] + [f"{first['startup'][p]:.2f}" for p in phases] +
                     [f"{first['step_s']:.2f}", f"{first['startup']['total_s']:.2f}",
                      f"{slowest:.2f}"])
    append_table(lines, "Start-up of rank 0, seconds a phase (the first step whole, beside a "
                 "later one), from each run's --metrics:",
                 ["run", "process", "rendezvous", "device", "data", "model", "first step",
                  "a later step", "total", "slowest rank's"], rows)


def cached_casts(lines, folder):
    """The GPT's bench rows with each weight cast once an update, against bench.json's."""
    plain = {r["schedule"]: r for r in load(folder, "bench.json") or [] if "tokens_per_s" in r}
    rows = []
    for row in load(folder, "bench-cached.json") or []:
        if "tokens_per_s" not in row or row["schedule"] not in plain:
            continue
        before = plain[row["schedule"]]
        rows.append([row["schedule"], f"{1e3 * before['step_s']:.0f}", f"{1e3 * row['step_s']:.0f}",
                     f"{row['tokens_per_s'] / before['tokens_per_s']:.3f}x"])
    append_table(lines, "The GPT with --cache-weight-casts (step ms without and with; "
                 "tokens/s ratio):", ["run", "cast by each product", "cached", "ratio"], rows)


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    folder = argv
    lines = []
    env_path = find(folder, "env.txt")
    if env_path:
        lines.append("Machine (scripts/gpu-run's env.txt):\n")
        lines += ["    " + l.rstrip() for l in open(env_path)]
        lines.append("")
    peak = load(folder, "peak.json")
    eager = load(folder, "eager.json")
    bench = load(folder, "bench.json") or []
    peak_tflops = peak["bf16_tflops"] if peak else None
    if peak:
        lines.append(f"Measured peak: bf16 {peak['n']}^3 matrix product, "
                     f"{peak_tflops:.0f} TFLOP/s (median of 10).\n")

    shape = load(folder, "model.json") or eager
    if shape:
        n = gpt_params(shape["layers"], shape["hidden"], shape["seq_len"])
        model_table(lines, "GPT", shape, n, eager, bench, peak_tflops,
                    {"eager": 1.0, "mfu": 0.5, "pp": 1.1})
    step_parts(lines, folder)
    cached_casts(lines, folder)
    startup_table(lines, folder)
    eager_llama = load(folder, "eager-llama.json")
    shape = load(folder, "llama-model.json") or eager_llama
    if shape:
        n = llama_params(shape["layers"], shape["hidden"], shape["heads"], shape["kv_heads"],
                         shape["intermediate"])
        hf = load(folder, "eager-hf-llama.json")
        model_table(lines, "Llama", shape, n, hf or eager_llama,
                    load(folder, "bench-llama.json") or [], peak_tflops,
                    {"eager": 1.05, "eager_name": "transformers' LlamaForCausalLM", "pp": 1.1}
                    if hf else {"pp": 1.1})
    shape = load(folder, "moe-model.json")
    if shape:
        total, active = moe_params(shape)
        lines.append(f"Mixture of experts: {shape['experts']} experts of {shape['expert_units']} "
                     f"units, top {shape['top_k']}; {total / 1e9:.2f} B parameters in all "
                     "(the FLOPs below count those a token passes through).\n")
        model_table(lines, "MoE Llama (its parameters a token passes through)", shape, active, None, load(folder, "bench-moe.json") or [],
                    peak_tflops)

    yardsticks = [(label, load(folder, name)) for name, label in (
        ("eager-llama.json", "eager.py's Llama"), ("eager-llama-2.json", "eager.py's Llama, again"),
        ("eager-hf-llama.json", "transformers' LlamaForCausalLM"))]
    yardsticks = [(label, e) for label, e in yardsticks if e]
    if len(yardsticks) > 1:
        lines.append("PyTorch eager Llamas (step ms, median; each timed step's ms):\n")
        lines += [f"- {label} {e.get('transformers', '')}: {1e3 * e['step_s']:.0f} ms; "
                  + ", ".join(f"{1e3 * t:.0f}" for t in e["step_times_s"]) for label, e in yardsticks]
        lines.append("")

    trained = load(folder, "train-pp4.json")
    if trained:
        peaks = [r.get("device_peak_allocated_bytes", 0) for r in trained.get("ranks", [])]
        lines.append(f"`conveyor train` pp {trained['pp']} {trained['schedule']} (trace run): "
                     f"bubble measured {100 * trained['measured_bubble_fraction']:.1f}%, "
                     f"predicted {100 * trained['predicted_bubble_fraction']:.1f}%; peak "
                     f"allocated {max(peaks or [0]) / 2**30:.1f} GiB.\n")

    curves = {d: load(folder, f"{d}.json") for d in ("bf16", "fp16")}
    if any(curves.values()):
        lines.append("| dtype | steps | loss at 1 | 25% | 50% | 75% | final | overflow steps | "
                     "final loss scale |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for dtype, m in curves.items():
            if not m:
                continue
            losses = [s["loss"] for s in m["steps"] if s.get("loss") is not None]  # skipped: null
            at = lambda f: f"{losses[min(len(losses) - 1, int(f * len(losses)))]:.3f}"
            lines.append(f"| {dtype} | {len(losses)} | {losses[0]:.3f} | {at(0.25)} | {at(0.5)} "
                         f"| {at(0.75)} | {losses[-1]:.3f} | {m.get('overflow_steps', '-')} | "
                         f"{m.get('final_loss_scale', '-')} |")
        lines.append("")

    planner_log = find(folder, "auto_planner.log")
    if planner_log:
        lines.append("The auto-planner on the GPU (bench/auto_planner --device cuda): "
                     "predicted against measured\n")
        lines += [l.rstrip() for l in open(planner_log) if l.startswith("|")]
        lines.append("")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
