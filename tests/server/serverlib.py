"""Helpers of the `turbokv serve` tests: start a server on 127.0.0.1 with a free
port (--port 0; the port is read from its "listening on" line), raw HTTP
requests, /metrics parsing, SIGTERM and the exit code."""
import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time


class Server:
    def __init__(self, binary, *args, start_timeout=120):
        cmd = [binary, "serve", "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1)
        self.lines = []
        self.port = None
        deadline = time.time() + start_timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("server did not start: " + "".join(self.lines))
        # Keep draining stdout so the server never blocks on a full pipe.
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        # It listens while the model loads: /health is 503 until then, 200 after.
        self.health_statuses = set()
        while time.time() < deadline:
            try:
                status = self.request("GET", "/health", timeout=5)[0]
            except OSError:
                status = -1
            self.health_statuses.add(status)
            if status == 200:
                break
            if status not in (503, -1) or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if 200 not in self.health_statuses:
            self.proc.kill()
            raise RuntimeError(f"server not ready (/health {self.health_statuses}): " +
                               "".join(self.lines))

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}"

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, headers dict, body bytes); body: dict (JSON), bytes or None."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def metrics(self, headers=None):
        status, _, data = self.request("GET", "/metrics", headers=headers)
        assert status == 200, (status, data)
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def terminate(self, timeout=60):
        """SIGTERM; the exit code (or None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        finally:
            self._reader.join(5)
            self.proc.stdout.close()

    def output(self):
        return "".join(self.lines)


def sse_events(resp):
    """Yields the JSON of each `data:` line of an SSE http.client response, then
    the string "[DONE]"."""
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.decode().rstrip("\r\n")
        if not line.startswith("data: "):
            continue
        payload = line[len("data: "):]
        if payload == "[DONE]":
            yield "[DONE]"
            return
        yield json.loads(payload)
