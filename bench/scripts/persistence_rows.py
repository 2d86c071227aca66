#!/usr/bin/env python3
"""Rows of docs/bench/persistence.json from run-persistence.sh's raw results, and the
markdown table.   persistence_rows.py OUT_DIR DST.json THREADS COLD_METHOD"""
import glob
import json
import os
import re
import subprocess
import sys

out, dst, threads, cold_method = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


def num(pattern, text):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def steps(path):
    """The point's steps; a step whose request failed was recorded with no result
    (`"r": }`) and is left out, so the rows that need it are left out too."""
    out = {}
    for line in open(path):
        try:
            s = json.loads(line)
        except json.JSONDecodeError:
            continue
        out[s["step"]] = s
    return out


rows = []
for done in sorted(glob.glob(f"{out}/*.jsonl.done")):
    meta = json.load(open(done))
    st = steps(done[: -len(".done")])
    need = ("save", "load-warm", "load-cold") if "-session-" in done else ("cold", "save")
    if any(k not in st for k in need):
        print(f"skipped {os.path.basename(done[: -len('.done')])}: a request failed (see its log)",
              file=sys.stderr)
        continue
    base = {k: meta[k] for k in ("engine", "model", "scheme", "prompt_tokens")}
    if "-session-" in done:  # turbokv generate --save-session / --load-session
        save = st["save"]["r"]["stderr"]
        for c in ("warm", "cold"):
            ld = st[f"load-{c}"]
            e = ld["r"]["stderr"]
            rows.append(dict(base, via="session", load_cache=c, bytes=st["save"]["r"]["bytes"],
                             save_ms=num(r"written in ([0-9.]+) ms", save),
                             load_ms=num(r"read and checked in ([0-9.]+) ms", e),
                             ttft_cold_ms=num(r"ttft ([0-9.]+) ms", save),
                             ttft_restored_ms=num(r"ttft ([0-9.]+) ms", e),
                             cached_tokens=int(num(r"(\d+) tokens loaded", e) or 0),
                             snapshot_resident_bytes=ld["r"]["resident_bytes"] if c == "cold" else None,
                             load=ld["load"]))
        continue
    cold = st["cold"]["r"]
    for c in ("warm", "cold"):
        if f"restore-{c}" in st:  # slot save / restore (both engines)
            rs, rq = st[f"restore-{c}"]["r"], st[f"restored-{c}"]["r"]
            sv = st["save"]["r"]
            rows.append(dict(base, via="slot", load_cache=c, bytes=sv["n_written"],
                             save_ms=sv["timings"]["save_ms"], load_ms=rs["restore"]["timings"]["restore_ms"],
                             ttft_cold_ms=cold["wall_ms"], ttft_restored_ms=rq["wall_ms"],
                             cached_tokens=rq["cached_tokens"] if rq["cached_tokens"] is not None else rq["server_cache_n"],
                             server_prompt_ms_cold=cold["server_prompt_ms"],
                             server_prompt_ms_restored=rq["server_prompt_ms"],
                             snapshot_resident_bytes=rs["resident"]["resident_bytes"] if c == "cold" else None,
                             load=st[f"restored-{c}"]["load"]))
        if f"pcache-{c}" in st:  # turbokv serve --prompt-cache after a restart
            p, w = st[f"pcache-{c}"]["r"], st["pcache-written"]["r"]
            rows.append(dict(base, via="prompt-cache", load_cache=c, bytes=w["bytes"], save_ms=None,
                             load_ms=None, ttft_cold_ms=cold["wall_ms"], ttft_restored_ms=p["req"]["wall_ms"],
                             cached_tokens=p["req"]["cached_tokens"],
                             disk_hits=p["metrics"].get("turbokv:prompt_cache_disk_hits_total"),
                             disk_tokens=p["metrics"].get("turbokv:prompt_cache_disk_tokens_total"),
                             snapshot_resident_bytes=p["resident"]["resident_bytes"] if c == "cold" else None,
                             load=st[f"pcache-{c}"]["load"]))

cpu = subprocess.run(["bash", "-c", "lscpu | grep 'Model name' | cut -d: -f2"], capture_output=True,
                     text=True).stdout.strip()
kvmap = {"bf16": "f16/f16", "turbo": "q8_0/q4_0", "turbo:k8v3": "q8_0/q4_0", "turbo:k4v3": "q4_0/q4_0"}
json.dump({"cpu": cpu, "threads": threads,
           "llama_omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "llama.cpp default"), "cold_page_cache": cold_method, "kv_map": kvmap,
           "ttft": "turbokv generate: submit to first token (snapshot read included); servers: "
                   "wall time of a max_tokens 1 request",
           "rows": rows}, open(dst, "w"), indent=1)

f = lambda x, d=1: "-" if x is None else f"{x:.{d}f}"
print(f"{cpu}, {threads} threads, cold page cache by {cold_method}\n")
print("| model | prompt | engine | via | kv | bytes | vs llama.cpp f16 | save ms | load ms warm / cold "
      "| TTFT cold ms | TTFT restored warm / cold ms | cold / restored (cold) | tokens reused | load |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
key = lambda r: (r["model"], r["prompt_tokens"], r["engine"], r["via"], r["scheme"])
for k in sorted({key(r) for r in rows}):
    w = next((r for r in rows if key(r) == k and r["load_cache"] == "warm"), None)
    c = next((r for r in rows if key(r) == k and r["load_cache"] == "cold"), None)
    r = w or c
    ref = next((x for x in rows if x["engine"] == "llama.cpp" and x["scheme"] == "f16/f16"
                and x["model"] == k[0] and x["prompt_tokens"] == k[1]), None)
    ratio = f"{ref['bytes'] / r['bytes']:.2f}x smaller" if ref and r["bytes"] else "-"
    sp = f"{r['ttft_cold_ms'] / c['ttft_restored_ms']:.1f}x" if c and c["ttft_restored_ms"] else "-"
    print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {r['bytes']} | {ratio} | {f(r['save_ms'])} | "
          f"{f(w and w['load_ms'])} / {f(c and c['load_ms'])} | {f(r['ttft_cold_ms'])} | "
          f"{f(w and w['ttft_restored_ms'])} / {f(c and c['ttft_restored_ms'])} | {sp} | "
          f"{f(r['cached_tokens'], 0)} | {r['load']} |")
