"""scripts/cluster end to end on loopback: two `turbokv serve` replicas (SmolLM2,
one pinned core each) behind vllm-router, driven by the real openai client.
Every request through the router is answered, with the same greedy text a replica
gives directly; cache_aware routing sends prompts that share a long prefix to one
replica (its prefix cache hits); a replica killed with SIGKILL mid-run loses no
non-streamed request (the router retries them on the other) and the survivor keeps
serving streams. Exit 77 (skip) when vllm-router cannot be installed, except under
CI=true, where that fails.
usage: cluster_test.py TURBOKV_BINARY"""
import concurrent.futures as cf
import os
import signal
import subprocess
import sys
import time
import unittest

from openai import OpenAI
from openai.types.chat import ChatCompletion, ChatCompletionChunk

# pydantic builds a response model's schema on first use; two client threads doing that at
# once can fail ("ChatCompletionChunk has no attribute '__pydantic_core_schema__'"): build
# them here, before any thread.
for _model in (ChatCompletion, ChatCompletionChunk):
    _model.model_rebuild()

sys.path.insert(0, os.path.dirname(__file__))
import serverlib  # noqa: E402

BIN = None
SYSTEM = " ".join(f"Rule {i}: answer briefly and name the color of box {i}." for i in range(40))


class Cluster(serverlib.Cluster):
    def __init__(self, policy):
        super().__init__(BIN, 2, policy, ["-c", "1024", "--alias", "smol", "--kv-quant", "turbo"])
        self.client = OpenAI(base_url=self.router + "/v1", api_key="none", max_retries=0,
                             timeout=120)


def chat(client, content, stream=False, max_tokens=12):
    kw = dict(model="smol", messages=[{"role": "user", "content": content}],
              max_tokens=max_tokens, temperature=0)
    if not stream:
        return client.chat.completions.create(**kw).choices[0].message.content
    text = ""
    for chunk in client.chat.completions.create(stream=True, **kw):
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
    return text


class RoundRobinTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Cluster("round_robin")

    @classmethod
    def tearDownClass(cls):
        cls.c.down()

    def test_1_answers_match_a_replica(self):
        direct = OpenAI(base_url=self.c.replicas[0][1] + "/v1", api_key="none", max_retries=0)
        prompts = [f"Name {i} fruits." for i in range(8)]
        want = [chat(direct, p) for p in prompts]
        with cf.ThreadPoolExecutor(4) as ex:
            got = list(ex.map(lambda p: chat(self.c.client, p), prompts))
            got_stream = list(ex.map(lambda p: chat(self.c.client, p, stream=True), prompts))
        self.assertEqual(got, want)
        self.assertEqual(got_stream, want)
        comp = self.c.client.completions.create(model="smol", prompt="The sky is", max_tokens=4,
                                                temperature=0)
        self.assertEqual(comp.usage.completion_tokens, 4)
        # Round robin: both replicas served some of them.
        for _, url in self.c.replicas:
            m = serverlib.metrics_of(url)
            self.assertGreater(m["turbokv:generation_tokens_total"], 0, url)

    def test_2_replica_killed_mid_run(self):
        prompts = [f"Write a list of {i + 3} animals." for i in range(36)]
        with cf.ThreadPoolExecutor(6) as ex:
            futs = [ex.submit(chat, self.c.client, p, False, 24) for p in prompts]
            # Kill replica 1 while requests are in flight on both.
            deadline = time.time() + 60
            while time.time() < deadline and sum(f.done() for f in futs) < 6:
                time.sleep(0.05)
            pid = self.c.replicas[1][0]
            os.kill(pid, signal.SIGKILL)
            done_at_kill = sum(f.done() for f in futs)
            answers = [f.result() for f in futs]  # raises if any request was lost
        self.assertLess(done_at_kill, len(prompts), "the kill came after the run")
        self.assertTrue(all(answers))
        self.assertIn("Failed to send", self.c.log("router"),
                      "no request reached the killed replica")
        # The survivor keeps serving, streamed and not, once the router has seen the death.
        time.sleep(3)
        for i in range(6):
            self.assertTrue(chat(self.c.client, f"Say {i}.", stream=i % 2 == 0))


class CacheAwareTest(unittest.TestCase):
    def test_shared_prefix_goes_to_one_replica(self):
        c = Cluster("cache_aware")
        try:
            for i in range(6):
                chat(c.client, SYSTEM + f" Question {i}: which box is blue?", max_tokens=4)
            ms = [serverlib.metrics_of(url) for _, url in c.replicas]
            hits = [m["turbokv:prefix_cache_hits_total"] for m in ms]
            gen = [m["turbokv:generation_tokens_total"] for m in ms]
        finally:
            c.down()
        # All six share a ~500-token prefix: one replica got them all (five hit).
        self.assertEqual(sorted(g > 0 for g in gen), [False, True], gen)
        self.assertGreaterEqual(max(hits), 5 * 448, hits)


if __name__ == "__main__":
    BIN = os.path.abspath(sys.argv.pop(1))
    if not serverlib.install_router():
        sys.exit(1 if os.environ.get("CI") == "true" else 77)
    unittest.main(verbosity=2)
