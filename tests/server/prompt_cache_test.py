"""`turbokv serve --prompt-cache DIR` across a restart (SmolLM2-135M, turbo KV):
a server answers a long prompt and exits; a new server on the same directory
answers the same prompt with its full KV pages loaded from disk instead of
prefilled (usage.prompt_tokens_details.cached_tokens, /metrics) and the same
greedy text; a bf16 server on the directory shares nothing with it.
usage: prompt_cache_test.py TURBOKV_BINARY"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from serverlib import Server  # noqa: E402

PROMPT = " ".join(f"Item {i}: a red brick house with a green door." for i in range(30))


def complete(srv):
    status, _, data = srv.request("POST", "/v1/completions", {
        "prompt": PROMPT, "max_tokens": 6, "temperature": 0})
    assert status == 200, (status, data)
    body = json.loads(data)
    details = body["usage"].get("prompt_tokens_details") or {}
    return body["choices"][0]["text"], body["usage"]["prompt_tokens"], details.get("cached_tokens", 0)


def serve(binary, scheme, cache_dir):
    return Server(binary, "--kv-quant", scheme, "-c", "1024", "--parallel", "2",
                  "--prompt-cache", cache_dir, "--prompt-cache-size", "64MiB")


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = os.path.join(tmp, "pc")
        srv = serve(binary, "turbo", cache_dir)
        try:
            text1, n_prompt, cached1 = complete(srv)
        finally:
            assert srv.terminate() == 0, srv.output()
        assert cached1 == 0, cached1
        blocks = [f for f in os.listdir(cache_dir) if f.endswith(".tkvb")]
        assert len(blocks) == (n_prompt + 6 - 1) // 64, (blocks, n_prompt)

        srv = serve(binary, "turbo", cache_dir)
        try:
            text2, _, cached2 = complete(srv)
            m = srv.metrics()
        finally:
            assert srv.terminate() == 0, srv.output()
        want = (n_prompt - 1) // 64 * 64
        assert cached2 == want, f"restarted server reused {cached2} tokens, expected {want}"
        assert text2 == text1, (text1, text2)
        assert m["turbokv:prompt_cache_disk_hits_total"] == 1, m
        assert m["turbokv:prompt_cache_disk_tokens_total"] == want, m

        srv = serve(binary, "bf16", cache_dir)
        try:
            _, _, cached3 = complete(srv)
            m = srv.metrics()
        finally:
            assert srv.terminate() == 0, srv.output()
        assert cached3 == 0 and m["turbokv:prompt_cache_disk_skipped_total"] == 0, (cached3, m)
    print(f"ok: {n_prompt}-token prompt, {want} tokens loaded after a restart, same text")


if __name__ == "__main__":
    main()
