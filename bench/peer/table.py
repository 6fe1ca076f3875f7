#!/usr/bin/env python3
"""Markdown tables from bench/peer/compare's JSON.

  bench/peer/table.py peer.json [--runs] [--against root|current]

The main table has one row per size, pp and schedule: conveyor against PyTorch 2.6 of the
Debian 13 root with the P2P fix (or as packaged where only that ran), or, with --against
current (the default when only that variant ran), against pip's current PyTorch (compare
--variants current); median step time (the median over --repeats runs of each run's median
step), tokens/s, the largest
per-rank peak RSS / peak private / peak anonymous memory, the ratios conveyor / PyTorch
(time: median step; memory: sums over the ranks), whether each loss falls, the largest
difference between the two loss curves, and what the packaged PyTorch did. "floor c/p" is
the fastest step the schedule allows with conveyor's measured stage costs (the simulator's
makespan plus the optimizer) over PyTorch's step: a time ratio cannot go below it without
faster kernels. --runs adds one row per run (every repeat and variant).
"""

import argparse
import json
import re
import sys


def fmt_ms(s):
    return f"{s * 1000:.1f}" if s is not None else ""


def fmt_mib(values):
    return f"{max(values):.0f}" if values else ""


def status_text(row):
    status = row.get("status", "")
    if status == "ok":
        return "ok"
    error = row.get("error", "")
    return f"{status}: {error}" if error else status


def frame(text):
    """'File "/x/y/schedules.py", line 724 in f' -> 'schedules.py:724 in f'."""
    m = re.match(r'File "(?:.*/)?([^/"]+)", line (\d+)(?:,)? in (\S+)', text)
    return f"{m.group(1)}:{m.group(2)} in {m.group(3)}" if m else text


def short_error(text, limit=90):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def falls(row):
    if row.get("status") != "ok":
        return "-"
    return "yes" if row.get("loss_falls") else "no"


def main_table(data, against="root"):
    """The table, and the distinct errors under it."""
    lines = [
        "| size | pp | schedule | conveyor ms/step | PyTorch ms/step | time c/p | floor c/p "
        "| conveyor tok/s | PyTorch tok/s | peak RSS MiB/rank c / p | peak private MiB/rank c / p "
        "| peak anon MiB/rank c / p | RSS c/p | private c/p | anon c/p | loss falls c / p "
        "| max loss diff | PyTorch 2.6 as packaged |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    notes = []  # distinct error texts, numbered

    def word(r):
        status = r.get("status", "")
        if status in ("ok", "not run", "n/a"):
            return status
        text = r.get("error", "")
        if r.get("hang_at"):
            text += "; stuck at " + "; ".join(
                f"rank {k}: {frame(v)}" for k, v in sorted(r["hang_at"].items()))
        text = " ".join(text.split())
        if text not in notes:
            notes.append(text)
        return f"{status} [{notes.index(text) + 1}]"

    def detail(row, key, r):
        """The run behind a comparison cell: older files keep hang_at only there."""
        if r.get("status") in ("hang", "failed") and "hang_at" not in r:
            system, variant = {"conveyor": ("conveyor", ""), "pytorch_packaged": (
                "pytorch", "packaged"), "pytorch_p2p_fix": ("pytorch", "p2p-fix"),
                "pytorch_current": ("pytorch", "current")}[key]
            for run in data.get("runs", []):
                if (run["size"], run["pp"], run["schedule"], run["system"],
                        run.get("variant", "")) == (row["size"], row["pp"], row["schedule"],
                                                    system, variant) and run.get("hang_at"):
                    r = dict(r, hang_at=run["hang_at"])
        return r

    for row in data["comparisons"]:
        if row.get("status") == "n/a":
            lines.append(f"| {row['size']} | {row['pp']} | {row['schedule']} | n/a | n/a | "
                         f"| | | | | | | | | | | | not possible: {row['reason']} |")
            continue
        c, fixed, packaged = (detail(row, k, row.get(k, {"status": "not run"})) for k in (
            "conveyor", "pytorch_p2p_fix", "pytorch_packaged"))
        if against == "current":
            ref = detail(row, "pytorch_current", row.get("pytorch_current", {"status": "not run"}))
            ref_mark, vs = "", row.get("vs_current", {})
        else:
            ref = fixed if row.get("pytorch_reference") == "p2p-fix" else packaged
            ref_mark = "" if row.get("pytorch_reference") == "p2p-fix" else " (packaged)"
            vs = row
        both = "rss_ratio" in vs

        def cell(r, fn):
            return fn(r) if r.get("status") == "ok" else word(r)

        lines.append("| " + " | ".join([
            row["size"], str(row["pp"]), row["schedule"],
            cell(c, lambda r: fmt_ms(r["median_step_s"])),
            cell(ref, lambda r: fmt_ms(r["median_step_s"]) + ref_mark),
            f"{vs['time_ratio']:.2f}" if "time_ratio" in vs else "",
            f"{vs['floor_ratio']:.2f}" if "floor_ratio" in vs else "",
            cell(c, lambda r: f"{r['tokens_per_s']:.0f}"),
            cell(ref, lambda r: f"{r['tokens_per_s']:.0f}"),
            f"{fmt_mib(c.get('peak_rss_mib'))} / {fmt_mib(ref.get('peak_rss_mib'))}"
            if both else "",
            f"{fmt_mib(c.get('peak_private_mib'))} / {fmt_mib(ref.get('peak_private_mib'))}"
            if both else "",
            f"{fmt_mib(c.get('peak_anon_mib'))} / {fmt_mib(ref.get('peak_anon_mib'))}"
            if both and "anon_ratio" in vs else "",
            f"{vs['rss_ratio']:.2f}" if both else "",
            f"{vs['private_ratio']:.2f}" if both else "",
            f"{vs['anon_ratio']:.2f}" if "anon_ratio" in vs else "",
            f"{falls(c)} / {falls(ref)}",
            f"{vs['max_loss_diff']:.1e}" if "max_loss_diff" in vs else "",
            word(packaged) if packaged.get("status") != "not run" else "",
        ]) + " |")
    if notes:
        lines.append("")
        lines += [f"[{i + 1}] {text}" + ("  " if i + 1 < len(notes) else "")
                  for i, text in enumerate(notes)]
    return "\n".join(lines)


def runs_table(data):
    lines = [
        "| size | pp | schedule | system | repeat | status | ms/step | loss first -> last "
        "| peak RSS MiB per rank | peak private MiB per rank | peak anon MiB per rank "
        "| parameters | layers per stage |",
        "|---|---:|---|---|---:|---|---:|---|---|---|---|---:|---|",
    ]
    for r in data["runs"]:
        system = r["system"] + (f" ({r['variant']})" if r.get("variant") else "")
        ok = r["status"] == "ok"
        lines.append("| " + " | ".join([
            r["size"], str(r["pp"]), r["schedule"], system, str(r.get("repeat", 0)),
            "ok" if ok else short_error(status_text(r), 80),
            fmt_ms(r.get("median_step_s")) if ok else "",
            f"{r['losses'][0]:.4f} -> {r['losses'][-1]:.4f}" if ok else "",
            " ".join(f"{x:.0f}" for x in r.get("peak_rss_mib", [])),
            " ".join(f"{x:.0f}" for x in r.get("peak_private_mib", [])),
            " ".join(f"{x:.0f}" for x in r.get("peak_anon_mib", [])),
            str(r.get("parameters", "")),
            " | ".join(str(x) for x in r.get("layers_per_stage", [])).replace("|", "/"),
        ]) + " |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(prog="bench/peer/table.py", description=__doc__.splitlines()[0])
    p.add_argument("json", help="the --out file of bench/peer/compare")
    p.add_argument("--runs", action="store_true", help="also one row per run")
    p.add_argument("--against", choices=["auto", "root", "current"], default="auto",
                   help="the PyTorch of the main table: root (Debian 13's 2.6, p2p-fix else "
                   "packaged) or current (pip's, compare --variants current); auto: root where "
                   "it ran")
    a = p.parse_args()
    try:
        with open(a.json) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        print(f"table.py: cannot read {a.json}: {e}", file=sys.stderr)
        return 1
    meta = data.get("meta", {})
    against = a.against
    if against == "auto":
        ran = {r.get("variant") for r in data.get("runs", []) if r.get("system") == "pytorch"}
        against = "root" if ran & {"packaged", "p2p-fix"} or not ran else "current"
    repeats = meta.get("repeats", 1)
    which = (f"PyTorch {first_torch_version(data, ('current',))} (pip's current release)"
             if against == "current" else
             f"PyTorch {first_torch_version(data, ('p2p-fix', 'packaged'))} with the P2P fix "
             "unless marked")
    print(f"`{meta.get('command', 'bench/peer/compare')}` ({meta.get('date', '')}, "
          f"{meta.get('cpus', '?')} CPUs, {meta.get('steps', '?')} steps, median of steps 2..N"
          f"{f', median of {repeats} runs' if repeats > 1 else ''}; c = conveyor, p = {which})")
    print()
    print(main_table(data, against))
    if a.runs:
        print()
        print(runs_table(data))
    return 0


def first_torch_version(data, variants):
    for r in data.get("runs", []):
        if r.get("torch_version") and r.get("variant") in variants:
            return r["torch_version"]
    if "current" in variants:
        return data.get("meta", {}).get("current_torch", {}).get("version", "(current)")
    return "2.6"


if __name__ == "__main__":
    sys.exit(main())
