"""`turbokv serve --kv-events` end to end (loopback, SmolLM2, -c 512): a ZMQ
subscriber decodes vLLM-format KV event batches while requests with shared
prefixes and distinct long prompts run (the small pool forces evictions); the
blocks it reconstructs from BlockStored / BlockRemoved must equal the server's
prefix cache at the end (turbokv:prefix_cache_blocks, evictions), every stored
block's parent must be a block it holds, the shared prefix's first block must
carry the prompt's tokens, and the replay socket must return the same batches.
Also two replicas behind vllm-router (scripts/cluster/up --kv-events): each one's
stream rebuilds that replica's prefix cache. Runs on Debian's python3 (python3-zmq, python3-msgpack)."""
import http.client
import json
import os
import random
import re
import subprocess
import sys
import time
import unittest

import msgpack
import zmq

from serverlib import Cluster, Server, install_router, metrics_of

BIN = None
BLOCK = 64


def words(seed, n):
    rng = random.Random(seed)
    vocab = ["river", "stone", "cloud", "amber", "lantern", "orbit", "maple", "signal", "copper",
             "meadow", "harbor", "pixel", "violet", "thunder", "canyon", "ember", "glacier"]
    return " ".join(rng.choice(vocab) + str(rng.randrange(100)) for _ in range(n))


class Subscriber:
    def __init__(self, endpoint):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        self.sock.connect(endpoint)
        self.batches = []  # (seq, payload bytes)

    def drain(self, quiet_s):
        """Reads until nothing arrived for quiet_s."""
        while self.sock.poll(int(quiet_s * 1000)):
            topic, seq, payload = self.sock.recv_multipart()
            self.batches.append((int.from_bytes(seq, "big"), payload))

    def close(self):
        self.sock.close(0)
        self.ctx.term()


def endpoints(server):
    m = re.search(r"kv events on (tcp://[\d.]+:\d+)(?:, replay on (tcp://[\d.]+:\d+))?",
                  server.output())
    assert m, server.output()
    return m.group(1), m.group(2)


class KvEventsTest(unittest.TestCase):
    def test_refuses_bad_endpoints(self):
        for ep, why in [("udp://127.0.0.1:5557", "scheme 'udp' is not supported"),
                        ("tcp://*:5557", "name the address to bind"),
                        ("127.0.0.1:5557", "no scheme")]:
            p = subprocess.run([BIN, "serve", "--port", "0", "--kv-events", ep],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn(why, p.stderr)

    def complete(self, server, prompt, max_tokens=4):
        status, _, body = server.request("POST", "/v1/completions", {
            "prompt": prompt, "max_tokens": max_tokens, "temperature": 0})
        self.assertEqual(status, 200, body)

    def rebuild(self, batches):
        """The blocks a consumer holds after these batches: (held hashes, removed count,
        {hash: tokens} of parentless blocks), checking every event on the way."""
        held, removed = set(), 0
        first_blocks = {}  # hash -> tokens of a block with no parent
        for _, payload in batches:
            batch = msgpack.unpackb(payload, raw=False)
            self.assertEqual(len(batch), 3)  # [ts, events, data_parallel_rank]
            ts, events, dp_rank = batch
            self.assertIsInstance(ts, float)
            self.assertLess(abs(ts - time.time()), 600)
            self.assertEqual(dp_rank, 0)
            for ev in events:
                tag = ev[0]
                if tag == "BlockStored":
                    self.assertEqual(len(ev), 8, ev[:1])
                    _, hashes, parent, tokens, block_size, lora_id, medium, lora_name = ev
                    self.assertEqual(block_size, BLOCK)
                    self.assertEqual(len(tokens), len(hashes) * BLOCK)
                    self.assertEqual((lora_id, medium, lora_name), (None, "CPU", None))
                    if parent is not None:
                        self.assertIn(parent, held, "stored block's parent is unknown")
                    else:
                        first_blocks[hashes[0]] = tokens[:BLOCK]
                    for h in hashes:
                        self.assertNotIn(h, held, "block stored twice")
                        held.add(h)
                elif tag == "BlockRemoved":
                    _, hashes, medium = ev
                    self.assertEqual(medium, "CPU")
                    for h in hashes:
                        self.assertIn(h, held, "removed a block never stored")
                        held.remove(h)
                    removed += len(hashes)
                else:
                    self.fail(f"unexpected event {tag}")
        return held, removed, first_blocks

    def test_events_match_the_prefix_cache(self):
        server = Server(BIN, "-c", "512", "--parallel", "1", "--kv-events", "tcp://127.0.0.1:0",
                        "--kv-events-replay", "tcp://127.0.0.1:0")
        sub = None
        try:
            pub_ep, replay_ep = endpoints(server)
            sub = Subscriber(pub_ep)
            time.sleep(0.5)  # a SUB misses what is sent before its subscription arrives
            shared = words(1, 90)
            prompts = [shared + " question " + words(100 + i, 12) for i in range(4)]
            prompts += [words(200 + i, 60) for i in range(6)]  # distinct: fill the pool
            prompts += [shared + " again " + words(300, 12)]
            for p in prompts:
                self.complete(server, p)
            sub.drain(1.0)
            m = server.metrics()
            self.assertEqual(m["turbokv:kv_events_batches_published_total"], len(sub.batches))
            self.assertEqual(m["turbokv:kv_events_dropped_total"], 0)
            self.assertEqual([s for s, _ in sub.batches], list(range(len(sub.batches))))

            held, removed, first_blocks = self.rebuild(sub.batches)
            self.assertGreater(removed, 0, "the pool was meant to overflow")
            self.assertEqual(len(held), m["turbokv:prefix_cache_blocks"])
            self.assertEqual(removed, m["turbokv:prefix_cache_evictions_total"])
            self.assertGreater(m["turbokv:prefix_cache_hits_total"], 0)
            # The shared prefix's first block holds the prompt's first 64 tokens.
            status, _, body = server.request("POST", "/tokenize", {"content": shared, "add_special": True})
            self.assertEqual(status, 200, body)
            toks = json.loads(body)["tokens"][:BLOCK]
            self.assertIn(toks, list(first_blocks.values()))

            # A late joiner asks the replay socket for everything from seq 1 on.
            ctx = zmq.Context()
            dealer = ctx.socket(zmq.DEALER)
            dealer.connect(replay_ep)
            dealer.send_multipart([b"", (1).to_bytes(8, "big")])
            replayed = []
            while True:
                self.assertTrue(dealer.poll(10000), "replay answered nothing")
                empty, seq, payload = dealer.recv_multipart()
                seq = int.from_bytes(seq, "big", signed=True)
                if seq == -1:
                    break
                replayed.append((seq, payload))
            dealer.close(0)
            ctx.term()
            self.assertEqual(replayed, sub.batches[1:])
        finally:
            if sub:
                sub.close()
            self.assertEqual(server.terminate(), 0, server.output())

    def test_two_replicas_behind_the_router(self):
        # scripts/cluster/up --kv-events: each replica publishes its own stream; requests
        # with shared prefixes go through vllm-router (round robin), and each stream
        # rebuilds exactly that replica's prefix cache.
        if not install_router():
            if os.environ.get("CI") == "true":
                self.fail("vllm-router could not be installed")
            self.skipTest("vllm-router could not be installed")
        c = Cluster(BIN, 2, "round_robin", ["-c", "512", "--parallel", "1"], kv_events=True)
        subs = []
        try:
            subs = [Subscriber(c.events_endpoint(i)) for i in range(2)]
            time.sleep(0.5)
            shared = words(11, 90)
            prompts = [shared + " question " + words(400 + i, 12) for i in range(6)]
            prompts += [words(500 + i, 60) for i in range(8)]
            for p in prompts:
                conn = http.client.HTTPConnection("127.0.0.1", c.router_port, timeout=120)
                conn.request("POST", "/v1/completions", json.dumps(
                    {"prompt": p, "max_tokens": 4, "temperature": 0}),
                    {"Content-Type": "application/json"})
                r = conn.getresponse()
                self.assertEqual(r.status, 200, r.read())
                r.read()
                conn.close()
            hits = 0
            for i, (sub, (_, url)) in enumerate(zip(subs, c.replicas)):
                sub.drain(1.0)
                m = metrics_of(url)
                self.assertGreater(m["turbokv:generation_tokens_total"], 0, f"replica {i} idle")
                held, removed, _ = self.rebuild(sub.batches)
                self.assertEqual(len(held), m["turbokv:prefix_cache_blocks"], f"replica {i}")
                self.assertEqual(removed, m["turbokv:prefix_cache_evictions_total"], f"replica {i}")
                hits += m["turbokv:prefix_cache_hits_total"]
            self.assertGreater(hits, 0)
        finally:
            for sub in subs:
                sub.close()
            c.down()

    def test_map_events_and_router_metrics(self):
        server = Server(BIN, "-c", "512", "--parallel", "1", "--kv-events", "tcp://127.0.0.1:0",
                        "--kv-events-format", "map")
        sub = None
        try:
            sub = Subscriber(endpoints(server)[0])
            time.sleep(0.5)
            self.complete(server, words(7, 100))
            sub.drain(1.0)
            self.assertGreater(len(sub.batches), 0)
            ev = msgpack.unpackb(sub.batches[0][1], raw=False)[1][0]
            self.assertEqual(ev["type"], "BlockStored")
            self.assertIsNone(ev["parent_block_hash"])
            self.assertEqual(ev["block_size"], BLOCK)
            self.assertEqual(ev["medium"], "CPU")
            m = server.metrics()
            for name in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"):
                self.assertEqual(m["vllm:" + name], m["turbokv:" + name], name)
            self.assertEqual(m["vllm:gpu_cache_usage_perc"], m["turbokv:kv_cache_usage_perc"])
            self.assertEqual(m['vllm:cache_config_info{block_size="64"}'], 1)
        finally:
            if sub:
                sub.close()
            self.assertEqual(server.terminate(), 0, server.output())


if __name__ == "__main__":
    BIN = sys.argv.pop(1)
    unittest.main(verbosity=2)
