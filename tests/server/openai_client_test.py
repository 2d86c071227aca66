"""`turbokv serve` through the real `openai` Python client (SmolLM2-135M, turbo
KV cache): chat and completions, streamed and not, stop strings, max_tokens, n,
usage, logprobs, the models list, every error path with the client's own
exception types, auth, the SIGTERM drain, and --spec ngram.
usage: openai_client_test.py TURBOKV_BINARY"""
import json
import sys
import threading
import time
import unittest

import openai
from openai import OpenAI

sys.path.insert(0, __import__("os").path.dirname(__file__))
from serverlib import Server, sse_events  # noqa: E402

BIN = None
KEY = "test-key-123"
CTX = 512
LONG_PROMPT = " ".join(f"Item {i} is a small red box on the table." for i in range(30))


class OpenAIClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server(BIN, "--kv-quant", "turbo", "-c", str(CTX), "--parallel", "4",
                         "--api-key", KEY, "--max-body", "1MiB")
        cls.client = OpenAI(base_url=cls.srv.base_url + "/v1", api_key=KEY, max_retries=0,
                            timeout=120)
        cls.model = cls.client.models.list().data[0].id
        cls.auth = {"Authorization": "Bearer " + KEY}

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.terminate()
        assert rc == 0, f"server exit code {rc}: {cls.srv.output()}"

    def chat(self, content, **kw):
        return self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": content}], **kw)

    def complete(self, prompt, **kw):
        return self.client.completions.create(model=self.model, prompt=prompt, **kw)

    # --- routes and shapes -------------------------------------------------

    def test_models_list(self):
        models = self.client.models.list().data
        self.assertEqual(len(models), 1)
        self.assertIn("SmolLM2", models[0].id)
        self.assertEqual(models[0].object, "model")

    def test_chat_stream_matches_non_stream(self):
        q = "What is the capital of France?"
        full = self.chat(q, max_tokens=24, temperature=0)
        choice = full.choices[0]
        self.assertEqual(full.object, "chat.completion")
        self.assertEqual(choice.message.role, "assistant")
        self.assertTrue(choice.message.content)
        self.assertIn(choice.finish_reason, ("stop", "length"))
        u = full.usage
        self.assertGreater(u.prompt_tokens, 5)
        self.assertTrue(1 <= u.completion_tokens <= 24)
        self.assertEqual(u.total_tokens, u.prompt_tokens + u.completion_tokens)
        self.assertIsNotNone(u.prompt_tokens_details.cached_tokens)
        # llama-server's timings object beside the usage: prompt tokens computed + reused
        # = the prompt; the decode rate over the tokens sampled after the first (an end
        # token is sampled but not streamed).
        t = full.model_extra["timings"]
        self.assertEqual(t["prompt_n"] + t["cache_n"], u.prompt_tokens)
        self.assertEqual(t["cache_n"], u.prompt_tokens_details.cached_tokens)
        self.assertTrue(0 <= t["predicted_n"] <= u.completion_tokens)
        if t["predicted_n"] > 0:
            self.assertAlmostEqual(t["predicted_per_second"],
                                   t["predicted_n"] * 1000 / t["predicted_ms"], places=3)
        self.assertEqual((t["draft_n"], t["draft_n_accepted"]), (0, 0))
        text, finish, usage, roles = "", None, None, []
        for chunk in self.chat(q, max_tokens=24, temperature=0, stream=True,
                               stream_options={"include_usage": True}):
            self.assertEqual(chunk.object, "chat.completion.chunk")
            if chunk.choices and chunk.choices[0].finish_reason:
                ts = chunk.model_extra["timings"]  # the finish chunk carries its choice's
                self.assertEqual(ts["prompt_n"] + ts["cache_n"], u.prompt_tokens)
            if chunk.usage is not None:
                usage = chunk.usage
                self.assertEqual(chunk.choices, [])
                continue
            d = chunk.choices[0].delta
            if d.role:
                roles.append(d.role)
            text += d.content or ""
            finish = chunk.choices[0].finish_reason or finish
        self.assertEqual(roles, ["assistant"])
        self.assertEqual(text, choice.message.content)
        self.assertEqual(finish, choice.finish_reason)
        self.assertIsNotNone(usage)
        self.assertEqual(usage.completion_tokens, u.completion_tokens)
        self.assertEqual(usage.prompt_tokens, u.prompt_tokens)

    def test_completions_stream_matches_non_stream(self):
        full = self.complete("Once upon a time", max_tokens=12, temperature=0)
        self.assertEqual(full.object, "text_completion")
        text = "".join(c.choices[0].text for c in self.complete(
            "Once upon a time", max_tokens=12, temperature=0, stream=True) if c.choices)
        self.assertEqual(text, full.choices[0].text)
        self.assertTrue(text)

    def test_token_array_prompt(self):
        _, _, body = self.srv.request("POST", "/tokenize", {"content": "Once upon a time"},
                                      self.auth)
        ids = json.loads(body)["tokens"]
        _, _, back = self.srv.request("POST", "/detokenize", {"tokens": ids}, self.auth)
        self.assertEqual(json.loads(back)["content"], "Once upon a time")
        by_ids = self.complete(ids, max_tokens=8, temperature=0)
        self.assertEqual(by_ids.usage.prompt_tokens, len(ids))

    def test_max_tokens_length(self):
        r = self.complete("The list of numbers:", max_tokens=5, temperature=0,
                          extra_body={"ignore_eos": True})
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 5)
        c = self.chat("Tell me a long story.", max_completion_tokens=3, temperature=0)
        self.assertEqual(c.choices[0].finish_reason, "length")
        self.assertEqual(c.usage.completion_tokens, 3)

    def test_stop_strings(self):
        base = self.complete("Once upon a time", max_tokens=24, temperature=0,
                             extra_body={"ignore_eos": True}).choices[0].text
        words = base.split()
        self.assertGreater(len(words), 4, base)
        stop = " " + words[3]
        cut = base[:base.index(stop)]
        for stops in (stop, [stop, "zzqqzz"]):
            r = self.complete("Once upon a time", max_tokens=24, temperature=0, stop=stops)
            self.assertEqual(r.choices[0].text, cut)
            self.assertEqual(r.choices[0].finish_reason, "stop")
        text = "".join(c.choices[0].text for c in self.complete(
            "Once upon a time", max_tokens=24, temperature=0, stop=stop, stream=True)
            if c.choices)
        self.assertEqual(text, cut)

    def test_n_choices_share_the_prefill(self):
        before = self.srv.metrics(self.auth)["turbokv:prefix_cache_hits_total"]
        r = self.complete(LONG_PROMPT, n=2, max_tokens=6, temperature=0.9, seed=7,
                          extra_body={"ignore_eos": True})
        self.assertEqual(sorted(c.index for c in r.choices), [0, 1])
        self.assertEqual(r.usage.completion_tokens, 12)
        hits = self.srv.metrics(self.auth)["turbokv:prefix_cache_hits_total"] - before
        # Choice 1 reuses choice 0's full prompt pages (64 tokens each).
        self.assertGreaterEqual(hits, (r.usage.prompt_tokens // 64) * 64 - 64, hits)
        self.assertGreater(hits, 0)
        seen = set()
        for c in self.chat("Say hi.", n=2, max_tokens=4, temperature=0.9, stream=True):
            for ch in c.choices:
                seen.add(ch.index)
        self.assertEqual(seen, {0, 1})

    def test_sampling_fields_accepted(self):
        r = self.chat("Hello", max_tokens=4, temperature=0.7, top_p=0.9, seed=3,
                      frequency_penalty=0.5, presence_penalty=0.5,
                      extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1})
        self.assertTrue(1 <= r.usage.completion_tokens <= 4)
        a = self.chat("Hello", max_tokens=6, temperature=1.0, seed=11)
        b = self.chat("Hello", max_tokens=6, temperature=1.0, seed=11)
        self.assertEqual(a.choices[0].message.content, b.choices[0].message.content)

    def test_router_fields(self):
        # vllm-router and sglang-router forward every request with these fields set to
        # their defaults: accepted; a value turbokv does not serve is refused by name.
        chat_defaults = {"logprobs": False, "no_stop_trim": False, "ignore_eos": False,
                         "continue_final_message": False, "skip_special_tokens": True,
                         "separate_reasoning": True, "stream_reasoning": True,
                         "return_hidden_states": False, "include_reasoning": True}
        r = self.chat("Hello", max_tokens=3, temperature=0,
                      extra_body={k: v for k, v in chat_defaults.items() if k != "logprobs"})
        self.assertTrue(r.choices[0].message.content)
        c = self.complete("Hello", max_tokens=3, temperature=0,
                          extra_body={"echo": False, "no_stop_trim": False, "ignore_eos": False,
                                      "skip_special_tokens": True, "return_hidden_states": False})
        self.assertTrue(c.choices[0].text)
        bad = openai.BadRequestError
        self.assert_error(bad, lambda: self.chat("hi", extra_body={"skip_special_tokens": False}),
                          "'skip_special_tokens': false is not supported")
        self.assert_error(bad, lambda: self.complete("hi", extra_body={"echo": True}),
                          "'echo': true is not supported")
        self.assert_error(bad, lambda: self.complete("hi", extra_body={"include_reasoning": True}),
                          "unknown field 'include_reasoning'")

    def test_logprobs(self):
        r = self.chat("Name a color.", max_tokens=5, temperature=0, logprobs=True, top_logprobs=3)
        content = r.choices[0].logprobs.content
        self.assertEqual(len(content), r.usage.completion_tokens)
        for e in content:
            self.assertLessEqual(e.logprob, 0.0)
            self.assertEqual(len(e.top_logprobs), 3)
            self.assertEqual(e.top_logprobs[0].token, e.token)  # greedy: the most likely
            self.assertAlmostEqual(e.top_logprobs[0].logprob, e.logprob, places=4)
            self.assertGreaterEqual(e.top_logprobs[0].logprob, e.top_logprobs[2].logprob)
        # Streamed: one entry per token, the same as the whole response's.
        streamed = []
        for chunk in self.chat("Name a color.", max_tokens=5, temperature=0, logprobs=True,
                               top_logprobs=3, stream=True):
            if chunk.choices and chunk.choices[0].logprobs:
                streamed += chunk.choices[0].logprobs.content
        self.assertEqual([(e.token, round(e.logprob, 4)) for e in streamed],
                         [(e.token, round(e.logprob, 4)) for e in content])
        c = self.complete("Once upon a time", max_tokens=4, temperature=0, logprobs=2)
        lp = c.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 4)
        self.assertEqual("".join(lp.tokens), c.choices[0].text)
        self.assertTrue(all(len(t) == 2 for t in lp.top_logprobs))
        self.assertTrue(all(x < 0.0 for x in lp.token_logprobs), lp.token_logprobs)

    def test_chat_page(self):
        # The embedded page is served without a key (it holds no data; its API calls send one).
        status, headers, body = self.srv.request("GET", "/")
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/html"))
        page = body.decode()
        self.assertTrue(page.startswith("<!doctype html>"))
        self.assertIn("/v1/chat/completions", page)
        self.assertTrue(page.rstrip().endswith("</html>"))
        self.assertNotIn("http://", page.split("-->", 1)[1])  # nothing fetched from elsewhere

    def test_health_and_metrics(self):
        status, _, body = self.srv.request("GET", "/health")  # no key needed
        self.assertEqual((status, json.loads(body)), (200, {"status": "ok"}))
        m = self.srv.metrics(self.auth)
        for name in ("turbokv:num_requests_running", "turbokv:num_requests_waiting",
                     "turbokv:prompt_tokens_total", "turbokv:generation_tokens_total",
                     "turbokv:kv_cache_usage_perc", "turbokv:kv_pages_used",
                     "turbokv:kv_pages_free", "turbokv:kv_bytes_used", "turbokv:kv_bytes_free",
                     "turbokv:prefix_cache_hit_ratio", "turbokv:num_preemptions_total",
                     "turbokv:time_to_first_token_seconds_count",
                     'turbokv:inter_token_latency_seconds_bucket{le="+Inf"}'):
            self.assertIn(name, m)

    # --- errors ------------------------------------------------------------

    def assert_error(self, exc_type, fn, *needles):
        with self.assertRaises(exc_type) as cm:
            fn()
        err = cm.exception
        self.assertIsInstance(err.body, dict, err)
        msg = err.body.get("message", "")
        for n in needles:
            self.assertIn(n, msg)
        return err

    def test_bad_requests(self):
        bad = openai.BadRequestError
        self.assert_error(bad, lambda: self.chat("hi", temperature=5), "temperature 5 out of range")
        self.assert_error(bad, lambda: self.chat("hi", max_tokens="many"), "'max_tokens' must be")
        self.assert_error(bad, lambda: self.chat("hi", extra_body={"bogus": 1}),
                          "unknown field 'bogus'")
        self.assert_error(bad, lambda: self.complete("x", stop=[""]), "must not be empty")
        self.assert_error(bad, lambda: self.complete([999999]), "out of range")
        self.assert_error(bad, lambda: self.client.chat.completions.create(
            model=self.model, messages=[{"role": "wizard", "content": "x"}]), "wizard")
        err = self.assert_error(bad, lambda: self.complete(LONG_PROMPT * 2, max_tokens=1),
                                f"the context is {CTX} tokens")
        self.assertRegex(err.body["message"], r"the prompt has \d+ tokens")
        self.assertEqual(err.body["code"], "context_length_exceeded")
        # Malformed JSON and a non-object body: raw requests.
        for body in (b'{"prompt": "x",', b"[1, 2]"):
            status, _, data = self.srv.request(
                "POST", "/v1/completions", body, dict(self.auth, **{"Content-Type": "application/json"}))
            self.assertEqual(status, 400)
            self.assertEqual(json.loads(data)["error"]["type"], "invalid_request_error")
        # The server still serves after all that.
        self.assertTrue(self.complete("Hi", max_tokens=2, temperature=0).choices)

    def test_auth(self):
        wrong = OpenAI(base_url=self.srv.base_url + "/v1", api_key="nope", max_retries=0)
        self.assert_error(openai.AuthenticationError, lambda: wrong.models.list(), "API key")
        self.assert_error(openai.AuthenticationError,
                          lambda: wrong.completions.create(model="m", prompt="x"), "API key")
        for path in ("/metrics", "/v1/models"):
            status, _, data = self.srv.request("GET", path)
            self.assertEqual(status, 401, path)
            self.assertEqual(json.loads(data)["error"]["type"], "authentication_error")

    def test_localhost_only_by_default(self):
        import socket
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            probe.connect(("10.255.255.255", 1))  # no packet is sent: picks the outgoing address
            addr = probe.getsockname()[0]
        except OSError:
            self.skipTest("no non-loopback IPv4 address on this machine")
        finally:
            probe.close()
        if addr.startswith("127."):
            self.skipTest("no non-loopback IPv4 address on this machine")
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection((addr, self.srv.port), timeout=5).close()
        socket.create_connection(("127.0.0.1", self.srv.port), timeout=5).close()

    def test_port_in_use(self):
        import subprocess
        r = subprocess.run([BIN, "serve", "--port", str(self.srv.port), "-c", "64"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"cannot listen on 127.0.0.1:{self.srv.port}", r.stderr)

    def test_not_found(self):
        self.assert_error(openai.NotFoundError, lambda: self.client.models.retrieve("nope"),
                          "no route")
        status, _, data = self.srv.request("GET", "/v2/whatever", headers=self.auth)
        self.assertEqual(status, 404)
        self.assertEqual(json.loads(data)["error"]["code"], "not_found")

    def test_body_too_large(self):
        body = json.dumps({"prompt": "a" * (2 << 20)}).encode()
        status, _, data = self.srv.request("POST", "/v1/completions", body,
                                           dict(self.auth, **{"Content-Type": "application/json"}))
        self.assertEqual(status, 413)
        self.assertIn("larger than the limit", json.loads(data)["error"]["message"])


class SpeculativeServeTest(unittest.TestCase):
    """serve --spec ngram: a greedy completion equals the plain server's, and
    /metrics counts the drafts verified and kept (so the path really ran)."""

    def test_prompt_lookup_keeps_greedy_output(self):
        prompt = "def add(a, b):\n    return a + b\n\n" * 6 + "def add(a, b):\n"
        outs, drafted = {}, {}
        for mode in ("none", "ngram"):
            srv = Server(BIN, "--kv-quant", "turbo", "-c", "512", "--spec", mode)
            try:
                client = OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0,
                                timeout=120)
                r = client.completions.create(model="m", prompt=prompt, max_tokens=40,
                                              temperature=0)
                outs[mode] = r.choices[0].text
                m = srv.metrics()
                drafted[mode] = (m["turbokv:spec_decode_num_draft_tokens_total"],
                                 m["turbokv:spec_decode_num_accepted_tokens_total"])
                # One request: its timings count the same drafts as the server's counters.
                t = r.model_extra["timings"]
                self.assertEqual((t["draft_n"], t["draft_n_accepted"]), drafted[mode])
            finally:
                self.assertEqual(srv.terminate(), 0, srv.output())
        self.assertEqual(outs["ngram"], outs["none"])
        self.assertEqual(drafted["none"], (0, 0))
        self.assertGreater(drafted["ngram"][0], 0)
        self.assertGreater(drafted["ngram"][1], 0)

    def test_bad_spec_flag_refused(self):
        import subprocess
        r = subprocess.run([BIN, "serve", "--port", "0", "--spec", "bogus"], capture_output=True,
                           text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--spec", r.stderr + r.stdout)


class QueueAndDrainTest(unittest.TestCase):
    """One batch slot, no queue: a second request gets 429; SIGTERM lets the
    stream in flight finish, refuses new connections, and exits 0."""

    def test_queue_full_then_drain(self):
        srv = Server(BIN, "--kv-quant", "turbo", "-c", "256", "--parallel", "1",
                     "--max-queue", "0", "--drain-timeout", "60")
        client = OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0, timeout=120)
        try:
            result = {}
            started = threading.Event()

            def long_stream():
                n, finish = 0, None
                for c in client.completions.create(model="m", prompt="Count: 1, 2, 3,",
                                                   max_tokens=48, temperature=0, stream=True,
                                                   extra_body={"ignore_eos": True}):
                    if c.choices and c.choices[0].text:
                        n += 1
                        started.set()
                    if c.choices and c.choices[0].finish_reason:
                        finish = c.choices[0].finish_reason
                result.update(chunks=n, finish=finish)

            t = threading.Thread(target=long_stream)
            t.start()
            self.assertTrue(started.wait(60))
            with self.assertRaises(openai.RateLimitError):
                client.completions.create(model="m", prompt="x", max_tokens=2)
            status, headers, _ = srv.request("POST", "/v1/completions",
                                             {"prompt": "x", "max_tokens": 2})
            self.assertEqual(status, 429)
            self.assertEqual(headers.get("retry-after"), "1")
            srv.proc.send_signal(__import__("signal").SIGTERM)
            time.sleep(0.5)
            with self.assertRaises(OSError):
                srv.request("GET", "/health", timeout=5)
            t.join(120)
            self.assertEqual(result.get("finish"), "length", result)
            self.assertGreater(result.get("chunks", 0), 10)
            self.assertEqual(srv.proc.wait(timeout=60), 0, srv.output())
            self.assertIn("draining", srv.output())
        finally:
            srv.terminate()


    def test_drain_timeout_cancels(self):
        """A stream longer than --drain-timeout is cancelled and told so; exit 0."""
        srv = Server(BIN, "--kv-quant", "turbo", "-c", "2048", "--drain-timeout", "1")
        client = OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0, timeout=120)
        try:
            stream = client.completions.create(model="m", prompt="Count:", max_tokens=2000,
                                               temperature=0, stream=True,
                                               extra_body={"ignore_eos": True})
            it = iter(stream)
            next(it)
            t0 = time.time()
            srv.proc.send_signal(__import__("signal").SIGTERM)
            with self.assertRaises(openai.APIError) as cm:
                for _ in it:
                    pass
            self.assertIn("shutting down", str(cm.exception))
            self.assertEqual(srv.proc.wait(timeout=60), 0, srv.output())
            self.assertLess(time.time() - t0, 30)
        finally:
            srv.terminate()


class NoChatTemplateTest(unittest.TestCase):
    """A model without tokenizer.chat_template (SmolLM2 with that key renamed in
    a copy): completions are served, chat answers a clear 400."""

    def test_chat_refused_completions_served(self):
        import os
        import tempfile
        src = os.path.join(os.environ.get("TKV_MODEL_DIR") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "turbokv",
            "models"), "SmolLM2-135M-Instruct.Q4_1.gguf")
        data = open(src, "rb").read()
        key = b"tokenizer.chat_template"
        self.assertEqual(data.count(key), 1)
        tmp = tempfile.mkdtemp()
        path = os.path.join(tmp, "no-template.gguf")
        with open(path, "wb") as f:
            f.write(data.replace(key, b"tokenizer.chat_templatX"))
        del data
        srv = Server(BIN, "-m", path, "-c", "256")
        try:
            for _ in range(100):  # printed before ready; the reader thread may lag
                if "no chat template" in srv.output():
                    break
                time.sleep(0.05)
            self.assertIn("no chat template", srv.output())
            client = OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0)
            with self.assertRaises(openai.BadRequestError) as cm:
                client.chat.completions.create(model="m", messages=[{"role": "user",
                                                                     "content": "hi"}])
            self.assertIn("has no chat template", cm.exception.body["message"])
            self.assertIn("/v1/completions", cm.exception.body["message"])
            r = client.completions.create(model="m", prompt="Once upon a time", max_tokens=4,
                                          temperature=0)
            self.assertTrue(r.choices[0].text)
        finally:
            self.assertEqual(srv.terminate(), 0)
            os.remove(path)
            os.rmdir(tmp)


class LoadingTest(unittest.TestCase):
    """The server listens before the model is loaded: /health and the API answer
    503 until then. The "model" is a FIFO, so loading waits, deterministically,
    until the test opens it; the load then fails and the server exits 1."""

    def test_503_while_loading_then_load_failure(self):
        import os
        import subprocess
        import tempfile
        fifo = os.path.join(tempfile.mkdtemp(), "model.gguf")
        os.mkfifo(fifo)
        proc = subprocess.Popen([BIN, "serve", "-m", fifo, "--port", "0"], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            line = proc.stdout.readline()
            port = int(line.split("127.0.0.1:")[1].split()[0])
            client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
            import http.client
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/health")
            r = conn.getresponse()
            self.assertEqual((r.status, json.loads(r.read())), (503, {"status": "loading"}))
            conn.close()
            with self.assertRaises(openai.InternalServerError) as cm:
                client.models.list()
            self.assertEqual(cm.exception.status_code, 503)
            self.assertEqual(cm.exception.body["code"], "loading")
            with open(fifo, "w"):
                pass  # the loader's open returns; the FIFO is not a GGUF file
            self.assertEqual(proc.wait(timeout=60), 1)
            self.assertIn("not a regular file", proc.stdout.read())
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()


if __name__ == "__main__":
    BIN = sys.argv.pop(1)
    unittest.main(verbosity=2)
