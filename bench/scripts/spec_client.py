#!/usr/bin/env python3
"""Client of bench/scripts/run-speculative.sh: sends one prompt set to a running server
(turbokv serve or llama-server), one request at a time, streamed, greedy, and prints one
JSON object: per request the completion tokens (the server's usage), time to first token
and decode tok/s measured here ((tokens - 1) / (last token - first token)), and the draft
tokens the server verified and kept (turbokv: its /metrics counters before and after;
llama-server: the response's timings.draft_n / draft_n_accepted).

  spec_client.py URL ENGINE SET MAX_TOKENS      SET: code-edit | chat

The prompts are fixed here so both engines see the same ones: code edits give the model a
function and ask for a rewritten version (most of the answer copies the prompt: where
prompt lookup shines); chat prompts ask open questions (where only a draft model helps).
"""
import json
import re
import sys
import time

import requests

CODE = [
    ("Rename the variable `acc` to `total` and add type hints. Reply with the whole "
     "function only.",
     '''def moving_average(values, window):
    if window <= 0:
        raise ValueError("window must be positive")
    acc = 0.0
    out = []
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        if i >= window - 1:
            out.append(acc / window)
    return out
'''),
    ("Add a docstring and replace the manual loop over `lines` with a list comprehension "
     "where it reads better. Reply with the whole function only.",
     '''def parse_config(text):
    lines = text.splitlines()
    entries = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"bad line: {line}")
        entries[key.strip()] = value.strip()
    return entries
'''),
    ("Make this C++ function take its vector by const reference and return early when it "
     "is empty. Reply with the whole function only.",
     '''double median(std::vector<double> xs) {
    std::sort(xs.begin(), xs.end());
    const size_t n = xs.size();
    if (n % 2 == 1) {
        return xs[n / 2];
    }
    return 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}
'''),
    ("Convert this JavaScript function to use async/await instead of promise chains. Reply "
     "with the whole function only.",
     '''function loadUser(id) {
  return fetch(`/api/users/${id}`)
    .then((res) => {
      if (!res.ok) {
        throw new Error(`HTTP ${res.status}`);
      }
      return res.json();
    })
    .then((user) => {
      user.loadedAt = Date.now();
      return user;
    });
}
'''),
]

CHAT = [
    "Explain in a few paragraphs why the sky is blue and why sunsets are red.",
    "What are the main differences between a process and a thread? Give examples.",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Give me a plan for learning to play the guitar in three months, week by week.",
]


def messages(kind):
    if kind == "code-edit":
        return [[{"role": "user", "content": f"{ask}\n\n```\n{code}```"}] for ask, code in CODE]
    if kind == "chat":
        return [[{"role": "user", "content": q}] for q in CHAT]
    sys.exit(f"spec_client: unknown prompt set {kind} (code-edit | chat)")


def tkv_counters(url):
    text = requests.get(f"{url}/metrics", timeout=30).text
    val = {}
    for name in ("num_draft_tokens_total", "num_accepted_tokens_total"):
        m = re.search(rf"^turbokv:spec_decode_{name} (\S+)$", text, re.M)
        val[name] = float(m.group(1)) if m else 0.0
    return val["num_draft_tokens_total"], val["num_accepted_tokens_total"]


def one(url, engine, msgs, max_tokens):
    before = tkv_counters(url) if engine == "turbokv" else None
    body = {"messages": msgs, "max_tokens": max_tokens, "temperature": 0.0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    first = last = None
    usage = timings = None
    text = []
    with requests.post(f"{url}/v1/chat/completions", json=body, stream=True, timeout=3600) as r:
        if r.status_code != 200:
            sys.exit(f"spec_client: HTTP {r.status_code}: {r.text[:500]}")
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[6:])
            usage = ev.get("usage") or usage
            timings = ev.get("timings") or timings
            for ch in ev.get("choices", []):
                piece = (ch.get("delta") or {}).get("content")
                if piece:
                    now = time.perf_counter()
                    first = first if first is not None else now
                    last = now
                    text.append(piece)
    if not usage or first is None:
        sys.exit("spec_client: the stream had no usage or no content")
    n = usage["completion_tokens"]
    if engine == "turbokv":
        after = tkv_counters(url)
        drafted, accepted = after[0] - before[0], after[1] - before[1]
    else:
        drafted = (timings or {}).get("draft_n", 0)
        accepted = (timings or {}).get("draft_n_accepted", 0)
    return {"tokens": n, "ttft_ms": (first - t0) * 1e3,
            "decode_tok_s": (n - 1) / (last - first) if n > 1 and last > first else None,
            "drafted": drafted, "accepted": accepted, "text": "".join(text)}


def main():
    url, engine, kind, max_tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    reqs = [one(url, engine, m, max_tokens) for m in messages(kind)]
    toks = sum(r["tokens"] - 1 for r in reqs)
    secs = sum((r["tokens"] - 1) / r["decode_tok_s"] for r in reqs if r["decode_tok_s"])
    drafted = sum(r["drafted"] for r in reqs)
    accepted = sum(r["accepted"] for r in reqs)
    print(json.dumps({"tok_s": toks / secs if secs else None,
                      "accept_rate": accepted / drafted if drafted else None,
                      "drafted": drafted, "accepted": accepted, "requests": reqs}))


if __name__ == "__main__":
    main()
