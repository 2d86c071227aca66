#!/usr/bin/env python3
"""HTTP steps of bench/scripts/run-persistence.sh and run-serve.sh, against
`turbokv serve` or llama-server (both speak llama.cpp's /tokenize, /slots and
OpenAI's /v1/completions). Each subcommand prints one JSON object on stdout.

  bench_http.py wait URL [SECONDS [PID]]            until GET /health answers 200 (fails early
                                                    when process PID has exited)
  bench_http.py prompts URL TOKENS COUNT SEED OUT [--osl N] [--text]
      COUNT prompts of exactly TOKENS tokens as the server counts them (special
      tokens included), random words, one per seed: a JSONL dataset in aiperf's
      single_turn shape ({"text", "output_length"}), or with --text the first
      prompt as a plain text file
  bench_http.py complete URL PROMPT_FILE            max_tokens 1 on slot 0: wall ms (= TTFT),
                                                    prompt / cached token counts, server timings
  bench_http.py slot URL ID ACTION FILENAME         POST /slots/ID?action=ACTION
  bench_http.py metrics URL                         GET /metrics scalars (prompt cache counters)
  bench_http.py evict PATH...                       drop the files' pages from the page cache
                                                    (posix_fadvise DONTNEED; dirty pages synced first)
  bench_http.py resident PATH...                    bytes of the files in the page cache (fincore)
  bench_http.py aiperf DIR                          the summary of an aiperf run in DIR
  bench_http.py tokenizer GGUF OUTDIR               a Hugging Face tokenizer directory from the
                                                    GGUF's BPE vocabulary and merges (run with the
                                                    venv's python: needs the gguf and tokenizers
                                                    packages), for aiperf, which must load one and
                                                    cannot fetch any here; its token counts are not
                                                    used (--use-server-token-count)
"""
import json
import os
import random
import subprocess
import sys
import time

try:
    import requests
except ImportError:  # the tokenizer subcommand runs without it
    requests = None

WORDS = ("time person year way day thing man world life hand part child eye woman place work "
         "week case point government company number group problem fact be have do say get make "
         "go know take see come think look want give use find tell ask seem feel try leave call "
         "good new first last long great little own other old right big high different small "
         "large next early young important few public bad same able river stone garden market "
         "window engine signal winter summer letter music paper bridge forest silver planet").split()


def post(url, body, timeout=3600):
    r = requests.post(url, json=body, timeout=timeout)
    if r.status_code != 200:
        sys.exit(f"bench_http: POST {url}: HTTP {r.status_code}: {r.text[:500]}")
    return r.json()


def alive(pid):
    try:  # a child its shell has not reaped yet is a zombie: state Z
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cmd_wait(url, seconds="600", pid=None):
    end = time.time() + float(seconds)
    while time.time() < end:
        if pid and not alive(pid):
            sys.exit(f"bench_http: the server (pid {pid}) exited before {url} was ready")
        try:
            if requests.get(f"{url}/health", timeout=5).status_code == 200:
                print(json.dumps({"ready": True}))
                return
        except requests.RequestException:
            pass
        time.sleep(0.25)
    sys.exit(f"bench_http: {url} not ready after {seconds} s")


def count(url, text, special):
    return post(f"{url}/tokenize", {"content": text, "add_special": special})["tokens"]


def exact_prompt(url, tokens, seed):
    """Random words cut to `tokens` tokens (special tokens included) that
    tokenize back to exactly that many."""
    rng = random.Random(seed)
    text = " ".join(rng.choice(WORDS) for _ in range(tokens + 16))
    n_special = len(count(url, "x", True)) - len(count(url, "x", False))
    ids = count(url, text, False)[: tokens - n_special]
    text = post(f"{url}/detokenize", {"tokens": ids})["content"].strip()
    for _ in range(8):  # a cut word may retokenize differently: trim or pad by whole words
        n = len(count(url, text, True))
        if n == tokens:
            return text
        text = text.rsplit(" ", 1)[0] if n > tokens else text + " " + rng.choice(WORDS)
    sys.exit(f"bench_http: no prompt of exactly {tokens} tokens (got {n})")


def cmd_prompts(url, tokens, n, seed, out, *flags):
    tokens, n, seed = int(tokens), int(n), int(seed)
    osl = int(flags[flags.index("--osl") + 1]) if "--osl" in flags else None
    texts = [exact_prompt(url, tokens, seed * 100003 + i) for i in range(n)]
    with open(out, "w") as f:
        if "--text" in flags:
            f.write(texts[0])
        else:
            for t in texts:
                f.write(json.dumps({"text": t, **({"output_length": osl} if osl else {})}) + "\n")
    print(json.dumps({"prompts": n, "tokens": tokens, "file": out}))


def cmd_complete(url, prompt_file):
    prompt = open(prompt_file).read()
    body = {"prompt": prompt, "max_tokens": 1, "temperature": 0, "id_slot": 0}
    t0 = time.perf_counter()
    d = post(f"{url}/v1/completions", body)
    wall = (time.perf_counter() - t0) * 1000
    u, t = d.get("usage") or {}, d.get("timings") or {}
    print(json.dumps({
        "wall_ms": wall, "prompt_tokens": u.get("prompt_tokens"),
        "cached_tokens": (u.get("prompt_tokens_details") or {}).get("cached_tokens"),
        "server_prompt_ms": t.get("prompt_ms"), "server_prompt_n": t.get("prompt_n"),
        "server_cache_n": t.get("cache_n")}))


def cmd_slot(url, slot, action, filename):
    print(json.dumps(post(f"{url}/slots/{slot}?action={action}", {"filename": filename})))


def cmd_metrics(url):
    text = requests.get(f"{url}/metrics", timeout=30).text
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or "{" in line or " " not in line:
            continue
        k, v = line.rsplit(" ", 1)
        out[k] = float(v)
    print(json.dumps(out))


def files_of(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                yield from (os.path.join(root, n) for n in names)
        elif os.path.exists(p):
            yield p


def cmd_evict(*paths):
    n = 0
    for f in files_of(paths):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            n += 1
        finally:
            os.close(fd)
    print(json.dumps({"evicted_files": n}))


def cmd_resident(*paths):
    total = 0
    for f in files_of(paths):
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", f],
                             capture_output=True, text=True).stdout.strip()
        total += int(out or 0)
    print(json.dumps({"resident_bytes": total}))


def cmd_aiperf(d):
    path = f"{d}/profile_export_aiperf.json"  # the profiling phase (phases/ also holds warmup's)
    if not os.path.exists(path):
        sys.exit(f"bench_http: no {path}")
    m = json.load(open(path))  # metrics by tag, each {"unit", "avg", "p50", "p99", ...}

    def get(tag, stat):
        x = m.get(tag)
        return x.get(stat) if isinstance(x, dict) else None

    errors = sum(e.get("count", 1) if isinstance(e, dict) else 1 for e in (m.get("error_summary") or []))
    print(json.dumps({
        "out_tok_s": get("output_token_throughput", "avg"),
        "ttft_p50_ms": get("time_to_first_token", "p50"), "ttft_p99_ms": get("time_to_first_token", "p99"),
        "itl_p50_ms": get("inter_token_latency", "p50"), "itl_p99_ms": get("inter_token_latency", "p99"),
        "requests": get("request_count", "avg"), "errors": errors,
        "isl_mean": get("input_sequence_length", "avg"), "osl_mean": get("output_sequence_length", "avg"),
        "cached_tokens": get("usage_prompt_cache_read_tokens", "sum"),
        "duration_s": get("benchmark_duration", "avg")}))


def cmd_tokenizer(gguf_path, outdir):
    from gguf import GGUFReader
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    fields = GGUFReader(gguf_path).fields

    def strings(key):
        f = fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    if bytes(fields["tokenizer.ggml.model"].parts[-1]).decode() != "gpt2":
        sys.exit(f"bench_http: {gguf_path}: only byte-level BPE (tokenizer.ggml.model gpt2) is converted")
    vocab = {t: i for i, t in enumerate(strings("tokenizer.ggml.tokens"))}
    merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
    tok = Tokenizer(models.BPE(vocab, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    os.makedirs(outdir, exist_ok=True)
    tok.save(f"{outdir}/tokenizer.json")
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast"}, open(f"{outdir}/tokenizer_config.json", "w"))
    print(json.dumps({"tokenizer": outdir, "vocab": len(vocab), "merges": len(merges)}))


CMDS = {"wait": cmd_wait, "prompts": cmd_prompts, "complete": cmd_complete, "slot": cmd_slot,
        "metrics": cmd_metrics, "evict": cmd_evict, "resident": cmd_resident, "aiperf": cmd_aiperf,
        "tokenizer": cmd_tokenizer}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in CMDS:
        sys.exit(__doc__)
    CMDS[sys.argv[1]](*sys.argv[2:])
