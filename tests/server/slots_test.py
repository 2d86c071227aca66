"""`turbokv serve --slot-save-path`: llama.cpp's slot routes through the real
`requests` client (SmolLM2-135M, short prompts so it stays quick under ASan).
Save after a completion, erase, restore into another slot: the same prompt
then reports its cached tokens and gives the same greedy text; file names that
leave the directory are refused and nothing is written outside it; a turbo
snapshot is refused by a bf16 server with the kv-store's reason.
usage: slots_test.py TURBOKV_BINARY"""
import os
import sys
import tempfile
import threading
import unittest

import requests

sys.path.insert(0, os.path.dirname(__file__))
from serverlib import Server  # noqa: E402

BIN = None
ARGS = ["-c", "256", "--parallel", "2"]
QUESTION = "Name a colour."


class SlotsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls.tmp.name, "slots")
        cls.outside = os.path.join(cls.tmp.name, "outside")
        os.makedirs(cls.outside)
        cls.srv = Server(BIN, "--kv-quant", "turbo", *ARGS, "--slot-save-path", cls.dir)
        cls.url = cls.srv.base_url

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.terminate()
        cls.tmp.cleanup()
        assert rc == 0, f"server exit code {rc}: {cls.srv.output()}"

    def chat(self, url, **kw):
        body = {"messages": [{"role": "user", "content": QUESTION}], "max_tokens": 8,
                "temperature": 0, **kw}
        r = requests.post(url + "/v1/chat/completions", json=body, timeout=120)
        self.assertEqual(r.status_code, 200, r.text)
        return r.json()

    def action(self, url, slot, action, filename=None, **kw):
        body = {} if filename is None else {"filename": filename}
        return requests.post(f"{url}/slots/{slot}", params={"action": action}, json=body,
                             timeout=120, **kw)

    def slots(self):
        r = requests.get(self.url + "/slots", timeout=30)
        self.assertEqual(r.status_code, 200, r.text)
        return r.json()

    def error(self, r, status):
        self.assertEqual(r.status_code, status, r.text)
        return r.json()["error"]["message"]

    def test_save_erase_restore(self):
        first = self.chat(self.url, id_slot=0)
        text = first["choices"][0]["message"]["content"]
        usage = first["usage"]
        n = usage["prompt_tokens"] + usage["completion_tokens"]
        listed = self.slots()
        self.assertEqual([s["id"] for s in listed], [0, 1])
        self.assertEqual(listed[0]["n_ctx"], 256)
        self.assertFalse(listed[0]["is_processing"])
        self.assertEqual(listed[0]["n_cached_tokens"], n)

        saved = self.action(self.url, 0, "save", "chat.bin")
        self.assertEqual(saved.status_code, 200, saved.text)
        s = saved.json()
        path = os.path.join(self.dir, "chat.bin")
        self.assertEqual((s["id_slot"], s["filename"], s["n_saved"]), (0, "chat.bin", n))
        self.assertEqual(s["n_written"], os.path.getsize(path))
        self.assertGreater(s["timings"]["save_ms"], 0)

        erased = self.action(self.url, 0, "erase")
        self.assertEqual(erased.status_code, 200, erased.text)
        self.assertEqual(erased.json(), {"id_slot": 0, "n_erased": n})
        self.assertEqual(self.slots()[0]["n_cached_tokens"], 0)

        restored = self.action(self.url, 1, "restore", "chat.bin")
        self.assertEqual(restored.status_code, 200, restored.text)
        r = restored.json()
        self.assertEqual((r["id_slot"], r["filename"], r["n_restored"]), (1, "chat.bin", n))
        self.assertEqual(r["n_read"], os.path.getsize(path))
        self.assertIn("restore_ms", r["timings"])
        self.assertEqual(self.slots()[1]["n_cached_tokens"], n)

        # The prompt is shorter than a KV page, so the prefix cache holds none of
        # it: only the restored snapshot can skip its prefill (all but its last token).
        again = self.chat(self.url, id_slot=1)
        self.assertEqual(again["choices"][0]["message"]["content"], text)
        self.assertEqual(again["usage"]["prompt_tokens_details"]["cached_tokens"],
                         usage["prompt_tokens"] - 1)
        self.assertEqual(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0)

    def test_names_outside_the_directory_are_refused(self):
        self.chat(self.url, id_slot=0)
        target = os.path.join(self.outside, "victim.bin")
        with open(target, "wb") as f:
            f.write(b"outside")
        os.symlink(target, os.path.join(self.dir, "link.bin"))
        os.symlink(os.path.join(self.outside, "new.bin"), os.path.join(self.dir, "dangling.bin"))
        cases = {"../x.bin": "'..' is not allowed",
                 os.path.join(self.outside, "abs.bin"): "absolute paths are not allowed",
                 "a/b": "path separators are not allowed",
                 "link.bin": "symlink that points out of --slot-save-path",
                 "dangling.bin": "symlink that points out of --slot-save-path",
                 "": "'filename' is empty"}
        for name, why in cases.items():
            for action in ("save", "restore"):
                msg = self.error(self.action(self.url, 0, action, name), 400)
                self.assertIn(why, msg, (name, action))
        msg = self.error(self.action(self.url, 0, "restore", "/etc/passwd"), 400)
        self.assertIn("absolute paths are not allowed", msg)
        self.assertEqual(sorted(os.listdir(self.outside)), ["victim.bin"])
        with open(target, "rb") as f:
            self.assertEqual(f.read(), b"outside")
        self.assertNotIn("x.bin", os.listdir(self.tmp.name))

    def test_bad_requests(self):
        msg = self.error(self.action(self.url, 0, "compress", "x.bin"), 400)
        self.assertIn("unknown slot action 'compress'", msg)
        self.assertIn("out of range (valid: 0 to 1", self.error(self.action(self.url, 2, "erase"), 400))
        self.assertIn("is not a number", self.error(self.action(self.url, "x", "erase"), 400))
        msg = self.error(self.action(self.url, 0, "restore", "missing.bin"), 404)
        self.assertIn("no snapshot 'missing.bin'", msg)
        body = {"messages": [{"role": "user", "content": "hi"}], "id_slot": 7}
        r = requests.post(self.url + "/v1/chat/completions", json=body, timeout=60)
        self.assertIn("slot id 7 out of range", self.error(r, 400))

    def test_busy_slot(self):
        body = {"messages": [{"role": "user", "content": "Count to one hundred."}],
                "max_tokens": 200, "ignore_eos": True, "temperature": 0, "stream": True,
                "id_slot": 1}
        with requests.post(self.url + "/v1/chat/completions", json=body, stream=True,
                           timeout=120) as stream:
            lines = stream.iter_lines()
            for line in lines:  # the role chunk, then the first token's
                if line.startswith(b"data: ") and b'"content":"' in line and b'""' not in line:
                    break
            msg = self.error(self.action(self.url, 1, "save", "busy.bin"), 409)
            self.assertIn("slot 1 is busy", msg)
            body2 = dict(body, stream=False, max_tokens=1)
            r = requests.post(self.url + "/v1/chat/completions", json=body2, timeout=60)
            self.assertIn("slot 1 is busy", self.error(r, 409))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "busy.bin")))

    def test_other_scheme_refused_and_off_without_path(self):
        self.chat(self.url, id_slot=0)
        saved = self.action(self.url, 0, "save", "turbo.bin")
        self.assertEqual(saved.status_code, 200, saved.text)
        bf16 = Server(BIN, "--kv-quant", "bf16", *ARGS, "--slot-save-path", self.dir)
        off = None
        try:
            before = requests.get(bf16.base_url + "/slots", timeout=30).json()
            msg = self.error(self.action(bf16.base_url, 0, "restore", "turbo.bin"), 400)
            self.assertIn("[kv-store]", msg)
            self.assertIn("snapshot is for scheme turbo:k8v3", msg)
            self.assertIn("this engine runs bf16", msg)
            self.assertEqual(requests.get(bf16.base_url + "/slots", timeout=30).json(), before)
            off = Server(BIN, "--kv-quant", "turbo", *ARGS)
            for action in ("save", "restore"):
                msg = self.error(self.action(off.base_url, 0, action, "turbo.bin"), 501)
                self.assertIn("--slot-save-path", msg)
        finally:
            self.assertEqual(bf16.terminate(), 0, bf16.output())
            if off:
                self.assertEqual(off.terminate(), 0, off.output())


if __name__ == "__main__":
    BIN = sys.argv.pop(1)
    unittest.main(verbosity=2)
