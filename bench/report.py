#!/usr/bin/env python3
"""Turns Google Benchmark JSON files written by conveyor's benchmarks into Markdown tables.

    bench/report.py build/bench/schedule.json > table.md

Only medians are reported (the JSON must come from runs with repetitions); every table
names the machine it was measured on.
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
        name = b["run_name"].split("/", 1)[1]
        phases = [b["build_s"], b["lower_s"], b["verify_s"], b["simulate_s"]]
        out.append(
            f"| {name} | {int(b['actions'])} | "
            + " | ".join(f"{x:.3f}" for x in phases)
            + f" | {sum(phases):.3f} |"
        )
    return "\n".join(out)


def main(paths):
    if not paths:
        sys.exit(__doc__)
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        names = [b["run_name"] for b in data["benchmarks"]]
        if all(n.startswith("plan/") for n in names):
            print(plan_table(data))
        else:
            sys.exit(f"{path}: unknown benchmark kind ({names[:1]})")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
