#!/usr/bin/env python3
"""The tables of docs/BENCHMARKS.md "On an H100" from what scripts/gpu-run wrote.

Usage: report.py RESULTS...   (results folders of scripts/gpu-run, env.txt in or beside
each; where several hold a file, the last one's is used: a rerun's over the first run's)

Reads model.json (layers, hidden, heads, seq_len, batch_size, microbatches), peak.json (the card's measured bf16 rate), eager.json (bench/gpu/eager_gpt.py),
bench.json (`conveyor bench train` rows), train-pp4.json (`conveyor train --metrics`),
bf16.json and fp16.json; whatever is missing is left out of the tables. Model FLOPs per
token: 6 N + 12 L C T (N parameters, L blocks, C hidden, T sequence; the attention's
products counted whole, as Megatron's and PaLM's MFU do); MFU = achieved / measured peak.
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

    shape = load(folder, "model.json") or eager or {}
    layers, hidden, seq_len = shape.get("layers"), shape.get("hidden"), shape.get("seq_len")
    batch = shape.get("batch_size")
    flops_per_token = None
    if layers:
        n = gpt_params(layers, hidden, seq_len)
        flops_per_token = 6 * n + 12 * layers * hidden * seq_len
        lines.append(f"Model: GPT, {layers} blocks x hidden {hidden}, {shape['heads']} heads, "
                     f"sequence {seq_len}, {n / 1e9:.2f} B parameters; batch {batch} sequences "
                     f"in {shape['microbatches']} micro-batches; bf16 autocast, fp32 master "
                     f"weights; {flops_per_token / 1e9:.1f} GFLOP per token.\n")

    def rate_cells(tokens_per_s):
        if not flops_per_token:
            return ["", ""]
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
        rows.append(["PyTorch eager (one process)", f"{1e3 * eager['step_s']:.0f}",
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
            name = "conveyor pp 1 (one process)"
            bubble = ["", ""]
        else:
            name = f"conveyor pp {row['pp']} {row['schedule']} (rank threads)"
            bubble = [f"{100 * row['measured_bubble_fraction']:.1f}%",
                      f"{100 * row['predicted_bubble_fraction']:.1f}%"]
        rows.append([name, f"{1e3 * row['step_s']:.0f}", f"{tps:.0f}"] + rate_cells(tps) +
                    [peak_gib(row)] + bubble +
                    [f"{tps / eager_tps:.2f}x" if eager_tps else ""])
    if rows:
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append("")
    checks = []
    if single and eager_tps:
        ratio = single["tokens_per_s"] / eager_tps
        checks.append(f"conveyor pp 1 / PyTorch eager tokens/s: {ratio:.2f}x (target >= 0.95x): "
                      + ("met" if ratio >= 0.95 else "NOT met"))
    if single:
        for row in bench:
            if row.get("pp", 1) > 1 and "step_s" in row:
                ratio = row["step_s"] / single["step_s"]
                checks.append(f"pp {row['pp']} {row['schedule']} / pp 1 step time: {ratio:.2f}x "
                              "(target <= 1.15x): " + ("met" if ratio <= 1.15 else "NOT met"))
    lines += ["- " + c for c in checks]
    if checks:
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
            losses = [s["loss"] for s in m["steps"] if "loss" in s]  # skipped steps have none
            at = lambda f: f"{losses[min(len(losses) - 1, int(f * len(losses)))]:.3f}"
            lines.append(f"| {dtype} | {len(losses)} | {losses[0]:.3f} | {at(0.25)} | {at(0.5)} "
                         f"| {at(0.75)} | {losses[-1]:.3f} | {m.get('overflow_steps', '-')} | "
                         f"{m.get('final_loss_scale', '-')} |")
        lines.append("")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
