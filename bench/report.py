#!/usr/bin/env python3
"""Turns the JSON that conveyor's benchmarks write into Markdown tables.

    bench/report.py build/bench/schedule.json                 # Google Benchmark (planner)
    bench/report.py fidelity.json overhead.json               # conveyor bench --format json
    bench/report.py build/bench/train/*.json                  # bench/train_suite (train metrics)

Planner tables report medians (the JSON must come from runs with repetitions); `conveyor
bench` rows already hold medians over their timed steps.
"""
import json
import sys


def plan_table(data):
    rows = [b for b in data["benchmarks"] if b.get("aggregate_name") == "median"]
    if not rows:
        sys.exit("no median aggregates: run the benchmark with repetitions")
    ctx = data["context"]
    first = rows[0]
    out = [
        f"Planner, p = {int(first['pp'])}, m = {int(first['microbatches'])}: median of "
        f"{first.get('repetitions', '?')} runs on {ctx.get('num_cpus')} CPUs "
        f"({ctx.get('host_name', 'unknown host')}, {ctx.get('date', '')}).",
        "",
        "| schedule | actions (lowered) | build s | lower s | verify s | simulate s | total s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for b in rows:
        name = b["run_name"].split("/")[1]
        phases = [b["build_s"], b["lower_s"], b["verify_s"], b["simulate_s"]]
        out.append(
            f"| {name} | {int(b['actions'])} | "
            + " | ".join(f"{x:.3f}" for x in phases)
            + f" | {sum(phases):.3f} |"
        )
    return "\n".join(out)


def rows_table(header, rows, cells):
    """A table of `conveyor bench` rows: `cells(row)` gives the columns after the name."""
    out = ["| schedule | " + " | ".join(header) + " |",
           "|---|" + "---:|" * len(header)]
    for r in rows:
        if "skipped" in r:
            out.append(f"| {r['schedule']} | skipped: {r['skipped']} |" + " |" * (len(header) - 1))
        else:
            out.append(f"| {r['schedule']} | " + " | ".join(cells(r)) + " |")
    return "\n".join(out)


def fidelity_table(rows):
    def cells(r):
        out = [f"{r['predicted_s']:.4f}", f"{r['measured_s']:.4f}", f"{100 * r['error']:+.1f}%"]
        if "predicted_no_comm_s" in r:
            out += [f"{1e6 * r['hop_s']:.0f}", f"{r['predicted_no_comm_s']:.4f}",
                    f"{100 * r['error_no_comm']:+.1f}%"]
        return out
    header = ["predicted s", "measured s", "error"]
    if rows and "predicted_no_comm_s" in next((r for r in rows if "skipped" not in r), {}):
        header += ["hop us", "predicted without hops", "error"]
    return rows_table(header, rows, cells)


def overhead_table(rows):
    nan = float("nan")
    return rows_table(
        ["actions (busiest rank)", "step ms", "us per action", "executor us per action",
         "traced: us per action"], rows,
        lambda r: [str(r["actions_per_rank"]), f"{1e3 * r['measured_s']:.2f}",
                   f"{r['us_per_action']:.1f}", f"{r.get('executor_us_per_action', nan):.2f}",
                   f"{r.get('traced_us_per_action', nan):.1f}"])


def bench_train_table(rows):
    """Rows of `conveyor bench train --format json`."""
    single = next((r["tokens_per_s"] for r in rows if r["schedule"] == "single process"), None)
    def cells(r):
        ratio = f"{r['tokens_per_s'] / single:.2f}x" if single else "-"
        if r["schedule"] == "single process":
            return [f"{1e3 * r['step_s']:.0f}", f"{r['tokens_per_s']:.0f}", "", ratio,
                    f"({r['threads']} threads)", "", "", "", ""]
        limit = r.get("predicted_tokens_per_s")
        return [f"{1e3 * r['step_s']:.0f}", f"{r['tokens_per_s']:.0f}",
                f"{limit:.0f}" if limit else "-", ratio,
                f"{100 * r['measured_bubble_fraction']:.1f}%",
                f"{100 * r['predicted_bubble_fraction']:.1f}%",
                f"{100 * r['transfer_wait_fraction']:.1f}%",
                f"{r['peak_activation_bytes'] / 2**20:.2f}",
                f"{r['predicted_peak_activation_bytes'] / 2**20:.2f}"]
    return rows_table(
        ["step ms", "tokens/s", "simulator's limit, tokens/s", "vs 1 process", "measured bubble", "predicted bubble",
         "exposed comm / step", "peak MiB (max rank)", "predicted MiB"], rows, cells)


def train_table(runs):
    """Rows of `conveyor train --metrics` files: one per run."""
    out = [
        "| run | step s | tokens/s | pipeline ms measured / predicted | measured bubble "
        "| predicted bubble | comm wait / step "
        "| exposed comm / step | overlap | peak MiB per rank | predicted MiB per rank |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    errors = []
    for name, m in runs:
        if m.get("predicted_pipeline_s") and m.get("measured_pipeline_s"):
            errors.append((m["predicted_pipeline_s"] / m["measured_pipeline_s"] - 1, name))
        steps = m["steps"][1:] or m["steps"]  # the first step warms up
        step_s = sorted(s["seconds"] for s in steps)[len(steps) // 2]
        tokens = sorted(s["tokens_per_s"] for s in steps)[len(steps) // 2]
        ranks = m["ranks"]
        wait = sum(r["comm_wait_s"] for r in ranks) / max(sum(r["step_s"] for r in ranks), 1e-12)
        exposed = m.get("transfer_wait_fraction", float("nan"))
        overlap = sum(r.get("comm_overlap", float("nan")) for r in ranks) / len(ranks)
        peaks = " ".join(f"{r['peak_activation_bytes'] / 2**20:.1f}" for r in ranks)
        predicted = " ".join(
            f"{r.get('predicted_peak_activation_bytes', float('nan')) / 2**20:.1f}" for r in ranks)
        pipeline = (f"{1e3 * m['measured_pipeline_s']:.1f} / {1e3 * m['predicted_pipeline_s']:.1f}"
                    if "predicted_pipeline_s" in m else "")
        out.append(
            f"| {name} | {step_s:.3f} | {tokens:.0f} | {pipeline} | "
            f"{100 * m['measured_bubble_fraction']:.1f}% | "
            f"{100 * m['predicted_bubble_fraction']:.1f}% | {100 * wait:.1f}% | "
            f"{100 * exposed:.1f}% | {100 * overlap:.0f}% | {peaks} | {predicted} |"
        )
    if errors:
        errors.sort(key=lambda e: abs(e[0]))
        median = abs(errors[len(errors) // 2][0])
        worst = errors[-1]
        out.append(f"\nPipeline step predicted from measured costs: median |error| {100 * median:.1f}%, "
                   f"worst {100 * worst[0]:+.1f}% ({worst[1]}), over {len(errors)} runs.")
    return "\n".join(out)


def main(paths):
    if not paths:
        sys.exit(__doc__)
    runs = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        if isinstance(data, dict) and "ranks" in data:
            runs.append((path.rsplit("/", 1)[-1].removesuffix(".json"), data))
    if runs:
        print(train_table(runs))
        print()
        paths = [p for p in paths if p.rsplit("/", 1)[-1].removesuffix(".json") not in dict(runs)]
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        if isinstance(data, list):
            measured = [r for r in data if "skipped" not in r]
            if measured and "predicted_s" in measured[0]:
                print(fidelity_table(data))
            elif measured and "us_per_action" in measured[0]:
                print(overhead_table(data))
            elif measured and "tokens_per_s" in measured[0]:
                print(bench_train_table(data))
            else:
                sys.exit(f"{path}: unknown rows")
            print()
            continue
        names = [b["run_name"] for b in data["benchmarks"]]
        if all(n.startswith("plan/") for n in names):
            print(plan_table(data))
        else:
            sys.exit(f"{path}: unknown benchmark kind ({names[:1]})")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
