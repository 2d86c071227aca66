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
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

import openai
from openai import OpenAI

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLUSTER = os.path.join(ROOT, "scripts", "cluster")
BIN = None
SYSTEM = " ".join(f"Rule {i}: answer briefly and name the color of box {i}." for i in range(40))


def free_run(n):
    """A port P with P .. P+n-1 all free on 127.0.0.1 now."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        try:
            for p in range(base, base + n):
                socket.create_server(("127.0.0.1", p)).close()
            return base
        except OSError:
            continue
    raise RuntimeError(f"no {n} consecutive free ports")


def metrics(url):
    out = {}
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
    return out


class Cluster:
    def __init__(self, policy):
        self.dir = tempfile.mkdtemp(prefix="tkv-cluster-")
        # Replicas on base, base+1; the router on base+2 (its metrics on base+3).
        base = free_run(4)
        router_port = base + 2
        cpus = ["--cpus", "1"] if os.cpu_count() >= 2 else []
        cmd = [os.path.join(CLUSTER, "up"), "-n", "2", "--policy", policy, "--port",
               str(router_port), "--base-port", str(base), "--dir", self.dir, *cpus,
               "--", "-c", "1024", "--alias", "smol", "--kv-quant", "turbo"]
        env = dict(os.environ, TURBOKV=BIN)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"cluster/up failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        self.router = f"http://127.0.0.1:{router_port}"
        self.replicas = []  # (pid, url)
        with open(os.path.join(self.dir, "pids")) as f:
            for line in f:
                pid, name, url = line.split()
                if name.startswith("replica"):
                    self.replicas.append((int(pid), url))
        self.client = OpenAI(base_url=self.router + "/v1", api_key="none", max_retries=0,
                             timeout=120)

    def down(self):
        subprocess.run([os.path.join(CLUSTER, "down"), "--dir", self.dir], timeout=120,
                       check=True, capture_output=True)

    def log(self, name):
        with open(os.path.join(self.dir, name + ".log")) as f:
            return f.read()


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
            self.assertGreater(metrics(url)["turbokv:generation_tokens_total"], 0, url)

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
            hits = [metrics(url)["turbokv:prefix_cache_hits_total"] for _, url in c.replicas]
            gen = [metrics(url)["turbokv:generation_tokens_total"] for _, url in c.replicas]
        finally:
            c.down()
        # All six share a ~500-token prefix: one replica got them all (five hit).
        self.assertEqual(sorted(g > 0 for g in gen), [False, True], gen)
        self.assertGreaterEqual(max(hits), 5 * 448, hits)


if __name__ == "__main__":
    BIN = os.path.abspath(sys.argv.pop(1))
    r = subprocess.run([os.path.join(CLUSTER, "install-router")], capture_output=True, text=True)
    if r.returncode != 0:
        print("vllm-router could not be installed:\n" + r.stderr)
        sys.exit(1 if os.environ.get("CI") == "true" else 77)
    unittest.main(verbosity=2)
