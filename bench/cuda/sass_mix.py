#!/usr/bin/env python3
"""Opcode mix of one kernel from an Nsight Compute source export (run 22, docs/bench/cuda.md).

Input: `ncu -i REPORT --page source --print-source sass --csv > sass.csv` of a report taken
with `--section SourceCounters`. Prints, per opcode, the instructions executed (and per
`--unit`, e.g. the count of one loop-body instruction: consumer warps x tiles) and the share
of the warp-stall samples; with `--ranges a:b,c:d` the same totals for SASS row ranges (the
loop body, the epilogue, the producer: read the row numbers off `--list`).
"""
import argparse
import collections
import csv
import re


def load(path):
    rows = list(csv.reader(open(path)))
    hdr, data = rows[1], rows[2:]
    ie, ss, src = (hdr.index(k) for k in ("Instructions Executed", "Warp Stall Sampling (All Samples)", "Source"))
    return [(int(r[ie]), int(r[ss]), r[src].strip()) for r in data]


def opcode(sass):
    s = re.sub(r"^@!?U?P\w+\s+", "", sass)  # drop the predicate
    return s.split()[0] if s else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--unit", type=float, default=0.0, help="divide counts by this (0: the most common count)")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--ranges", default="", help="a:b,c:d SASS row ranges to total")
    ap.add_argument("--list", action="store_true", help="print rows executed at least once per unit")
    a = ap.parse_args()
    rows = load(a.csv)
    unit = a.unit or collections.Counter(c for c, _, _ in rows if c).most_common(1)[0][0]
    tot_i, tot_s = sum(c for c, _, _ in rows), sum(s for _, s, _ in rows) or 1
    print(f"{len(rows)} SASS rows, {tot_i} instructions = {tot_i / unit:.1f} per unit of {unit:.0f}, {tot_s} samples")
    if a.list:
        for i, (c, s, src) in enumerate(rows):
            if c >= unit / 2:
                print(f"{i:5d} {c / unit:7.2f} {s:5d}  {src}")
        return
    mix, smp = collections.Counter(), collections.Counter()
    for c, s, src in rows:
        mix[opcode(src)] += c
        smp[opcode(src)] += s
    for op, c in mix.most_common(a.top):
        print(f"{op:34s} {c / unit:8.1f} per unit {100 * c / tot_i:5.1f} %  samples {100 * smp[op] / tot_s:5.1f} %")
    for rg in filter(None, a.ranges.split(",")):
        lo, hi = (int(x) for x in rg.split(":"))
        part = rows[lo:hi]
        print(f"rows {lo}:{hi}: {sum(c for c, _, _ in part) / unit:.1f} per unit, "
              f"{100 * sum(s for _, s, _ in part) / tot_s:.1f} % of samples")


if __name__ == "__main__":
    main()
