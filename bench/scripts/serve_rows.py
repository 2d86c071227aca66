#!/usr/bin/env python3
"""Rows of docs/bench/serve.json from run-serve.sh's raw results (aiperf summaries),
and the markdown tables.   serve_rows.py OUT_DIR DST.json THREADS OSL"""
import glob
import json
import os
import subprocess
import sys

out, dst, threads, osl = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows, fit = [], []
for path in sorted(glob.glob(f"{out}/turbokv-*.json") + glob.glob(f"{out}/llama.cpp-*.json")):
    d = json.load(open(path))
    a = d.pop("aiperf")
    rows.append({"engine": d["engine"], "model": d["model"], "scheme": d["scheme"],
                 "concurrency": d["concurrency"], "prompt_tokens": d["prompt_tokens"],
                 "out_tok_s": a["out_tok_s"], "ttft_p50_ms": a["ttft_p50_ms"], "ttft_p99_ms": a["ttft_p99_ms"],
                 "itl_p50_ms": a["itl_p50_ms"], "itl_p99_ms": a["itl_p99_ms"], "osl": d["osl"],
                 "requests": a["requests"], "errors": a["errors"], "isl_mean": a["isl_mean"],
                 "osl_mean": a["osl_mean"], "cached_tokens": a.get("cached_tokens"),
                 "duration_s": a["duration_s"], "load_before": d["load_before"], "load": d["load"]})
for path in sorted(glob.glob(f"{out}/fit-*.json")):
    fit.append(json.load(open(path)))
skipped = [json.loads(x) for x in open(f"{out}/skipped.jsonl")] if os.path.exists(f"{out}/skipped.jsonl") else []
cpu = subprocess.run(["bash", "-c", "lscpu | grep 'Model name' | cut -d: -f2"], capture_output=True,
                     text=True).stdout.strip()
kvmap = {"bf16": "f16/f16", "turbo": "q8_0/q4_0", "turbo:k8v3": "q8_0/q4_0", "turbo:k4v3": "q4_0/q4_0"}
json.dump({"cpu": cpu, "threads": threads,
           "llama_omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "llama.cpp default"), "osl": osl, "load_generator": "aiperf 0.13.0, /v1/completions, streamed",
           "kv_map": kvmap, "rows": rows, "fit": fit, "skipped": skipped}, open(dst, "w"), indent=1)

f = lambda x, d=1: "-" if x is None else f"{x:.{d}f}"
print(f"{cpu}, {threads} threads, {osl} output tokens per request\n")
print("| model | prompt | conc | kv (turbokv) | out tok/s | TTFT p50 / p99 ms | ITL p50 ms | llama.cpp kv "
      "| out tok/s | TTFT p50 / p99 ms | ITL p50 ms | tok/s turbokv / llama.cpp | errors | load |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
key = lambda r: (r["model"], r["prompt_tokens"], r["concurrency"])
for t in sorted((r for r in rows if r["engine"] == "turbokv"), key=lambda r: (key(r), r["scheme"])):
    lc = next((r for r in rows if r["engine"] == "llama.cpp" and key(r) == key(t)
               and r["scheme"] == kvmap.get(t["scheme"])), None)
    ratio = f"{t['out_tok_s'] / lc['out_tok_s']:.2f}x" if lc and t["out_tok_s"] and lc["out_tok_s"] else "-"
    lcells = (f"{lc['scheme']} | {f(lc['out_tok_s'])} | {f(lc['ttft_p50_ms'], 0)} / {f(lc['ttft_p99_ms'], 0)} | "
              f"{f(lc['itl_p50_ms'])}" if lc else "- | - | - | -")
    errs = t["errors"] + (lc["errors"] if lc else 0)
    print(f"| {t['model']} | {t['prompt_tokens']} | {t['concurrency']} | {t['scheme']} | {f(t['out_tok_s'])} | "
          f"{f(t['ttft_p50_ms'], 0)} / {f(t['ttft_p99_ms'], 0)} | {f(t['itl_p50_ms'])} | {lcells} | {ratio} | "
          f"{errs} | {t['load']} |")
for r in rows:  # llama.cpp points without a turbokv partner (ENGINES=llama.cpp)
    if r["engine"] == "llama.cpp" and not any(t["engine"] == "turbokv" and key(t) == key(r)
                                              and kvmap.get(t["scheme"]) == r["scheme"] for t in rows):
        print(f"| {r['model']} | {r['prompt_tokens']} | {r['concurrency']} | - | - | - | - | {r['scheme']} | "
              f"{f(r['out_tok_s'])} | {f(r['ttft_p50_ms'], 0)} / {f(r['ttft_p99_ms'], 0)} | {f(r['itl_p50_ms'])} | "
              f"- | {r['errors']} | {r['load']} |")
if fit:
    print("\n| model | kv | ctx | --kv-budget | KV bytes/token | sequences admitted | vs bf16 |\n|---|---|---|---|---|---|---|")
    for r in fit:
        bf = next((x for x in fit if x["model"] == r["model"] and x["scheme"] == "bf16"), None)
        print(f"| {r['model']} | {r['scheme']} | {r['ctx']} | {r['kv_budget']} | {r['kv_bytes_per_token']} | "
              f"{r['seqs']} | {f(r['seqs'] / bf['seqs'], 2) + 'x' if bf and bf['seqs'] else '-'} |")
for s in skipped:
    print(f"skipped: {s['model']} N={s['concurrency']} prompt={s['prompt_tokens']}: {s['why']}")
