"""64 concurrent streaming clients against one `turbokv serve` (SmolLM2-135M,
turbo KV cache, --parallel 8) for a bounded time, with random max_tokens and
random mid-stream disconnects. Checks: no 5xx (no error status at all); every
stream that was not cut ends with a finish reason and [DONE] and equals, text
and finish reason, the same greedy request run alone afterwards; the KV pages
in use return to their starting value (the disconnects' requests were
cancelled and freed); RSS stays bounded.
usage: concurrency_test.py TURBOKV_BINARY [SECONDS] [--sanitized]
(--sanitized: 32 clients and max_tokens up to 12, for the ~10x slower ASan build)"""
import http.client
import json
import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from serverlib import Server, sse_events  # noqa: E402

CLIENTS = 64
MAX_TOKENS = (4, 12, 24)
PROMPTS = [
    "Once upon a time",
    "The capital of France is",
    "def fibonacci(n):",
    "List three colors:",
    "In 1492, Columbus",
    "The best way to learn a language is",
    # Longer than a KV page (64 tokens): their prefixes go through the prefix cache.
    " ".join(f"Step {i}: add water to the pot." for i in range(14)),
    " ".join(f"Row {i} of the table has {i * 3} apples." for i in range(12)),
]


def stream_once(port, prompt, max_tokens, cut_after):
    """One streamed completion; cut_after: close the socket after that many
    text chunks (None: read to the end). Returns a result dict."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True})
    conn.request("POST", "/v1/completions", body=body,
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    out = {"status": resp.status, "text": "", "finish": None, "done": False, "cut": False,
           "error": None}
    if resp.status != 200:
        out["error"] = resp.read().decode(errors="replace")
        conn.close()
        return out
    chunks = 0
    for ev in sse_events(resp):
        if ev == "[DONE]":
            out["done"] = True
            break
        if "error" in ev:
            out["error"] = ev["error"]
            break
        ch = ev["choices"][0]
        out["text"] += ch["text"]
        out["finish"] = ch["finish_reason"] or out["finish"]
        if ch["text"]:
            chunks += 1
        if cut_after is not None and chunks >= cut_after:
            out["cut"] = True
            conn.sock.shutdown(socket.SHUT_RDWR)
            break
    conn.close()
    return out


def main():
    binary = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
    global CLIENTS, MAX_TOKENS
    if "--sanitized" in sys.argv[3:]:
        CLIENTS, MAX_TOKENS = 32, (4, 12)
    srv = Server(binary, "--kv-quant", "turbo", "-c", "512", "--parallel", "8")
    failures = []
    try:
        start_pages = srv.metrics()["turbokv:kv_pages_used"]
        rss0 = srv.rss_bytes()
        results, lock = [], threading.Lock()
        deadline = time.time() + seconds

        def client(i):
            rng = random.Random(1000 + i)
            while time.time() < deadline:
                p = rng.randrange(len(PROMPTS))
                m = rng.choice(MAX_TOKENS)
                cut = rng.randrange(1, m) if rng.random() < 0.3 else None
                try:
                    r = stream_once(srv.port, PROMPTS[p], m, cut)
                except Exception as e:  # a refused or broken connection is a failure too
                    r = {"status": -1, "error": repr(e), "cut": False}
                r.update(prompt=p, max_tokens=m)
                with lock:
                    results.append(r)

        peak = {"pages": start_pages}
        clients_done = threading.Event()

        def sample():  # the pages check below means something only if pages were taken
            while not clients_done.is_set():
                peak["pages"] = max(peak["pages"], srv.metrics()["turbokv:kv_pages_used"])
                time.sleep(0.2)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        sampler = threading.Thread(target=sample)
        for t in threads + [sampler]:
            t.start()
        for t in threads:
            t.join(seconds + 600)
        clients_done.set()
        sampler.join()
        if peak["pages"] <= start_pages:
            failures.append(f"KV pages in use never rose above {start_pages}")
        print(f"[concurrency] {len(results)} streams in {seconds:.0f} s from {CLIENTS} clients, "
              f"{sum(r['cut'] for r in results)} cut mid-stream")
        bad_status = [r for r in results if r["status"] != 200]
        if bad_status:
            failures.append(f"{len(bad_status)} requests with an error status, e.g. {bad_status[0]}")
        if len(results) < CLIENTS:
            failures.append(f"only {len(results)} streams finished")
        complete = [r for r in results if r["status"] == 200 and not r["cut"]]
        for r in complete:
            if r["error"] or not r["done"] or r["finish"] not in ("stop", "length"):
                failures.append(f"stream did not end cleanly: {r}")
        # The same requests, each alone on the idle server.
        alone = {}
        for key in sorted({(r["prompt"], r["max_tokens"]) for r in complete}):
            ref = stream_once(srv.port, PROMPTS[key[0]], key[1], None)
            alone[key] = (ref["text"], ref["finish"])
        mismatched = [r for r in complete
                      if (r["text"], r["finish"]) != alone[(r["prompt"], r["max_tokens"])]]
        for r in mismatched[:3]:
            failures.append(f"prompt {r['prompt']} max_tokens {r['max_tokens']}: batched "
                            f"{r['text']!r} ({r['finish']}) != alone "
                            f"{alone[(r['prompt'], r['max_tokens'])]!r}")
        if mismatched:
            failures.append(f"{len(mismatched)} of {len(complete)} streams differ from alone")
        # Cut streams were cancelled: their pages come back.
        m = {}
        for _ in range(100):
            m = srv.metrics()
            if (m["turbokv:kv_pages_used"] == start_pages and m["turbokv:num_requests_running"] == 0
                    and m["turbokv:num_requests_waiting"] == 0):
                break
            time.sleep(0.1)
        else:
            failures.append(f"KV pages used {m['turbokv:kv_pages_used']} (start {start_pages}), "
                            f"running {m['turbokv:num_requests_running']}, waiting "
                            f"{m['turbokv:num_requests_waiting']}")
        cancelled = m.get('turbokv:request_success_total{finished_reason="cancelled"}', 0)
        print(f"[concurrency] peak KV pages in use {peak['pages']:.0f}; {cancelled:.0f} requests "
              "cancelled by disconnects")
        if cancelled == 0:
            failures.append("no disconnect cancelled a request")
        if any(k.startswith("turbokv:http_errors_total") for k in m):
            failures.append("the server counted error responses: " +
                            str({k: v for k, v in m.items() if "http_errors" in k}))
        growth = srv.rss_bytes() - rss0
        print(f"[concurrency] RSS growth {growth / 2**20:.1f} MiB; "
              f"{len(complete)} complete streams, {len(alone)} distinct requests checked alone")
        if growth > 256 * 2**20:
            failures.append(f"RSS grew by {growth / 2**20:.0f} MiB")
    finally:
        rc = srv.terminate()
    if rc != 0:
        failures.append(f"server exit code {rc}")
    for f in failures:
        print("FAIL", f)
    print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
